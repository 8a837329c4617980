"""spec.storage.autoGrow: whether the data volumes grow now, to what size, or why they cannot.

Pure: no I/O, no clock. The caller measures the primary's data file system (`Usage`, from `df` run by the server)
and passes the instance pods that stop because their volume is full (the stuck reason VolumeFull, read from a
crash-looping container's last words), and the data claims as the caches hold them.

A full volume's server crash-loops, and its last words stay in the pod's status through the kubelet's back-off (up
to five minutes), well after its volume has grown: that evidence counts once. A growth asked for full pods names
them on every data claim (GROWN_FOR_ANNOTATION, their uids); such a pod is not evidence again, and once the claims
have grown it is restarted (`restarts`) rather than left to wait out the back-off: it serves nothing, so deleting it
loses nothing, and its StatefulSet makes it again at once. If the grown volume is still too small, the new pod
stops on it in turn, and that (a pod not named) is new evidence: the next step.

Invariants:
- a pod counts as full evidence for one growth only (GROWN_FOR_ANNOTATION), so one crash never grows a volume twice;
- a growth is asked only when no data claim is still growing (its request above its capacity): one step at a time,
  each measured on the grown volume;
- the new size is the largest claim's request plus step_percent of it, rounded up to a whole MiB, never past
  maximum; every instance's claim gets it (a standby holds what the primary holds);
- at maximum, a volume past the threshold (or full) is a Problem, StorageAutoGrowLimit, never a larger request;
- a data claim made after a growth (a standby added, a volume made again) asks for what the largest holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sampledb_operator.decide.plan import with_size
from sampledb_operator.model.autogrow import AutoGrowSpec
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.quantity import parse_quantity
from sampledb_operator.model.sampledb import Problem

MIB = 1024 * 1024
MEASURE_SECONDS = 30.0  # how often the primary's data file system is measured
GROWN_FOR_ANNOTATION = "sampledb.io/autogrown-for"  # on a data claim: the pods (uids) a full volume stopped when
# its size was last asked for, comma-separated


@dataclass(frozen=True, slots=True)
class Usage:
    """The data file system as `df` sees it on the primary, in bytes."""

    size: int
    used: int

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.size if self.size > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Growth:
    """What to do: `size` (bytes) for every data claim, with why; or a Problem; or neither."""

    size: int | None = None
    reason: str = ""
    problem: Problem | None = None
    full_pods: tuple[str, ...] = ()  # the uids of the pods whose full volume asks for this growth


def parse_df(text: str) -> Usage | None:
    """`df -P -B1 .`'s answer (a header, then one line: filesystem, size, used, available, use%, mount) as Usage;
    None when it does not read so."""
    lines = [line.split() for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 2 or len(lines[-1]) < 4:
        return None
    try:
        size, used = int(lines[-1][1]), int(lines[-1][2])
    except ValueError:
        return None
    return Usage(size, used) if size > 0 and used >= 0 else None


def request_of(claim: Obj) -> int | None:
    value = (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    try:
        return int(parse_quantity(str(value))) if value is not None else None
    except ValueError:
        return None


def capacity_of(claim: Obj) -> int | None:
    value = ((claim.get("status") or {}).get("capacity") or {}).get("storage")
    try:
        return int(parse_quantity(str(value))) if value is not None else None
    except ValueError:
        return None


def growing(claims: Sequence[Obj]) -> bool:
    """Some data claim asks for more than it has (an expansion under way, or stuck: said by
    decide/lifecycle/stuck.py)."""
    for claim in claims:
        want, have = request_of(claim), capacity_of(claim)
        if want is not None and (have is None or want > have):
            return True
    return False


def grown_for(claims: Sequence[Obj]) -> frozenset[str]:
    """The uids of the pods that stopped on a full volume when the claims' size was last asked for."""
    return frozenset(uid for claim in claims for uid in str(
        ((claim.get("metadata") or {}).get("annotations") or {}).get(GROWN_FOR_ANNOTATION) or "").split(",") if uid)


def _uid(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def restarts(claims: Sequence[Obj], full_pods: Sequence[Obj]) -> list[str]:
    """The names of the full pods a growth was asked for, once every claim has grown: each still crash-loops on the
    old evidence and waits for the kubelet's back-off; deleted, it starts again at once on the grown volume."""
    if growing(claims):
        return []
    done = grown_for(claims)
    return [str(p["metadata"].get("name")) for p in full_pods if _uid(p) and _uid(p) in done]


def decide(spec: AutoGrowSpec, claims: Sequence[Obj], usage: Usage | None, full_pods: Sequence[Obj] = ()
           ) -> Growth:
    """Whether the data claims grow now (see the module's invariants)."""
    requests = [r for c in claims if (r := request_of(c)) is not None]
    if not requests or growing(claims):
        return Growth()
    done = grown_for(claims)
    fresh = tuple(uid for p in full_pods if (uid := _uid(p)) not in done)
    full = bool(fresh)
    current = max(requests)
    past = usage is not None and usage.percent >= spec.threshold_percent
    if not (past or full):
        return Growth()
    why = "the server stops: its volume is full" if full or usage is None else (
        f"{usage.percent:.0f}% of the data file system is used (threshold {spec.threshold_percent}%)")
    maximum = int(parse_quantity(str(spec.maximum)))
    if current >= maximum:
        return Growth(problem=Problem("StorageAutoGrowLimit", (
            f"the data volume is at autoGrow.maximum ({spec.maximum}) and {why}: raise spec.storage.autoGrow.maximum"
            " (the class must allow expansion), or free space"), "spec.storage.autoGrow.maximum"))
    step = current * spec.step_percent // 100
    size = min(maximum, -(-(current + step) // MIB) * MIB)
    return Growth(size=size, reason=f"{why}: growing from {quantity(current)} to {quantity(size)}", full_pods=fresh)


def new_claims_sized(desired: Sequence[Obj], observed: Mapping[tuple[str, str], Obj], claims: Sequence[str]
                     ) -> list[Obj]:
    """`desired`, where a data claim of `claims` (the instances' claim names) that is not made yet asks for the
    largest existing one's request when that is larger: a standby added after a growth holds what the primary
    holds."""
    largest = max((r for name in claims if (c := observed.get(("PersistentVolumeClaim", name))) is not None
                   and (r := request_of(c)) is not None), default=None)
    if largest is None:
        return list(desired)
    out = []
    for obj in desired:
        name = str((obj.get("metadata") or {}).get("name"))
        wanted = request_of(obj)
        if (obj.get("kind") == "PersistentVolumeClaim" and name in claims
                and ("PersistentVolumeClaim", name) not in observed and wanted is not None and largest > wanted):
            out.append(with_size(obj, quantity(largest)))
        else:
            out.append(obj)
    return out


def quantity(size: int) -> str:
    """`size` bytes as a claim's request: whole MiB."""
    return f"{-(-size // MIB)}Mi"
