"""decide/replicas/pooler_pause.py: a switchover's pause recorded before it is sent, sent before the old primary stops,
resumed once the switchover ends or takes too long; never for a failover; a pause always gets its resume."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sampledb_operator.decide.replicas import pooler_pause as pp
from sampledb_operator.model.sampledb_status import PoolerPause

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
T = "orders-i1-0"


def test_a_switchover_is_recorded_then_paused_then_resumed_when_it_ends() -> None:
    first = pp.decide(pooler=True, switchover_to=T, record=None, now=NOW)
    assert first == pp.PauseDecision(pp.PauseAction.NONE, PoolerPause(target=T))  # the record before any pause
    assert pp.hold_fence(pooler=True, switchover_to=T, primary="orders-0", record=None)
    assert not pp.hold_fence(pooler=True, switchover_to=T, primary="orders-0", record=first.record)
    second = pp.decide(pooler=True, switchover_to=T, record=first.record, now=NOW)
    assert second.action is pp.PauseAction.PAUSE and second.record == PoolerPause(target=T, paused_at=NOW)
    waiting = pp.decide(pooler=True, switchover_to=T, record=second.record, now=NOW + timedelta(seconds=5))
    assert waiting == pp.PauseDecision(pp.PauseAction.NONE, second.record)
    ended = pp.decide(pooler=True, switchover_to=None, record=second.record, now=NOW + timedelta(seconds=6))
    assert ended == pp.PauseDecision(pp.PauseAction.RESUME, None)
    assert pp.decide(pooler=True, switchover_to=None, record=None, now=NOW) == pp.PauseDecision(pp.PauseAction.NONE,
                                                                                                 None)


def test_a_switchover_that_takes_too_long_is_resumed_once_and_not_paused_again() -> None:
    paused = PoolerPause(target=T, paused_at=NOW)
    late = NOW + timedelta(seconds=pp.PAUSE_LIMIT_SECONDS + 1)
    resumed = pp.decide(pooler=True, switchover_to=T, record=paused, now=late)
    assert resumed.action is pp.PauseAction.RESUME and resumed.record == PoolerPause(target=T, paused_at=NOW,
                                                                                     resumed=True)
    assert pp.decide(pooler=True, switchover_to=T, record=resumed.record, now=late).action is pp.PauseAction.NONE
    assert pp.decide(pooler=True, switchover_to=None, record=resumed.record, now=late) == pp.PauseDecision(
        pp.PauseAction.NONE, None)


def test_a_record_whose_pause_time_was_lost_is_still_resumed() -> None:
    """The pass that sent PAUSE stopped before its status write: the record has no time, and is resumed anyway."""
    assert pp.decide(pooler=True, switchover_to=None, record=PoolerPause(target=T), now=NOW) == pp.PauseDecision(
        pp.PauseAction.RESUME, None)
    assert pp.decide(pooler=False, switchover_to=None, record=PoolerPause(target=T, paused_at=NOW),
                     now=NOW).action is pp.PauseAction.RESUME  # the pooler removed meanwhile: nothing left paused


def test_failovers_and_databases_without_a_pooler_never_pause_or_hold() -> None:
    assert pp.decide(pooler=False, switchover_to=T, record=None, now=NOW) == pp.PauseDecision(pp.PauseAction.NONE,
                                                                                               None)
    assert not pp.hold_fence(pooler=False, switchover_to=T, primary="orders-0", record=None)
    assert not pp.hold_fence(pooler=True, switchover_to=None, primary="orders-0", record=None)
    assert not pp.hold_fence(pooler=True, switchover_to="orders-0", primary="orders-0", record=None)  # no change
    another = pp.decide(pooler=True, switchover_to="orders-i2-0", record=PoolerPause(target=T, resumed=True),
                        now=NOW)
    assert another == pp.PauseDecision(pp.PauseAction.NONE, PoolerPause(target="orders-i2-0"))  # a new switchover
