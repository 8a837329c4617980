"""Version upgrades of a SampleDB: read the facts, plan the pass (decide/upgrades/upgrade_step.py), apply the plan.

Reads where the upgrade stands from the caches (the StatefulSet, the data volume, the database's
upgrade, thaw and migrate Jobs, the attempt's pre-upgrade SampleDBBackup, upgrade, link and thaw
Jobs, whether the first instance's pod exists) and, live, the failed upgrade Jobs' result lines when
the plan needs them; applies the plan (the
backup or Job it asks for, with their Events), records the duration of an upgrade that has just
succeeded, and tells the SampleDB reconciler which version, image and data directory the
StatefulSet gets. Every decision, and every write, is in the plan.
"""

from __future__ import annotations

from dataclasses import replace

from sampledb_operator.decide.children.desired_inputs import Instance
from sampledb_operator.decide.upgrades import migrations as mig
from sampledb_operator.decide.upgrades import upgrade_step as step
from sampledb_operator.decide.upgrades.upgrade_step import UpgradeOutcome, current_data_dir, sts_version
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability import metrics
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of
from sampledb_operator.reconcilers.job_result import job_result

__all__ = ["UpgradeOutcome", "adopted_data_dir", "current_data_dir", "read_facts", "reconcile_upgrade", "stopped",
           "sts_version"]


def stopped(instances: tuple[Instance, ...]) -> tuple[Instance, ...]:
    """The instances with 0 replicas each: a link upgrade's old server is stopped (the one instance, 0)."""
    return tuple(Instance(i.index, replicas=0) for i in instances)


def adopted_data_dir(ctx: Context, db: SampleDB) -> str:
    """Before the StatefulSet exists: the directory the (cached) data volume records, else the default."""
    return step.adopted_data_dir(_data_volume(ctx, db))


def _data_volume(ctx: Context, db: SampleDB) -> Obj | None:
    return ctx.cached("PersistentVolumeClaim", db.metadata.namespace, names.data_pvc_name(db.metadata.name))


async def read_facts(ctx: Context, db: SampleDB, sts: Obj | None, sts_ready: bool,
                     major_blocked: str | None) -> step.UpgradeFacts:
    """What one pass of the upgrade step reads: the caches, and the failed Job's result line when needed."""
    ns = db.metadata.namespace
    upgrade_jobs = [job for selector in step.job_selectors(db) for job in ctx.caches.jobs.list(ns, selector)]
    migrate_jobs = ctx.caches.jobs.list(ns, mig.job_selector(db))
    facts = step.UpgradeFacts(
        db=db, statefulset=sts, statefulset_ready=sts_ready, data_volume=_data_volume(ctx, db),
        major_blocked=major_blocked, upgrade_jobs=tuple(upgrade_jobs), migrate_jobs=tuple(migrate_jobs),
        now=ctx.clock.now())
    attempt = step.attempt_of(db)
    if attempt is not None:
        pod = ctx.cached("Pod", ns, names.instance_pod_name(db.metadata.name, 0))
        facts = replace(facts, backup=ctx.cached("SampleDBBackup", ns, attempt.backup),
                        job=ctx.cached("Job", ns, attempt.job), thaw=ctx.cached("Job", ns, attempt.thaw),
                        link_job=ctx.cached("Job", ns, attempt.link), pod_exists=pod is not None)
        for failed_job in step.result_read_needed(facts):
            result = await job_result(ctx, ns or "", failed_job)
            facts = (replace(facts, link_result=result) if failed_job == attempt.link
                     else replace(facts, job_result=result))
    return facts


async def reconcile_upgrade(ctx: Context, db: SampleDB, sts: Obj | None, sts_ready: bool,
                            major_blocked: str | None = None) -> UpgradeOutcome:
    """One pass of the upgrade step; `major_blocked` (why a major upgrade cannot run now) holds one back."""
    planned = step.plan_upgrade_step(await read_facts(ctx, db, sts, sts_ready, major_blocked))
    await apply_plan(ctx, subject_of(db), planned.plan)
    if planned.duration is not None:
        metrics.upgrade_duration_seconds.labels(kind=planned.kind.value).observe(planned.duration)
    return planned.outcome
