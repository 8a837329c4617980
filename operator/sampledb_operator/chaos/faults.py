"""The faults that can be injected, the one-off annotation, and the size of a volume fill. Pure.

Invariants: a fault name is its kebab-case value (the --faults and annotation spelling);
DEFAULT_FAULTS touch only the selected databases' objects (kill-leader, which deletes the
operator's pod, is never a default); the fill size leaves at least HEADROOM bytes free both on
the filesystem and below the volume's capacity (a provisioner without quotas shows the host's
filesystem, which must never be filled).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

ANNOTATION = "sampledb.io/chaos"
FILL_FILE = "sampledb-chaos-fill"  # at the root of the data volume, beside PGDATA, never inside it
HEADROOM = 8 * 2**20  # bytes left free by fill-volume
POSTGRES_CONTAINER = "postgres"


class Fault(StrEnum):
    DELETE_POD = "delete-pod"
    KILL_POSTGRES = "kill-postgres"
    DELETE_SERVICE = "delete-service"
    DELETE_CONFIGMAP = "delete-configmap"
    DELETE_STATEFULSET = "delete-statefulset"
    DELETE_JOB = "delete-job"
    FAIL_BACKUP_JOB = "fail-backup-job"
    FILL_VOLUME = "fill-volume"
    KILL_LEADER = "kill-leader"


DESCRIPTIONS: dict[Fault, str] = {
    Fault.DELETE_POD: "delete the database pod",
    Fault.KILL_POSTGRES: "SIGQUIT the postmaster (PID 1 of the postgres container): an immediate shutdown",
    Fault.DELETE_SERVICE: "delete the client Service",
    Fault.DELETE_CONFIGMAP: "delete the configuration ConfigMap",
    Fault.DELETE_STATEFULSET: "delete the StatefulSet (and with it the pod)",
    Fault.DELETE_JOB: "delete a running Job of the database",
    Fault.FAIL_BACKUP_JOB: "delete the pod of a running backup Job (that attempt fails)",
    Fault.FILL_VOLUME: f"fill the data volume to {HEADROOM // 2**20} MiB of free space (removed at the end)",
    Fault.KILL_LEADER: "delete the operator's leader pod with grace period 0",
}
DEFAULT_FAULTS: tuple[Fault, ...] = tuple(f for f in Fault if f is not Fault.KILL_LEADER)
# one-off faults by annotation: those that need no cleanup and touch only the annotated database
ANNOTATION_FAULTS: frozenset[Fault] = frozenset(DEFAULT_FAULTS) - {Fault.FILL_VOLUME}
DELETE_CHILD = "delete-child"  # --faults shorthand for the four child deletions
CHILD_DELETIONS = (Fault.DELETE_SERVICE, Fault.DELETE_CONFIGMAP, Fault.DELETE_STATEFULSET, Fault.DELETE_JOB)


def parse_faults(text: str | None) -> tuple[Fault, ...]:
    """Comma-separated fault names ("delete-child" stands for the four deletions), in Fault order;
    None or empty: DEFAULT_FAULTS. ValueError names an unknown fault and the known ones."""
    if not text or not text.strip():
        return DEFAULT_FAULTS
    wanted: set[Fault] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part == DELETE_CHILD:
            wanted.update(CHILD_DELETIONS)
            continue
        try:
            wanted.add(Fault(part))
        except ValueError:
            known = ", ".join([*(f.value for f in Fault), DELETE_CHILD])
            raise ValueError(f"unknown fault {part!r} (known: {known})") from None
    return tuple(f for f in Fault if f in wanted)


@dataclass(frozen=True, slots=True)
class AnnotationRequest:
    """A one-off fault asked for by annotation: the fault, or why it is refused."""

    value: str
    fault: Fault | None
    refusal: str = ""


def annotation_request(annotations: Mapping[str, str] | None) -> AnnotationRequest | None:
    """The one-off fault the SampleDB's annotations ask for; None when there is no chaos annotation."""
    if not annotations or ANNOTATION not in annotations:
        return None
    value = str(annotations[ANNOTATION]).strip()
    try:
        fault = Fault(value)
    except ValueError:
        known = ", ".join(sorted(f.value for f in ANNOTATION_FAULTS))
        return AnnotationRequest(value, None, f"unknown fault {value!r} (known: {known})")
    if fault not in ANNOTATION_FAULTS:
        return AnnotationRequest(value, None, f"{value} is not available as a one-off annotation; "
                                              "use `sampledb-operator chaos`")
    return AnnotationRequest(value, fault)


def fill_size(capacity: int | None, used: int, available: int, headroom: int = HEADROOM) -> int:
    """Bytes to allocate so that at most `headroom` stays free: below the volume's capacity
    (`used` bytes already on it) and on the filesystem (`available` free); never negative."""
    room = available - headroom
    if capacity is not None:
        room = min(room, capacity - used - headroom)
    return max(0, room)


def running_job(job: Mapping[str, object]) -> bool:
    """A Job that has neither completed nor failed."""
    status = job.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, dict) and cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return False
    return True


def names_in(faults: Iterable[Fault]) -> str:
    return ",".join(f.value for f in faults)
