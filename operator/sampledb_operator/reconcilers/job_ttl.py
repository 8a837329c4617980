"""Finished Jobs of a SampleDB expire once the operator no longer needs them: read the facts, plan
(decide/job_ttl.py), apply.

One merge patch of spec.ttlSecondsAfterFinished per Job, once; the status the pass wrote is the
proof that its outcome is recorded, so a status not yet written keeps the Job. A Job gone meanwhile
is skipped (NotFound). Nothing is decided here.
"""

from __future__ import annotations

from sampledb_operator.decide import job_ttl as ttl
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of

log = get_logger(__name__)


def read_facts(ctx: Context, db: SampleDB) -> ttl.ExpiryFacts:
    """What one pass of the expiry reads: the database's Jobs, from the cache."""
    return ttl.ExpiryFacts(db=db, jobs=tuple(ctx.caches.jobs.by_owner(db.metadata.uid or "")))


async def expire_finished_jobs(ctx: Context, db: SampleDB) -> None:
    """Set ttlSecondsAfterFinished on this database's finished Jobs whose outcome the status holds."""
    applied = await apply_plan(ctx, subject_of(db), ttl.plan_expiry(read_facts(ctx, db)))
    for _kind, name in applied.patched:
        log.info("finished job expires", namespace=db.metadata.namespace, job=name, ttl=ttl.FINISHED_JOB_TTL_SECONDS)
