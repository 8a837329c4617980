"""The one-off fault of a `sampledb.io/chaos: <fault>` annotation (chaos/faults.py says which faults):
read the request, plan (decide/chaos.py), apply, inject, report.

Invariants: nothing is injected unless the operator was started with `--chaos-annotation`
(ctx.chaos_annotation, off by default; manifests/components/chaos turns it on with the grants the
faults need); while it is off an annotation is removed and answered by a Warning ChaosDisabled.
The annotation is removed before the fault is injected, by a merge patch conditional on the
SampleDB's resourceVersion, so a fault runs at most once per annotation even across operator
restarts (a stale pass's removal is refused and injects nothing); the fault touches only the
annotated database's objects, and the operator's children are read from the informer caches (no
get on Services, ConfigMaps, StatefulSets); the outcome is an Event on the SampleDB (ChaosInjected,
ChaosSkipped, or a Warning ChaosDisabled/ChaosRefused/ChaosFailed); nothing waits for recovery. What
to do, the removal and the Events are the plans of decide/chaos.py; the fault's own I/O is done here.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from sampledb_operator.chaos.faults import Fault, annotation_request
from sampledb_operator.chaos.inject import Api, Executor, Injector
from sampledb_operator.chaos.plan import Target
from sampledb_operator.decide import chaos as dc
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.kube.exec import exec_in_pod
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of

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


def read_facts(db: SampleDB, *, enabled: bool) -> dc.ChaosFacts:
    """What the pass reads: the request of the SampleDB's chaos annotation (None: there is none), and
    whether the operator acts on it (`enabled`: its --chaos-annotation setting)."""
    request = annotation_request(db.metadata.annotations)
    if request is None:
        return dc.ChaosFacts(db=db, request=None, enabled=enabled)
    fault = request.fault.value if request.fault is not None else None
    return dc.ChaosFacts(db=db, request=dc.ChaosRequest(request.value, fault, request.refusal), enabled=enabled)


async def reconcile_chaos(ctx: Context, db: SampleDB, *, executor: Executor | None = None) -> None:
    """Inject the fault the annotation asks for, once, when the setting is on; record it as an Event."""
    planned = dc.plan_chaos(read_facts(db, enabled=ctx.chaos_annotation))
    subject = subject_of(db)
    applied = await apply_plan(ctx, subject, planned.plan)
    if planned.inject is None or ("SampleDB", db.metadata.name) not in applied.patched:
        return  # refused, or not removed by this pass (a newer object's pass decides, or it is gone)
    target = Target(db.metadata.namespace or "", db.metadata.name)
    run = executor if executor is not None else partial(exec_in_pod, ctx.client, timeout=EXEC_TIMEOUT)
    apis: dict[str, Api] = {**ctx.apis, **{kind: _CachedGet(ctx, kind) for kind in CACHED_KINDS}}
    injection = await Injector(apis, run, [target]).inject(Fault(planned.inject), target)
    log.info("chaos annotation", sampledb=str(target), fault=planned.inject, outcome=injection.outcome,
             target=injection.target, detail=injection.detail)
    await apply_plan(ctx, subject, dc.plan_report(dc.Injection(planned.inject, injection.outcome, injection.target,
                                                               injection.detail)))
