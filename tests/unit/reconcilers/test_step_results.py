"""Each step's outcome says when the pass should come back (a runtime Result); the pass only combines them."""

from __future__ import annotations

from sampledb_operator.model.result import Result, combine
from sampledb_operator.model.sampledb import Problem
from sampledb_operator.reconcilers.init import InitOutcome
from sampledb_operator.reconcilers.migrations import MigrationOutcome
from sampledb_operator.reconcilers.schedule import ScheduleOutcome
from sampledb_operator.reconcilers.verification import VerificationOutcome


def test_a_step_with_nothing_to_wait_for_asks_for_nothing() -> None:
    assert [o.result for o in (InitOutcome(), MigrationOutcome(), VerificationOutcome(), ScheduleOutcome())] == [
        None, None, None, None]


def test_a_blocked_init_job_asks_for_a_rate_limited_look_again() -> None:
    assert InitOutcome(blockers=(Problem("InitSourceMissing", "gone", "spec.init"),)).result == Result(requeue=True)


def test_migrations_ask_for_backoff_and_for_a_recheck_of_the_configmap() -> None:
    assert MigrationOutcome(requeue=True).result == Result(requeue=True)
    assert MigrationOutcome(recheck_after=60.0).result == Result(requeue_after=60.0)
    assert MigrationOutcome(requeue=True, recheck_after=60.0).result == Result(requeue_after=60.0, requeue=True)


def test_verification_and_schedule_results() -> None:
    assert VerificationOutcome(requeue=True).result == Result(requeue=True)
    assert ScheduleOutcome(requeue_after=30.0).result == Result(requeue_after=30.0)


def test_the_pass_combines_them_the_earliest_wins() -> None:
    results = [InitOutcome().result, MigrationOutcome(recheck_after=60.0).result,
               ScheduleOutcome(requeue_after=30.0).result]
    assert combine(*results) == Result(requeue_after=30.0)
