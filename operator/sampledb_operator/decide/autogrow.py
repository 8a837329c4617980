"""spec.storage.autoGrow: whether the data volumes grow now, to what size, or why they cannot.

Pure: no I/O, no clock. The caller measures the primary's data file system (`Usage`, from `df` run by the server)
and says whether an instance stops because its volume is full (the stuck reason VolumeFull), and passes the data
claims as the caches hold them.

Invariants:
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
    """Some data claim asks for more than it has (an expansion under way, or stuck: said by decide/stuck.py)."""
    for claim in claims:
        want, have = request_of(claim), capacity_of(claim)
        if want is not None and (have is None or want > have):
            return True
    return False


def decide(spec: AutoGrowSpec, claims: Sequence[Obj], usage: Usage | None, *, full: bool) -> Growth:
    """Whether the data claims grow now (see the module's invariants)."""
    requests = [r for c in claims if (r := request_of(c)) is not None]
    if not requests or growing(claims):
        return Growth()
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
    return Growth(size=size, reason=f"{why}: growing from {quantity(current)} to {quantity(size)}")


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
