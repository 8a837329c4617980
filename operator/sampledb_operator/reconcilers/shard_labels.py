"""The bucket label of the children, for a sharded replica's filtered caches (runtime/shard_caches.py).

Every child the operator makes carries sampledb.io/bucket (decide/labels.labels), and so do the database
pods of a StatefulSet made with it in its template; a child made by a version before the label has none,
and a cache that selects on the label would not see it. The labelling pass gives each managed child
without the label its bucket (decide.labels.bucket_of_child), but not the pods: a pod of a template
without the label is cached by every replica through the watch of unlabelled pods (unlabelled_selector),
since a pod the StatefulSet controller makes again would come back without it. The selectors name exactly
the children of a set of shards (decide.sharding.bucket_selector on each kind's own selector).

Invariant: one merge patch of the label per unlabelled object of the buckets asked for (a replica's own
shards'), at most LABEL_CONCURRENCY at once; the kinds (and namespaces) are listed concurrently, at most
LIST_CONCURRENCY lists at once (a restart's pass runs beside its caches' listings: its lists are not
queued one behind another); an object deleted meanwhile is skipped; any other error ends the pass, the
rest of its lists and patches cancelled and awaited (ShardCaches retries it); a pass cancelled ends
cancelled, also when its lists fail at the same time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Coroutine, Iterable, Sequence
from typing import Any

from sampledb_operator.decide.labels import MANAGED_SELECTOR, bucket_of_child
from sampledb_operator.decide.sharding import BUCKET_LABEL, bucket_selector, buckets_of
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.errors import NotFound

# the cached kinds a sharded replica filters: the children carrying the bucket label, the database pods, the
# SampleDBs and the SampleDBBackups (by their database's bucket); the labelling pass labels all of them but the
# pods, the SampleDBs and the SampleDBBackups (their own passes label them: lifecycle.own_metadata, and
# backup_run's labels)
FILTERED_KINDS = frozenset({"StatefulSet", "PersistentVolumeClaim", "Job", "Service", "ConfigMap", "Secret",
                            "PodDisruptionBudget", "Deployment", "Pod", "SampleDB", "SampleDBBackup"})
LABELLED_KINDS = FILTERED_KINDS - {"Pod", "SampleDB", "SampleDBBackup"}
LABEL_CONCURRENCY = 8
LIST_CONCURRENCY = len(LABELLED_KINDS)


def shard_buckets(held: Iterable[int], shards: int) -> frozenset[str]:
    """The bucket label values of the shards `held`, the shared bucket included."""
    return frozenset(buckets_of(held, shards))


def children_selector(held: Iterable[int], shards: int, base: str | None = MANAGED_SELECTOR) -> str:
    """The selector of the managed children (those `base` selects; None: the SampleDBs themselves) of the
    shards `held` (and the shared bucket's objects)."""
    return bucket_selector(base, sorted(held), shards)


def unlabelled_selector(base: str | None = MANAGED_SELECTOR) -> str:
    """The selector of the objects `base` selects (None: all) that have no bucket label."""
    return f"{base},!{BUCKET_LABEL}" if base else f"!{BUCKET_LABEL}"


def _target(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(name, namespace, bucket) of an unlabelled child."""
    meta = obj["metadata"]
    return str(meta["name"]), str(meta.get("namespace") or ""), bucket_of_child(obj)


async def label_children(apis: Sequence[ResourceApi], namespaces: Sequence[str | None], *, field_manager: str,
                         buckets: Collection[str] | None = None) -> int:
    """Give every managed child of `apis`' kinds in `namespaces` (None: all) that lacks the bucket label its
    bucket (decide.labels.bucket_of_child), only those of `buckets` when given (a replica labels its own
    shards' children: after an upgrade the replicas do not all patch every child); the number labelled.
    Objects deleted meanwhile are skipped."""
    patches = asyncio.Semaphore(LABEL_CONCURRENCY)
    lists = asyncio.Semaphore(LIST_CONCURRENCY)

    async def label(api: ResourceApi, name: str, namespace: str, value: str) -> int:
        async with patches:
            try:
                await api.patch(name, {"metadata": {"labels": {BUCKET_LABEL: value}}}, namespace=namespace,
                                field_manager=field_manager)
            except NotFound:
                return 0
            return 1

    async def kind_in(api: ResourceApi, namespace: str | None) -> int:
        async with lists:
            # each page reduced to what the patch needs as it arrives (after an upgrade: every child, unlabelled)
            found = await api.list_all(namespace, label_selector=unlabelled_selector(), page_size=100, keep=_target)
        return sum(await _together(label(api, *target) for target in found.items
                                   if buckets is None or target[2] in buckets))

    return sum(await _together(kind_in(api, namespace) for api in apis for namespace in namespaces))


async def _together(steps: Iterable[Coroutine[Any, Any, int]]) -> list[int]:
    """Run `steps` at once; their results. The first failure, or this call's cancellation, cancels the others
    (awaited) before it is raised, so nothing of a pass outlives it (asyncio.TaskGroup would do this, but in
    Python 3.11 it drops a cancellation that comes while its tasks fail)."""
    tasks = [asyncio.ensure_future(step) for step in steps]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled():
                task.exception()  # retrieved: the error raised is the first one
        raise
