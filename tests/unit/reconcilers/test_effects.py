"""reconcilers/effects.py applies a plan as decide/effects.py says, on the fake cluster.

Creates never overwrite and announce only what this pass made; deletes of what is gone are quiet;
a patch whose resourceVersion precondition fails stops the plan (nothing after it is applied).
"""

from __future__ import annotations

from tests.support.fake_cluster import NS, FakeCluster

from sampledb_operator.decide.effects import Create, Delete, Emit, Patch, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.model.result import Result
from sampledb_operator.reconcilers.effects import apply_plan

SUBJECT = {"name": "orders", "namespace": NS, "uid": "u-1", "resourceVersion": "1"}


def config_map(name: str, value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
            "data": {"k": value}}


async def test_a_create_never_overwrites_and_announces_only_what_this_pass_made() -> None:
    cluster = FakeCluster()
    cluster.put("ConfigMap", config_map("old", "kept"))
    plan = Plan((Create(config_map("old", "new"), EventSpec("Normal", "Made", "old")),
                 Create(config_map("fresh", "v"), EventSpec("Normal", "Made", "fresh"))))
    applied = await apply_plan(cluster.ctx, SUBJECT, plan)
    assert set(applied.created) == {("ConfigMap", "fresh")}
    assert applied.created[("ConfigMap", "fresh")]["metadata"]["resourceVersion"]  # the server's answer
    assert cluster.get("ConfigMap", "old")["data"] == {"k": "kept"}  # type: ignore[index]
    assert [(e[1], e[2]) for e in cluster.recorder.events] == [("Made", "fresh")]


async def test_a_delete_of_what_is_gone_is_quiet() -> None:
    cluster = FakeCluster()
    cluster.put("ConfigMap", config_map("here", "v"))
    plan = Plan((Delete("ConfigMap", "here", EventSpec("Normal", "Gone", "here")),
                 Delete("ConfigMap", "absent", EventSpec("Normal", "Gone", "absent"))))
    applied = await apply_plan(cluster.ctx, SUBJECT, plan)
    assert applied.deleted == {("ConfigMap", "here")}
    assert cluster.get("ConfigMap", "here") is None
    assert [e[2] for e in cluster.recorder.events] == ["here"]


async def test_a_failed_precondition_stops_the_plan() -> None:
    cluster = FakeCluster()
    have = cluster.put("ConfigMap", config_map("cm", "v"))
    stale = {"metadata": {"resourceVersion": "not-" + str(have["metadata"]["resourceVersion"])}, "data": {"k": "w"}}
    plan = Plan((Patch("ConfigMap", "cm", stale), Emit(EventSpec("Normal", "After", "never")),
                 Delete("ConfigMap", "cm")), Result(requeue_after=5))
    applied = await apply_plan(cluster.ctx, SUBJECT, plan)
    assert applied.stale
    assert cluster.get("ConfigMap", "cm")["data"] == {"k": "v"}  # type: ignore[index]
    assert cluster.recorder.events == []


async def test_a_patch_without_precondition_applies_and_returns_the_answer() -> None:
    cluster = FakeCluster()
    cluster.put("ConfigMap", config_map("cm", "v"))
    applied = await apply_plan(cluster.ctx, SUBJECT, Plan((Patch("ConfigMap", "cm", {"data": {"k": "w"}}),
                                                           Patch("ConfigMap", "absent", {"data": {}}))))
    assert not applied.stale
    assert applied.patched[("ConfigMap", "cm")]["data"] == {"k": "w"}
    assert cluster.get("ConfigMap", "cm")["data"] == {"k": "w"}  # type: ignore[index]


def test_plans_add_in_order_and_keep_the_earliest_result() -> None:
    a = Plan((Emit(EventSpec("Normal", "A", "a")),), Result(requeue_after=30))
    b = Plan((Emit(EventSpec("Normal", "B", "b")),), Result(requeue_after=5))
    both = a + b
    assert [e.event.reason for e in both.effects if isinstance(e, Emit)] == ["A", "B"]
    assert both.result == Result(requeue_after=5)


async def test_a_patch_of_the_subject_that_is_gone_ends_the_plan() -> None:
    cluster = FakeCluster()
    plan = Plan((Patch("SampleDB", "orders", {"status": {"phase": "Running"}}, subresource="status"),
                 Emit(EventSpec("Normal", "After", "about a deleted object"))))
    applied = await apply_plan(cluster.ctx, SUBJECT, plan)
    assert applied.gone and not applied.stale
    assert cluster.recorder.events == []
