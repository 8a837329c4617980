"""A SampleDB's first pass labels it with its bucket: with filtered caches that moves it from the strays watch
(no bucket) to the shards' watch, both feeding one cache (StoreUnion). The strays watch then sends DELETED (the
API server's watch cache: the previous content, without the label, at the write's resourceVersion); that event
is no deletion and wakes nobody (app._watch_handlers, triggers.unless_handed_over, StoreUnion.moved_in), while
every real deletion, and every DELETED of another watch, still wakes the database and its backups."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from sampledb_operator.app import _watch_handlers
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.reconcilers.context import Caches, Context
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.controller import Controller
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.runtime.storeunion import StoreUnion
from sampledb_operator.runtime.triggers import unless_handed_over
from sampledb_operator.runtime.watcher import Watcher
from sampledb_operator.sharded import Watched, bucketed

BUCKET = "sampledb.io/bucket"


def sampledb(rv: str, bucket: str | None = None) -> Obj:
    labels = {BUCKET: bucket} if bucket is not None else {}
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
            "metadata": {"name": "orders", "namespace": "shop", "resourceVersion": rv, "labels": labels}}


def backup() -> Obj:
    return {"kind": "SampleDBBackup", "metadata": {"name": "nightly", "namespace": "shop", "resourceVersion": "3"},
            "spec": {"database": "orders"}}


def store(objs: list[Obj], kind: str = "sampledbs") -> Store:
    s = Store(kind)
    s.replace(objs, resource_version="5")
    return s


class Recording(Controller):
    def __init__(self, name: str, calls: list[str]) -> None:
        async def noop(_ref: ObjectRef) -> None:
            return None

        super().__init__(name, noop, clock=FakeClock())
        self.calls = calls

    def enqueue(self, ref: ObjectRef) -> None:
        self.calls.append(f"{self.name} {ref.name}")


def wiring() -> tuple[StoreUnion, list[str], Any, Any]:
    union = StoreUnion({None: store([])}, StoreSet({None: store([sampledb("5")])}), routes_here=bucketed)
    empty = [StoreSet({None: store([])}) for _ in range(6)]
    caches = Caches(union, StoreSet({None: store([backup()], "backups")}), *empty)
    ctx = cast(Context, SimpleNamespace(caches=caches))
    calls: list[str] = []
    dbs, backups = Recording("db", calls), Recording("backup", calls)
    watcher = cast(Watcher, None)  # the handlers never touch it

    def deliver(watched: Watched) -> Any:
        handlers = _watch_handlers(watched, dbs, backups, ctx)
        return lambda type_, obj: [h(type_, obj) for h in handlers]

    strays = deliver(Watched("SampleDB", watcher, None, filtered=False, strays=True))
    shards = deliver(Watched("SampleDB", watcher, None, filtered=True))
    return union, calls, strays, shards


def test_the_strays_watchs_deleted_after_the_pass_labels_the_sampledb_wakes_nobody() -> None:
    union, calls, strays, shards = wiring()
    union.remember(sampledb("6", bucket="7"))  # the first pass's PATCH (finalizer and label): its answer
    strays("DELETED", sampledb("6"))  # previous content, the write's resourceVersion
    assert calls == []
    shards("ADDED", sampledb("6", bucket="7"))  # an own write: not the writer's news (unless_own_write), the
    assert calls == ["backup nightly"]  # backup controller's (a change of its database), once
    assert union.get(ObjectRef("shop", "orders")) == sampledb("6", bucket="7")


def test_a_real_deletion_still_wakes_the_database_and_its_backups() -> None:
    union, calls, strays, shards = wiring()
    union.remember(sampledb("6", bucket="7"))
    strays("DELETED", sampledb("9"))  # deleted before its label reached the watch: the delete's own version
    assert calls == ["db orders", "backup nightly"]
    calls.clear()
    shards("DELETED", sampledb("6", bucket="7"))  # the shards' watch: deletions always wake
    assert calls == ["db orders", "backup nightly"]


def test_a_deleted_whose_version_the_strays_side_remembers_is_a_deletion() -> None:
    union, calls, strays, _ = wiring()
    union.remember(sampledb("6"))  # an answer without a bucket (a paused database): read back from the strays
    assert not union.moved_in(sampledb("6")) and union.is_own_write(sampledb("6"))
    strays("DELETED", sampledb("6"))
    assert calls == ["db orders", "backup nightly"]


def test_unless_handed_over_drops_only_the_deleted_it_is_told_of() -> None:
    got: list[tuple[str, str]] = []
    handler = unless_handed_over(lambda t, o: got.append((t, o["metadata"]["resourceVersion"])),
                                 lambda o: o["metadata"]["resourceVersion"] == "6")
    for type_, rv in (("DELETED", "6"), ("MODIFIED", "6"), ("ADDED", "6"), ("DELETED", "7")):
        handler(type_, sampledb(rv))
    assert got == [("MODIFIED", "6"), ("ADDED", "6"), ("DELETED", "7")]
