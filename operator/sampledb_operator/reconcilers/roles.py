"""The roles step: spec.roles applied to the primary (decide/sql/roles.py decides, pg/roles.py talks to the server).

Runs only for a database with declared roles (or roles it declared before: their status turns Retained), once the
database is ready. The password Secrets are read live (they are the user's: outside the label-selected cache) and
looked at again every SECRET_RECHECK_SECONDS (a rotation is applied within that); their versions and the roles as
written make `applied_hash`, and a pass whose hash is the one status.rolesApplied records sends no SQL. A failed
pass (a statement the server refused, a missing Secret, no answer) records no hash and looks again after
RETRY_SECONDS; each failed role is Degraded (RoleFailed) with the server's words. Events: RolesApplied (the roles a
pass changed), never with a password. With roles that log in by certificate, the hash is recorded only once every
ready instance runs the pg_hba.conf line that admits them (pg/roles.hba_loaded makes each reload when its copy of
the file is newer; looked at again every HBA_RECHECK_SECONDS until then).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from sampledb_operator.decide.sql import roles as decide_roles
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.roles import CERTIFICATE_GROUP, Ensure, Password, RoleState, RoleStatus
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.pg import client as pg
from sampledb_operator.pg import roles as pg_roles
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.superuser import credentials, ready_instances

RETRY_SECONDS = 30.0
HBA_RECHECK_SECONDS = 10.0  # roles that log in by certificate: the instances' pg_hba.conf looked at again this soon
SECRET_RECHECK_SECONDS = 30.0  # the password Secrets are not watched: a rotation is found within this


@dataclass(frozen=True, slots=True)
class RolesOutcome:
    """status.roles and status.rolesApplied to write (None: as they are), problems, when to look again."""

    statuses: tuple[RoleStatus, ...] | None = None
    applied: str | None = None
    problems: tuple[Problem, ...] = ()
    recheck_after: float | None = None


async def _passwords(ctx: Context, db: SampleDB) -> tuple[dict[str, Password | None], dict[str, str]]:
    passwords: dict[str, Password | None] = {}
    missing: dict[str, str] = {}
    for role in db.spec.roles or []:
        ref = role.password_secret
        if role.ensure is Ensure.ABSENT or ref is None:
            continue
        try:
            secret: Obj | None = await ctx.apis["Secret"].get(ref.name, db.metadata.namespace)
        except NotFound:
            secret = None
        raw = ((secret or {}).get("data") or {}).get(ref.key)
        if secret is None or raw is None:
            missing[role.name] = f"Secret {ref.name} with key {ref.key!r} (its password) does not exist"
            passwords[role.name] = None
            continue
        version = f"{secret['metadata'].get('uid', '')}/{secret['metadata'].get('resourceVersion', '')}"
        passwords[role.name] = Password(version, base64.b64decode(raw).decode(errors="replace"))
    return passwords, missing


def _problems(statuses: tuple[RoleStatus, ...]) -> tuple[Problem, ...]:
    return tuple(Problem("RoleFailed", f"role {s.name}: {s.message}", "spec.roles")
                 for s in statuses if s.state is RoleState.FAILED)


async def reconcile_roles(ctx: Context, db: SampleDB, *, db_ready: bool, primary_pod: Obj | None) -> RolesOutcome:
    """One pass of spec.roles (see the module's docstring)."""
    declared_roles = db.spec.roles or []
    if not declared_roles and not db.status.roles:
        return RolesOutcome()
    invalid = decide_roles.problems(declared_roles, tls_enabled=db.spec.tls.enabled)
    if invalid:
        return RolesOutcome(problems=tuple(invalid))
    kept = _problems(tuple(db.status.roles))
    ip = ((primary_pod or {}).get("status") or {}).get("podIP")
    creds = credentials(ctx, db)
    if not db_ready or not ip or creds is None:
        return RolesOutcome(problems=kept)
    passwords, missing = await _passwords(ctx, db)
    look_again = SECRET_RECHECK_SECONDS if any(r.password_secret for r in declared_roles) else None
    wanted = decide_roles.applied_hash(declared_roles, passwords)
    if wanted == db.status.roles_applied and not missing:
        return RolesOutcome(problems=kept, recheck_after=look_again)
    target = pg.Target(str(ip), names.POSTGRES_PORT, *creds)
    declared = [r.name for r in declared_roles]
    observed = await pg_roles.observe(target, [*declared, CERTIFICATE_GROUP])
    ops = decide_roles.plan(declared_roles, observed or {}, db.status.roles, passwords) if observed is not None else []
    failed = await pg_roles.apply(target, [o for o in ops if o.role not in missing]) if ops else {}
    if observed is None or failed is None:
        return RolesOutcome(problems=kept, recheck_after=RETRY_SECONDS)  # no answer: as it was, and again soon
    statuses = tuple(decide_roles.statuses(declared_roles, db.status.roles, passwords, failed, missing))
    changed = sorted({o.role for o in ops} - set(failed))
    if changed:
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "RolesApplied",
                        f"roles created, changed or dropped as spec.roles says: {', '.join(changed)}")
    bad = _problems(statuses)
    if not bad and decide_roles.certificate_roles(declared_roles) and not await _hba_loaded(ctx, db):
        # the roles are made, but an instance does not run the pg_hba.conf that admits them by certificate yet
        return RolesOutcome(statuses=statuses, problems=bad, recheck_after=HBA_RECHECK_SECONDS)
    return RolesOutcome(statuses=statuses, applied=None if bad else wanted, problems=bad,
                        recheck_after=RETRY_SECONDS if bad else look_again)


async def _hba_loaded(ctx: Context, db: SampleDB) -> bool:
    """Every ready instance runs with the pg_hba.conf line that admits CERTIFICATE_GROUP by certificate (each is
    made to reload once the kubelet has refreshed its copy: pg/roles.hba_loaded)."""
    loaded = True
    for target in ready_instances(ctx, db):
        loaded = await pg_roles.hba_loaded(target, f"+{CERTIFICATE_GROUP}") is True and loaded
    return loaded
