"""How a sharded replica takes its share of the work (--shards N > 1), wired to the controllers.

Sharding says which shard a key belongs to (decide.sharding.shard_of of a SampleDB's namespace/name; a
SampleDBBackup goes with its spec.database) and admits a key only while the ShardOwner (runtime/shards.py)
owns its shard and, with the shard-filtered caches, once they have listed the shard's children
(shard_caches_for: runtime/shard_caches.ShardCaches over the children's and pods' watchers, labelling with
reconcilers/shard_labels.py). app.py makes the parts (the watchers as Watched) and hands them here.

Invariants: a shard's keys are enqueued whenever it becomes admitted (acquired while cached, or cached
while owned), and only a held shard's keys are queued at all (the controllers' intake: holds_database,
holds_backup; the others wait in the caches for their shard to be taken); a backup not in the cache, or
naming no database, is admitted everywhere (its reconcile finds it gone, or reports the missing field).
With filtered caches a SampleDB (a SampleDBBackup) is in the
caches of its label's bucket's holder (and of every replica while it has no bucket label): one whose label
names a bucket other than its own (its database's, for a backup; set by hand, or copied with another's
manifest) is noted by the replica that caches it, whose BucketMender puts the label right at once, so its
owner caches it and its pass runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sampledb_operator.config import Settings
from sampledb_operator.decide.sharding import BUCKET_LABEL, bucket_of, filterable, is_bucket, plan_shards, shard_of
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.kube.resources import LEASE, SAMPLEDB, SAMPLEDBBACKUP
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Caches
from sampledb_operator.reconcilers.sampledb import watched_resources
from sampledb_operator.reconcilers.shard_labels import (
    LABELLED_KINDS,
    children_selector,
    label_children,
    shard_buckets,
)
from sampledb_operator.runtime.clock import Clock
from sampledb_operator.runtime.controller import Controller
from sampledb_operator.runtime.shard_caches import SelectorOf, ShardCaches
from sampledb_operator.runtime.shards import ShardOwner
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.runtime.watcher import Watcher

log = get_logger(__name__)

@dataclass(frozen=True, slots=True)
class Watched:
    """One of app.build_caches' watchers: the kind it watches, the kind's own selector (`base`), whether
    ShardCaches moves its selector with the shards held (`filtered`: base narrowed to their buckets) and
    whether it is the second watch of a kind with filtered caches (`strays`: the objects without a bucket,
    merged into the kind's cache, a StoreUnion)."""

    kind: str
    watcher: Watcher
    base: str | None
    filtered: bool = False
    strays: bool = False


def filters_caches(settings: Settings) -> bool:
    """Whether this replica caches only its shards' children (--shard-caches, shards dividing the buckets)."""
    return settings.shards > 1 and settings.shard_caches and filterable(settings.shards)


def _backup_database(obj: dict[str, Any]) -> ObjectRef | None:
    """The SampleDB a SampleDBBackup is of (spec.database, same namespace); None when it names none."""
    name = (obj.get("spec") or {}).get("database")
    return ObjectRef((obj.get("metadata") or {}).get("namespace") or "", str(name)) if name else None


class Sharding:
    """Which shard a key belongs to, for the ShardOwner and the controllers' admission.

    A SampleDB's shard is shard_of(namespace, name); a SampleDBBackup's is its database's (so a
    database and its backups are reconciled by one replica); a backup not in the cache, or naming no
    database, is admitted everywhere (its reconcile finds it gone, or reports the missing field).
    """

    def __init__(self, shards: int, caches: Caches) -> None:
        self.shards = shards
        self.caches = caches
        self.owner: ShardOwner | None = None
        self.shard_caches: ShardCaches | None = None  # set when this replica caches only its shards' children
        self.databases: Controller | None = None
        self.backups: Controller | None = None

    def attach(self, settings: Settings, client: KubeClient, clock: Clock, databases: Controller,
               backups: Controller) -> ShardOwner:
        """Create the ShardOwner (the same Lease namespace and timings as leader election) for the two
        controllers."""
        self.databases, self.backups = databases, backups
        self.owner = ShardOwner(
            ResourceApi(client, LEASE), lease_name=settings.lease_name, namespace=settings.lease_namespace,
            identity=settings.identity, shards=self.shards, clock=clock, planner=plan_shards,
            lease_duration=settings.lease_duration, renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period, on_acquired=self.on_acquired, busy=self.busy,
            on_held=self.on_held,
        )
        return self.owner

    def of_database(self, ref: ObjectRef) -> int:
        return shard_of(ref.namespace, ref.name, self.shards)

    def of_backup(self, ref: ObjectRef) -> int | None:
        obj = self.caches.backups.get(ref)
        database = _backup_database(obj) if obj is not None else None
        return self.of_database(database) if database is not None else None

    def _cached(self, shard: int) -> bool:
        """The caches hold `shard`'s children (always, unless they are filtered)."""
        return self.shard_caches is None or self.shard_caches.ready(shard)

    def _admits(self, shard: int) -> bool:
        return self.owner is not None and self._cached(shard) and self.owner.admits(shard)

    def admit_database(self, ref: ObjectRef) -> bool:
        return self._admits(self.of_database(ref))

    def admit_backup(self, ref: ObjectRef) -> bool:
        shard = self.of_backup(ref)
        return shard is None or self._admits(shard)

    def holds_database(self, ref: ObjectRef) -> bool:
        """The database's shard is held here: its key may be queued (the controllers' intake; a shard taken
        later has its cached keys enqueued then: on_acquired, on_cache_ready)."""
        return self.owner is not None and self.owner.holds(self.of_database(ref))

    def holds_backup(self, ref: ObjectRef) -> bool:
        """As holds_database, for a backup's database; a backup not cached or naming no database is taken."""
        shard = self.of_backup(ref)
        return shard is None or (self.owner is not None and self.owner.holds(shard))

    def owned_databases(self) -> Iterator[dict[str, Any]]:
        """The cached SampleDBs of the owned shards, decoded one at a time (StoreSet.each)."""
        owner = self.owner
        if owner is None:
            return iter(())
        return self.caches.sampledbs.each(lambda ref: owner.owns(self.of_database(ref)))

    def busy(self, shard: int) -> bool:
        """A key of `shard` is being reconciled."""
        dbs = self.databases.in_flight if self.databases is not None else frozenset()
        backups = self.backups.in_flight if self.backups is not None else frozenset()
        return any(self.of_database(ref) == shard for ref in dbs) or any(
            self.of_backup(ref) == shard for ref in backups)

    def on_held(self, held: frozenset[int]) -> None:
        """The ShardOwner's shards held, every period: what the filtered caches must hold."""
        if self.shard_caches is not None:
            self.shard_caches.want(held)

    def on_cache_ready(self, shard: int) -> None:
        """The filtered caches now hold `shard`'s children: its keys, refused until now, are enqueued (a shard
        held but late in its renewal is marked by admits(), and enqueued when it is renewed)."""
        if self.owner is not None and self.owner.admits(shard):
            self._enqueue_shard(shard)

    def on_acquired(self, shard: int) -> None:
        """Enqueue the shard's keys, or, while the filtered caches do not hold its children yet, leave them
        to on_cache_ready."""
        if self._cached(shard):
            self._enqueue_shard(shard)

    def _enqueue_shard(self, shard: int) -> None:
        """Enqueue every cached SampleDB of `shard` and every backup of those databases."""
        databases = [ref for ref in self.caches.sampledbs.refs() if self.of_database(ref) == shard]  # not decoded
        backups = [ObjectRef.of(o) for o in self.caches.backups.list()
                   if (db := _backup_database(o)) is not None and self.of_database(db) == shard]
        if self.databases is not None:
            for ref in databases:
                self.databases.enqueue(ref)
        if self.backups is not None:
            for ref in backups:
                self.backups.enqueue(ref)
        log.info("shard's objects enqueued", shard=shard, databases=len(databases), backups=len(backups))


def shard_caches_for(settings: Settings, client: KubeClient, clock: Clock, sharding: Sharding,
                     watchers: list[Watched]) -> ShardCaches:
    """The runnable that moves the filtered watchers (children, pods, SampleDBs) with the shards held, attached to
    `sharding` (after sharding.attach: it starts from the shards whose Leases name this replica, the
    ShardOwner's `named`; the manager runs it early, with the watchers)."""
    shards = settings.shards
    apis = [ResourceApi(client, resource) for resource, _ in watched_resources() if resource.kind in LABELLED_KINDS]

    async def relabel(held: frozenset[int]) -> int:
        return await label_children(apis, settings.watch_namespaces, field_manager=settings.field_manager,
                                    buckets=shard_buckets(held, shards))

    def selector_of(base: str | None) -> SelectorOf:
        return lambda held: children_selector(held, shards, base)

    caches = ShardCaches([(w.watcher, selector_of(w.base)) for w in watchers if w.filtered],
                         clock=clock, relabel=relabel, on_ready=sharding.on_cache_ready,
                         hint=sharding.owner.named if sharding.owner is not None else None,
                         retry_period=settings.retry_period)
    for w in watchers:
        if w.filtered:  # a restarted replica's first listing is of the shards its Leases name
            w.watcher.start_after(caches.hinted)
    sharding.shard_caches = caches
    return caches


def _bucket_label(obj: dict[str, Any]) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(BUCKET_LABEL)


def bucketed(obj: dict[str, Any]) -> bool:
    """A SampleDB or SampleDBBackup the shards' watches select (its bucket label is a bucket), not the watch of
    those without one."""
    return is_bucket(_bucket_label(obj))


def database_bucket(obj: dict[str, Any]) -> str | None:
    """A SampleDB's own bucket (of its namespace/name)."""
    meta = obj.get("metadata") or {}
    return str(bucket_of(meta.get("namespace") or "", str(meta.get("name") or "")))


def backup_bucket(obj: dict[str, Any]) -> str | None:
    """A SampleDBBackup's bucket: its database's (spec.database); None when it names none."""
    database = _backup_database(obj)
    return str(bucket_of(database.namespace, database.name)) if database is not None else None


def has_bucket_label(obj: dict[str, Any]) -> bool:
    """A database pod the shards' watches select (it has the bucket label), not the watch of those without."""
    return _bucket_label(obj) is not None


def misplaced(obj: dict[str, Any], own_bucket: Callable[[dict[str, Any]], str | None] = database_bucket) -> bool:
    """An object whose bucket label is a bucket, but not its own (`own_bucket`: a SampleDB's by default); one
    with no bucket is labelled by its own pass, one with no bucket of its own is left alone."""
    value = _bucket_label(obj)
    if not is_bucket(value):
        return False
    wanted = own_bucket(obj)
    return wanted is not None and value != wanted


class BucketMender:
    """Puts right the bucket label of the objects of one kind (SampleDBs, SampleDBBackups) this replica caches
    under another bucket than their own (`own_bucket`: a SampleDB's, a backup's database's).

    `note` is the kind's filtered watches' event handler: an object whose label is misplaced is noted (one
    deleted, or put right, is forgotten). run() (a manager runnable) gives each noted object still misplaced in
    `cache` its own bucket, a merge patch of the label only (its owner's filtered watch then selects it: ADDED
    there, DELETED here); one deleted meanwhile is skipped; a failure keeps the rest noted and is retried after
    retry_period. Several replicas may both hold a misplaced object for a moment (during a handover): their
    patches write the same value.
    """

    def __init__(self, cache: StoreSet, api: ResourceApi, *, field_manager: str, clock: Clock,
                 retry_period: float, own_bucket: Callable[[dict[str, Any]], str | None] = database_bucket) -> None:
        self._cache = cache
        self._own_bucket = own_bucket
        self._api = api
        self._field_manager = field_manager
        self._clock = clock
        self._retry_period = retry_period
        self._noted: set[ObjectRef] = set()
        self._wake = asyncio.Event()

    def note(self, type_: str, obj: dict[str, Any]) -> None:
        ref = ObjectRef.of(obj)
        if type_ != "DELETED" and misplaced(obj, self._own_bucket):
            self._noted.add(ref)
            self._wake.set()
        else:
            self._noted.discard(ref)

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.mend()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("putting a bucket label right failed; retrying", kind=self._api.resource.kind,
                            error=repr(err), delay=self._retry_period)
                self._wake.set()
                await self._clock.sleep(self._retry_period)

    async def stop(self) -> None:
        """Nothing to release."""

    async def mend(self) -> int:
        """Put every noted object right (see the class); the number patched."""
        mended = 0
        for ref in sorted(self._noted):
            self._noted.discard(ref)  # before the patch: a note that comes while it runs is kept
            obj = self._cache.get(ref)
            if obj is None or not misplaced(obj, self._own_bucket):
                continue
            own = self._own_bucket(obj)
            log.info("bucket label put right", kind=self._api.resource.kind, namespace=ref.namespace, name=ref.name,
                     label=_bucket_label(obj), bucket=own)
            try:
                await self._api.patch(ref.name, {"metadata": {"labels": {BUCKET_LABEL: own}}},
                                      namespace=ref.namespace, field_manager=self._field_manager)
            except NotFound:
                continue
            except BaseException:
                self._noted.add(ref)
                raise
            mended += 1
        return mended


def bucket_menders_for(settings: Settings, client: KubeClient, clock: Clock, caches: Caches,
                       watchers: list[Watched]) -> list[tuple[str, BucketMender]]:
    """The BucketMenders (with their runnables' names) of the SampleDBs and of the SampleDBBackups, each's handler
    added to its kind's filtered watches among `watchers`."""
    menders = []
    for name, resource, cache, own_bucket in (("bucket-mender", SAMPLEDB, caches.sampledbs, database_bucket),
                                              ("backup-bucket-mender", SAMPLEDBBACKUP, caches.backups, backup_bucket)):
        mender = BucketMender(cache, ResourceApi(client, resource), field_manager=settings.field_manager, clock=clock,
                              retry_period=settings.retry_period, own_bucket=own_bucket)
        for w in watchers:
            if w.kind == resource.kind and w.filtered:
                w.watcher.add_handler(mender.note)
        menders.append((name, mender))
    return menders
