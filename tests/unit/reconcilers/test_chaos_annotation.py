"""The `sampledb.io/chaos` annotation on the fake cluster. With the operator's --chaos-annotation
setting on (ctx.chaos_annotation): the fault runs once, the annotation is removed, an Event says what
happened; an unknown fault is refused; a stale pass does nothing. With it off (the default): nothing
is injected, the annotation is removed and a Warning ChaosDisabled names the flag, once."""

from __future__ import annotations

from typing import Any

from tests.support.chaos_world import FakeExec, database_pod, databases, unique_uids
from tests.support.fake_cluster import FakeCluster

from sampledb_operator.chaos.faults import ANNOTATION
from sampledb_operator.kube.errors import Forbidden
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.chaos import reconcile_chaos


async def _annotated(value: str, *, enabled: bool = True) -> tuple[FakeCluster, FakeExec, SampleDB]:
    """Two databases, `orders` annotated with `value`; the operator's setting as `enabled`."""
    cluster = FakeCluster()
    cluster.ctx.chaos_annotation = enabled
    unique_uids(cluster)
    await databases(cluster, "orders", "billing")
    cluster.patch("SampleDB", "orders", {"metadata": {"annotations": {ANNOTATION: value}}})
    cluster.recorder.events.clear()  # the databases' creation events
    return cluster, FakeExec(cluster), SampleDB.model_validate(cluster.get("SampleDB", "orders"))


def _annotations(cluster: FakeCluster) -> dict[str, Any]:
    return dict((cluster.get("SampleDB", "orders") or {})["metadata"].get("annotations") or {})


async def test_delete_pod_runs_once_and_the_annotation_is_removed() -> None:
    cluster, executor, db = await _annotated("delete-pod")
    await reconcile_chaos(cluster.ctx, db, executor=executor)
    assert cluster.get("Pod", "orders-0") is None and cluster.get("Pod", "billing-0") is not None
    assert ANNOTATION not in _annotations(cluster)
    assert cluster.recorder.events == [("Normal", "ChaosInjected", "delete-pod: injected Pod orders-0")]
    database_pod(cluster, "orders")  # the StatefulSet controller's new pod
    await reconcile_chaos(cluster.ctx, db, executor=executor)  # a pass that still read the annotation
    assert cluster.get("Pod", "orders-0") is not None, "the stale pass's removal is refused: no second fault"
    fresh = SampleDB.model_validate(cluster.get("SampleDB", "orders"))
    await reconcile_chaos(cluster.ctx, fresh, executor=executor)
    assert cluster.get("Pod", "orders-0") is not None and len(cluster.recorder.events) == 1


async def test_kill_postgres_execs_in_the_annotated_databases_container() -> None:
    cluster, executor, db = await _annotated("kill-postgres")
    await reconcile_chaos(cluster.ctx, db, executor=executor)
    assert executor.calls == [("shop", "orders-0", "postgres", ["sh", "-c", "kill -QUIT 1"])]
    assert cluster.recorder.reasons() == ["ChaosInjected"] and ANNOTATION not in _annotations(cluster)


async def test_an_exec_refused_is_a_warning_and_the_annotation_still_goes() -> None:
    cluster, executor, db = await _annotated("kill-postgres")
    executor.refuse = True
    await reconcile_chaos(cluster.ctx, db, executor=executor)
    [(type_, reason, message)] = cluster.recorder.events
    assert (type_, reason) == ("Warning", "ChaosFailed") and "unsupported" in message
    assert ANNOTATION not in _annotations(cluster)


async def test_an_unknown_or_unavailable_fault_is_refused_and_touches_nothing() -> None:
    for value in ("kill-primary", "fill-volume"):
        cluster, executor, db = await _annotated(value)
        writes = len(cluster.writes)
        await reconcile_chaos(cluster.ctx, db, executor=executor)
        assert cluster.recorder.reasons() == ["ChaosRefused"] and ANNOTATION not in _annotations(cluster)
        assert [w[0] for w in cluster.writes[writes:]] == ["patch"] and not executor.calls


async def test_without_the_annotation_nothing_happens() -> None:
    cluster = FakeCluster()
    cluster.ctx.chaos_annotation = True
    await databases(cluster, "orders")
    cluster.recorder.events.clear()
    writes = len(cluster.writes)
    await reconcile_chaos(cluster.ctx, SampleDB.model_validate(cluster.get("SampleDB", "orders")),
                          executor=FakeExec(cluster))
    assert cluster.writes[writes:] == [] and cluster.recorder.events == []


async def test_the_children_are_read_from_the_caches_not_the_api() -> None:
    cluster, executor, db = await _annotated("delete-service")
    cluster.fail("Service", "get", Forbidden(403, "Forbidden", "cannot get services"))  # the operator's RBAC
    await reconcile_chaos(cluster.ctx, db, executor=executor)
    assert cluster.get("Service", "orders") is None
    assert cluster.recorder.reasons() == ["ChaosInjected"]


async def test_a_stale_pass_neither_refuses_nor_injects() -> None:
    for value in ("fill-volume", "delete-pod"):
        cluster, executor, db = await _annotated(value)
        cluster.patch("SampleDB", "orders", {"metadata": {"labels": {"x": "y"}}})  # a newer object
        await reconcile_chaos(cluster.ctx, db, executor=executor)
        assert cluster.recorder.events == [] and _annotations(cluster) == {ANNOTATION: value}
        assert cluster.get("Pod", "orders-0") is not None and not executor.calls


async def test_a_database_gone_before_the_removal_gets_no_fault_and_no_event() -> None:
    cluster, executor, db = await _annotated("delete-service")
    cluster.remove(("SampleDB", "shop", "orders"))  # its finalizer done: the removal's patch finds nothing
    await reconcile_chaos(cluster.ctx, db, executor=executor)
    assert cluster.written("patch", "SampleDB")[-1] == ("patch", "SampleDB", "orders")
    assert cluster.get("Service", "orders") is not None and cluster.recorder.events == []


def test_the_setting_is_off_by_default() -> None:
    assert FakeCluster().ctx.chaos_annotation is False


async def test_with_the_setting_off_nothing_is_injected_and_a_warning_names_the_flag_once() -> None:
    for value in ("kill-postgres", "delete-pod", "delete-job", "delete-service", "kill-primary"):
        cluster, executor, db = await _annotated(value, enabled=False)
        before = {kind: len(cluster.written("delete", kind)) for kind in ("Pod", "Service", "Job", "StatefulSet")}
        writes = len(cluster.writes)
        await reconcile_chaos(cluster.ctx, db, executor=executor)
        assert not executor.calls, "no exec into any pod"
        assert cluster.writes[writes:] == [("patch", "SampleDB", "orders")], "only the annotation's removal"
        assert {kind: len(cluster.written("delete", kind)) for kind in before} == before
        assert cluster.get("Pod", "orders-0") is not None and cluster.get("Service", "orders") is not None
        [(type_, reason, message)] = cluster.recorder.events
        assert (type_, reason) == ("Warning", "ChaosDisabled")
        assert f"{ANNOTATION}={value}" in message and "--chaos-annotation" in message
        assert "SAMPLEDB_CHAOS_ANNOTATION" in message and "manifests/overlays/chaos" in message
        assert ANNOTATION not in _annotations(cluster)
        # the same pass again (a stale copy that still carries the annotation): no second Event, no fault
        await reconcile_chaos(cluster.ctx, db, executor=executor)
        fresh = SampleDB.model_validate(cluster.get("SampleDB", "orders"))
        await reconcile_chaos(cluster.ctx, fresh, executor=executor)
        assert len(cluster.recorder.events) == 1 and not executor.calls


async def test_an_annotation_answered_while_off_is_not_injected_once_the_setting_is_on() -> None:
    cluster, executor, db = await _annotated("delete-pod", enabled=False)
    await reconcile_chaos(cluster.ctx, db, executor=executor)
    cluster.ctx.chaos_annotation = True  # the operator restarted with the setting on
    await reconcile_chaos(cluster.ctx, SampleDB.model_validate(cluster.get("SampleDB", "orders")), executor=executor)
    assert cluster.get("Pod", "orders-0") is not None and cluster.recorder.reasons() == ["ChaosDisabled"]


async def test_a_new_annotation_value_while_off_gets_its_own_warning() -> None:
    cluster, executor, db = await _annotated("delete-pod", enabled=False)
    await reconcile_chaos(cluster.ctx, db, executor=executor)
    cluster.patch("SampleDB", "orders", {"metadata": {"annotations": {ANNOTATION: "kill-postgres"}}})
    await reconcile_chaos(cluster.ctx, SampleDB.model_validate(cluster.get("SampleDB", "orders")), executor=executor)
    assert cluster.recorder.reasons() == ["ChaosDisabled", "ChaosDisabled"]
    assert "kill-postgres" in cluster.recorder.events[1][2] and not executor.calls
