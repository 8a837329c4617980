"""Why a database's instances do not progress, in Kubernetes' own words: Problems for the Degraded condition.

Pure: no I/O, no clock (the caller passes `now`). Reads the database's instance pods and data claims as the caches
hold them, and what the caller knows of the claims' StorageClasses, and says, per cause, what Kubernetes knows and
the operator would otherwise keep to itself:

| reason | when | from |
|---|---|---|
| (2) | a data claim is Pending, or does not grow | decide/lifecycle/stuck_claims.py |
| Unschedulable | a pod's PodScheduled is False/Unschedulable, not for unbound claims (3) | the scheduler's message |
| ImagePullFailed | a container waits in ErrImagePull, ImagePullBackOff, InvalidImageName... | the kubelet's words |
| ContainerConfigError | a container waits in CreateContainerConfigError or CreateContainerError | the kubelet's words |
| VolumeFull, VolumeReadOnly | a container crash-loops with ENOSPC or EROFS in its last lines | its words |
| ImageMajorMismatch | a container crash-loops saying its data is of another major than its binaries | its words |
| CrashLoopBackOff | a container waits to be restarted after failing | its exit code, the end of its message if any |
| (1) | an instance's pod is missing past POD_GRACE, or a Job has none | its controller's FailedCreate Event |

(2) StorageClassNotFound, NoDefaultStorageClass, ProvisioningFailed, ClaimPending, StorageExpansionStuck.
(3) The scheduler's "pod has unbound immediate PersistentVolumeClaims" is the wait of every new instance
until its claim binds: the claim's own problems say why when it does not (ClaimPending past its grace, the
provisioner's words), and the scheduler's next verdict comes once it binds, so that wait is no scheduling problem.
(1) `refusal_reason` of the API server's words: QuotaExceeded (a ResourceQuota), PodSecurityRefused (Pod Security
admission), AdmissionRefused (a webhook or policy), OperatorForbidden (RBAC), else CreateRefused.

`refusal_reason` also names the API server's refusal of one of the operator's own writes (reconcilers/children.py).
The same pod causes, for the pods of the database's own Jobs (init, restore, upgrade, migrations, reload, base
backups, verifications) still running without a ready pod after JOB_GRACE, their messages naming the Job. A pod that
waits may change no more (the scheduler's verdict stays as it is), so nothing else would bring the database back at
the grace's end: `job_recheck` says when to look again.

A pod stuck that way (never scheduled, its image never pulled, its container never created or crash-looping) that
was made from an older revision of its StatefulSet than the current one is one a StatefulSet never replaces by
itself (its rolling update waits for the pod to be ready first): `stale_stuck_pods` names them, and the
reconciler deletes them so that the StatefulSet makes them again from the edited template. Such a pod serves
nothing, so deleting it loses nothing.

Invariants: a Problem is derived from the objects' current state only, so it goes as soon as the cause does (the
next pass after the pod's or the claim's change); messages carry Kubernetes' and the container's words, bounded,
never an object's data (a container's termination message is PostgreSQL's or the data plane's last lines, which
never print secrets: dataplane/lib.sh).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from sampledb_operator.decide.status import REVISION_LABEL
from sampledb_operator.decide.volume_full import FULL_WORDS, VOLUME_FULL
from sampledb_operator.model import timestamps
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem

JOB_GRACE = timedelta(seconds=120)  # a Job's pod not ready after this long is looked at (a live list each pass)
POD_GRACE = timedelta(seconds=10)  # an instance's StatefulSet older than this without its pod: its Events are read
REFUSAL_FRESH = timedelta(minutes=20)  # a FailedCreate Event older than this is history (the controller's
# retries back off to minutes, and each one renews the Event)
IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CONFIG_REASONS = ("CreateContainerConfigError", "CreateContainerError")
MESSAGE_MAX = 400
UNBOUND_CLAIMS = "unbound immediate PersistentVolumeClaims"  # the scheduler's words for a pod whose claims wait (3)
# instance.sh's refusal, or PostgreSQL's own FATAL's DETAIL, for data of another major than the binaries
_OTHER_MAJOR = re.compile(r"holds a PostgreSQL (?P<data>\d+) cluster but this image runs PostgreSQL (?P<image>\d+)"
                          r"|initialized by PostgreSQL version (?P<data2>\d+)[^|]*? with this version (?P<image2>\d+)")
LOG_LINES = 4


def crash_logs_needed(pods: Sequence[Obj]) -> list[tuple[str, str]]:
    """(pod, container) of the containers crash-looping without a termination message: their previous run's log
    says why (PostgreSQL writes its FATAL line there), read live by the caller (log_reason)."""
    out = []
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            last = (cs.get("lastState") or {}).get("terminated") or {}
            if waiting.get("reason") == "CrashLoopBackOff" and not _tail(last.get("message")) \
                    and not meta.get("deletionTimestamp"):
                out.append((str(meta.get("name")), str(cs.get("name"))))
    return out


def log_reason(text: str) -> str:
    """The lines of a container's log that say why it stopped: around its last FATAL, PANIC or ERROR line (the two
    before it, where PostgreSQL names the bad setting, and the one after, its DETAIL or HINT), else the last
    LOG_LINES lines; one line, bounded. A line that speaks of a password is left out."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and "password" not in line.lower()]
    severe = [i for i, line in enumerate(lines) if any(f"{level}:" in line for level in ("FATAL", "PANIC", "ERROR"))]
    chosen = lines[max(severe[-1] - 2, 0):severe[-1] + 2] if severe else lines[-LOG_LINES:]
    value = " | ".join(chosen)
    return value if len(value) <= MESSAGE_MAX else "..." + value[-(MESSAGE_MAX - 3):]


def pod_problems(pods: Sequence[Obj], logs: Mapping[tuple[str, str], str] | None = None) -> list[Problem]:
    """The pods' problems, in the pods' order: scheduling first, then each container's. `logs`: for a
    crash-looping container without a termination message, log_reason of its previous run's log."""
    out = []
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if meta.get("deletionTimestamp"):
            continue
        name = str(meta.get("name"))
        scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if scheduled is not None and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            if UNBOUND_CLAIMS in str(scheduled.get("message") or ""):
                continue
            out.append(Problem("Unschedulable", f"pod {name} cannot be scheduled: {short(scheduled.get('message'))}",
                               "spec"))
            continue
        for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            problem = _container_problem(name, cs, (logs or {}).get((name, str(cs.get("name")))))
            if problem is not None:
                out.append(problem)
                break
    return out


def full_pods(pods: Sequence[Obj], logs: Mapping[tuple[str, str], str] | None = None) -> list[Obj]:
    """The pods of `pods` (not deleted) whose problem is VolumeFull (pod_problems' words, `logs` alike)."""
    out = []
    for pod in pods:
        status = pod.get("status") or {}
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        name = str((pod.get("metadata") or {}).get("name"))
        for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            problem = _container_problem(name, cs, (logs or {}).get((name, str(cs.get("name")))))
            if problem is not None:
                if problem.reason == VOLUME_FULL:
                    out.append(pod)
                break
    return out


def job_waiting(job: Obj, now: datetime) -> bool:
    """A Job still running with no ready pod for over JOB_GRACE: its pods are worth a look (one live read)."""
    waited = _unready_for(job, now)
    return waited is not None and waited > JOB_GRACE


def job_recheck(jobs: Sequence[Obj], now: datetime) -> float | None:
    """Seconds until the youngest Job still running without a ready pod is past JOB_GRACE (then job_waiting names
    it), or None when there is none. Past the grace, its pods' own changes bring the database back."""
    waits = [(JOB_GRACE - waited).total_seconds() + 1 for job in jobs
             if (waited := _unready_for(job, now)) is not None and waited <= JOB_GRACE]
    return min(waits) if waits else None


def _unready_for(job: Obj, now: datetime) -> timedelta | None:
    """How long a Job still running without a ready pod has run; None for a finished Job or one whose pod is
    ready."""
    if _finished(job) or (job.get("status") or {}).get("ready"):
        return None
    started = _started(job)
    return None if started is None else now - started


def _started(job: Obj) -> datetime | None:
    return timestamps.parse((job.get("status") or {}).get("startTime")) or timestamps.parse(
        (job.get("metadata") or {}).get("creationTimestamp"))


def _finished(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def job_podless_for(job: Obj, now: datetime) -> timedelta | None:
    """How long a Job still running has had no pod (status.active 0) since it started: its controller may be
    refused the pod (FailedCreate); None for a finished Job or one with a pod."""
    if _finished(job) or (job.get("status") or {}).get("active"):
        return None
    started = _started(job)
    return None if started is None else now - started


def job_problems(job: Obj, pods: Sequence[Obj]) -> list[Problem]:
    """The problems of a waiting Job's pods (pod_problems), their messages prefixed with the Job's name."""
    name = str((job.get("metadata") or {}).get("name"))
    return [Problem(p.reason, f"Job {name}: {p.message}", p.field) for p in pod_problems(pods)]


def refusal_reason(message: str) -> str:
    """The reason for an object the API server refused to create, from its words: a ResourceQuota, Pod Security
    admission, an admission webhook or policy, the operator's own RBAC, else CreateRefused."""
    text = message.lower()
    if "exceeded quota" in text or "failed quota" in text:
        return "QuotaExceeded"
    if "violates podsecurity" in text:
        return "PodSecurityRefused"
    if "admission webhook" in text or "validatingadmissionpolicy" in text or "denied request" in text:
        return "AdmissionRefused"
    if "is forbidden: user" in text and " cannot " in text:
        return "OperatorForbidden"
    return "CreateRefused"


def podless_statefulsets(statefulsets: Sequence[Obj], pods: Sequence[Obj], now: datetime) -> list[str]:
    """The StatefulSets that want a pod, have not made it (no name-0) and are older than POD_GRACE: their
    controller may be refused the pod (one live read of its Events each)."""
    have = {str((p.get("metadata") or {}).get("name")) for p in pods}
    out = []
    for sts in statefulsets:
        meta = sts.get("metadata") or {}
        name, made = str(meta.get("name")), timestamps.parse(meta.get("creationTimestamp"))
        if _podless(sts, have) and made is not None and now - made > POD_GRACE:
            out.append(name)
    return out


def podless_recheck(statefulsets: Sequence[Obj], pods: Sequence[Obj], now: datetime,
                    jobs: Sequence[Obj] = ()) -> float | None:
    """Seconds until the youngest StatefulSet or Job without its pod is past POD_GRACE (then podless_statefulsets
    or job_podless_for names it), or None when there is none. One that stays without its pod is looked at again
    every POD_GRACE (its controller's retries back off; a pod made brings the database back)."""
    have = {str((p.get("metadata") or {}).get("name")) for p in pods}
    ages = []
    for sts in statefulsets:
        made = timestamps.parse((sts.get("metadata") or {}).get("creationTimestamp"))
        if _podless(sts, have) and made is not None:
            ages.append(now - made)
    ages += [age for job in jobs if (age := job_podless_for(job, now)) is not None]
    waits = [(POD_GRACE - age).total_seconds() + 1 if age <= POD_GRACE else POD_GRACE.total_seconds() for age in ages]
    return min(waits) if waits else None


def _podless(sts: Obj, pods: set[str]) -> bool:
    """The StatefulSet wants its pod, has not made it (its status counts fewer pods than it wants) and the pod is
    not in the cache."""
    meta, spec, status = sts.get("metadata") or {}, sts.get("spec") or {}, sts.get("status") or {}
    wanted = spec.get("replicas") or 0
    return (wanted > 0 and (status.get("replicas") or 0) < wanted and f"{meta.get('name')}-0" not in pods
            and not meta.get("deletionTimestamp"))


def create_refused(kind: str, name: str, events: Sequence[Obj], now: datetime) -> Problem | None:
    """The newest recent FailedCreate Warning Event of the StatefulSet or Job `name` (its pod refused by the
    API server) as a Problem, or None."""
    message = newest_warning(events, "FailedCreate", now)
    if message is None:
        return None
    return Problem(refusal_reason(message), f"{kind} {name} cannot create its pod: {short(message)}", "spec")


def newest_warning(events: Sequence[Obj], reason: str, now: datetime) -> str | None:
    """The message of the newest Warning Event of `reason` younger than REFUSAL_FRESH, or None."""
    newest: tuple[datetime, str] | None = None
    for event in events:
        if event.get("reason") != reason or event.get("type") != "Warning":
            continue
        when = event_time(event)
        if when is not None and now - when <= REFUSAL_FRESH and (newest is None or when > newest[0]):
            newest = (when, str(event.get("message") or ""))
    return None if newest is None else newest[1]


def event_time(event: Obj) -> datetime | None:
    series = event.get("series") or {}
    for value in (series.get("lastObservedTime"), event.get("lastTimestamp"), event.get("eventTime"),
                  (event.get("metadata") or {}).get("creationTimestamp")):
        parsed = timestamps.parse(value)
        if parsed is not None:
            return parsed
    return None


def stale_stuck_pods(pods: Sequence[Obj], update_revisions: Mapping[str, str]) -> list[str]:
    """The pods with a problem of pod_problems and a revision label other than their StatefulSet's update
    revision (`update_revisions`: pod name -> that revision, for the StatefulSets whose status has one)."""
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        name = str(meta.get("name"))
        wanted = update_revisions.get(name)
        made = (meta.get("labels") or {}).get(REVISION_LABEL)
        if wanted and made and made != wanted and not meta.get("deletionTimestamp") and pod_problems([pod]):
            out.append(name)
    return out


def _container_problem(pod: str, cs: Obj, log: str | None = None) -> Problem | None:
    waiting = (cs.get("state") or {}).get("waiting") or {}
    reason = waiting.get("reason")
    container = cs.get("name")
    if reason in IMAGE_PULL_REASONS:
        return Problem("ImagePullFailed", (
            f"pod {pod}: the image {cs.get('image')} of container {container} cannot be pulled ({reason}):"
            f" {short(waiting.get('message'))}"), "spec.image")
    if reason in CONFIG_REASONS:
        return Problem("ContainerConfigError", f"pod {pod}: container {container} cannot be created ({reason}):"
                                               f" {short(waiting.get('message'))}", "spec")
    if reason == "CrashLoopBackOff":
        last = (cs.get("lastState") or {}).get("terminated") or {}
        said = _tail(last.get("message")) or log
        volume = _volume_problem(pod, container, said or "")
        if volume is not None:
            return volume
        majors = _OTHER_MAJOR.search(said or "")
        if majors is not None:
            data, image = majors.group("data") or majors.group("data2"), majors.group("image") or majors.group("image2")
            return Problem("ImageMajorMismatch", (
                f"pod {pod}: its data is of PostgreSQL {data} but the image {cs.get('image')} runs PostgreSQL"
                f" {image}: set spec.image to an image of PostgreSQL {data} (a major upgrade is a change of"
                " spec.version)"), "spec.image")
        return Problem("CrashLoopBackOff", (
            f"pod {pod}: container {container} keeps failing ({cs.get('restartCount', 0)} restarts, last exit"
            f" {last.get('exitCode', '?')}{', ' + str(last['reason']) if last.get('reason') else ''})"
            + (f": {said}" if said else f"; kubectl logs {pod} -c {container} --previous shows why")), "spec")
    return None




def _volume_problem(pod: str, container: object, said: str) -> Problem | None:
    """A container that stops because a volume is full or read-only (the kernel's words in its last lines)."""
    if "No space left on device" in said:
        return Problem(VOLUME_FULL, (
            f"pod {pod}: container {container} {FULL_WORDS}: grow spec.storage.size (its"
            f" StorageClass must allow expansion) or free space: {said}"), "spec.storage.size")
    if "Read-only file system" in said:
        return Problem("VolumeReadOnly", (
            f"pod {pod}: container {container} stops because a volume is read-only (a file system remounted"
            f" read-only after errors, or a read-only volume): {said}"), "spec.storage")
    return None


def short(text: object) -> str:
    value = " ".join(str(text or "").split())
    return value if len(value) <= MESSAGE_MAX else value[:MESSAGE_MAX - 3] + "..."


def _tail(text: object) -> str:
    """The last non-empty lines of a termination message, in one line, bounded."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    value = " | ".join(lines[-LOG_LINES:])
    return value if len(value) <= MESSAGE_MAX else "..." + value[-(MESSAGE_MAX - 3):]
