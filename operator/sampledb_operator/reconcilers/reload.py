"""Applying spec.parameters edits by a reload (decide/reload.py decides; this module acts).

One pass reads the reload Job of the wanted parameters from the cache, asks decide/reload.py for
the step and takes it: create the Job, or hand the hash to record (status.appliedParameters) and
the problem to report (Degraded) back to the SampleDB reconciler, which writes the status. The Job's
result line names the settings that still wait for a restart; an event says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide import desired as d
from sampledb_operator.decide import pgconfig
from sampledb_operator.decide import reload as rl
from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.status import job_state
from sampledb_operator.kube.errors import Conflict
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.job_result import job_result

log = get_logger(__name__)
MESSAGE_LIMIT = 900


@dataclass(frozen=True, slots=True)
class ReloadOutcome:
    applied: str | None = None  # the new status.appliedParameters, None = unchanged
    degraded: tuple[Problem, ...] = ()


async def reconcile_reload(ctx: Context, db: SampleDB, *, db_ready: bool, busy: bool,
                           statefulset_existed: bool) -> ReloadOutcome:
    """One pass of the reload step (`busy`: an upgrade is in progress; `statefulset_existed`: the
    StatefulSet was in the cache before this pass applied the children)."""
    wanted = pgconfig.parameters_hash(db.spec.parameters, synchronous=d.synchronous(db))
    ns = db.metadata.namespace or ""
    job_name = names.reload_job_name(db.metadata.name, db.metadata.uid or "", wanted)
    job = ctx.cached("Job", ns, job_name)
    decision = rl.decide(rl.ReloadInput(wanted=wanted, applied=db.status.applied_parameters, db_ready=db_ready,
                                        busy=busy, job=job_state(job), statefulset_exists=statefulset_existed))
    if decision.step is rl.Step.RECORD_NEW:
        return ReloadOutcome(applied=wanted)
    if decision.step is rl.Step.CREATE_JOB:
        try:
            await ctx.apis["Job"].create(rl.reload_job(db, wanted))
            await _event(ctx, db, "Normal", "ReloadingParameters", f"reloading spec.parameters with Job {job_name}")
        except Conflict:
            pass  # created by an earlier pass whose watch event has not arrived yet
        return ReloadOutcome()
    if decision.step is rl.Step.RECORD:
        result = await job_result(ctx, ns, job_name)
        pending = [str(p) for p in result.get("pending_restart") or []]
        message = "spec.parameters reloaded"
        if pending:
            message += f"; {', '.join(pending)} take effect when the pod restarts"
        await _event(ctx, db, "Normal", "ParametersReloaded", message)
        return ReloadOutcome(applied=wanted)
    if decision.step is rl.Step.FAILED:
        result = await job_result(ctx, ns, job_name)
        detail = str(result.get("message") or decision.reason)[:MESSAGE_LIMIT]
        return ReloadOutcome(degraded=(Problem(
            "ParametersNotApplied",
            f"reload Job {job_name} failed: {detail}; fix spec.parameters (or delete the Job to retry)",
            "spec.parameters"),))
    return ReloadOutcome()


async def _event(ctx: Context, db: SampleDB, type_: EventType, reason: str, message: str) -> None:
    await ctx.event(db.metadata, API_VERSION, "SampleDB", type_, reason, message)
