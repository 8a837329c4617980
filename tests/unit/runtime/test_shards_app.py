"""sharded.Sharding: which shard a SampleDB and a SampleDBBackup belong to, admission, enqueue on acquire;
the filtered caches' gating; --shards and --shard-caches."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import pytest
from tests.support.aio import eventually
from tests.support.scale_bench import load_scale_bench

from sampledb_operator.app import build_caches
from sampledb_operator.config import ConfigError, load_settings
from sampledb_operator.decide.sharding import BUCKET_LABEL, shard_of
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.reconcilers.context import Caches
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.runtime.storeunion import StoreUnion
from sampledb_operator.sharded import Sharding, filters_caches, shard_caches_for

SHARDS = 4


class StubOwner:
    def __init__(self, owned: set[int]) -> None:
        self.owned = owned

    def owns(self, shard: int) -> bool:
        return shard in self.owned

    def admits(self, shard: int) -> bool:
        return shard in self.owned

    def holds(self, shard: int) -> bool:
        return shard in self.owned

    async def named(self) -> frozenset[int]:
        return frozenset(self.owned)


class StubController:
    def __init__(self) -> None:
        self.enqueued: list[ObjectRef] = []
        self.in_flight: frozenset[ObjectRef] = frozenset()

    def enqueue(self, ref: ObjectRef) -> None:
        self.enqueued.append(ref)


def sampledb(ns: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
            "metadata": {"namespace": ns, "name": name, "resourceVersion": "1"}, "spec": {}}


def backup(ns: str, name: str, database: str | None, phase: str = "Pending") -> dict[str, Any]:
    spec = {"database": database} if database else {}
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"namespace": ns, "name": name, "resourceVersion": "1"}, "spec": spec,
            "status": {"phase": phase}}


def caches(objs: list[dict[str, Any]]) -> Caches:
    stores = {kind: Store(kind) for kind in ("sampledbs", "backups", "statefulsets", "pvcs", "jobs", "services",
                                             "configmaps", "secrets")}
    for obj in objs:
        stores["sampledbs" if obj["kind"] == "SampleDB" else "backups"].upsert(obj)
    return Caches(**{kind: StoreSet({None: store}) for kind, store in stores.items()})


def names_in(shard: int, count: int, ns: str = "ns") -> list[str]:
    found: list[str] = []
    i = 0
    while len(found) < count:
        if shard_of(ns, f"db{i}", SHARDS) == shard:
            found.append(f"db{i}")
        i += 1
    return found


def setup(objs: list[dict[str, Any]], owned: set[int]) -> tuple[Sharding, StubController, StubController]:
    sharding = Sharding(SHARDS, caches(objs))
    dbs, backups = StubController(), StubController()
    sharding.owner = StubOwner(owned)   # type: ignore[assignment]
    sharding.databases, sharding.backups = dbs, backups   # type: ignore[assignment]
    return sharding, dbs, backups


def test_a_database_is_admitted_only_when_its_shard_is_owned() -> None:
    (mine,), (other,) = names_in(0, 1), names_in(1, 1)
    sharding, _, _ = setup([], owned={0})
    assert sharding.admit_database(ObjectRef("ns", mine))
    assert not sharding.admit_database(ObjectRef("ns", other))


def test_a_backup_goes_with_its_database_and_one_not_cached_or_without_database_is_admitted() -> None:
    (mine,), (other,) = names_in(0, 1), names_in(1, 1)
    objs = [backup("ns", "b-mine", mine), backup("ns", "b-other", other), backup("ns", "b-none", None)]
    sharding, _, _ = setup(objs, owned={0})
    assert sharding.admit_backup(ObjectRef("ns", "b-mine"))
    assert not sharding.admit_backup(ObjectRef("ns", "b-other"))
    assert sharding.admit_backup(ObjectRef("ns", "b-none"))
    assert sharding.admit_backup(ObjectRef("ns", "b-gone"))


def test_only_a_held_shards_keys_are_taken_into_the_queues() -> None:
    (mine,), (other,) = names_in(0, 1), names_in(1, 1)
    objs = [backup("ns", "b-mine", mine), backup("ns", "b-other", other), backup("ns", "b-none", None)]
    sharding, _, _ = setup(objs, owned={0})
    assert sharding.holds_database(ObjectRef("ns", mine))
    assert not sharding.holds_database(ObjectRef("ns", other))
    assert sharding.holds_backup(ObjectRef("ns", "b-mine"))
    assert not sharding.holds_backup(ObjectRef("ns", "b-other"))
    assert sharding.holds_backup(ObjectRef("ns", "b-none")) and sharding.holds_backup(ObjectRef("ns", "b-gone"))
    sharding.owner = None
    assert not sharding.holds_database(ObjectRef("ns", mine))


def test_acquiring_a_shard_enqueues_its_databases_and_their_backups() -> None:
    mine, other = names_in(2, 3), names_in(3, 2)
    objs = [sampledb("ns", n) for n in mine + other] + [
        backup("ns", "b1", mine[0]), backup("ns", "b2", mine[1], phase="Succeeded"), backup("ns", "b3", other[0])]
    sharding, dbs, backups = setup(objs, owned=set())
    sharding.on_acquired(2)
    assert sorted(dbs.enqueued) == sorted(ObjectRef("ns", n) for n in mine)
    assert sorted(backups.enqueued) == [ObjectRef("ns", "b1"), ObjectRef("ns", "b2")]


def test_busy_looks_at_the_keys_in_flight_of_both_controllers() -> None:
    (db,), (other,) = names_in(1, 1), names_in(2, 1)
    sharding, dbs, backups = setup([backup("ns", "b", other)], owned={1, 2})
    assert not sharding.busy(1) and not sharding.busy(2)
    dbs.in_flight = frozenset({ObjectRef("ns", db)})
    assert sharding.busy(1) and not sharding.busy(2)
    backups.in_flight = frozenset({ObjectRef("ns", "b")})
    assert sharding.busy(2)


def test_only_the_owned_databases_are_counted_by_the_metrics() -> None:
    mine, other = names_in(0, 2), names_in(1, 2)
    sharding, _, _ = setup([sampledb("ns", n) for n in mine + other], owned={0})
    assert sorted(o["metadata"]["name"] for o in sharding.owned_databases()) == sorted(mine)


def test_the_shards_setting_defaults_to_1_and_comes_from_the_flag_or_the_environment() -> None:
    assert load_settings({}, environ={}).shards == 1
    assert load_settings({}, environ={"SAMPLEDB_SHARDS": "6"}).shards == 6
    assert load_settings({"shards": "8"}, environ={"SAMPLEDB_SHARDS": "6"}).shards == 8
    for bad in ("0", "129", "two"):
        with pytest.raises(ConfigError, match="--shards"):
            load_settings({"shards": bad}, environ={})


class StubShardCaches:
    def __init__(self, ready: set[int]) -> None:
        self.ready_shards = ready
        self.wanted: list[frozenset[int]] = []

    def ready(self, shard: int) -> bool:
        return shard in self.ready_shards

    def want(self, shards: frozenset[int]) -> None:
        self.wanted.append(shards)


def test_with_filtered_caches_a_held_shard_is_admitted_and_enqueued_only_once_its_children_are_cached() -> None:
    mine = names_in(2, 2)
    sharding, dbs, _ = setup([sampledb("ns", n) for n in mine], owned={2})
    stub = StubShardCaches(ready=set())
    sharding.shard_caches = stub  # type: ignore[assignment]
    sharding.on_held(frozenset({2}))
    assert stub.wanted == [frozenset({2})]
    sharding.on_acquired(2)
    assert dbs.enqueued == []  # left to on_cache_ready
    assert not sharding.admit_database(ObjectRef("ns", mine[0]))
    stub.ready_shards.add(2)
    sharding.on_cache_ready(2)
    assert sorted(dbs.enqueued) == sorted(ObjectRef("ns", n) for n in mine)
    assert sharding.admit_database(ObjectRef("ns", mine[0]))


def test_a_shard_cached_but_no_longer_owned_is_neither_enqueued_nor_admitted() -> None:
    (db,) = names_in(3, 1)
    sharding, dbs, _ = setup([sampledb("ns", db)], owned=set())
    sharding.shard_caches = StubShardCaches(ready={3})  # type: ignore[assignment]
    sharding.on_cache_ready(3)
    assert dbs.enqueued == [] and not sharding.admit_database(ObjectRef("ns", db))


def test_filtered_caches_need_shards_dividing_the_buckets_and_can_be_turned_off() -> None:
    assert filters_caches(load_settings({"shards": "6"}, environ={}))
    assert not filters_caches(load_settings({"shards": "7"}, environ={}))
    assert not filters_caches(load_settings({}, environ={}))
    assert not filters_caches(load_settings({"shards": "6", "shard_caches": "false"}, environ={}))


def test_filtered_caches_watch_their_shards_pods_and_every_pod_made_without_the_bucket_label() -> None:
    settings = load_settings({"shards": "6", "namespaces": "a,b"}, environ={})
    client = cast(KubeClient, None)  # nothing is requested: the watchers are not run
    sets, watched = build_caches(client, settings, FakeClock())
    pods = "app.kubernetes.io/managed-by=sampledb-operator,app.kubernetes.io/component=database"
    assert sorted((w.watcher.label_selector, w.filtered) for w in watched if w.kind == "Pod") == [
        (f"{pods},!{BUCKET_LABEL}", False), (f"{pods},!{BUCKET_LABEL}", False),
        (f"{pods},{BUCKET_LABEL} in (shared)", True), (f"{pods},{BUCKET_LABEL} in (shared)", True)]
    assert isinstance(sets["Pod"], StoreUnion)  # one cache of both watches
    assert {w.kind for w in watched if w.filtered} == {"StatefulSet", "PersistentVolumeClaim", "Job", "Service",
                                                       "ConfigMap", "Secret", "PodDisruptionBudget", "Deployment",
                                                       "Pod", "SampleDB", "SampleDBBackup"}
    moved = shard_caches_for(settings, client, FakeClock(), setup([], owned=set())[0], watched)
    moved._select(frozenset({1}))  # what run() does when shard 1 is wanted
    selectors = {w.watcher.label_selector for w in watched if w.kind == "Pod"}
    assert selectors == {f"{pods},!{BUCKET_LABEL}", f"{pods},{BUCKET_LABEL} in (shared,1,7,13,19,25,31,37,43,49,55)"}


def test_filtered_caches_watch_their_shards_sampledbs_and_every_sampledb_without_a_bucket() -> None:
    settings = load_settings({"shards": "6", "namespaces": "a,b"}, environ={})
    client = cast(KubeClient, None)  # nothing is requested: the watchers are not run
    sets, watched = build_caches(client, settings, FakeClock())
    strays = f"{BUCKET_LABEL} notin ({','.join(str(b) for b in range(60))})"
    assert sorted((w.watcher.label_selector, w.filtered) for w in watched if w.kind == "SampleDB") == [
        (f"{BUCKET_LABEL} in (shared)", True), (f"{BUCKET_LABEL} in (shared)", True), (strays, False), (strays, False)]
    assert isinstance(sets["SampleDB"], StoreUnion)
    moved = shard_caches_for(settings, client, FakeClock(), setup([], owned=set())[0], watched)
    moved._select(frozenset({1}))
    assert {w.watcher.label_selector for w in watched if w.kind == "SampleDB"} == {
        strays, f"{BUCKET_LABEL} in (shared,1,7,13,19,25,31,37,43,49,55)"}
    # the SampleDBs' watches feed one cache: a database is read wherever its label puts it
    first, second = ({"metadata": {"namespace": "a", "name": n, "resourceVersion": "5",
                                   "labels": {BUCKET_LABEL: b} if b else {}}} for n, b in (("x", "7"), ("y", None)))
    bucketed, unbucketed = (w.watcher.store for w in watched if w.kind == "SampleDB" and w.watcher._namespace == "a")
    bucketed.upsert(first)
    unbucketed.upsert(second)
    assert [o["metadata"]["name"] for o in sets["SampleDB"].list("a")] == ["x", "y"]


def test_without_filtered_caches_there_is_one_pods_watch_per_namespace() -> None:
    sets, watched = build_caches(cast(KubeClient, None), load_settings({"shards": "7"}, environ={}), FakeClock())
    assert [w.watcher.label_selector for w in watched if w.kind == "Pod"] == [
        "app.kubernetes.io/managed-by=sampledb-operator,app.kubernetes.io/component=database"]
    assert not isinstance(sets["Pod"], StoreUnion) and not any(w.filtered for w in watched)


async def test_the_shard_caches_start_from_the_shards_the_owners_leases_name() -> None:
    settings = load_settings({"shards": "6"}, environ={})
    client = cast(KubeClient, None)
    _, watched = build_caches(client, settings, FakeClock())
    moved = shard_caches_for(settings, client, FakeClock(), setup([], owned={4})[0], watched)  # named: {4}
    # the filtered watches list first once the named shards are selected (their first listing is of those)
    assert all((w.watcher._gate is moved.hinted) == w.filtered for w in watched)
    run = asyncio.create_task(moved.run())
    try:
        await eventually(moved.hinted.is_set)
        assert all(BUCKET_LABEL + " in (shared,4," in (w.watcher.label_selector or "") for w in watched if w.filtered)
    finally:
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run


@pytest.fixture
def scale(monkeypatch: pytest.MonkeyPatch) -> Any:
    return load_scale_bench(monkeypatch)


def test_the_scale_benchs_replica_floor_fetches_what_a_replica_caches(scale: Any) -> None:
    """bench/scale/scale.py times a sharded replica's restart against a plain client fetching the same objects
    (replica_selectors): the same kinds through the same selectors as build_caches and ShardCaches give a
    replica holding those shards."""
    settings = load_settings({"shards": "6"}, environ={})
    client = cast(KubeClient, None)
    _, watched = build_caches(client, settings, FakeClock())
    shard_caches_for(settings, client, FakeClock(), setup([], owned=set())[0], watched)._select(frozenset({1, 4}))
    replica = sorted((w.kind, w.watcher.label_selector or "") for w in watched if w.kind != "Node")
    assert sorted((r.kind, s or "") for r, s in scale.replica_selectors(6, [1, 4])) == replica
    assert [w.kind for w in watched].count("Node") == 1  # the cordoned nodes (few: the floor leaves them out)
    assert ("Pod", f"{'app.kubernetes.io/managed-by=sampledb-operator,app.kubernetes.io/component=database'},"
                   f"!{BUCKET_LABEL}") in replica
