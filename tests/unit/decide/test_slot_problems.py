"""decide/replicas/slots.slot_problems: an inactive slot holding a quarter of the data volume's size in WAL is a
problem that names the slot, the WAL it holds and how to end it; less, or no inactive slot, is none; a standby's own
slot says its standby does not stream."""

from __future__ import annotations

from sampledb_operator.decide.replicas.slots import slot_problems
from sampledb_operator.model import names
from sampledb_operator.model.sampledb_status import InstanceStatus

GIB = 2**30


def primary(slot: str | None, held: int | None) -> InstanceStatus:
    return InstanceStatus(name="orders-0", role="primary", ready=True, inactive_slot=slot,
                          inactive_slot_retained_bytes=held)


def test_a_quarter_of_the_volume_held_by_an_inactive_slot_is_a_problem() -> None:
    (problem,) = slot_problems([primary("cdc", GIB // 4)], GIB)
    assert problem.reason == "InactiveSlotRetainingWAL"
    assert "cdc" in problem.message and "256 MiB" in problem.message and "25%" in problem.message
    assert "pg_drop_replication_slot('cdc')" in problem.message and "nothing consumes it" in problem.message


def test_less_or_no_inactive_slot_is_no_problem() -> None:
    assert slot_problems([primary("cdc", GIB // 4 - 1)], GIB) == ()
    assert slot_problems([primary(None, None)], GIB) == ()


def test_a_standbys_slot_says_its_standby_does_not_stream() -> None:
    (problem,) = slot_problems([primary(names.replication_slot_name(1), GIB)], GIB)
    assert "standby that does not stream" in problem.message
