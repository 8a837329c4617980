"""The scope of a chaos run and its schedule: which fault, on which database, when. Pure.

Invariants: a run needs a namespace (or all namespaces) AND a label selector, or `--all` with one
namespace (ScopeError otherwise); the schedule is a function of (seed, databases, faults, rate,
duration) only: the same inputs give the same schedule whatever the order the databases were
listed in; floor(rate * duration / 60) faults, one every 60/rate seconds from the start.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sampledb_operator.chaos.faults import Fault

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class ScopeError(ValueError):
    """The command line does not say which databases the run may touch."""


@dataclass(frozen=True, slots=True)
class Scope:
    """Where the run acts: one namespace or all (namespace None), and the SampleDBs' label selector
    (None only with `--all` in one namespace)."""

    namespace: str | None
    selector: str | None

    def describe(self) -> str:
        where = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        return f"{where}, " + (f"SampleDBs matching {self.selector!r}" if self.selector else "every SampleDB")


def scope_from_flags(namespace: str | None, all_namespaces: bool, selector: str | None, all_: bool) -> Scope:
    """The run's scope, or ScopeError saying what is missing."""
    if bool(namespace) == all_namespaces:
        raise ScopeError("give exactly one of --namespace NS or --all-namespaces")
    selector = (selector or "").strip() or None
    if selector and all_:
        raise ScopeError("give either --selector or --all, not both")
    if not selector and not all_:
        raise ScopeError("give a label selector (--selector/-l) naming the SampleDBs to disturb, "
                         "or --all with --namespace")
    if all_ and all_namespaces:
        raise ScopeError("--all needs --namespace: across all namespaces a --selector is required")
    return Scope(namespace or None, selector)


@dataclass(frozen=True, slots=True, order=True)
class Target:
    """One SampleDB."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PlannedFault:
    """The index-th fault: at `at` seconds after the start, `fault` on `target` (None: the operator)."""

    index: int
    at: float
    fault: Fault
    target: Target | None


def parse_duration(text: str) -> float:
    """"90", "90s", "5m", "1.5h", "500ms" as seconds; ValueError otherwise."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 5m, 1h)")
    return float(match.group(1)) * _UNIT[match.group(2)]


def fault_count(rate: float, duration: float) -> int:
    """How many faults a run of `duration` seconds at `rate` faults per minute injects."""
    if rate <= 0 or duration <= 0:
        return 0
    return math.floor(rate * duration / 60 + 1e-9)


def plan(*, seed: int, targets: Iterable[Target], faults: Sequence[Fault], rate: float,
         duration: float) -> list[PlannedFault]:
    """The run's schedule; ValueError when there is nothing to choose from."""
    if not faults:
        raise ValueError("no fault kinds to choose from")
    pool = sorted(set(targets))
    if not pool and any(f is not Fault.KILL_LEADER for f in faults):
        raise ValueError("no SampleDB in scope")
    kinds = sorted(set(faults), key=list(Fault).index)
    rng = random.Random(seed)
    interval = 60.0 / rate if rate > 0 else 0.0
    out: list[PlannedFault] = []
    for index in range(fault_count(rate, duration)):
        fault = rng.choice(kinds)
        target = rng.choice(pool) if pool else None  # drawn for every fault: the draws never depend on the kinds drawn
        out.append(PlannedFault(index, round(index * interval, 3), fault,
                                None if fault is Fault.KILL_LEADER else target))
    return out
