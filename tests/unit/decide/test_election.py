"""decide/replicas/replication.py: the election, as examples and as properties over generated inputs.

The properties are the module's promises (its docstring): a standby is promoted only once the old
primary is fenced; any other writable instance is fenced; the primary, the instance being promoted
and any writable instance are never scaled away; at most one pod carries the primary label, none during
a failover; a failover promotes the most advanced ready standby, and in synchronous mode only once
every standby answered; the plan is a function of its input.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sampledb_operator.decide.labels import PRIMARY_ROLE, REPLICA_ROLE
from sampledb_operator.decide.replicas.replication import (
    FAILOVER_POLL,
    FENCED,
    SWITCHOVER_ANNOTATION,
    InstanceView,
    PodView,
    ReplicationInput,
    ReplicationPlan,
    candidates,
    decide,
    index_of,
    observed_primary,
    wanted_indexes,
)
from sampledb_operator.model import names
from sampledb_operator.model.instances import ServerState

DB = "orders"
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
DELAY = 30.0


def pod(i: int) -> str:
    return names.instance_pod_name(DB, i)


def primary_server(lsn: int = 100) -> ServerState:
    return ServerState(in_recovery=False, current_lsn=lsn)


def standby_server(lsn: int = 90) -> ServerState:
    return ServerState(in_recovery=True, receive_lsn=lsn, replay_lsn=lsn)


def ready(role: str | None = REPLICA_ROLE) -> PodView:
    return PodView(ready=True, since=NOW - timedelta(hours=1), role=role)


def unready(seconds: float, role: str | None = PRIMARY_ROLE) -> PodView:
    return PodView(ready=False, since=NOW - timedelta(seconds=seconds), role=role)


def healthy(n: int = 3, *, positions: tuple[int, ...] = (100, 90, 80)) -> dict[int, InstanceView]:
    """n instances: 0 the primary (labelled, writable), the others ready standbys at `positions`."""
    out = {0: InstanceView(0, pod=ready(PRIMARY_ROLE), server=primary_server(positions[0]))}
    for i in range(1, n):
        out[i] = InstanceView(i, pod=ready(), server=standby_server(positions[i]))
    return out


def inp(instances: dict[int, InstanceView] | None = None, **kw: object) -> ReplicationInput:
    base = ReplicationInput(db=DB, replicas=3, synchronous=False, failover_delay=DELAY, primary=pod(0),
                            target=None, switchover_to=None,
                            instances=healthy() if instances is None else instances, now=NOW)
    return replace(base, **kw)  # type: ignore[arg-type]


def replicas_of(plan: ReplicationPlan) -> dict[int, int]:
    return {i.index: i.replicas for i in plan.instances}


def fenced(plan: ReplicationPlan) -> set[int]:
    return {i.index for i in plan.instances if i.replicas == 0}


def reasons(plan: ReplicationPlan) -> list[str]:
    return [e.reason for e in plan.events]


def problem_reasons(plan: ReplicationPlan) -> list[str]:
    return [p.reason for p in plan.problems]


# ---------------------------------------------------------------------- examples: the steady state


def test_a_new_database_elects_instance_0_and_creates_the_wanted_instances() -> None:
    plan = decide(inp({}, primary=None))
    assert (plan.primary, plan.target, plan.promote) == (pod(0), None, None)
    assert replicas_of(plan) == {0: 1, 1: 1, 2: 1}
    assert (plan.fence_pods, plan.remove, plan.events, plan.problems) == ((), (), (), ())
    assert plan.slots is None  # no primary server answered yet: the slots are left alone


def test_one_instance_needs_no_polling() -> None:
    plan = decide(inp({0: InstanceView(0, pod=ready(PRIMARY_ROLE))}, replicas=1))
    assert replicas_of(plan) == {0: 1}
    assert plan.requeue_after is None


def test_a_lost_status_takes_the_one_writable_server_as_primary() -> None:
    instances = {0: InstanceView(0, pod=ready(REPLICA_ROLE), server=standby_server()),
                 1: InstanceView(1, pod=ready(REPLICA_ROLE), server=primary_server()),
                 2: InstanceView(2, pod=ready(REPLICA_ROLE), server=standby_server())}
    assert observed_primary(inp(instances, primary=None)) == 1
    plan = decide(inp(instances, primary=None))
    assert (plan.primary, plan.target, fenced(plan)) == (pod(1), None, set())
    assert plan.labels == {pod(1): PRIMARY_ROLE}
    assert plan.slots == frozenset({names.replication_slot_name(0), names.replication_slot_name(2)})


def test_a_lost_status_with_no_answer_takes_the_one_labelled_pod_then_instance_0() -> None:
    labelled = {0: InstanceView(0, pod=ready(REPLICA_ROLE)), 1: InstanceView(1, pod=ready(PRIMARY_ROLE))}
    assert observed_primary(inp(labelled, primary=None)) == 1
    two = {0: InstanceView(0, pod=ready(PRIMARY_ROLE)), 1: InstanceView(1, pod=ready(PRIMARY_ROLE))}
    assert observed_primary(inp(two, primary=None)) == 0


def test_steady_state_labels_the_primary_and_keeps_a_slot_per_standby() -> None:
    unlabelled = {i: replace(v, pod=replace(v.pod, role=None)) for i, v in healthy().items() if v.pod}
    plan = decide(inp(unlabelled))
    assert plan.labels == {pod(0): PRIMARY_ROLE, pod(1): REPLICA_ROLE, pod(2): REPLICA_ROLE}
    assert plan.slots == frozenset({"sdb_i1", "sdb_i2"})
    assert decide(inp()).labels == {}  # already right: nothing to patch
    assert plan.role_of(0, DB) == PRIMARY_ROLE and plan.role_of(1, DB) == REPLICA_ROLE


def test_a_second_writable_instance_is_fenced_at_once() -> None:
    instances = healthy()
    instances[2] = replace(instances[2], server=primary_server(50))
    plan = decide(inp(instances))
    assert fenced(plan) == {2}
    assert plan.fence_pods == (pod(2),)
    assert reasons(plan) == ["UnexpectedPrimaryFenced"]
    assert plan.role_of(2, DB) == FENCED
    assert plan.primary == pod(0) and 2 not in plan.remove


# ---------------------------------------------------------------------- examples: failover


def test_a_primary_unready_for_less_than_the_delay_waits_the_remaining_time() -> None:
    instances = healthy()
    instances[0] = replace(instances[0], pod=unready(12), server=None)
    plan = decide(inp(instances))
    assert (plan.target, plan.fence_pods, fenced(plan), plan.events) == (None, (), set(), ())
    assert plan.requeue_after == pytest.approx(DELAY - 12)


def test_a_primary_unready_past_the_delay_is_fenced_and_the_most_advanced_standby_chosen() -> None:
    instances = healthy(positions=(100, 80, 95))
    instances[0] = replace(instances[0], pod=unready(DELAY + 1), server=None)
    plan = decide(inp(instances))
    assert plan.target == pod(2)  # 95 > 80
    assert reasons(plan) == ["FailoverStarted"]
    assert fenced(plan) == {0}
    assert plan.fence_pods == (pod(0),)  # a failed primary's pod is deleted (it must not come back writable)
    assert plan.promote is None  # not before the fence is confirmed
    assert plan.requeue_after == FAILOVER_POLL
    assert plan.slots is None  # no primary during a failover: the slots are left alone
    assert all(role == REPLICA_ROLE for role in plan.labels.values()) and plan.labels == {pod(0): REPLICA_ROLE}


def test_a_primary_that_never_ran_is_no_failure() -> None:
    instances = healthy()
    instances[0] = replace(instances[0], pod=unready(DELAY + 100), server=None)
    plan = decide(inp(instances, has_run=False))
    assert (plan.target, plan.fence_pods, plan.events) == (None, (), ())


def test_a_tie_in_position_goes_to_the_lowest_index() -> None:
    instances = healthy(4, positions=(100, 90, 95, 95))
    instances[0] = replace(instances[0], pod=unready(DELAY), server=None)
    assert decide(inp(instances, replicas=4)).target == pod(2)


def test_failover_is_blocked_without_a_ready_standby() -> None:
    instances = healthy()
    instances[0] = replace(instances[0], pod=unready(DELAY + 1), server=None)
    instances[1] = replace(instances[1], pod=unready(5, REPLICA_ROLE))
    instances[2] = replace(instances[2], server=None)  # its pod is ready but its server did not answer
    plan = decide(inp(instances))
    assert plan.target is None and fenced(plan) == set() and plan.fence_pods == ()
    assert problem_reasons(plan) == ["FailoverBlocked"]


def test_synchronous_failover_waits_for_every_standby_to_answer() -> None:
    instances = healthy()
    instances[0] = replace(instances[0], pod=unready(DELAY + 1), server=None)
    instances[2] = replace(instances[2], server=None)
    plan = decide(inp(instances, synchronous=True))
    assert plan.target is None and plan.fence_pods == ()
    [problem] = plan.problems
    assert problem.reason == "FailoverBlocked" and pod(2) in problem.message
    # Asynchronous: the one that answered is promoted.
    assert decide(inp(instances)).target == pod(1)
    # Every standby answered: synchronous mode fails over too.
    instances[2] = replace(instances[2], server=standby_server(99))
    assert decide(inp(instances, synchronous=True)).target == pod(2)


def test_the_target_is_promoted_only_once_the_fence_is_confirmed() -> None:
    instances = healthy()
    instances[0] = InstanceView(0, replicas=0)  # the fenced primary: its StatefulSet at 0, its pod gone
    running = inp(instances, target=pod(1))
    waiting = decide(running)
    assert (waiting.promote, waiting.target, fenced(waiting)) == (None, pod(1), {0})
    promoting = decide(replace(running, fence_confirmed=True))
    assert (promoting.promote, promoting.primary, promoting.target) == (pod(1), pod(0), pod(1))
    assert fenced(promoting) == {0}


def test_promoted_makes_the_target_primary_and_keeps_the_old_one_fenced_in_that_pass() -> None:
    instances = healthy()
    instances[0] = InstanceView(0, replicas=0)
    instances[1] = replace(instances[1], server=primary_server(91))
    plan = decide(inp(instances, target=pod(1), fence_confirmed=True))
    assert reasons(plan) == ["Promoted"]
    assert (plan.primary, plan.target, plan.promote) == (pod(1), None, None)
    assert fenced(plan) == {0}  # back as a standby only once the status records the new primary
    assert plan.labels == {pod(1): PRIMARY_ROLE}
    assert plan.slots == frozenset({"sdb_i0", "sdb_i2"})
    # The next pass reads the new record: the old primary comes back, as a standby.
    after = decide(inp(instances, primary=pod(1)))
    assert replicas_of(after) == {0: 1, 1: 1, 2: 1} and after.events == ()


def test_a_gone_target_is_replaced_by_the_best_remaining_standby() -> None:
    instances = healthy(4, positions=(100, 90, 70, 80))
    instances[0] = InstanceView(0, replicas=0)
    instances[1] = InstanceView(1)  # its pod is gone: no server answers
    plan = decide(inp(instances, replicas=4, target=pod(1), fence_confirmed=True))
    assert plan.target == pod(3)
    assert reasons(plan) == ["FailoverRetargeted"]
    assert plan.promote is None  # promoted in the next pass, once it is the recorded target
    assert fenced(plan) == {0}


def test_no_scale_down_during_a_failover() -> None:
    instances = healthy()
    instances[0] = InstanceView(0, replicas=0)
    plan = decide(inp(instances, replicas=1, target=pod(2)))
    assert plan.remove == ()
    assert sorted(replicas_of(plan)) == [0, 1, 2]


# ---------------------------------------------------------------------- examples: switchover


def test_switchover_stops_the_old_primary_cleanly_while_a_failover_deletes_its_pod() -> None:
    plan = decide(inp(switchover_to=pod(2)))
    assert (plan.target, reasons(plan)) == (pod(2), ["SwitchoverStarted"])
    assert fenced(plan) == {0}
    assert plan.fence_pods == ()  # graceful: its StatefulSet at 0 stops it
    assert not plan.clear_switchover
    # The same step as a failover (no annotation): the pod is deleted.
    failover = decide(inp(target=pod(2)))
    assert failover.fence_pods == (pod(0),) and fenced(failover) == {0}


def test_a_switchover_held_for_its_pooler_pause_neither_stops_nor_relabels_the_old_primary() -> None:
    held = decide(inp(switchover_to=pod(2), hold_fence=True))
    assert (held.target, reasons(held)) == (pod(2), ["SwitchoverStarted"])  # recorded: the next pass goes on
    assert fenced(held) == set() and held.fence_pods == () and held.promote is None
    assert pod(0) not in held.labels  # still the primary the Service selects
    assert held.requeue_after is not None and held.requeue_after <= 0.5
    going = decide(inp(target=pod(2), switchover_to=pod(2)))  # its record written: no longer held
    assert fenced(going) == {0}
    failover = decide(inp(target=pod(2), hold_fence=True))  # a failover is never held
    assert fenced(failover) == {0} and failover.fence_pods == (pod(0),)


def test_switchover_to_an_instance_that_is_not_a_ready_standby_waits() -> None:
    instances = healthy()
    instances[2] = replace(instances[2], pod=unready(3, REPLICA_ROLE))
    plan = decide(inp(instances, switchover_to=pod(2)))
    assert plan.target is None and fenced(plan) == set()
    assert problem_reasons(plan) == ["SwitchoverPending"]
    assert not plan.clear_switchover


def test_the_switchover_annotation_is_cleared_only_once_the_status_records_it() -> None:
    instances = healthy()
    instances[0] = InstanceView(0, replicas=0)
    instances[2] = replace(instances[2], server=primary_server(95))
    promoted = decide(inp(instances, target=pod(2), switchover_to=pod(2), fence_confirmed=True))
    assert promoted.primary == pod(2) and promoted.target is None
    assert not promoted.clear_switchover  # the status still says the old primary
    recorded = decide(inp(instances, primary=pod(2), switchover_to=pod(2)))
    assert recorded.clear_switchover
    assert SWITCHOVER_ANNOTATION == "sampledb.io/switchover"
    # Naming the primary already recorded clears it too; an unknown name does not.
    assert decide(inp(switchover_to=pod(0))).clear_switchover
    assert not decide(inp(switchover_to="someone-else")).clear_switchover


# ---------------------------------------------------------------------- examples: scaling


def test_wanted_indexes_scale_up_takes_the_lowest_free_indexes() -> None:
    assert wanted_indexes({0, 2}, {0}, 4) == [0, 1, 2, 3]
    assert wanted_indexes(set(), {0}, 3) == [0, 1, 2]
    assert wanted_indexes({0, 5}, {5}, 3) == [0, 1, 5]


def test_wanted_indexes_scale_down_keeps_the_primary_and_the_lowest_others() -> None:
    assert wanted_indexes({0, 1, 2, 3}, {3}, 2) == [0, 3]
    assert wanted_indexes({0, 1, 2}, {0}, 1) == [0]
    assert wanted_indexes({0, 1, 2}, {1, 2}, 1) == [1, 2]  # the kept ones even beyond replicas


def test_scale_down_removes_standbys_never_the_primary_and_drops_their_slots() -> None:
    instances = healthy()
    instances[0], instances[2] = (replace(instances[2], index=0, pod=ready()),
                                  replace(instances[0], index=2))  # instance 2 is the primary
    plan = decide(inp(instances, primary=pod(2), replicas=1))
    assert plan.remove == (0, 1)
    assert replicas_of(plan) == {2: 1}
    assert plan.slots == frozenset()
    assert pod(0) not in plan.labels and pod(1) not in plan.labels
    scaled_up = decide(inp(instances, primary=pod(2), replicas=5))
    assert sorted(replicas_of(scaled_up)) == [0, 1, 2, 3, 4]
    assert scaled_up.slots == frozenset({"sdb_i0", "sdb_i1", "sdb_i3", "sdb_i4"})


def test_index_of_names() -> None:
    assert [index_of(DB, pod(i)) for i in range(names.MAX_INSTANCES)] == list(range(names.MAX_INSTANCES))
    assert index_of(DB, None) is None and index_of(DB, "orders-i9-0") is None and index_of(DB, "x") is None


# ---------------------------------------------------------------------- properties

times = st.integers(0, 120).map(lambda s: NOW - timedelta(seconds=s))
pod_views = st.none() | st.builds(PodView, ready=st.booleans(), since=st.none() | times,
                                  role=st.sampled_from([None, PRIMARY_ROLE, REPLICA_ROLE]),
                                  terminating=st.booleans())
lsns = st.none() | st.integers(0, 4)  # a small range: ties are common
servers = st.none() | st.builds(ServerState, in_recovery=st.booleans(), current_lsn=lsns, receive_lsn=lsns,
                                replay_lsn=lsns)


@st.composite
def inputs(draw: st.DrawFn) -> ReplicationInput:
    indexes = draw(st.sets(st.integers(0, names.MAX_INSTANCES - 1), min_size=1, max_size=names.MAX_INSTANCES))
    instances = {i: InstanceView(i, replicas=draw(st.sampled_from([1, 1, 0])), pod=draw(pod_views),
                                 server=draw(servers)) for i in sorted(indexes)}
    some_name = st.none() | st.sampled_from([pod(i) for i in range(names.MAX_INSTANCES)]) \
        | st.sampled_from([pod(i) for i in sorted(indexes)])
    return ReplicationInput(
        db=DB, replicas=draw(st.integers(1, names.MAX_INSTANCES)), synchronous=draw(st.booleans()),
        failover_delay=draw(st.sampled_from([0.0, 10.0, 30.0, 100.0])), primary=draw(some_name),
        target=draw(st.none() | some_name), switchover_to=draw(st.none() | some_name | st.just("stranger")),
        instances=instances, now=NOW, fence_confirmed=draw(st.booleans()), has_run=draw(st.booleans()))


def old_primary(i: ReplicationInput) -> int:
    index = index_of(DB, i.primary)
    return observed_primary(i) if index is None else index


def writable(i: ReplicationInput) -> set[int]:
    return {k for k, v in i.instances.items() if v.server is not None and not v.server.in_recovery}


@settings(max_examples=250)
@given(inputs())
def test_a_standby_is_promoted_only_once_the_old_primary_is_fenced(i: ReplicationInput) -> None:
    plan = decide(i)
    if plan.promote is not None:
        assert i.fence_confirmed
        assert old_primary(i) in fenced(plan)
        assert plan.promote == plan.target
        # ... and every other instance that accepts writes is fenced too.
        assert writable(i) - {index_of(DB, plan.promote)} <= fenced(plan)


@settings(max_examples=250)
@given(inputs())
def test_at_most_one_writable_instance_is_left_unfenced(i: ReplicationInput) -> None:
    plan = decide(i)
    leaders = {index_of(DB, plan.target) if plan.target is not None else index_of(DB, plan.primary)}
    if plan.target is not None:
        assert old_primary(i) in fenced(plan)
    assert writable(i) - leaders <= fenced(plan)


@settings(max_examples=250)
@given(inputs())
def test_the_primary_the_target_and_writable_instances_are_never_removed(i: ReplicationInput) -> None:
    plan = decide(i)
    removed = set(plan.remove)
    assert index_of(DB, plan.primary) not in removed
    if plan.target is not None:
        assert index_of(DB, plan.target) not in removed
        assert removed == set()  # no scale-down during a failover
    assert not writable(i) & removed
    kept = {x.index for x in plan.instances}
    assert not kept & removed
    assert set(i.instances) <= kept | removed  # every instance is kept or removed, none forgotten
    assert removed <= set(i.instances)


@settings(max_examples=250)
@given(inputs())
def test_at_most_one_pod_is_labelled_primary_and_none_during_a_failover(i: ReplicationInput) -> None:
    plan = decide(i)
    labels = {pod(k): v.pod.role for k, v in i.instances.items()
              if v.pod is not None and not v.pod.terminating and k not in plan.remove}
    labels.update(plan.labels)
    primaries = [name for name, role in labels.items() if role == PRIMARY_ROLE]
    assert len(primaries) <= 1
    if plan.target is not None:
        assert primaries == []
    elif primaries:
        assert primaries == [plan.primary]
        assert index_of(DB, plan.primary) not in fenced(plan)


@settings(max_examples=250)
@given(inputs())
def test_a_new_target_is_the_most_advanced_ready_standby(i: ReplicationInput) -> None:
    plan = decide(i)
    if i.target is not None or plan.target is None:
        return
    target = index_of(DB, plan.target)
    best = candidates(i, {old_primary(i)})
    assert target in {c.index for c in best}  # ready, not terminating, in recovery, not fenced
    view = i.instances[target]  # type: ignore[index]
    assert view.pod is not None and view.pod.ready and view.server is not None and view.server.in_recovery
    if plan.target != i.switchover_to:  # a failover (a switchover goes where it is asked)
        assert "FailoverStarted" in reasons(plan)
        top = max(c.server.position for c in best if c.server)
        assert view.server.position == top
        assert target == min(c.index for c in best if c.server and c.server.position == top)


@settings(max_examples=250)
@given(inputs())
def test_synchronous_failover_starts_only_when_every_standby_answered(i: ReplicationInput) -> None:
    plan = decide(i)
    if not i.synchronous or "FailoverStarted" not in reasons(plan):
        return
    primary = old_primary(i)
    for k, v in i.instances.items():
        if k != primary:
            assert v.server is not None and v.server.in_recovery, (k, v)


@settings(max_examples=250)
@given(inputs())
def test_the_instances_are_enough_and_distinct(i: ReplicationInput) -> None:
    plan = decide(i)
    indexes = [x.index for x in plan.instances]
    assert len(indexes) == len(set(indexes))
    assert indexes == sorted(indexes)
    assert len(indexes) >= i.replicas
    assert all(0 <= x < names.MAX_INSTANCES for x in indexes)
    assert index_of(DB, plan.primary) in indexes
    if plan.target is not None:
        assert index_of(DB, plan.target) in indexes
        assert plan.target != plan.primary
    assert all(x.replicas in (0, 1) for x in plan.instances)
    assert len(plan.fence_pods) == len(set(plan.fence_pods))
    # A pod deleted is a fenced instance's, or one scaled away (an old primary, in the pass that records the new).
    assert {index_of(DB, p) for p in plan.fence_pods} <= fenced(plan) | set(plan.remove)


@settings(max_examples=200)
@given(inputs())
def test_decide_is_deterministic(i: ReplicationInput) -> None:
    assert decide(i) == decide(replace(i, instances=dict(reversed(list(i.instances.items())))))


# -- regressions found by these properties (fixed in decide/replicas/replication.py) ------------------------


def test_sync_failover_waits_for_a_more_advanced_standby_whose_pod_is_unready() -> None:
    instances = healthy(3, positions=(100, 90, 70))
    instances[0] = replace(instances[0], pod=unready(DELAY + 1), server=None)
    instances[1] = replace(instances[1], pod=unready(1, REPLICA_ROLE))  # answers SQL, one failed probe
    plan = decide(inp(instances, synchronous=True))
    assert plan.target is None
    assert [p.reason for p in plan.problems] == ["FailoverBlocked"] and pod(1) in plan.problems[0].message
    # asynchronous: the best ready standby is promoted (what a failover may lose is documented)
    assert decide(inp(instances, synchronous=False)).target == pod(2)


def test_sync_failover_never_retargets_away_from_the_most_advanced() -> None:
    instances = healthy(3, positions=(100, 90, 70))
    instances[0] = InstanceView(0, replicas=0)
    instances[1] = InstanceView(1)  # the target is gone
    plan = decide(inp(instances, synchronous=True, target=pod(1), fence_confirmed=True))
    assert plan.target == pod(1) and plan.promote is None
    assert [p.reason for p in plan.problems] == ["FailoverBlocked"]
    assert decide(inp(instances, synchronous=False, target=pod(1), fence_confirmed=True)).target == pod(2)


def test_removed_and_terminating_pods_lose_a_stale_primary_label() -> None:
    instances = healthy(3)
    instances[2] = replace(instances[2], pod=replace(ready(PRIMARY_ROLE), terminating=True))
    plan = decide(inp(instances, replicas=2))
    assert plan.remove == (2,)
    assert plan.labels.get(pod(2)) == REPLICA_ROLE
