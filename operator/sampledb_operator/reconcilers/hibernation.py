"""The hibernation step: the I/O around decide/replicas/hibernation.py.

`asked` reads the annotation and what a hibernation asked for must wait for (the database's unfinished
Jobs from the cache, and its status); `stop` sets every instance StatefulSet of the database to 0 replicas (a merge
patch of spec.replicas only: the template, the claims and everything else stay) and says how many of its pods are
not gone yet. While a database hibernates, the SampleDB pass does nothing else (no failover, no backup, no apply of
the other children): its status says Hibernated (decide/status.py). On wake the pass is the usual one, and the
desired StatefulSets (1 replica each) start the instances again.
"""

from __future__ import annotations

from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.decide.replicas import hibernation
from sampledb_operator.decide.status import job_state
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.replication import instance_statefulsets, reconcile_replication


def active_jobs(ctx: Context, db: SampleDB) -> list[str]:
    """The database's Jobs (any component: init, backups, base backups, verifications...) that have not finished."""
    jobs = ctx.caches.jobs.list(db.metadata.namespace, {DATABASE_LABEL: db.metadata.name})
    out = []
    for job in jobs:
        state = job_state(job)
        if state is not None and not state.finished:
            out.append(str(job["metadata"]["name"]))
    return out


def asked(ctx: Context, db: SampleDB) -> tuple[bool | Problem, str | None]:
    """Whether the annotation asks for hibernation (or why its value is refused), and what a requested hibernation
    waits for now (None: the instances can stop)."""
    wanted = hibernation.requested(db.metadata.annotations)
    return wanted, (hibernation.must_wait(db.status, active_jobs(ctx, db)) if wanted is True else None)


async def _scale(ctx: Context, db: SampleDB, replicas: int) -> list[str]:
    """Every instance StatefulSet of `db` not at `replicas` set to it (a merge patch of spec.replicas only); returns
    the names of those it set."""
    ns = db.metadata.namespace or ""
    scaled = []
    for _index, sts in sorted(instance_statefulsets(ctx, db).items()):
        if (sts.get("spec") or {}).get("replicas") == replicas:
            continue
        name = str(sts["metadata"]["name"])
        try:
            await ctx.apis["StatefulSet"].patch(name, {"spec": {"replicas": replicas}}, namespace=ns)
        except NotFound:
            continue
        scaled.append(name)
    return scaled


async def start_for_snapshot(ctx: Context, db: SampleDB) -> None:
    """A hibernated database deleted with the Snapshot policy: its final snapshot needs a running server, so every
    instance starts again (StatefulSets at 1) and the replication step labels the primary (the Services select it by
    that label; the deletion passes run no other step). No failover meanwhile (`starting`)."""
    started = await _scale(ctx, db, 1)
    if started:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "WakingForSnapshot", (
            f"the database is hibernated and deleted with the Snapshot policy: starting {', '.join(started)} to take"
            " the final snapshot"))
    await reconcile_replication(ctx, db, starting=True)


async def stop(ctx: Context, db: SampleDB) -> int:
    """Every instance StatefulSet at 0 replicas (an Event Hibernating the first time one is set); returns the
    number of the database's pods that still exist (stopping)."""
    stopped = await _scale(ctx, db, 0)
    if stopped:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "Hibernating", (
            f"{hibernation.HIBERNATION_ANNOTATION}={hibernation.ON}: stopping every instance ({', '.join(stopped)}"
            " to 0 replicas); volumes, Services and Secrets are kept"))
    return len(ctx.caches.pods.list(db.metadata.namespace, {DATABASE_LABEL: db.metadata.name,
                                                           COMPONENT_LABEL: "database"}))
