"""Condition helpers: metav1.Condition semantics for set/get/is_true."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sampledb_operator.model.conditions import (
    Condition,
    ConditionType,
    get_condition,
    is_true,
    remove_condition,
    set_condition,
)

T0 = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def cond(type_: str = "Ready", status: str = "True", reason: str = "DatabaseReady", message: str = "",
         generation: int | None = 1) -> Condition:
    return Condition(type=type_, status=status, reason=reason, message=message,  # type: ignore[arg-type]
                     observed_generation=generation)


def test_new_condition_is_appended_with_now_as_transition_time() -> None:
    existing = [cond("Initialized")]
    out = set_condition(existing, cond("Ready"), T0)
    assert [c.type for c in out] == ["Initialized", "Ready"]
    assert out[1].last_transition_time == T0


def test_same_status_keeps_transition_time_but_takes_new_reason_message_generation() -> None:
    first = set_condition([], cond(reason="Starting", message="a", generation=1), T0)
    second = set_condition(first, cond(reason="StillReady", message="b", generation=2), T1)
    (c,) = second
    assert c.last_transition_time == T0
    assert (c.reason, c.message, c.observed_generation) == ("StillReady", "b", 2)


def test_status_change_moves_transition_time() -> None:
    first = set_condition([], cond(status="False", reason="NotYet"), T0)
    (c,) = set_condition(first, cond(status="True"), T1)
    assert c.last_transition_time == T1
    assert c.status == "True"


def test_time_carried_by_the_new_condition_is_ignored() -> None:
    first = set_condition([], cond(), T0)
    incoming = cond().model_copy(update={"last_transition_time": T1 + timedelta(days=1)})
    (c,) = set_condition(first, incoming, T1)
    assert c.last_transition_time == T0


def test_existing_condition_without_time_gets_now() -> None:
    (c,) = set_condition([cond()], cond(), T1)
    assert c.last_transition_time == T1


def test_set_condition_keeps_order_and_does_not_mutate_its_input() -> None:
    original = set_condition(set_condition([], cond("A"), T0), cond("B"), T0)
    snapshot = list(original)
    out = set_condition(original, cond("A", status="False", reason="Broken"), T1)
    assert original == snapshot
    assert [c.type for c in out] == ["A", "B"]
    assert out[0].status == "False"


def test_now_is_normalised_to_whole_utc_seconds() -> None:
    (c,) = set_condition([], cond(), T0.replace(microsecond=123456))
    assert c.last_transition_time == T0


def test_get_condition_and_is_true() -> None:
    conds = set_condition(set_condition([], cond("Ready", "False", "Down"), T0), cond("Initialized"), T0)
    assert get_condition(conds, "Ready") is conds[0]
    assert get_condition(conds, "Degraded") is None
    assert is_true(conds, "Initialized")
    assert not is_true(conds, "Ready")
    assert not is_true(conds, "Missing")


def test_unknown_status_is_not_true() -> None:
    assert not is_true([cond(status="Unknown", reason="Checking")], "Ready")


def test_remove_condition_drops_only_that_type() -> None:
    conds = [cond("A"), cond("B")]
    assert [c.type for c in remove_condition(conds, "A")] == ["B"]
    assert remove_condition(conds, "C") == conds


def test_condition_types_are_the_documented_ones() -> None:
    assert {t.value for t in ConditionType} >= {
        "Ready", "Initialized", "Progressing", "Degraded", "Upgrading", "BackupHealthy", "DeletionBlocked",
    }


@pytest.mark.parametrize("reason", ["", "not camel case", "Trailing-", "9Starts"])
def test_reason_must_be_camel_case_identifier(reason: str) -> None:
    with pytest.raises(ValidationError):
        cond(reason=reason)


def test_status_must_be_true_false_or_unknown() -> None:
    with pytest.raises(ValidationError):
        cond(status="Yes")


_types = st.sampled_from(["Ready", "Initialized", "Degraded"])
_updates = st.lists(
    st.tuples(_types, st.sampled_from(["True", "False", "Unknown"]), st.integers(0, 1000)), max_size=20
)


@given(_updates)
def test_any_sequence_of_updates_keeps_one_condition_per_type(updates: list[tuple[str, str, int]]) -> None:
    conds: list[Condition] = []
    for type_, status, minute in updates:
        conds = set_condition(conds, cond(type_, status), T0 + timedelta(minutes=minute))
    types = [c.type for c in conds]
    assert len(types) == len(set(types))
    assert set(types) == {u[0] for u in updates}


@given(_updates, _types, st.sampled_from(["True", "False", "Unknown"]))
def test_setting_the_same_condition_twice_is_idempotent(
    updates: list[tuple[str, str, int]], type_: str, status: str
) -> None:
    conds: list[Condition] = []
    for t, s, minute in updates:
        conds = set_condition(conds, cond(t, s), T0 + timedelta(minutes=minute))
    once = set_condition(conds, cond(type_, status), T1)
    assert set_condition(once, cond(type_, status), T1 + timedelta(hours=1)) == once
