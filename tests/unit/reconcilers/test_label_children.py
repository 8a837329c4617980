"""label_children, the shard caches' labelling pass, on fake APIs: the kinds are listed at once (not one
behind another), only the buckets asked for are patched, a child deleted meanwhile is skipped, and a
failure ends the pass with the rest of its lists and patches cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import pytest
from tests.support.aio import eventually

from sampledb_operator.decide.labels import DATABASE_LABEL, bucket_of_child
from sampledb_operator.decide.sharding import BUCKET_LABEL
from sampledb_operator.kube.api import ListResult, ResourceApi
from sampledb_operator.kube.errors import NotFound, ServerError
from sampledb_operator.reconcilers.shard_labels import label_children, unlabelled_selector


def child(name: str, database: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team", "labels": {DATABASE_LABEL: database}}}


class FakeKind:
    """One kind's list_all (parked until `answer` is set) and patch."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.answer = asyncio.Event()
        self.listing = False
        self.patched: list[tuple[str, dict[str, Any]]] = []
        self.gone: set[str] = set()
        self.fail: Exception | None = None
        self.patch_gate = asyncio.Event()
        self.patch_gate.set()
        self.patch_cancelled = 0
        self.patching = 0

    async def list_all(self, namespace: str | None = None, *, label_selector: str | None = None,
                       page_size: int = 500, keep: Callable[[dict[str, Any]], Any] | None = None,
                       **_: Any) -> ListResult:
        assert label_selector == unlabelled_selector()
        self.listing = True
        await self.answer.wait()
        if self.fail is not None:
            raise self.fail
        items = [keep(o) if keep else o for o in self.objects]
        return ListResult(items, "1", None)

    async def patch(self, name: str, body: dict[str, Any], *, namespace: str | None = None,
                    field_manager: str | None = None) -> dict[str, Any]:
        self.patching += 1
        try:
            await self.patch_gate.wait()
        except asyncio.CancelledError:
            self.patch_cancelled += 1
            raise
        if name in self.gone:
            raise NotFound(404, "NotFound", "gone")
        self.patched.append((name, body))
        return {}


def apis(*kinds: FakeKind) -> list[ResourceApi]:
    return [cast(ResourceApi, kind) for kind in kinds]


async def test_every_kind_is_listed_at_once_and_only_the_buckets_asked_for_are_labelled() -> None:
    one, two = child("a-secret", "a"), child("b-secret", "b")
    secrets, services = FakeKind([one, two]), FakeKind([child("a-svc", "a")])
    services.gone = {"a-svc"}  # deleted between the list and the patch
    bucket = bucket_of_child(one)
    assert bucket != bucket_of_child(two)
    run = asyncio.create_task(label_children(apis(secrets, services), [None], field_manager="op",
                                             buckets={bucket}))
    await eventually(lambda: secrets.listing and services.listing)  # both lists in flight together
    secrets.answer.set()
    services.answer.set()
    assert await run == 1
    assert secrets.patched == [("a-secret", {"metadata": {"labels": {BUCKET_LABEL: bucket}}})]


async def test_a_failed_list_ends_the_pass_and_cancels_the_rest() -> None:
    secrets, services = FakeKind([child("a-secret", "a")]), FakeKind([])
    secrets.patch_gate.clear()  # its patch hangs
    secrets.answer.set()
    run = asyncio.create_task(label_children(apis(secrets, services), [None], field_manager="op"))
    await eventually(lambda: services.listing and secrets.patching == 1)  # the secret's patch waits
    services.fail = ServerError(500, "InternalError", "etcd")
    services.answer.set()
    with pytest.raises(ServerError):
        await run
    assert secrets.patch_cancelled == 1 and secrets.patched == []


async def test_a_pass_cancelled_while_a_list_fails_ends_cancelled() -> None:
    failing = [FakeKind([]) for _ in range(3)]
    for kind in failing:
        kind.fail = ServerError(500, "InternalError", "etcd")
        kind.answer.set()
    run = asyncio.create_task(label_children(apis(*failing), [None], field_manager="op"))
    await eventually(lambda: all(kind.listing for kind in failing))  # the lists have started (and fail)
    run.cancel()  # a shutdown, as the failures end the pass: the cancellation must not be lost
    with pytest.raises(asyncio.CancelledError):
        await run
