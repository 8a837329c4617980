"""runtime/collector: the garbage collector's settings change when it runs, not what it frees."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from sampledb_operator.runtime import collector


@pytest.fixture
def tuned() -> Iterator[collector.CollectorSettings]:
    before = collector.tune(young_threshold=5_000)
    try:
        yield before
    finally:
        collector.restore(before)


class _Node:
    def __init__(self) -> None:
        self.other: object = None


def test_tune_widens_the_young_generation_and_keeps_the_older_thresholds(
        tuned: collector.CollectorSettings) -> None:
    young, middle, old = gc.get_threshold()
    assert young == 5_000
    assert (middle, old) == tuned.thresholds[1:]


def test_tune_freezes_what_is_alive(tuned: collector.CollectorSettings) -> None:
    assert gc.get_freeze_count() > tuned.frozen


def test_a_cycle_made_after_tune_is_still_collected(tuned: collector.CollectorSettings) -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # held by the cycle alone: reference counting cannot free it
    gc.collect()
    assert gone() is None


def test_restore_puts_back_what_tune_replaced() -> None:
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    collector.restore(collector.tune(young_threshold=1234))
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() == frozen


def test_a_young_threshold_below_one_is_refused() -> None:
    thresholds = gc.get_threshold()
    with pytest.raises(ValueError, match="young_threshold"):
        collector.tune(young_threshold=0)
    assert gc.get_threshold() == thresholds
