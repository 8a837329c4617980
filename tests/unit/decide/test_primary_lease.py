"""decide/replicas/primary_lease.py and the self-fence in the election (decide/replicas/replication.py).

The operator renews the lease of the designated primary of a database with standbys only, and not while a failover or
switchover runs; a pod says its server stopped itself through its container's termination message. A self-fenced
primary is failed over like any unready primary (the reason in the event); with no standby to promote, its pod is
deleted so that it starts again (the fence's release), never while it is already going.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tests.unit.decide.test_election import DELAY, healthy, inp, pod, unready

from sampledb_operator.decide.replicas import primary_lease
from sampledb_operator.decide.replicas.replication import decide


@pytest.mark.parametrize(("case", "expected"), [
    ((2, 2, "db-0", None, False), True),
    ((1, 2, "db-0", None, False), True),  # scaling down: a standby still runs
    ((1, 1, "db-0", None, False), False),  # no standby: nothing would replace it, no lease
    ((2, 2, "db-0", "db-1", False), False),  # a failover or switchover runs
    ((2, 2, "db-0", None, True), False),  # it answered as a standby
    ((2, 2, "db-0", None, None), False),  # it did not answer
    ((2, 2, None, None, False), False),
])
def test_the_lease_is_renewed_for_a_designated_primary_with_standbys_only(
        case: tuple[int, int, str | None, str | None, bool | None], expected: bool) -> None:
    replicas, instances, primary, target, in_recovery = case
    assert primary_lease.renew(replicas=replicas, instances=instances, primary=primary, target=target,
                               in_recovery=in_recovery) is expected


def terminated(message: str) -> dict[str, Any]:
    return {"terminated": {"exitCode": 0, "message": message}}


@pytest.mark.parametrize(("statuses", "expected"), [
    ([], False),
    ([{"name": "postgres", "state": {"running": {}}}], False),
    ([{"name": "postgres", "state": {"running": {}}, "lastState": terminated("sampledb: self-fenced: lease")}], True),
    ([{"name": "postgres", "state": terminated("sampledb: self-fenced: lease")}], True),
    ([{"name": "postgres", "state": {"running": {}}, "lastState": terminated("OOMKilled")}], False),
    ([{"name": "postgres", "state": {"running": {}}, "lastState": terminated("x sampledb: self-fenced:")}], False),
])
def test_a_pod_says_it_self_fenced_by_its_termination_message(statuses: list[dict[str, Any]], expected: bool) -> None:
    assert primary_lease.self_fenced(statuses) is expected


def self_fenced_primary() -> dict[int, Any]:
    instances = healthy()
    instances[0] = replace(instances[0], pod=replace(unready(DELAY + 1), self_fenced=True), server=None)
    return instances


def test_a_self_fenced_primary_is_failed_over_and_the_event_says_why() -> None:
    plan = decide(inp(self_fenced_primary()))
    assert plan.target == pod(1) and plan.release == ()
    (event,) = [e for e in plan.events if e.reason == "FailoverStarted"]
    assert "stopped itself" in event.message


def test_a_self_fenced_primary_no_standby_can_replace_is_released() -> None:
    instances = self_fenced_primary()
    for i in (1, 2):
        instances[i] = replace(instances[i], pod=unready(5, "replica"))
    plan = decide(inp(instances))
    assert plan.target is None and plan.release == (pod(0),)
    assert [p.reason for p in plan.problems] == ["FailoverBlocked"]
    assert [e.reason for e in plan.events] == ["SelfFenceReleased"]


def test_an_unready_primary_that_did_not_fence_itself_is_not_released() -> None:
    instances = self_fenced_primary()
    instances[0] = replace(instances[0], pod=unready(DELAY + 1))
    for i in (1, 2):
        instances[i] = replace(instances[i], pod=unready(5, "replica"))
    assert decide(inp(instances)).release == ()


def test_a_self_fenced_primary_already_going_is_not_released_again() -> None:
    instances = self_fenced_primary()
    instances[0] = replace(instances[0], pod=replace(instances[0].pod, terminating=True))
    for i in (1, 2):
        instances[i] = replace(instances[i], pod=unready(5, "replica"))
    assert decide(inp(instances)).release == ()


def test_a_single_self_fenced_instance_is_released() -> None:
    instances = {0: replace(self_fenced_primary()[0])}
    plan = decide(inp(instances, replicas=1))
    assert plan.release == (pod(0),) and [e.reason for e in plan.events] == ["SelfFenceReleased"]


@pytest.mark.parametrize(("case", "expected"), [
    ((1, 1, None, False), True),
    ((1, 2, None, False), False),  # a standby still runs
    ((2, 1, None, False), False),  # a standby is on its way
    ((1, 1, "db-1", False), False),
    ((1, 1, None, None), False),
])
def test_the_lease_is_turned_off_once_no_standby_is_left(case: tuple[int, int, str | None, bool | None],
                                                         expected: bool) -> None:
    replicas, instances, target, in_recovery = case
    assert primary_lease.disarm(replicas=replicas, instances=instances, target=target,
                                in_recovery=in_recovery) is expected
