"""The application role step: the role `app` of a database whose superuser has a Secret of its own
(decide/children/desired_config.separate_superuser) gets the password of the credentials Secret, so that editing the
Secret's `password` rotates it (the Secret's `uri` follows by itself: reconcilers/tls.sync_connection_uri).

The hash of the credentials Secret's version (uid and resourceVersion) goes to status.appRoleApplied; a pass whose
hash is the recorded one sends no SQL. A change of the Secret after the first record is announced (Event
ApplicationPasswordApplied, never with the password). A refusal is Degraded (ApplicationRoleFailed, the server's
words) and retried after RETRY_SECONDS; a server that does not answer is asked again after a growing delay
(reconcilers/unanswered.py). A database whose application role is its superuser (an earlier layout) is left alone:
its password is the superuser's, which the instances hold.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide.children import desired as d
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.pg import app_role as pg_app_role
from sampledb_operator.pg import client as pg
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.superuser import credentials, decoded

RETRY_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class AppRoleOutcome:
    """status.appRoleApplied to write (None: as it is), problems, when to look again."""

    applied: str | None = None
    problems: tuple[Problem, ...] = ()
    recheck_after: float | None = None


def applied_hash(secret: Obj) -> str:
    """The credentials Secret's version, with the statements' version."""
    meta = secret.get("metadata") or {}
    return names.short_hash(pg_app_role.SQL_VERSION, str(meta.get("uid", "")), str(meta.get("resourceVersion", "")),
                            length=16)


async def reconcile_app_role(ctx: Context, db: SampleDB, *, db_ready: bool, primary_pod: Obj | None) -> AppRoleOutcome:
    """One pass of the application role step (see the module's docstring)."""
    if not db_ready or primary_pod is None:
        return AppRoleOutcome()
    secret = ctx.cached("Secret", db.metadata.namespace, names.secret_name(db.metadata.name))
    if secret is None or not d.separate_superuser(secret):
        return AppRoleOutcome()
    wanted = applied_hash(secret)
    if wanted == db.status.app_role_applied:
        return AppRoleOutcome()  # the common pass: recorded, nothing decoded
    ip = (primary_pod.get("status") or {}).get("podIP")
    creds = credentials(ctx, db)
    password = decoded(secret, d.SECRET_PASSWORD_KEY)
    if not ip or creds is None:
        return AppRoleOutcome()
    if not password:
        return AppRoleOutcome(problems=(Problem(
            "ApplicationRoleFailed", f"Secret {names.secret_name(db.metadata.name)} has no {d.SECRET_PASSWORD_KEY!r}:"
            " the application's password cannot be set", "status.secretName"),), recheck_after=RETRY_SECONDS)
    uid, now = db.metadata.uid or f"{db.metadata.namespace}/{db.metadata.name}", ctx.clock.monotonic()
    if not ctx.unanswered_app_role.due(uid, now):
        return AppRoleOutcome()  # asked a moment ago without an answer: its recheck comes back
    failed = await pg_app_role.apply(pg.Target(str(ip), names.POSTGRES_PORT, *creds), d.DEFAULT_USER, password)
    if failed is None:  # no server (fake nodes) or not listening yet: again after a growing delay
        _tries, again = ctx.unanswered_app_role.unanswered(uid, now)
        return AppRoleOutcome(recheck_after=again)
    ctx.unanswered_app_role.answered(uid)
    if failed:
        words = "; ".join(f"{part}: {why}" for part, why in sorted(failed.items()))
        return AppRoleOutcome(problems=(Problem("ApplicationRoleFailed", f"the role {d.DEFAULT_USER}: {words}",
                                                "status.secretName"),), recheck_after=RETRY_SECONDS)
    if db.status.app_role_applied is not None:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "ApplicationPasswordApplied",
                        f"the role {d.DEFAULT_USER} has the password of Secret {names.secret_name(db.metadata.name)}"
                        " (the Secret changed)")
    return AppRoleOutcome(applied=wanted)
