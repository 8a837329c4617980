"""decide/lifecycle/lifecycle.py: the deletion policies as pure steps."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from sampledb_operator.decide.lifecycle.lifecycle import (
    Attempt,
    DeletionInput,
    Step,
    deletion_step,
    retry_delay,
    snapshot_backup_name,
)

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
BASE = DeletionInput(policy="Snapshot", skip_requested=False, namespace_terminating=False, ever_ran=True,
                     data_present=True, latest=None)


def test_snapshot_policy_takes_a_snapshot_first() -> None:
    d = deletion_step(BASE, NOW)
    assert (d.step, d.attempt) == (Step.START_SNAPSHOT, 1)


@pytest.mark.parametrize("phase", [None, "Pending", "Running"])
def test_a_snapshot_in_progress_is_waited_for(phase: str | None) -> None:
    assert deletion_step(replace(BASE, latest=Attempt(1, phase)), NOW).step is Step.WAIT_SNAPSHOT


def test_data_is_deleted_only_after_the_snapshot_succeeded() -> None:
    assert deletion_step(replace(BASE, latest=Attempt(2, "Succeeded")), NOW).step is Step.DELETE_DATA


def test_a_failed_snapshot_blocks_deletion_then_retries_with_growing_backoff() -> None:
    failed = Attempt(1, "Failed", completed_at=NOW, message="pg_dump: connection refused")
    d = deletion_step(replace(BASE, latest=failed), NOW + timedelta(seconds=3))
    assert d.step is Step.RETRY_LATER
    assert d.wait_seconds == pytest.approx(retry_delay(1) - 3)
    assert "connection refused" in d.reason
    later = deletion_step(replace(BASE, latest=failed), NOW + timedelta(seconds=retry_delay(1)))
    assert (later.step, later.attempt) == (Step.START_SNAPSHOT, 2)
    assert retry_delay(1) < retry_delay(2) < retry_delay(3) <= retry_delay(50) == 600


def test_retain_keeps_the_data_and_delete_skips_the_snapshot() -> None:
    assert deletion_step(replace(BASE, policy="Retain"), NOW).step is Step.RETAIN_DATA
    assert deletion_step(replace(BASE, policy="Delete"), NOW).step is Step.DELETE_DATA


@pytest.mark.parametrize("change", [{"skip_requested": True}, {"namespace_terminating": True}, {"ever_ran": False}])
def test_snapshot_is_skipped_when_asked_impossible_or_pointless(change: dict[str, bool]) -> None:
    d = deletion_step(replace(BASE, **change), NOW)  # type: ignore[arg-type]
    assert d.step is Step.DELETE_DATA


def test_nothing_left_releases_the_finalizer() -> None:
    assert deletion_step(replace(BASE, data_present=False), NOW).step is Step.RELEASE


def test_snapshot_names_are_deterministic_per_incarnation_and_attempt() -> None:
    a = snapshot_backup_name("db", "uid-1", 1)
    assert a == snapshot_backup_name("db", "uid-1", 1)
    assert a != snapshot_backup_name("db", "uid-2", 1) != snapshot_backup_name("db", "uid-1", 2)
    assert len(snapshot_backup_name("x" * 63, "u", 99)) <= 253
