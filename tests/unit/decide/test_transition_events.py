"""decide/events.py: which condition transitions are announced by an Event, one test per row of the table."""

from __future__ import annotations

import pytest

from sampledb_operator.decide.events import EventSpec, transition_events
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.sampledb_status import SampleDBStatus


def status(*conds: tuple[str, str, str]) -> SampleDBStatus:
    return SampleDBStatus(conditions=[Condition(type=t, status=s, reason=r, message=f"{t} {r}")  # type: ignore[arg-type]
                                      for t, s, r in conds])


def events(old: tuple[tuple[str, str, str], ...], new: tuple[tuple[str, str, str], ...]) -> list[EventSpec]:
    return transition_events(status(*old), status(*new))


def test_an_unchanged_status_and_reason_announce_nothing() -> None:
    same = (("Ready", "True", "Ready"), ("Degraded", "True", "StorageExpansionUnsupported"),
            ("Upgrading", "False", "UpgradeFailed"), ("Progressing", "False", "Paused"))
    assert events(same, same) == []


def test_ready_true_is_announced_as_database_ready() -> None:
    assert events((("Ready", "False", "Creating"),), (("Ready", "True", "Ready"),)) == [
        EventSpec("Normal", "DatabaseReady", "Ready Ready")]
    assert events((), (("Ready", "True", "Ready"),)) == [EventSpec("Normal", "DatabaseReady", "Ready Ready")]


def test_ready_false_is_not_announced() -> None:
    assert events((("Ready", "True", "Ready"),), (("Ready", "False", "Creating"),)) == []


@pytest.mark.parametrize(("type_", "status_"), [("Degraded", "True"), ("SpecValid", "False")])
def test_degraded_and_an_invalid_spec_are_warnings_with_their_reason(type_: str, status_: str) -> None:
    assert events((), ((type_, status_, "Why"),)) == [EventSpec("Warning", "Why", f"{type_} Why")]
    # a new reason while the status stays is announced again
    assert events(((type_, status_, "Before"),), ((type_, status_, "Why"),)) == [
        EventSpec("Warning", "Why", f"{type_} Why")]


@pytest.mark.parametrize(("type_", "status_"), [("Degraded", "False"), ("SpecValid", "True")])
def test_recovery_from_degraded_or_an_invalid_spec_is_not_announced(type_: str, status_: str) -> None:
    assert events(((type_, "True" if status_ == "False" else "False", "Why"),), ((type_, status_, "Fine"),)) == []


def test_initialized_true_is_announced_when_it_turns_true() -> None:
    assert events((("Initialized", "False", "InitRunning"),), (("Initialized", "True", "InitSucceeded"),)) == [
        EventSpec("Normal", "InitSucceeded", "Initialized InitSucceeded")]
    assert events((), (("Initialized", "True", "NoInitSQL"),)) == [
        EventSpec("Normal", "NoInitSQL", "Initialized NoInitSQL")]


def test_initialized_true_with_a_new_reason_is_announced_only_for_the_renotified_ones() -> None:
    assert events((("Initialized", "True", "InitSucceeded"),), (("Initialized", "True", "InitChangedNotRerun"),)) == [
        EventSpec("Normal", "InitChangedNotRerun", "Initialized InitChangedNotRerun")]
    assert events((("Initialized", "True", "InitSucceeded"),), (("Initialized", "True", "Restored"),)) == []


@pytest.mark.parametrize("reason", ["InitSourceMissing", "InitSecretNotOptedIn", "InitFailed", "RestoreFailed",
                                    "RestoreSourceMissing", "RestoreSourceNotReady"])
def test_initialized_failing_is_a_warning(reason: str) -> None:
    assert events((), (("Initialized", "False", reason),)) == [EventSpec("Warning", reason, f"Initialized {reason}")]
    assert events((("Initialized", "True", "InitSucceeded"),), (("Initialized", "False", reason),)) == [
        EventSpec("Warning", reason, f"Initialized {reason}")]


def test_initialized_false_for_a_reason_that_is_no_failure_is_not_announced() -> None:
    assert events((), (("Initialized", "False", "WaitingForDatabase"),)) == []
    assert events((("Initialized", "True", "InitSucceeded"),), (("Initialized", "False", "InitRunning"),)) == []


def test_a_failure_reason_announced_again_only_when_renotified() -> None:
    # False -> False: InitSourceMissing is renotified; InitFailed after InitRunning is not (the status did not change)
    assert events((("Initialized", "False", "InitRunning"),), (("Initialized", "False", "InitSourceMissing"),)) == [
        EventSpec("Warning", "InitSourceMissing", "Initialized InitSourceMissing")]
    assert events((("Initialized", "False", "InitRunning"),), (("Initialized", "False", "InitFailed"),)) == []


@pytest.mark.parametrize(("reason", "type_"), [("UpgradeFailed", "Warning"), ("DowngradeRefused", "Warning"),
                                               ("UpgradeSucceeded", "Normal"), ("Upgrading", "Normal")])
def test_every_upgrading_transition_is_announced_a_failure_as_a_warning(reason: str, type_: str) -> None:
    assert events((("Upgrading", "False", "Before"),), (("Upgrading", "True", reason),)) == [
        EventSpec(type_, reason, f"Upgrading {reason}")]  # type: ignore[arg-type]


def test_paused_is_announced_and_other_progressing_reasons_are_not() -> None:
    assert events((("Progressing", "False", "Reconciled"),), (("Progressing", "False", "Paused"),)) == [
        EventSpec("Normal", "Paused", "Progressing Paused")]
    assert events((("Progressing", "False", "Paused"),), (("Progressing", "True", "Reconciling"),)) == []


def test_conditions_of_other_types_are_not_announced() -> None:
    assert events((), (("BackupHealthy", "False", "BackupFailed"), ("Migrated", "True", "Applied"))) == []


def test_events_follow_the_order_of_the_new_conditions() -> None:
    new = (("Degraded", "True", "Why"), ("Ready", "True", "Ready"))
    assert [e.reason for e in events((), new)] == ["Why", "DatabaseReady"]


def test_initialized_with_ready_in_the_same_write_is_one_database_ready_event() -> None:
    new = (("Ready", "True", "DatabaseReady"), ("Initialized", "True", "InitSucceeded"))
    assert events((("Ready", "False", "Initializing"), ("Initialized", "False", "InitRunning")), new) == [
        EventSpec("Normal", "DatabaseReady",
                  "Ready DatabaseReady (initialized: InitSucceeded, Initialized InitSucceeded)")]
    # the order of the conditions does not matter; a warning of the same write stays its own Event
    new = (("Degraded", "True", "Why"), ("Initialized", "True", "NoInitSQL"), ("Ready", "True", "DatabaseReady"))
    assert events((), new) == [EventSpec("Warning", "Why", "Degraded Why"),
                               EventSpec("Normal", "DatabaseReady",
                                         "Ready DatabaseReady (initialized: NoInitSQL, Initialized NoInitSQL)")]


def test_initialized_without_ready_turning_true_stays_its_own_event() -> None:
    # already ready (a renotified reason), or not ready yet: the initialization is announced alone
    assert events((("Ready", "True", "DatabaseReady"), ("Initialized", "True", "InitSucceeded")),
                  (("Ready", "True", "DatabaseReady"), ("Initialized", "True", "InitChangedNotRerun"))) == [
        EventSpec("Normal", "InitChangedNotRerun", "Initialized InitChangedNotRerun")]
    assert events((("Initialized", "False", "InitRunning"),),
                  (("Ready", "False", "DatabaseNotReady"), ("Initialized", "True", "InitSucceeded"))) == [
        EventSpec("Normal", "InitSucceeded", "Initialized InitSucceeded")]
