"""The monitoring step: with spec.monitoring.enabled, the exporters' role (pg/monitoring.py) on the ready primary.

The role's hash (the SQL's version and the primary pod's uid, so a new primary, a restore or a recovery makes sure
of it again) goes to status.monitoringApplied; a pass whose hash is the recorded one sends no SQL. A refusal is
Degraded (MonitoringSetupFailed, the server's words) and retried after RETRY_SECONDS; a server that does not
answer (not listening yet, or none at all, as on fake nodes) is asked again after a growing delay
(reconcilers/unanswered.py, as the TLS question), so it costs a connection attempt every few minutes at most.
Until the role exists the exporters answer with pg_up 0. The exporter containers are the children step's
(decide/children/exporter.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.pg import client as pg
from sampledb_operator.pg import monitoring as pg_monitoring
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.superuser import credentials

RETRY_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class MonitoringOutcome:
    """status.monitoringApplied to write (None: as it is), problems, when to look again."""

    applied: str | None = None
    problems: tuple[Problem, ...] = ()
    recheck_after: float | None = None


def applied_hash(primary_pod: Obj) -> str:
    uid = str((primary_pod.get("metadata") or {}).get("uid", ""))
    return names.short_hash(pg_monitoring.SQL_VERSION, uid, length=16)


async def reconcile_monitoring(ctx: Context, db: SampleDB, *, db_ready: bool,
                               primary_pod: Obj | None) -> MonitoringOutcome:
    """One pass of the monitoring step (see the module's docstring)."""
    if not db.spec.monitoring.enabled or not db_ready or primary_pod is None:
        return MonitoringOutcome()
    ip = (primary_pod.get("status") or {}).get("podIP")
    creds = credentials(ctx, db)
    wanted = applied_hash(primary_pod)
    if not ip or creds is None or wanted == db.status.monitoring_applied:
        return MonitoringOutcome()
    uid, now = db.metadata.uid or f"{db.metadata.namespace}/{db.metadata.name}", ctx.clock.monotonic()
    if not ctx.unanswered_monitoring.due(uid, now):
        return MonitoringOutcome()  # asked a moment ago without an answer: its recheck comes back
    failed = await pg_monitoring.apply(pg.Target(str(ip), names.POSTGRES_PORT, *creds))
    if failed is None:  # no server (fake nodes) or not listening yet: again after a growing delay
        _tries, again = ctx.unanswered_monitoring.unanswered(uid, now)
        return MonitoringOutcome(recheck_after=again)
    ctx.unanswered_monitoring.answered(uid)
    if failed:
        words = "; ".join(f"{part}: {why}" for part, why in sorted(failed.items()))
        return MonitoringOutcome(problems=(Problem("MonitoringSetupFailed", f"the exporters' role: {words}",
                                                   "spec.monitoring"),), recheck_after=RETRY_SECONDS)
    return MonitoringOutcome(applied=wanted)
