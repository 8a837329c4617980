"""The pooler's pools paused around a switchover: decide/replicas/pooler_pause.py's decision sent to each ready pod of
the read-write pooler's Deployment (pg/pooler_admin.py; its pods listed live), in the replication step, before the
children step stops the old primary. A RESUME that some ready pod did not take keeps the record, so the next pass sends
it again; a PAUSE that did not get through lets the switchover go on (the clients of that pod see what they would see
without it).
"""

from __future__ import annotations

import asyncio

from sampledb_operator.decide.children.pooler import selector
from sampledb_operator.decide.replicas import pooler_pause as pp
from sampledb_operator.kube.errors import ApiError
from sampledb_operator.model import names
from sampledb_operator.model.objects import condition_true
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.sampledb_status import PoolerPause
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.pg import pooler_admin
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.pooler import secret_password

log = get_logger(__name__)


async def _ready_ips(ctx: Context, db: SampleDB) -> list[str]:
    """The read-write pooler's ready pods, read live (the caches hold the database pods only; this runs twice per
    switchover). None readable: none to send to."""
    wanted = ",".join(f"{k}={v}" for k, v in sorted(selector(db).items()))
    try:
        pods = (await ctx.apis["Pod"].list(db.metadata.namespace, label_selector=wanted)).items
    except ApiError as exc:
        log.info("listing the pooler's pods failed", namespace=db.metadata.namespace, name=db.metadata.name,
                 error=str(exc)[:200])
        return []
    return sorted(str(p["status"]["podIP"]) for p in pods if (p.get("status") or {}).get("podIP")
                  and not p["metadata"].get("deletionTimestamp") and condition_true(p, "Ready"))


async def reconcile_pause(ctx: Context, db: SampleDB, *, switchover_to: str | None) -> PoolerPause | None:
    """One pass: send what decide/replicas/pooler_pause.py says; the record to write. `switchover_to`: the target of the
    switchover running (None: none, or a failover)."""
    record = db.status.pooler_pause
    decision = pp.decide(pooler=db.spec.pooler is not None, switchover_to=switchover_to, record=record,
                         now=ctx.clock.now())
    if decision.action is pp.PauseAction.NONE:
        return decision.record
    password = secret_password(ctx.cached("Secret", db.metadata.namespace, names.pooler_name(db.metadata.name)))
    ips = await _ready_ips(ctx, db) if db.spec.pooler is not None else []
    statement = "PAUSE" if decision.action is pp.PauseAction.PAUSE else "RESUME"
    sent = await asyncio.gather(*(pooler_admin.command(ip, password, statement) for ip in ips)) \
        if password is not None else [False] * len(ips)
    pooler = names.pooler_name(db.metadata.name)
    if decision.action is pp.PauseAction.RESUME and not all(sent):
        return record  # again at the next pass
    if decision.action is pp.PauseAction.PAUSE:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal" if all(sent) else "Warning",
                        "PoolerPaused" if all(sent) else "PoolerPauseFailed",
                        f"{pooler}: {sum(sent)} of {len(ips)} ready pods paused their pools for the switchover to"
                        f" {switchover_to}")
    elif record is not None and record.paused_at is not None:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "PoolerResumed",
                        f"{pooler}: {len(ips)} ready pods resumed their pools"
                        f" {(ctx.clock.now() - record.paused_at).total_seconds():.1f} s after the pause")
    return decision.record
