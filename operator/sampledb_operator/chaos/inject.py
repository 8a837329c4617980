"""Injecting one fault: the API writes and pods/exec calls, and what recovery means for it.

Invariants: every object acted on is first read and checked to belong to the target database
(its namespace, and the sampledb.io/database label naming it; OutOfScope otherwise) and to a
database of the run's scope; deletions carry the object's uid as a precondition, so a replacement
that appeared meanwhile is never deleted; kill-leader acts only on the pod named by the operator
Lease's holder in the Lease's namespace. An exec the cluster refuses is the outcome "unsupported",
an API write it refuses "failed"; nothing here waits for the cluster.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sampledb_operator.chaos.faults import FILL_FILE, POSTGRES_CONTAINER, Fault, fill_size, running_job
from sampledb_operator.chaos.plan import Target
from sampledb_operator.chaos.report import FAILED, INJECTED, SKIPPED, UNSUPPORTED
from sampledb_operator.decide.children.desired_config import DATA_MOUNT
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.kube.errors import ApiError, KubeError, NotFound
from sampledb_operator.model import names
from sampledb_operator.model.names import ROLE_LABEL
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.quantity import parse_quantity

if TYPE_CHECKING:
    from sampledb_operator.kube.exec import ExecResult

Executor = Callable[[str, str, str, Sequence[str]], Awaitable["ExecResult"]]  # namespace, pod, container, argv
FILL_PATH = f"{DATA_MOUNT}/{FILL_FILE}"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
_CHILDREN = {
    Fault.DELETE_SERVICE: ("Service", names.client_service_name),
    Fault.DELETE_CONFIGMAP: ("ConfigMap", names.configmap_name),
    Fault.DELETE_STATEFULSET: ("StatefulSet", names.statefulset_name),
}


class Api(Protocol):
    """The verbs used, as kube.api.ResourceApi has them."""

    async def get(self, name: str, namespace: str | None = None) -> Obj: ...

    async def list(self, namespace: str | None = None, *, label_selector: str | None = None,
                   continue_token: str | None = None) -> Any: ...

    async def delete(self, name: str, namespace: str | None = None, *, preconditions: dict[str, Any] | None = None,
                     grace_period_seconds: int | None = None) -> Any: ...


class OutOfScope(Exception):
    """An object the run was about to touch does not belong to the databases in scope."""


# ---------------------------------------------------------------------- what recovered means


@dataclass(frozen=True, slots=True)
class Recreated:
    """The object exists again with another uid (the operator re-created it)."""

    kind: str
    namespace: str
    name: str
    old_uid: str


@dataclass(frozen=True, slots=True)
class PodBack:
    """The pod is Ready, and either replaced (another uid) or its container restarted since."""

    namespace: str
    name: str
    old_uid: str
    restarts_before: int | None = None  # None: the pod must be replaced


@dataclass(frozen=True, slots=True)
class NewLeader:
    """The Lease names a holder other than the killed one."""

    namespace: str
    name: str
    old_holder: str


Check = Recreated | PodBack | NewLeader


@dataclass(frozen=True, slots=True)
class Cleanup:
    """A fill file to remove at the end of the run."""

    target: Target
    path: str


@dataclass(slots=True)
class Injection:
    outcome: str
    target: str = ""
    detail: str = ""
    checks: list[Check] = field(default_factory=list)
    cleanup: Cleanup | None = None


# ---------------------------------------------------------------------- the injector


class Injector:
    """Injects faults into the databases of `scope` through `apis` (by kind) and `executor` (pods/exec)."""

    def __init__(self, apis: Mapping[str, Api], executor: Executor | None, scope: Collection[Target], *,
                 lease: tuple[str, str] | None = None, exec_timeout: float = 60.0) -> None:
        self.apis = apis
        self.executor = executor
        self.scope = frozenset(scope)
        self.lease = lease
        self.exec_timeout = exec_timeout

    async def inject(self, fault: Fault, target: Target | None) -> Injection:
        """Cause `fault` on `target` (None for kill-leader); what was done and how to tell it recovered."""
        try:
            if fault is Fault.KILL_LEADER:
                return await self._kill_leader()
            if target is None or target not in self.scope:
                raise OutOfScope(f"{target} is not in the run's scope")
            return await self._inject(fault, target)
        except NotFound as exc:
            return Injection(SKIPPED, detail=f"gone before the fault: {exc.message or exc}")
        except ApiError as exc:
            return Injection(FAILED, detail=f"the API refused: {exc.status} {exc.reason} {exc.message}".strip())
        except KubeError as exc:  # no answer: the API server may be the thing that is down
            return Injection(FAILED, detail=f"no answer from the API: {exc}")

    async def _inject(self, fault: Fault, target: Target) -> Injection:
        if fault is Fault.DELETE_POD:
            pod = await self._database_pod(target)
            if pod is None:
                return Injection(SKIPPED, detail="no database pod")
            await self._delete("Pod", pod, grace=None)
            return Injection(INJECTED, f"Pod {_name(pod)}", checks=[PodBack(target.namespace, _name(pod), _uid(pod))])
        if fault is Fault.KILL_POSTGRES:
            return await self._kill_postgres(target)
        if fault in _CHILDREN:
            kind, name_of = _CHILDREN[fault]
            obj = self._owned(await self.apis[kind].get(name_of(target.name), target.namespace), target)
            await self._delete(kind, obj, grace=None)
            return Injection(INJECTED, f"{kind} {_name(obj)}",
                             checks=[Recreated(kind, target.namespace, _name(obj), _uid(obj))])
        if fault is Fault.DELETE_JOB:
            job = await self._running_job(target, component=None)
            if job is None:
                return Injection(SKIPPED, detail="no running Job")
            await self._delete("Job", job, grace=None)
            return Injection(INJECTED, f"Job {_name(job)}")
        if fault is Fault.FAIL_BACKUP_JOB:
            return await self._fail_backup_job(target)
        if fault is Fault.FILL_VOLUME:
            return await self._fill_volume(target)
        raise AssertionError(f"unhandled fault {fault}")  # pragma: no cover

    # ------------------------------------------------------------------ faults that exec

    async def _kill_postgres(self, target: Target) -> Injection:
        pod = await self._database_pod(target)
        if pod is None:
            return Injection(SKIPPED, detail="no database pod")
        restarts = _restarts(pod, POSTGRES_CONTAINER)
        # PID 1 of the container is the postmaster (the image's entrypoint execs it). The kernel drops
        # a SIGKILL sent to a PID namespace's init from inside it, so `kill -9 1` does nothing; SIGQUIT
        # is the postmaster's immediate shutdown: every backend quits at once, no checkpoint (a crash
        # as far as the data is concerned), the container exits, kubelet restarts it, WAL replay.
        result = await self._exec(pod, ["sh", "-c", "kill -QUIT 1"])
        if isinstance(result, Injection):
            return result
        if result.exit_code not in (0, None):
            return Injection(FAILED, f"Pod {_name(pod)}", f"kill exited {result.exit_code}: {result.stderr.strip()}")
        return Injection(INJECTED, f"Pod {_name(pod)} container {POSTGRES_CONTAINER}", "postmaster sent SIGQUIT",
                         checks=[PodBack(target.namespace, _name(pod), _uid(pod), max(restarts, 0))])

    async def _fill_volume(self, target: Target) -> Injection:
        pod = await self._database_pod(target)
        if pod is None:
            return Injection(SKIPPED, detail="no database pod")
        measured = await self._exec(pod, ["sh", "-c", f"df -Pk {DATA_MOUNT} | tail -n 1; "
                                                       f"du -sxk {DATA_MOUNT} 2>/dev/null | tail -n 1; true"])
        if isinstance(measured, Injection):
            return measured
        try:
            available, used = _parse_df_du(measured.stdout)
        except ValueError as exc:
            return Injection(FAILED, f"Pod {_name(pod)}", f"cannot read the volume's usage: {exc}")
        size = fill_size(await self._capacity(target), used, available)
        cleanup = Cleanup(target, FILL_PATH)
        if size <= 0:
            return Injection(SKIPPED, f"Pod {_name(pod)}", "the volume is already nearly full")
        mib = size // 2**20
        result = await self._exec(pod, ["sh", "-c", f"fallocate -l {size} {FILL_PATH} 2>/dev/null || "
                                                     f"dd if=/dev/zero of={FILL_PATH} bs=1048576 count={mib} 2>&1"])
        if isinstance(result, Injection):
            result.cleanup = cleanup
            return result
        outcome, detail = INJECTED, f"wrote {mib} MiB to {FILL_PATH}"
        if result.exit_code not in (0, None):
            outcome, detail = FAILED, f"fill exited {result.exit_code}: {(result.stdout + result.stderr).strip()}"
        return Injection(outcome, f"Pod {_name(pod)} volume {names.DATA_VOLUME}", detail, cleanup=cleanup)

    async def remove_fill(self, cleanup: Cleanup) -> str:
        """Remove a fill file through the database's current pod; a line for the report."""
        try:
            pod = await self._database_pod(cleanup.target)
            if pod is None:
                return f"{cleanup.target}: no database pod to remove {cleanup.path} through: remove it by hand"
            result = await self._exec(pod, ["rm", "-f", cleanup.path])
        except ApiError as exc:
            return f"{cleanup.target}: {cleanup.path} not removed ({exc.status} {exc.reason}): remove it by hand"
        if isinstance(result, Injection) or result.exit_code not in (0, None):
            return f"{cleanup.target}: {cleanup.path} not removed: remove it by hand"
        return f"{cleanup.target}: removed {cleanup.path}"

    async def _exec(self, pod: Obj, argv: list[str]) -> ExecResult | Injection:
        if self.executor is None:
            return Injection(UNSUPPORTED, f"Pod {_name(pod)}", "no pods/exec available")
        try:
            return await self.executor(_namespace(pod), _name(pod), POSTGRES_CONTAINER, argv)
        except KubeError as exc:
            return Injection(UNSUPPORTED, f"Pod {_name(pod)}", f"pods/exec failed: {exc}")

    # ------------------------------------------------------------------ Jobs and the leader

    async def _fail_backup_job(self, target: Target) -> Injection:
        job = await self._running_job(target, component="backup")
        if job is None:
            return Injection(SKIPPED, detail="no running backup Job")
        listed = await self.apis["Pod"].list(target.namespace, label_selector=f"{JOB_NAME_LABEL}={_name(job)}")
        pods = sorted((p for p in listed.items if _running_pod(p)), key=_name)
        if not pods:
            return Injection(SKIPPED, f"Job {_name(job)}", "the backup Job has no running pod")
        for pod in pods:
            self._owned(pod, target)
            await self._delete("Pod", pod, grace=0)
        return Injection(INJECTED, f"Job {_name(job)} pod {', '.join(_name(p) for p in pods)}",
                         "the attempt fails; the Job retries up to its backoffLimit")

    async def _kill_leader(self) -> Injection:
        if self.lease is None:
            return Injection(SKIPPED, detail="no operator Lease given")
        namespace, name = self.lease
        lease = await self.apis["Lease"].get(name, namespace)
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        if not holder:
            return Injection(SKIPPED, f"Lease {namespace}/{name}", "the Lease has no holder")
        pod_name = holder.rsplit("_", 1)[0]  # identity: <hostname = pod name>_<uuid>
        try:
            pod = await self.apis["Pod"].get(pod_name, namespace)
        except NotFound:
            return Injection(SKIPPED, f"Lease {namespace}/{name}",
                             f"the leader {holder} is not a pod in {namespace}")
        await self._delete("Pod", pod, grace=0)
        return Injection(INJECTED, f"Pod {namespace}/{pod_name}", f"leader {holder}",
                         checks=[NewLeader(namespace, name, holder)])

    # ------------------------------------------------------------------ reads, guarded

    async def _database_pod(self, target: Target) -> Obj | None:
        selector = f"{DATABASE_LABEL}={target.name},{COMPONENT_LABEL}=database"
        listed = await self.apis["Pod"].list(target.namespace, label_selector=selector)
        # the primary first (with replicas, the instance a fault matters most for), then by name
        pods = sorted((p for p in listed.items if not (p.get("metadata") or {}).get("deletionTimestamp")),
                      key=lambda p: (((p.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL) != "primary",
                                     _name(p)))
        return self._owned(pods[0], target) if pods else None

    async def _running_job(self, target: Target, component: str | None) -> Obj | None:
        selector = f"{DATABASE_LABEL}={target.name}" + (f",{COMPONENT_LABEL}={component}" if component else "")
        listed = await self.apis["Job"].list(target.namespace, label_selector=selector)
        jobs = sorted((j for j in listed.items if running_job(j)), key=_name)
        return self._owned(jobs[0], target) if jobs else None

    async def _capacity(self, target: Target) -> int | None:
        try:
            pvc = await self.apis["PersistentVolumeClaim"].get(names.data_pvc_name(target.name), target.namespace)
        except NotFound:
            return None
        size = ((pvc.get("status") or {}).get("capacity") or {}).get("storage") or \
            (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
        return int(parse_quantity(str(size))) if size else None

    def _owned(self, obj: Obj, target: Target) -> Obj:
        """`obj`, once checked to be the target database's (OutOfScope otherwise)."""
        meta = obj.get("metadata") or {}
        if target not in self.scope or meta.get("namespace") != target.namespace \
                or (meta.get("labels") or {}).get(DATABASE_LABEL) != target.name:
            raise OutOfScope(f"{obj.get('kind', 'object')} {meta.get('namespace')}/{meta.get('name')} "
                             f"does not belong to {target}")
        return obj

    async def _delete(self, kind: str, obj: Obj, *, grace: int | None) -> None:
        await self.apis[kind].delete(_name(obj), _namespace(obj), preconditions={"uid": _uid(obj)},
                                     grace_period_seconds=grace)


def _parse_df_du(text: str) -> tuple[int, int]:
    """(available bytes, used bytes) from `df -Pk` 's last line and `du -sxk` 's."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or len(lines[0]) < 4 or not lines[1]:
        raise ValueError(f"unexpected df/du output {text[:200]!r}")
    return int(lines[0][3]) * 1024, int(lines[1][0]) * 1024


def _restarts(pod: Obj, container: str) -> int:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return int(status.get("restartCount") or 0)
    return -1


def _running_pod(pod: Obj) -> bool:
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and \
        (pod.get("status") or {}).get("phase") in ("Pending", "Running")


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _namespace(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")
