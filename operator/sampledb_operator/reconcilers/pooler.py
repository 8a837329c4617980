"""The pooler step: with spec.pooler, the pooler's Secret and, on the ready primary, its role and lookup function.

The Secret `<name>-pooler` (keys `password` and PgBouncer's `userlist.txt` of that one role) is created once with a
random password and never rewritten; it is owned by the SampleDB, labelled `pooler-auth` (not the pooler's
component, so it is never pruned while the pooler runs). The role and the function (pg/pooler.py) are made on the
primary once it is ready; their hash (the SQL's version and the Secret's uid and resourceVersion) goes to
status.poolerApplied, and a pass whose hash is the recorded one sends no SQL. A refusal is Degraded
(PoolerSetupFailed, the server's words) and retried after RETRY_SECONDS, as is a server that does not answer.
The password is never logged, put in an Event or in the status. The Deployment, its ConfigMap and Service are the
children step's (decide/children/pooler.py).
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, replace

from sampledb_operator.decide.children import pooler as dp
from sampledb_operator.decide.labels import meta
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition, ConditionType, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.pg import client as pg
from sampledb_operator.pg import pooler as pg_pooler
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.superuser import credentials

RETRY_SECONDS = 30.0
PASSWORD_BYTES = 24
AUTH_COMPONENT = "pooler-auth"


@dataclass(frozen=True, slots=True)
class PoolerOutcome:
    """status.poolerApplied to write (None: as it is), problems, when to look again."""

    applied: str | None = None
    problems: tuple[Problem, ...] = ()
    recheck_after: float | None = None
    condition: Condition | None = None  # PoolerReady


def _condition(ctx: Context, db: SampleDB, applied: str | None) -> Condition | None:
    ns, name = db.metadata.namespace or "", names.pooler_name(db.metadata.name)
    had = get_condition(db.status.conditions, ConditionType.POOLER_READY.value) is not None
    recorded = applied or db.status.pooler_applied
    return dp.condition(db, ctx.cached("Deployment", ns, name), applied=recorded is not None, had=had,
                        read_only=ctx.cached("Deployment", ns, names.read_only_pooler_name(db.metadata.name)))


def secret_body(db: SampleDB, password: str) -> Obj:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": meta(db, names.pooler_name(db.metadata.name), AUTH_COMPONENT),
            "data": {dp.PASSWORD_KEY: b64(password), dp.USERLIST_KEY: b64(dp.userlist(password))}}


async def ensure_secret(ctx: Context, db: SampleDB) -> Obj | None:
    """The pooler's Secret, created when missing; None when it cannot be read back yet."""
    ns, name = db.metadata.namespace or "", names.pooler_name(db.metadata.name)
    found = ctx.cached("Secret", ns, name)
    if found is not None:
        return found
    try:
        return await ctx.apis["Secret"].create(secret_body(db, secrets.token_urlsafe(PASSWORD_BYTES)), ns)
    except Conflict:  # made by an earlier pass whose watch event has not arrived yet
        try:
            return await ctx.apis["Secret"].get(name, ns)
        except NotFound:
            return None


def secret_password(secret: Obj | None) -> str | None:
    """The pooler role's password from its Secret (None: no Secret, or no readable password in it)."""
    try:
        return base64.b64decode(((secret or {}).get("data") or {})[dp.PASSWORD_KEY]).decode()
    except (KeyError, ValueError):
        return None


def applied_hash(secret: Obj) -> str:
    meta_ = secret.get("metadata") or {}
    return names.short_hash(pg_pooler.SQL_VERSION, str(meta_.get("uid", "")), str(meta_.get("resourceVersion", "")),
                            length=16)


async def reconcile_pooler(ctx: Context, db: SampleDB, *, db_ready: bool, primary_pod: Obj | None) -> PoolerOutcome:
    """One pass of the pooler step (see the module's docstring)."""
    out = await _step(ctx, db, db_ready=db_ready, primary_pod=primary_pod)
    return replace(out, condition=_condition(ctx, db, out.applied))


async def _step(ctx: Context, db: SampleDB, *, db_ready: bool, primary_pod: Obj | None) -> PoolerOutcome:
    if db.spec.pooler is None:
        return PoolerOutcome()
    secret = await ensure_secret(ctx, db)
    ip = ((primary_pod or {}).get("status") or {}).get("podIP")
    creds = credentials(ctx, db)
    if secret is None or not db_ready or not ip or creds is None:
        return PoolerOutcome(recheck_after=RETRY_SECONDS if secret is None else None)
    wanted = applied_hash(secret)
    if wanted == db.status.pooler_applied:
        return PoolerOutcome()
    password = secret_password(secret)
    if password is None:
        return PoolerOutcome(problems=(Problem(
            "PoolerSetupFailed", f"Secret {names.pooler_name(db.metadata.name)} has no password: delete it, the"
            " operator makes a new one", "spec.pooler"),), recheck_after=RETRY_SECONDS)
    failed = await pg_pooler.apply(pg.Target(str(ip), names.POSTGRES_PORT, *creds), password)
    if failed is None:
        return PoolerOutcome(recheck_after=RETRY_SECONDS)
    if failed:
        words = "; ".join(f"{part}: {why}" for part, why in sorted(failed.items()))
        return PoolerOutcome(problems=(Problem("PoolerSetupFailed", f"the pooler's role or lookup function: {words}",
                                               "spec.pooler"),), recheck_after=RETRY_SECONDS)
    return PoolerOutcome(applied=wanted)
