"""decide/replicas/operator_rollout.py: a template change at the generation the StatefulSet records, no restart asked,
is the operator's; a newer generation, a restart asked, or no record make it the user's; the record follows the
template, stays while the upgrade step holds the version back, and a write of the record alone makes no Event; the
OperatorUpdate condition's states. runtime/rollout_slots.py: first asked, first admitted, up to the limit; a holder that
is gone frees its slot, and one that holds it past HOLD_LIMIT rolls on without it; limit 0 admits none."""

from __future__ import annotations

from typing import Any

from sampledb_operator.decide import plan
from sampledb_operator.decide.labels import RESTARTED_FOR_ANNOTATION, TEMPLATE_GENERATION_ANNOTATION, VERSION_ANNOTATION
from sampledb_operator.decide.replicas import operator_rollout as op
from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition
from sampledb_operator.runtime.rollout_slots import HOLD_LIMIT, RolloutSlots

DB = "orders"


def sts(i: int, *, image: str = "a", stamp: str | None = "3", version: str = "16.4", restart: str | None = None,
        replicas: int = 1) -> dict[str, Any]:
    annotations = {VERSION_ANNOTATION: version, **({TEMPLATE_GENERATION_ANNOTATION: stamp} if stamp else {})}
    template: dict[str, Any] = {"metadata": {"annotations": {RESTARTED_FOR_ANNOTATION: restart} if restart else {}},
                                "spec": {"containers": [{"name": "postgres", "image": image}]}}
    return {"kind": "StatefulSet", "metadata": {"name": names.instance_statefulset_name(DB, i),
                                                "annotations": annotations},
            "spec": {"replicas": replicas, "template": template}}


def observed(*objs: dict[str, Any]) -> dict[plan.Key, Any]:
    return {plan.key_of(o): o for o in objs}


def test_a_change_at_the_recorded_generation_without_a_restart_is_the_operators() -> None:
    have = observed(sts(0), sts(1, stamp="2"), sts(2, stamp=None), sts(3))
    actions = [plan.Action(sts(0, image="b"), "x"), plan.Action(sts(1, image="b"), "x"),
               plan.Action(sts(2, image="b"), "x"), plan.Action(sts(3, image="b", restart="now"), "x")]
    assert op.operator_made(DB, 3, actions, have, frozenset({0, 1, 2, 3})) == {0}
    assert op.operator_made(DB, 4, actions, have, frozenset({0, 1, 2, 3})) == set()  # the spec changed since
    assert op.operator_made(DB, 3, actions, have, frozenset({1})) == set()  # only what restarts counts
    stopped = [plan.Action(sts(0, image="b", replicas=0), "fence")]
    assert op.operator_made(DB, 3, stopped, have, frozenset({0})) == set()  # no pod: nothing restarts


def test_the_record_follows_the_template_and_waits_while_the_version_is_held_back() -> None:
    have = observed(sts(0, stamp="3"))
    moved = plan.Action(sts(0, image="b", stamp="4", version="16.5"), "x")
    assert op.stamped(DB, "16.5", [moved], have, frozenset({0})) == [moved]
    # the upgrade step still runs 16.4 (a backup first): the template stays, and so does the record
    lagging = plan.Action(sts(0, stamp="4"), "x")
    assert op.stamped(DB, "16.5", [lagging], have, frozenset()) == []
    # the template is current: the record moves alone, quietly
    (quiet,) = op.stamped(DB, "16.4", [lagging], have, frozenset())
    assert quiet.quiet and quiet.obj["metadata"]["annotations"][TEMPLATE_GENERATION_ANNOTATION] == "4"
    (loud,) = op.stamped(DB, "16.4", [plan.Action(sts(0, stamp="4", replicas=0), "fence")], have, frozenset())
    assert not loud.quiet


def test_the_condition_says_waiting_rolling_and_applied() -> None:
    def cond(**kw: Any) -> Condition | None:
        args: dict[str, Any] = {"pending": True, "admitted": False, "limit": 1, "others": ["shop/a"], "db": DB,
                                "previous": None, "generation": 3, **kw}
        return op.condition(**args)

    waiting = cond()
    assert waiting is not None and (waiting.status, waiting.reason) == ("True", op.WAITING_FOR_TURN)
    assert "shop/a" in waiting.message
    manual = cond(limit=0)
    assert manual is not None and manual.reason == op.WAITING_FOR_RESTART and f"restart {DB}" in manual.message
    rolling = cond(admitted=True)
    assert rolling is not None and rolling.reason == op.ROLLING
    applied = cond(pending=False, previous=rolling)
    assert applied is not None and (applied.status, applied.reason) == ("False", op.APPLIED)
    assert cond(pending=False) is None and cond(pending=False, previous=applied) is None


def test_slots_admit_in_order_up_to_the_limit_and_free_a_gone_holders() -> None:
    slots = RolloutSlots(1)
    alive = {"ns/a", "ns/b", "ns/c"}
    assert slots.admit("ns/a", alive.__contains__, 0.0)
    assert not slots.admit("ns/b", alive.__contains__, 0.0)
    assert not slots.admit("ns/c", alive.__contains__, 0.0)
    assert slots.admit("ns/a", alive.__contains__, 0.0)  # a holder keeps its slot
    slots.release("ns/a")
    assert not slots.admit("ns/c", alive.__contains__, 0.0)  # b asked first
    assert slots.admit("ns/b", alive.__contains__, 0.0)
    alive.discard("ns/b")  # deleted while it held the slot
    assert slots.admit("ns/c", alive.__contains__, 0.0) and slots.holders() == ["ns/c"]
    assert not RolloutSlots(0).admit("ns/a", alive.__contains__, 0.0)
    late = RolloutSlots(1)
    assert late.admit("ns/a", alive.__contains__, 0.0) and not late.admit("ns/c", alive.__contains__, 1.0)
    # a holds its slot past the limit (its roll does not finish): c's turn comes, a rolls on without a slot
    assert late.admit("ns/c", alive.__contains__, HOLD_LIMIT) and late.rolling("ns/a") and late.holders() == ["ns/c"]
    assert late.admit("ns/a", alive.__contains__, HOLD_LIMIT + 1)
    late.release("ns/a")
    assert not late.rolling("ns/a")
    two = RolloutSlots(2)
    assert two.admit("ns/a", alive.__contains__, 0.0) and two.admit("ns/c", alive.__contains__, 0.0)
