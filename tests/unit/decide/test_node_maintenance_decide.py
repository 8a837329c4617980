"""decide/replicas/maintenance.py: a primary on a cordoned node is switched over to the ready standby furthest ahead
on a schedulable node; nothing happens while the primary moves already, is not ready, or is not on a cordoned node;
without a standby to move to, the primary stays and the reason says a drain waits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sampledb_operator.decide.replicas.maintenance import RECHECK, Maintenance, MaintenanceInput, Standby, decide

S1 = Standby("orders-i1-0", ready=True, node="node-b", position=5_000)
S2 = Standby("orders-i2-0", ready=True, node="node-c", position=4_000)
BASE = MaintenanceInput(primary="orders-0", primary_ready=True, primary_node="node-a", cordoned={"node-a"},
                        standbys=(S1, S2), busy=False)


def test_the_standby_furthest_ahead_on_a_schedulable_node_is_the_target() -> None:
    assert decide(BASE) == Maintenance(switchover_to="orders-i1-0")
    assert decide(replace(BASE, standbys=(S1, replace(S2, position=6_000)))).switchover_to == "orders-i2-0"


def test_among_equals_the_first_by_name_and_a_standby_whose_position_is_unknown_comes_last() -> None:
    assert decide(replace(BASE, standbys=(replace(S2, position=5_000), S1))).switchover_to == "orders-i1-0"
    assert decide(replace(BASE, standbys=(replace(S1, position=None), S2))).switchover_to == "orders-i2-0"
    assert decide(replace(BASE, standbys=(replace(S1, position=None),))).switchover_to == "orders-i1-0"


@pytest.mark.parametrize("standbys", [
    (replace(S1, node="node-a"), replace(S2, node="node-d")),  # S1 on the cordoned node itself
    (replace(S1, ready=False), S2),  # S1 not ready
    (replace(S1, node=None), S2),  # S1 not scheduled
])
def test_a_standby_that_cannot_take_over_is_passed_over(standbys: tuple[Standby, ...]) -> None:
    cordoned = {"node-a", "node-d"} if standbys[1].node == "node-d" else {"node-a"}
    got = decide(replace(BASE, cordoned=cordoned, standbys=standbys))
    if standbys[1].node == "node-d":
        assert got.switchover_to is None and got.waiting is not None  # both on cordoned nodes
    else:
        assert got == Maintenance(switchover_to="orders-i2-0")


def test_no_standby_to_move_to_leaves_the_primary_and_says_why_a_drain_waits() -> None:
    got = decide(replace(BASE, standbys=(replace(S1, ready=False), replace(S2, node="node-a"))))
    assert got.switchover_to is None
    assert got.waiting == ("the primary orders-0 runs on cordoned node node-a, and no ready standby runs on a"
                           " schedulable node to switch over to: a drain of the node waits")
    assert got.recheck_after == RECHECK
    assert decide(replace(BASE, standbys=())).waiting == got.waiting


@pytest.mark.parametrize("change", [
    {"cordoned": set()},  # no node cordoned
    {"cordoned": {"node-b"}},  # another node is
    {"primary_node": None},  # the primary's pod is not scheduled (or has none)
    {"primary": None},  # no primary recorded yet
    {"busy": True},  # a failover or switchover runs, or is asked for
])
def test_nothing_to_do(change: dict[str, object]) -> None:
    assert decide(replace(BASE, **change)) == Maintenance()  # type: ignore[arg-type]


def test_an_unready_primary_is_left_to_a_failover() -> None:
    got = decide(replace(BASE, primary_ready=False))
    assert got.switchover_to is None
    assert got.waiting is not None and "a failover, not a switchover, moves it" in got.waiting
    assert got.recheck_after == RECHECK
