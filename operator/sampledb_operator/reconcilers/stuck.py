"""Why a database's instances do not progress: the facts decide/lifecycle/stuck.py reads, gathered for one pass.

Reads the instance pods and data claims from the caches, the claims' StorageClasses through the context's
BindingModes (remembered for a while; an absent class is asked for again within seconds), and whether there is
a default class only when a claim without a class has been Pending beyond POD_GRACE (a claim gets the default
class when it is made, so in a cluster that has one this is rare). Live, and only for a
StatefulSet without its pod past the grace or a Job without any pod, that controller's Events (why the API
server refused the pod: quota, Pod Security, admission); and for a claim Pending past the grace, its
provisioner's ProvisioningFailed Events. Writes nothing: the Problems go to the Degraded
condition with the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sampledb_operator.decide.children import volumes as vol
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.decide.lifecycle import stuck, stuck_claims
from sampledb_operator.kube.errors import ApiError, KubeError, NotFound
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.reconcilers.context import Context


@dataclass(frozen=True, slots=True)
class Stuck:
    """The instances' problems, and when to look again (a StatefulSet or a Job without its pod, or a Job without a
    ready pod, not past its grace yet: nothing else would bring the database back when its controller is refused
    the pod, or when the pod waits without changing), and the instance pods among them that stop on a full volume
    (for autoGrow)."""

    problems: tuple[Problem, ...] = ()
    recheck_after: float | None = None
    full_pods: tuple[Obj, ...] = ()


async def stuck_problems(ctx: Context, db: SampleDB) -> Stuck:
    """The instances' problems (see decide/lifecycle/stuck.py)."""
    ns, name = db.metadata.namespace or "", db.metadata.name
    pods = sorted(ctx.caches.pods.list(ns, {DATABASE_LABEL: name, COMPONENT_LABEL: "database"}),
                  key=lambda p: str(p["metadata"].get("name")))
    claims = [c for i in range(db.spec.replicas)
              if (c := ctx.cached("PersistentVolumeClaim", ns, names.instance_data_pvc_name(name, i))) is not None]
    pending = [c for c in claims if (c.get("status") or {}).get("phase") == "Pending"]
    classes: dict[str, str | None] = {}
    for claim in pending:
        wanted = (claim.get("spec") or {}).get("storageClassName")
        if wanted and wanted not in classes:
            mode = await ctx.binding_modes.mode(wanted)
            classes[wanted] = None if await ctx.binding_modes.missing(wanted) else (mode or "Unknown")
    now = ctx.clock.now()
    unnamed_late = any(not (c.get("spec") or {}).get("storageClassName")
                       and now - (timestamps.parse(c["metadata"].get("creationTimestamp")) or now)
                       > stuck.POD_GRACE for c in pending)
    default_class = await ctx.binding_modes.has_default() if unnamed_late else None
    claim_events = {c: await _events(ctx, ns, "PersistentVolumeClaim", c, "ProvisioningFailed")
                    for c in stuck_claims.claim_events_needed(pending, now)}
    await _recreate_stale(ctx, db, pods)
    statefulsets = [s for i in range(db.spec.replicas)
                    if (s := ctx.cached("StatefulSet", ns, names.instance_statefulset_name(name, i))) is not None]
    refused = [p for sts in stuck.podless_statefulsets(statefulsets, pods, now)
               if (p := await _refused(ctx, ns, "StatefulSet", sts, now)) is not None]
    logs = {key: await _crash_log(ctx, ns, *key) for key in stuck.crash_logs_needed(pods)}
    job_problems, jobs = await _job_problems(ctx, db, now)
    expansion, expansion_recheck = await _expansion_problems(ctx, db, claims, now)
    recheck = [t for t in (stuck.podless_recheck(statefulsets, pods, now, jobs), stuck.job_recheck(jobs, now),
                           expansion_recheck, stuck_claims.claim_recheck(pending, now)) if t is not None]
    claimed = stuck_claims.claim_problems(pending, classes, default_class=default_class, now=now, events=claim_events)
    said = {k: v for k, v in logs.items() if v}
    return Stuck((*claimed, *stuck.pod_problems(pods, said), *refused, *job_problems, *expansion),
                 min(recheck) if recheck else None, tuple(stuck.full_pods(pods, said)))


async def _expansion_problems(ctx: Context, db: SampleDB, claims: list[Obj], now: datetime
                              ) -> tuple[list[Problem], float | None]:
    """The database's claims asked to grow that have not (their Events read live, only for such claims), and when
    to look again (the grace's end of one not stuck yet)."""
    ns = db.metadata.namespace or ""
    backup = ctx.cached("PersistentVolumeClaim", ns, names.backup_pvc_name(db.metadata.name))
    out: list[Problem] = []
    waits: list[float] = []
    for claim in [*claims, *([backup] if backup is not None else [])]:
        if not stuck_claims.expanding(claim):
            continue
        name = str(claim["metadata"].get("name"))
        events = await _events(ctx, ns, "PersistentVolumeClaim", name)
        volume, field = vol.what(db, name)
        problem, asked = stuck_claims.expansion_problem(claim, events, now, volume=volume, field=field)
        if problem is not None:
            out.append(problem)
        elif asked is not None:
            waits.append(max((stuck_claims.EXPANSION_GRACE - (now - asked)).total_seconds(), 0.0) + 1)
        else:
            waits.append(stuck_claims.EXPANSION_GRACE.total_seconds())
    return out, min(waits) if waits else None


async def _crash_log(ctx: Context, namespace: str, pod: str, container: str) -> str:
    """Why a crash-looping container stopped, from its last run's log (decide/lifecycle/stuck.log_reason); "" when it
    cannot be read (the pods/log grant missing, the pod gone)."""
    try:
        text = await ctx.apis["Pod"].log(pod, namespace, container=container, previous=True)
    except KubeError:
        return ""
    return stuck.log_reason(text)


async def _refused(ctx: Context, namespace: str, kind: str, name: str, now: datetime) -> Problem | None:
    """Why the controller of `kind` `name` is refused its pod, from its FailedCreate Events (read live)."""
    return stuck.create_refused(kind, name, await _events(ctx, namespace, kind, name, "FailedCreate"), now)


async def _events(ctx: Context, namespace: str, kind: str, name: str, reason: str | None = None) -> list[Obj]:
    """The Events (of `reason`, or all) about `kind` `name`, read live; none when they cannot be read."""
    selector = f"involvedObject.kind={kind},involvedObject.name={name}" + (f",reason={reason}" if reason else "")
    try:
        events = await ctx.apis["Event"].list(namespace, field_selector=selector)
    except ApiError:
        return []
    return list(events.items)


async def _job_problems(ctx: Context, db: SampleDB, now: datetime) -> tuple[list[Problem], list[Obj]]:
    """The database's own Jobs without any pod past POD_GRACE (their Events read live), or running without a ready
    pod past JOB_GRACE (their pods read live): their problems, and the Jobs looked at."""
    out: list[Problem] = []
    ns = db.metadata.namespace or ""
    owned = {str(j["metadata"].get("name")): j for j in ctx.caches.jobs.by_owner(db.metadata.uid or "")}
    # a backup's Job belongs to its SampleDBBackup, and carries the database's label
    labelled = ctx.caches.jobs.list(ns, {DATABASE_LABEL: db.metadata.name})
    owned.update({str(j["metadata"].get("name")): j for j in labelled})
    for job_name, job in sorted(owned.items()):
        podless = stuck.job_podless_for(job, now)
        if podless is not None and podless > stuck.POD_GRACE:
            refused = await _refused(ctx, ns, "Job", job_name, now)
            out.extend([refused] if refused is not None else [])
            continue
        if not stuck.job_waiting(job, now):
            continue
        try:
            pods = await ctx.apis["Pod"].list(ns, label_selector=f"job-name={job_name}")
        except ApiError:
            continue
        out.extend(stuck.job_problems(job, pods.items))
    return out, list(owned.values())


async def _recreate_stale(ctx: Context, db: SampleDB, pods: list[Obj]) -> None:
    ns, name = db.metadata.namespace or "", db.metadata.name
    revisions = {}
    for i in range(db.spec.replicas):
        sts = ctx.cached("StatefulSet", ns, names.instance_statefulset_name(name, i))
        revision = ((sts or {}).get("status") or {}).get("updateRevision")
        if revision:
            revisions[names.instance_pod_name(name, i)] = str(revision)
    await delete_pods(ctx, db, stuck.stale_stuck_pods(pods, revisions), "RecreatedStuckPod", (
        "was stuck on an older revision of its StatefulSet (a rolling update waits for it forever): deleted so that"
        " it is made again from the current spec"))


async def delete_pods(ctx: Context, db: SampleDB, pods: list[str], reason: str, why: str) -> None:
    """Delete the database's instance pods `pods` (their StatefulSets make them again at once), each with a Normal
    Event `reason`: "pod <name> <why>". A pod already gone is skipped."""
    ns = db.metadata.namespace or ""
    for pod in pods:
        try:
            await ctx.apis["Pod"].delete(pod, ns)
        except NotFound:
            continue
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", reason, f"pod {pod} {why}")

