"""The shard-filtered caches' selectors and labelling pass against the real API server.

A labelling pass gives each managed object without the bucket label its database's bucket (the shared
bucket when it names no database), only those of the buckets asked for, and leaves labelled and foreign
objects alone; a Watcher whose
selector is moved from one set of shards to another lists exactly the objects of the new set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from tests.support.kube import async_wait_until, kubectl, kubectl_json

from sampledb_operator.decide.sharding import BUCKET_LABEL, SHARED_BUCKET, bucket_of, shard_of
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.resources import CONFIGMAP
from sampledb_operator.reconcilers.shard_labels import children_selector, label_children
from sampledb_operator.runtime.clock import RealClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.watcher import Watcher

pytestmark = pytest.mark.cluster

SHARDS = 3
MANAGED = {"app.kubernetes.io/managed-by": "sampledb-operator"}


def configmap(ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels}}


def create(*objs: dict[str, Any]) -> None:
    kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)}))


def labels_of(ns: str) -> dict[str, dict[str, str]]:
    return {o["metadata"]["name"]: o["metadata"].get("labels") or {}
            for o in kubectl_json("get", "configmaps", "-n", ns)["items"]}


def database_in(shard: int, ns: str) -> str:
    return next(f"db-{i}" for i in range(1000) if shard_of(ns, f"db-{i}", SHARDS) == shard)


async def test_the_labelling_pass_labels_only_managed_objects_without_the_label(kubeconfig: str,
                                                                                namespace: str) -> None:
    db = database_in(0, namespace)
    create(configmap(namespace, "legacy", {**MANAGED, "sampledb.io/database": db}),
           configmap(namespace, "legacy-shared", MANAGED),
           configmap(namespace, "labelled", {**MANAGED, "sampledb.io/database": db, BUCKET_LABEL: "7"}),
           configmap(namespace, "foreign", {"sampledb.io/database": db}))
    client = await KubeClient.connect(kubeconfig)
    try:
        api = ResourceApi(client, CONFIGMAP)
        # a replica labels only its own shards' children: here the shared bucket's
        assert await label_children([api], [namespace], field_manager="sampledb-operator",
                                    buckets=frozenset({SHARED_BUCKET})) == 1
        assert BUCKET_LABEL not in labels_of(namespace)["legacy"]
        assert await label_children([api], [namespace], field_manager="sampledb-operator") == 1
        assert await label_children([api], [namespace], field_manager="sampledb-operator") == 0
    finally:
        await client.close()
    found = labels_of(namespace)
    assert found["legacy"][BUCKET_LABEL] == str(bucket_of(namespace, db))
    assert found["legacy-shared"][BUCKET_LABEL] == SHARED_BUCKET
    assert found["labelled"][BUCKET_LABEL] == "7"
    assert BUCKET_LABEL not in found["foreign"]


async def test_a_watcher_moved_to_other_shards_lists_exactly_their_objects(kubeconfig: str, namespace: str) -> None:
    dbs = [database_in(shard, namespace) for shard in range(SHARDS)]
    create(*(configmap(namespace, f"cm-{db}", {**MANAGED, "sampledb.io/database": db,
                                                BUCKET_LABEL: str(bucket_of(namespace, db))}) for db in dbs),
           configmap(namespace, "scripts", {**MANAGED, BUCKET_LABEL: SHARED_BUCKET}))
    client = await KubeClient.connect(kubeconfig)
    store = Store("configmaps")
    watcher = Watcher(ResourceApi(client, CONFIGMAP), store, clock=RealClock(), namespace=namespace,
                      label_selector=children_selector((), SHARDS), streaming=True)
    task = asyncio.create_task(watcher.run())
    try:
        def names() -> set[str]:
            return {ref.name for ref in store.refs()}

        def holds(wanted: set[str]) -> Callable[[], Awaitable[bool]]:
            async def check() -> bool:
                return names() == wanted
            return check

        def listed(selector: str) -> Callable[[], Awaitable[bool]]:
            async def check() -> bool:
                return watcher.listed_selector == selector
            return check

        await async_wait_until(holds({"scripts"}), timeout=30, what="the shared bucket only")
        watcher.select(children_selector({0, 2}, SHARDS))
        await async_wait_until(listed(children_selector({0, 2}, SHARDS)), timeout=30,
                               what="the listing of shards 0 and 2")
        assert names() == {"scripts", f"cm-{dbs[0]}", f"cm-{dbs[2]}"}
        watcher.select(children_selector({1}, SHARDS))
        await async_wait_until(listed(children_selector({1}, SHARDS)), timeout=30,
                               what="the listing of shard 1")
        assert names() == {"scripts", f"cm-{dbs[1]}"}
        kubectl("label", "configmap", f"cm-{dbs[1]}", "-n", namespace, f"{BUCKET_LABEL}-")
        await async_wait_until(holds({"scripts"}), timeout=30,
                               what="the object whose label was removed gone from the cache")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.close()
