"""sharded.BucketMender, misplaced and bucketed: a SampleDB (or a SampleDBBackup: its database's bucket) this
replica caches under another valid bucket than its own is noted from its watch events and given its own bucket
label by one merge patch of the label; one labelled right, unlabelled or with a value that is no bucket is left
to its own pass; one deleted, or put right meanwhile, is skipped; a failure keeps it noted and run() tries
again after the retry period."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import pytest
from tests.support.aio import eventually

from sampledb_operator.decide.sharding import BUCKET_LABEL, BUCKETS, bucket_of
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.errors import NotFound, ServerError
from sampledb_operator.kube.resources import SAMPLEDB
from sampledb_operator.model.objects import Obj
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.sharded import BucketMender, backup_bucket, bucketed, misplaced

NS = "shop"
RETRY = 2.0
FIELD_MANAGER = "sampledb-test"


def own(name: str, ns: str = NS) -> str:
    return str(bucket_of(ns, name))


def elsewhere(name: str, ns: str = NS) -> str:
    """A valid bucket that is not the database's own."""
    return str((bucket_of(ns, name) + 1) % BUCKETS)


def db(name: str, bucket: str | None, rv: str = "5") -> Obj:
    meta: Obj = {"name": name, "namespace": NS, "resourceVersion": rv, "labels": {"team": "x"}}
    if bucket is not None:
        meta["labels"][BUCKET_LABEL] = bucket
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": meta}


class Api:
    """The SampleDB API's patch: records every call; raises the error set for a name."""

    resource = SAMPLEDB

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, Any, str | None]] = []
        self.errors: dict[str, Exception] = {}
        self.during: Callable[[str], None] | None = None  # runs while a patch is in flight

    async def patch(self, name: str, patch: Any, *, namespace: str | None = None,
                    field_manager: str | None = None) -> Obj:
        self.calls.append((name, namespace, patch, field_manager))
        if self.during is not None:
            self.during(name)
        error = self.errors.get(name)
        if error is not None:
            raise error
        return {}

    def names(self) -> list[str]:
        return [name for name, *_ in self.calls]


def setup() -> tuple[BucketMender, Store, Api, FakeClock]:
    store = Store("sampledbs")
    store.replace([], resource_version="1")
    api, clock = Api(), FakeClock()
    mender = BucketMender(StoreSet({None: store}), cast(ResourceApi, api), field_manager=FIELD_MANAGER, clock=clock,
                          retry_period=RETRY)
    return mender, store, api, clock


def cached_and_noted(mender: BucketMender, store: Store, obj: Obj, type_: str = "ADDED") -> None:
    """The watch delivers `obj`: into the cache, then to the mender's handler."""
    store.upsert(obj)
    mender.note(type_, obj)


def label_patch(name: str) -> dict[str, Any]:
    return {"metadata": {"labels": {BUCKET_LABEL: own(name)}}}


def test_misplaced_and_bucketed_read_the_bucket_label() -> None:
    assert misplaced(db("orders", elsewhere("orders")))
    assert not misplaced(db("orders", own("orders")))
    assert not misplaced(db("orders", None))
    assert not misplaced(db("orders", "garbage"))
    assert not misplaced(db("orders", "shared"))
    assert not misplaced({"metadata": {"name": "orders", "namespace": NS}})  # no labels at all
    assert bucketed(db("orders", own("orders"))) and bucketed(db("orders", elsewhere("orders")))
    assert not bucketed(db("orders", None)) and not bucketed(db("orders", "60"))
    assert not bucketed(db("orders", "shared"))


async def test_a_sampledb_labelled_with_another_bucket_is_patched_once_with_its_own() -> None:
    mender, store, api, _clock = setup()
    cached_and_noted(mender, store, db("orders", elsewhere("orders")))
    assert await mender.mend() == 1
    assert api.calls == [("orders", NS, label_patch("orders"), FIELD_MANAGER)]
    assert await mender.mend() == 0  # forgotten once put right
    assert len(api.calls) == 1


@pytest.mark.parametrize("bucket", ["own", None, "garbage", "shared", "60", "07"])
async def test_a_sampledb_without_another_valid_bucket_is_not_noted(bucket: str | None) -> None:
    mender, store, api, _clock = setup()
    cached_and_noted(mender, store, db("orders", own("orders") if bucket == "own" else bucket))
    assert await mender.mend() == 0
    assert api.calls == []


async def test_a_deleted_event_forgets_a_noted_sampledb() -> None:
    mender, store, api, _clock = setup()
    obj = db("orders", elsewhere("orders"))
    cached_and_noted(mender, store, obj)
    mender.note("DELETED", obj)  # the last known object: still misplaced, but gone
    assert await mender.mend() == 0
    assert api.calls == []


async def test_a_later_event_showing_it_put_right_forgets_it() -> None:
    mender, store, api, _clock = setup()
    cached_and_noted(mender, store, db("orders", elsewhere("orders")))
    mender.note("MODIFIED", db("orders", own("orders"), rv="6"))
    assert await mender.mend() == 0
    assert api.calls == []


async def test_one_the_cache_shows_put_right_by_the_time_mend_runs_is_not_patched() -> None:
    mender, store, api, _clock = setup()
    cached_and_noted(mender, store, db("orders", elsewhere("orders")))
    cached_and_noted(mender, store, db("other", elsewhere("other")))
    store.upsert(db("orders", own("orders"), rv="6"))  # put right (by its owner) before its event came
    assert await mender.mend() == 1
    assert api.names() == ["other"]


async def test_one_gone_from_the_cache_is_not_patched() -> None:
    mender, store, api, _clock = setup()
    cached_and_noted(mender, store, db("orders", elsewhere("orders")))
    store.replace([], resource_version="9")  # a relist without it
    assert await mender.mend() == 0
    assert api.calls == []


async def test_every_noted_sampledb_is_patched_with_its_own_bucket() -> None:
    mender, store, api, _clock = setup()
    names = [f"db-{i}" for i in range(5)]
    for name in names:
        cached_and_noted(mender, store, db(name, elsewhere(name)))
    assert await mender.mend() == 5
    assert sorted(api.calls) == sorted((n, NS, label_patch(n), FIELD_MANAGER) for n in names)


async def test_a_sampledb_deleted_before_its_patch_is_skipped() -> None:
    mender, store, api, _clock = setup()
    cached_and_noted(mender, store, db("gone", elsewhere("gone")))
    cached_and_noted(mender, store, db("orders", elsewhere("orders")))
    api.errors["gone"] = NotFound(404, "NotFound", 'sampledbs.sampledb.io "gone" not found')
    assert await mender.mend() == 1  # no raise; the other one is patched
    assert sorted(api.names()) == ["gone", "orders"]
    api.calls.clear()
    assert await mender.mend() == 0  # and it is not tried again
    assert api.calls == []


async def test_another_error_propagates_and_keeps_the_sampledb_noted() -> None:
    mender, store, api, _clock = setup()
    cached_and_noted(mender, store, db("orders", elsewhere("orders")))
    api.errors["orders"] = ServerError(500, "InternalError", "etcd timed out")
    with pytest.raises(ServerError):
        await mender.mend()
    assert api.names() == ["orders"]
    del api.errors["orders"]
    assert await mender.mend() == 1
    assert api.calls[-1] == ("orders", NS, label_patch("orders"), FIELD_MANAGER)
    assert len(api.calls) == 2


async def test_a_sampledb_noted_while_another_is_patched_is_mended_next() -> None:
    mender, store, api, _clock = setup()
    cached_and_noted(mender, store, db("orders", elsewhere("orders")))
    late = db("late", elsewhere("late"))
    api.during = lambda name: cached_and_noted(mender, store, late) if name == "orders" else None
    assert await mender.mend() == 1
    assert api.names() == ["orders"]
    assert await mender.mend() == 1  # kept noted: not lost with the one being patched
    assert api.names() == ["orders", "late"]


async def test_run_wakes_on_a_note_and_patches() -> None:
    mender, store, api, _clock = setup()
    task = asyncio.create_task(mender.run())
    try:
        cached_and_noted(mender, store, db("orders", elsewhere("orders")))
        await eventually(lambda: len(api.calls) == 1)
        assert api.calls == [("orders", NS, label_patch("orders"), FIELD_MANAGER)]
        cached_and_noted(mender, store, db("later", elsewhere("later")))  # the loop waits for the next note
        await eventually(lambda: len(api.calls) == 2)
        assert api.names() == ["orders", "later"]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_run_retries_after_the_retry_period_after_a_failure() -> None:
    mender, store, api, clock = setup()
    api.errors["orders"] = ServerError(503, "ServiceUnavailable", "try later")
    task = asyncio.create_task(mender.run())
    try:
        cached_and_noted(mender, store, db("orders", elsewhere("orders")))
        await eventually(lambda: len(api.calls) == 1 and clock.pending_sleepers() == 1)
        assert clock.next_deadline() == RETRY  # it waits the retry period on the clock, then tries again
        assert len(api.calls) == 1
        del api.errors["orders"]
        clock.advance(RETRY)
        await eventually(lambda: len(api.calls) == 2)
        assert api.calls[-1] == ("orders", NS, label_patch("orders"), FIELD_MANAGER)
        await eventually(lambda: not task.done() and clock.pending_sleepers() == 0)
        assert await mender.mend() == 0  # mended: nothing left noted
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def backup(name: str, database: str, bucket: str | None) -> Obj:
    meta: Obj = {"name": name, "namespace": NS, "resourceVersion": "5", "labels": {"sampledb.io/database": database}}
    if bucket is not None:
        meta["labels"][BUCKET_LABEL] = bucket
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup", "metadata": meta,
            "spec": {"database": database}}


def test_a_backups_own_bucket_is_its_databases() -> None:
    assert backup_bucket(backup("nightly", "orders", None)) == own("orders") != own("nightly")
    assert misplaced(backup("nightly", "orders", own("nightly")), backup_bucket)  # its own name's: not its bucket
    assert not misplaced(backup("nightly", "orders", own("orders")), backup_bucket)
    assert misplaced(backup("nightly", "orders", elsewhere("orders")), backup_bucket)
    assert not misplaced(backup("nightly", "orders", None), backup_bucket)  # its own pass labels it
    assert backup_bucket({"metadata": {"name": "b", "namespace": NS}, "spec": {}}) is None
    assert not misplaced({"metadata": {"name": "b", "namespace": NS, "labels": {BUCKET_LABEL: "3"}}, "spec": {}},
                         backup_bucket)  # names no database: no bucket of its own to put


async def test_a_misplaced_backup_gets_its_databases_bucket() -> None:
    store = Store("sampledbbackups")
    store.replace([], resource_version="1")
    api = Api()
    mender = BucketMender(StoreSet({None: store}), cast(ResourceApi, api), field_manager=FIELD_MANAGER,
                          clock=FakeClock(), retry_period=RETRY, own_bucket=backup_bucket)
    cached_and_noted(mender, store, backup("nightly", "orders", elsewhere("orders")))
    cached_and_noted(mender, store, backup("weekly", "orders", own("orders")))
    assert await mender.mend() == 1
    assert api.calls == [("nightly", NS, {"metadata": {"labels": {BUCKET_LABEL: own("orders")}}}, FIELD_MANAGER)]
