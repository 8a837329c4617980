"""Finished Jobs of a SampleDB expire once the operator no longer needs them (decide/job_ttl.py).

One merge patch of spec.ttlSecondsAfterFinished per Job, once; the status read by the pass is the
proof that its outcome is recorded, so a status not yet written keeps the Job.
"""

from __future__ import annotations

import contextlib

from sampledb_operator.decide import job_ttl as ttl
from sampledb_operator.decide.status import job_state
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context

log = get_logger(__name__)


async def expire_finished_jobs(ctx: Context, db: SampleDB) -> None:
    """Set ttlSecondsAfterFinished on this database's finished Jobs whose outcome the status holds."""
    for job in ctx.caches.jobs.by_owner(db.metadata.uid or ""):
        state = job_state(job)
        if state is None or not state.finished or "ttlSecondsAfterFinished" in (job.get("spec") or {}):
            continue
        if not ttl.outcome_recorded(db, job):
            continue
        name = str(job["metadata"]["name"])
        with contextlib.suppress(NotFound):
            await ctx.apis["Job"].patch(name, {"spec": {"ttlSecondsAfterFinished": ttl.FINISHED_JOB_TTL_SECONDS}},
                                        namespace=db.metadata.namespace)
            log.info("finished job expires", namespace=db.metadata.namespace, job=name,
                     ttl=ttl.FINISHED_JOB_TTL_SECONDS)
