"""decide/replicas/rollout.py: the standbys first and one at a time, the primary last by a switchover, nothing out of
turn; an instance without a pod, a standby that is down, one instance, and a change of major never held; convergence of
a simulated roll (Hypothesis) with at most one running instance restarting at a time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sampledb_operator.decide import plan
from sampledb_operator.decide.labels import VERSION_ANNOTATION
from sampledb_operator.decide.replicas import rollout
from sampledb_operator.decide.replicas.rollout import PATIENCE, Member, RolloutInput, decide
from sampledb_operator.model import names

DB = "orders"
OK = Member(ready=True)


def pod(i: int) -> str:
    return names.instance_pod_name(DB, i)


def inp(members: dict[int, Member], pending: set[int], primary: int = 0, **kw: bool) -> RolloutInput:
    return RolloutInput(db=DB, primary=primary, members=members, pending=frozenset(pending), **kw)


def test_nothing_pending_holds_nothing() -> None:
    assert decide(inp({0: OK, 1: OK}, set())) == rollout.Rollout()


def test_one_instance_restarts_in_place() -> None:
    assert decide(inp({0: OK}, {0})).hold == frozenset()


def test_the_first_standby_goes_first_and_alone() -> None:
    step = decide(inp({0: OK, 1: OK, 2: OK}, {0, 1, 2}))
    assert step.restart == (1,) and step.hold == {0, 2} and step.switchover_to is None
    assert step.recheck_after == rollout.RECHECK


def test_an_instance_still_restarting_holds_the_next() -> None:
    for busy in (Member(ready=False, settled=False, unready_for=5), Member(ready=True, settled=False)):
        step = decide(inp({0: OK, 1: busy, 2: OK}, {0, 2}))
        assert step.hold == {0, 2} and step.restart == () and step.switchover_to is None
        assert step.waiting is not None and pod(1) in step.waiting


def test_an_instance_down_without_rolling_holds_nothing_back() -> None:
    # e.g. the primary's pod that no node takes: the standbys roll (a new spread may be what places it)
    assert decide(inp({0: Member(ready=False, unready_for=5), 1: OK, 2: OK}, {1, 2})).restart == (1,)


def test_an_instance_unready_past_the_patience_holds_nothing_back() -> None:
    stuck = Member(ready=False, settled=False, unready_for=PATIENCE)
    assert decide(inp({0: OK, 1: stuck, 2: OK}, {0, 2})).restart == (2,)


def test_a_pending_standby_that_is_down_restarts_at_once() -> None:
    step = decide(inp({0: OK, 1: OK, 2: Member(ready=False, unready_for=1)}, {0, 1, 2}))
    assert step.restart == (2,) and step.hold == {0, 1}


def test_the_primary_goes_last_by_a_switchover_to_a_ready_standby() -> None:
    step = decide(inp({0: OK, 1: OK, 2: OK}, {0}))
    assert step.hold == {0} and step.switchover_to == pod(1) and step.restart == ()
    step = decide(inp({0: OK, 1: OK, 2: OK}, {2}, primary=2))
    assert step.switchover_to == pod(0)


def test_without_a_standby_to_take_over_the_primary_restarts_in_place() -> None:
    stuck = Member(ready=False, unready_for=PATIENCE + 1)
    assert decide(inp({0: OK, 1: stuck}, {0})) == rollout.Rollout()


def test_nothing_restarts_during_a_failover_or_switchover_but_an_instance_without_a_pod() -> None:
    fenced = Member(ready=False, running=False)
    step = decide(inp({0: fenced, 1: OK, 2: OK}, {0, 1, 2}, switching=True))
    assert step.hold == {1, 2} and step.restart == ()


def _sts(i: int, *, image: str, version: str = "16.4") -> plan.Action:
    obj = {"kind": "StatefulSet", "metadata": {"name": names.instance_statefulset_name(DB, i),
                                               "annotations": {VERSION_ANNOTATION: version}},
           "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "postgres", "image": image}]}}}}
    return plan.Action(obj, "test")


def test_restarts_are_template_changes_of_existing_statefulsets_within_a_major() -> None:
    observed = {a.key: a.obj for a in (_sts(0, image="a"), _sts(1, image="a"), _sts(2, image="a", version="15.8"))}
    actions = [_sts(0, image="b"), _sts(1, image="a"), _sts(2, image="b"), _sts(3, image="b")]
    assert rollout.restarts(DB, actions, observed) == {0}  # 1: no change; 2: a new major; 3: a new StatefulSet


def test_a_held_statefulset_keeps_its_template_and_gets_its_other_fields() -> None:
    observed = {a.key: a.obj for a in (_sts(0, image="a"), _sts(1, image="a"))}
    fence = _sts(1, image="b")
    fence.obj["spec"]["replicas"] = 0
    out = rollout.held(DB, [_sts(0, image="b"), fence], observed, frozenset({0, 1}))
    assert len(out) == 1 and out[0].obj["spec"]["replicas"] == 0
    assert out[0].obj["spec"]["template"] == observed[out[0].key]["spec"]["template"]
    minor = _sts(0, image="b", version="16.5")
    assert rollout.held(DB, [minor], observed, frozenset({0})) == []  # the version annotation describes the template


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=1, max_value=4), primary=st.integers(min_value=0, max_value=3),
       slow=st.lists(st.integers(min_value=0, max_value=3), max_size=3))
def test_a_simulated_roll_restarts_one_at_a_time_and_ends_with_every_instance_new(
        n: int, primary: int, slow: list[int]) -> None:
    primary %= n
    new: set[int] = set()
    restarting: dict[int, int] = {}  # instance -> passes until it is ready again
    for _ in range(60):
        members = {i: Member(ready=i not in restarting, settled=i not in restarting) for i in range(n)}
        step = decide(inp(members, set(range(n)) - new, primary=primary))
        restarting = {i: t - 1 for i, t in restarting.items() if t > 1}
        released = set(range(n)) - new - step.hold
        if n > 1:
            assert len(released | set(restarting)) <= 1, "one instance restarts at a time"
            assert primary not in released, "the primary never restarts in place while a standby can take over"
        for i in released:
            new.add(i)
            restarting[i] = 1 + slow.count(i)
        if step.switchover_to is not None:
            primary = next(i for i in range(n) if names.instance_pod_name(DB, i) == step.switchover_to)
            assert primary in new
        if len(new) == n and not restarting:
            break
    assert new == set(range(n))
