"""The cyclic garbage collector's settings for the operator's long-running process.

Reference counting frees almost everything the operator allocates (a watch event's decoded JSON, an
answer, a pass's models) as soon as it is no longer used; the cyclic collector is only needed for garbage
held in reference cycles. With CPython's defaults it was ~4.5 % of the operator's CPU while 1,000 databases
were created (docs/benchmarks.md, "Decisions"): a young collection whenever 700 more container objects had
been allocated than freed, which decoding one watch event (hundreds of dicts and lists, freed again a
moment later) often is, each costing ~1 ms; and full collections that traversed again and again the
~60,000 objects the imports made (modules, classes, functions), which live as long as the process.

tune() sets:
- freeze(): the objects alive when it is called (after the imports, before the event loop starts) move to
  the permanent generation, which no collection traverses;
- a young generation of YOUNG_THRESHOLD containers: a burst of allocations that is freed again no longer
  sets off a collection; one that stays (cycles included) is collected after at most that many.

Invariants:
- it changes when the collector runs, never what it frees: a cycle made after the call is collected as
  before; what it froze is the process's import-time state;
- the older generations' thresholds are CPython's own; tune() returns the settings it replaced, which
  restore() puts back (emptying the permanent generation when it was empty before).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

YOUNG_THRESHOLD = 10_000  # containers allocated (net) between young collections; CPython's default is 700


@dataclass(frozen=True)
class CollectorSettings:
    thresholds: tuple[int, int, int]
    frozen: int  # objects in the permanent generation


def tune(young_threshold: int = YOUNG_THRESHOLD) -> CollectorSettings:
    """Freeze what is alive now and widen the young generation; the settings replaced."""
    if young_threshold < 1:
        raise ValueError("young_threshold must be >= 1")
    before = CollectorSettings(gc.get_threshold(), gc.get_freeze_count())
    gc.collect()  # what the start-up left as garbage is freed, not frozen
    gc.freeze()
    _, middle, old = before.thresholds
    gc.set_threshold(young_threshold, middle, old)
    return before


def restore(settings: CollectorSettings) -> None:
    """Undo tune(): the thresholds it replaced; frozen objects go back to the oldest generation unless some
    were frozen before tune()."""
    gc.set_threshold(*settings.thresholds)
    if settings.frozen == 0:
        gc.unfreeze()
