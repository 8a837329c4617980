"""Applying spec.parameters edits by a reload: read the facts, plan the pass (decide/upgrades/reload.py), apply it.

One pass reads the reload Job of the wanted parameters from the cache (and, live, its result line
once it has finished), and applies the plan: the Job with its Event, or the ParametersReloaded
Event. The outcome hands the hash to record (status.appliedParameters) and the problem to report
(Degraded) back to the SampleDB reconciler, which writes the status. Nothing is decided here.
"""

from __future__ import annotations

from dataclasses import replace

from sampledb_operator.decide.labels import COMPONENT_LABEL
from sampledb_operator.decide.status import job_state
from sampledb_operator.decide.upgrades import reload as rl
from sampledb_operator.decide.upgrades.reload import ReloadOutcome
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of
from sampledb_operator.reconcilers.job_result import job_result

__all__ = ["ReloadOutcome", "read_facts", "reconcile_reload"]


async def read_facts(ctx: Context, db: SampleDB, *, db_ready: bool, busy: bool,
                     statefulset_existed: bool) -> rl.ReloadFacts:
    """What one pass of the reload step reads: the Job from the cache, and its result line (live) only
    once it has finished; every reload Job of the database (which one reloaded the server last)."""
    ns, name = db.metadata.namespace or "", rl.job_name(db)
    jobs = tuple(j for j in ctx.caches.jobs.by_owner(db.metadata.uid or "")
                 if ((j.get("metadata") or {}).get("labels") or {}).get(COMPONENT_LABEL) == rl.COMPONENT)
    facts = rl.ReloadFacts(db=db, db_ready=db_ready, busy=busy, statefulset_existed=statefulset_existed,
                           job=job_state(ctx.cached("Job", ns, name)), jobs=jobs)
    if rl.result_read_needed(facts):
        facts = replace(facts, job_result=await job_result(ctx, ns, name))
    return facts


async def reconcile_reload(ctx: Context, db: SampleDB, *, db_ready: bool, busy: bool,
                           statefulset_existed: bool) -> ReloadOutcome:
    """One pass of the reload step (`busy`: an upgrade is in progress; `statefulset_existed`: the
    StatefulSet was in the cache before this pass applied the children)."""
    facts = await read_facts(ctx, db, db_ready=db_ready, busy=busy, statefulset_existed=statefulset_existed)
    planned = rl.plan_reload(facts)
    await apply_plan(ctx, subject_of(db), planned.plan)
    return planned.outcome
