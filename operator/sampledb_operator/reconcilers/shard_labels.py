"""The bucket label of the children, for a sharded replica's filtered caches (runtime/shard_caches.py).

Every child the operator makes carries sampledb.io/bucket (decide/desired.labels); a child made by a
version before the label has none, and a cache that selects on the label would not see it. The labelling
pass gives each managed child without the label its bucket (decide.desired.bucket_of_child); the
selectors name exactly the children of a set of shards (decide.sharding.bucket_selector).

Invariant: one merge patch of the label per unlabelled object, at most LABEL_CONCURRENCY at once; an
object deleted meanwhile is skipped; any other error ends the pass (ShardCaches retries it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from sampledb_operator.decide.desired import MANAGED_SELECTOR, bucket_of_child
from sampledb_operator.decide.sharding import BUCKET_LABEL, bucket_selector
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.errors import NotFound

# the cached kinds a sharded replica filters: the children carrying the bucket label (not the database pods,
# whose template has none, nor the users' SampleDBs and SampleDBBackups)
FILTERED_KINDS = frozenset({"StatefulSet", "PersistentVolumeClaim", "Job", "Service", "ConfigMap", "Secret"})
UNLABELLED_SELECTOR = f"{MANAGED_SELECTOR},!{BUCKET_LABEL}"
LABEL_CONCURRENCY = 8


def children_selector(held: Iterable[int], shards: int) -> str:
    """The selector of the managed children of the shards `held` (and the shared bucket's objects)."""
    return bucket_selector(MANAGED_SELECTOR, sorted(held), shards)


async def label_children(apis: Sequence[ResourceApi], namespaces: Sequence[str | None], *, field_manager: str) -> int:
    """Give every managed child of `apis`' kinds in `namespaces` (None: all) that lacks the bucket label its
    bucket (decide.desired.bucket_of_child); the number labelled. Objects deleted meanwhile are skipped."""
    limit = asyncio.Semaphore(LABEL_CONCURRENCY)

    async def label(api: ResourceApi, name: str, namespace: str, value: str) -> int:
        async with limit:
            try:
                await api.patch(name, {"metadata": {"labels": {BUCKET_LABEL: value}}}, namespace=namespace,
                                field_manager=field_manager)
            except NotFound:
                return 0
            return 1

    done = 0
    for api in apis:
        for namespace in namespaces:
            found = await api.list_all(namespace, label_selector=UNLABELLED_SELECTOR, page_size=100)
            results = await asyncio.gather(*(
                label(api, str(o["metadata"]["name"]), str(o["metadata"].get("namespace") or ""), bucket_of_child(o))
                for o in found.items))
            done += sum(results)
    return done
