"""The one-off fault of a `sampledb.io/chaos: <fault>` annotation (chaos/faults.py says which faults).

Invariants: the annotation is removed before the fault is injected, by a merge patch conditional
on the SampleDB's resourceVersion, so a fault runs at most once per annotation even across
operator restarts (a stale pass's removal is refused and injects nothing); the fault touches only
the annotated database's objects, and the operator's children are read from the informer caches
(no get on Services, ConfigMaps, StatefulSets); the outcome is an Event on the SampleDB (ChaosInjected,
ChaosSkipped, or a Warning ChaosRefused/ChaosFailed); nothing waits for recovery.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from sampledb_operator.chaos.faults import ANNOTATION, annotation_request
from sampledb_operator.chaos.inject import Api, Executor, Injector
from sampledb_operator.chaos.plan import Target
from sampledb_operator.chaos.report import INJECTED, SKIPPED
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.kube.exec import exec_in_pod
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context

log = get_logger(__name__)
EXEC_TIMEOUT = 30.0
CACHED_KINDS = ("Service", "ConfigMap", "StatefulSet")


class _CachedGet:
    """get() from the informer cache, list() and delete() through the API."""

    def __init__(self, ctx: Context, kind: str) -> None:
        self.ctx, self.kind, self.api = ctx, kind, ctx.apis[kind]

    async def get(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        obj = self.ctx.cached(self.kind, namespace, name)
        if obj is None:
            raise NotFound(404, "NotFound", f"{self.kind} {name} is not in the cache")
        return obj

    async def list(self, namespace: str | None = None, *, label_selector: str | None = None,
                   continue_token: str | None = None) -> Any:
        return await self.api.list(namespace, label_selector=label_selector, continue_token=continue_token)

    async def delete(self, name: str, namespace: str | None = None, *, preconditions: dict[str, Any] | None = None,
                     grace_period_seconds: int | None = None) -> Any:
        return await self.api.delete(name, namespace, preconditions=preconditions,
                                     grace_period_seconds=grace_period_seconds)


async def reconcile_chaos(ctx: Context, db: SampleDB, *, executor: Executor | None = None) -> None:
    """Inject the fault the annotation asks for, once; record it as an Event."""
    request = annotation_request(db.metadata.annotations)
    if request is None:
        return
    namespace, name = db.metadata.namespace or "", db.metadata.name
    patch = {"metadata": {"resourceVersion": db.metadata.resource_version, "annotations": {ANNOTATION: None}}}
    try:
        await ctx.apis["SampleDB"].patch(name, patch, namespace=namespace)
    except (Conflict, NotFound):
        return  # a newer object (its pass decides) or none at all
    if request.fault is None:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Warning", "ChaosRefused",
                        f"annotation {ANNOTATION}={request.value}: {request.refusal}")
        return
    target = Target(namespace, name)
    run = executor if executor is not None else partial(exec_in_pod, ctx.client, timeout=EXEC_TIMEOUT)
    apis: dict[str, Api] = {**ctx.apis, **{kind: _CachedGet(ctx, kind) for kind in CACHED_KINDS}}
    injection = await Injector(apis, run, [target]).inject(request.fault, target)
    log.info("chaos annotation", sampledb=str(target), fault=request.fault.value, outcome=injection.outcome,
             target=injection.target, detail=injection.detail)
    what = f"{request.fault.value}: {injection.outcome}" + (f" {injection.target}" if injection.target else "") + \
        (f" ({injection.detail})" if injection.detail else "")
    if injection.outcome == INJECTED:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "ChaosInjected", what)
    elif injection.outcome == SKIPPED:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "ChaosSkipped", what)
    else:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Warning", "ChaosFailed", what)
