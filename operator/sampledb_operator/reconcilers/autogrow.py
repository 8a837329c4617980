"""The autoGrow step: measure the primary's data file system, grow the data claims (decide/lifecycle/autogrow.py).

Reads the instances' data claims from the caches; measures with SQL on the primary (pg.data_filesystem: `df` run by the
server) when it is ready; writes one merge patch per data claim when a growth is decided (its size, and the full pods it
is for: decide/lifecycle/autogrow.GROWN_FOR_ANNOTATION), with a Normal Event StorageAutoGrown on the SampleDB and the
counter sampledb_storage_autogrowths_total. Once the claims have grown, deletes the full pods the growth was for
(decide/lifecycle/autogrow.restarts), with a Normal Event RestartedOnGrownVolume: they start again at once rather than
after the kubelet's crash-loop back-off. The children step never shrinks a claim back (decide/plan.never_shrink), so
spec.storage.size stays the smallest size. A refused patch (a class that cannot expand) is the Degraded reason
StorageAutoGrowFailed and a Warning Event, tried again at the next measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sampledb_operator.decide.lifecycle import autogrow
from sampledb_operator.kube.errors import ApiError
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability import metrics
from sampledb_operator.pg import client as pg
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.stuck import delete_pods
from sampledb_operator.reconcilers.superuser import credentials


@dataclass(frozen=True, slots=True)
class AutoGrown:
    """The step's outcome: a limit Problem for Degraded, and when to measure again (None: autoGrow is off)."""

    problems: tuple[Problem, ...] = ()
    recheck_after: float | None = None


async def reconcile_autogrow(ctx: Context, db: SampleDB, *, db_ready: bool, primary_pod: Obj | None,
                             full_pods: Sequence[Obj]) -> AutoGrown:
    """One pass of spec.storage.autoGrow (nothing without it)."""
    spec = db.spec.storage.auto_grow
    if spec is None:
        return AutoGrown()
    ns, name = db.metadata.namespace or "", db.metadata.name
    claims = [c for i in range(db.spec.replicas)
              if (c := ctx.cached("PersistentVolumeClaim", ns, names.instance_data_pvc_name(name, i))) is not None]
    usage = await _usage(ctx, db, primary_pod) if db_ready else None
    await delete_pods(ctx, db, autogrow.restarts(claims, full_pods), "RestartedOnGrownVolume", (
        "stopped because its volume was full; the volume has grown, so the pod was deleted to start again now rather"
        " than after the kubelet's crash-loop back-off"))
    growth = autogrow.decide(spec, claims, usage, full_pods)
    if growth.size is not None:
        size = autogrow.quantity(growth.size)
        patch = {"metadata": {"annotations": {autogrow.GROWN_FOR_ANNOTATION: ",".join(growth.full_pods) or None}},
                 "spec": {"resources": {"requests": {"storage": size}}}}
        try:
            for claim in claims:
                await ctx.apis["PersistentVolumeClaim"].patch(str(claim["metadata"]["name"]), patch, namespace=ns)
        except ApiError as exc:
            failed = Problem("StorageAutoGrowFailed", f"{growth.reason}, but the API server refused to grow a data"
                             f" claim (does its StorageClass allow volume expansion?): {exc}", "spec.storage")
            await ctx.event(db.metadata, API_VERSION, "SampleDB", "Warning", failed.reason, failed.message)
            return AutoGrown((failed,), autogrow.MEASURE_SECONDS)
        else:
            metrics.storage_autogrowths_total.inc()
            await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "StorageAutoGrown", growth.reason)
    return AutoGrown((growth.problem,) if growth.problem is not None else (), autogrow.MEASURE_SECONDS)


async def _usage(ctx: Context, db: SampleDB, primary_pod: Obj | None) -> autogrow.Usage | None:
    ip = ((primary_pod or {}).get("status") or {}).get("podIP")
    creds = credentials(ctx, db)
    if not ip or creds is None:
        return None
    text = await pg.data_filesystem(pg.Target(str(ip), names.POSTGRES_PORT, *creds))
    return autogrow.parse_df(text) if text is not None else None
