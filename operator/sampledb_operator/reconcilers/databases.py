"""The databases step: spec.databases applied to the primary (decide/sql/databases.py decides, pg/databases.py talks to
the server).

Runs only for a database with declared databases (or ones it declared before: their status turns Retained), once
the SampleDB is ready, after the roles step (an owner declared in spec.roles exists by then). The databases as
written make `applied_hash`; a pass whose hash is the one status.databasesApplied records sends no SQL. A failed pass
(a statement the server refused, no answer) records no hash and looks again after RETRY_SECONDS; each failed
database is Degraded (DatabaseFailed) with the server's words. Events: DatabasesApplied (the databases a pass
created, changed or dropped).
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide.sql import databases as decide_databases
from sampledb_operator.model import names
from sampledb_operator.model.databases import DatabaseState, DatabaseStatus
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.pg import client as pg
from sampledb_operator.pg import databases as pg_databases
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.superuser import credentials

RETRY_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class DatabasesOutcome:
    """status.databases and status.databasesApplied to write (None: as they are), problems, when to look again, and
    whether a database was dropped (a role that owned it may be dropped now)."""

    statuses: tuple[DatabaseStatus, ...] | None = None
    applied: str | None = None
    problems: tuple[Problem, ...] = ()
    recheck_after: float | None = None
    dropped: bool = False


def _problems(statuses: tuple[DatabaseStatus, ...]) -> tuple[Problem, ...]:
    return tuple(Problem("DatabaseFailed", f"database {s.name}: {s.message}", "spec.databases")
                 for s in statuses if s.state is DatabaseState.FAILED)


async def reconcile_databases(ctx: Context, db: SampleDB, *, db_ready: bool,
                              primary_pod: Obj | None) -> DatabasesOutcome:
    """One pass of spec.databases (see the module's docstring)."""
    declared = db.spec.databases or []
    if not declared and not db.status.databases:
        return DatabasesOutcome()
    invalid = decide_databases.problems(declared)
    if invalid:
        return DatabasesOutcome(problems=tuple(invalid))
    kept = _problems(tuple(db.status.databases))
    wanted = decide_databases.applied_hash(declared)
    ip = ((primary_pod or {}).get("status") or {}).get("podIP")
    creds = credentials(ctx, db)
    if not db_ready or not ip or creds is None or wanted == db.status.databases_applied:
        return DatabasesOutcome(problems=kept)
    target = pg.Target(str(ip), names.POSTGRES_PORT, *creds)
    observed = await pg_databases.observe(target, [d.name for d in declared])
    ops = decide_databases.plan(declared, observed) if observed is not None else []
    failed = await pg_databases.apply(target, ops) if ops else {}
    if observed is None or failed is None:
        return DatabasesOutcome(problems=kept, recheck_after=RETRY_SECONDS)  # no answer: as it was, and again soon
    statuses = tuple(decide_databases.statuses(declared, db.status.databases, failed))
    changed = sorted({o.database for o in ops} - set(failed))
    if changed:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "DatabasesApplied",
                        f"databases created, changed or dropped as spec.databases says: {', '.join(changed)}")
    bad = _problems(statuses)
    return DatabasesOutcome(statuses=statuses, applied=None if bad else wanted, problems=bad,
                            recheck_after=RETRY_SECONDS if bad else None,
                            dropped=any(o.kind == "drop" and o.database not in failed for o in ops))
