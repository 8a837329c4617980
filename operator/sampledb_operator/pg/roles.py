"""The server's roles: read them, and run decide/sql/roles.py's statements, on one short connection to the primary.

Identifiers and values are composed by psycopg.sql (never by string formatting). A password is sent as its
SCRAM-SHA-256 verifier, computed here (`scram_verifier`): the server stores the same thing, and the password
itself appears in no statement text, so a server that logs statements (log_statement=ddl) never logs it. Each
statement runs on its own (autocommit): one refused statement (a role that owns objects cannot be dropped) fails
that role only, with the server's words; the call never raises, and returns None when the server does not answer.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
from collections.abc import Sequence
from typing import Any

from sampledb_operator.model.roles import ObservedRole, Op
from sampledb_operator.pg.client import Target, query, run_each

SCRAM_ITERATIONS = 4096  # PostgreSQL's default (scram_iterations)
OBSERVE_SQL = """
SELECT r.rolname, r.rolcanlogin, r.rolconnlimit,
       coalesce(array_agg(g.rolname) FILTER (WHERE g.rolname IS NOT NULL), '{}')
FROM pg_roles r LEFT JOIN pg_auth_members m ON m.member = r.oid LEFT JOIN pg_roles g ON g.oid = m.roleid
WHERE r.rolname = ANY(%s) GROUP BY 1, 2, 3
"""


def scram_verifier(password: str, *, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802/7677; no SASLprep: passwords are taken
    as their UTF-8 bytes, as libpq sends an ASCII or already normalised one)."""
    salt = salt if salt is not None else os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def create_if_missing(sql: Any, role: str) -> Any:
    """A statement making `role` (LOGIN, nothing else) unless it exists: the operator's own roles (the exporters', the
    pooler's, the application's), whose attributes the statements after it set."""
    return sql.SQL("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = {name}) THEN"
                   " CREATE ROLE {role} LOGIN; END IF; END$$").format(name=sql.Literal(role), role=sql.Identifier(role))


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def statement(sql: Any, op: Op) -> Any:
    """The SQL of one Op (psycopg.sql composed: identifiers quoted, the verifier a literal)."""
    role = sql.Identifier(op.role)
    login = sql.SQL("LOGIN" if op.login else "NOLOGIN")
    limit = sql.Literal(op.connection_limit)
    if op.kind == "create":
        password = (sql.SQL(" PASSWORD {}").format(sql.Literal(scram_verifier(op.password.value)))
                    if op.password is not None else sql.SQL(""))
        return sql.SQL("CREATE ROLE {} WITH {} CONNECTION LIMIT {}{}").format(role, login, limit, password)
    if op.kind == "alter":
        return sql.SQL("ALTER ROLE {} WITH {} CONNECTION LIMIT {}").format(role, login, limit)
    if op.kind == "password":
        assert op.password is not None
        return sql.SQL("ALTER ROLE {} WITH PASSWORD {}").format(role, sql.Literal(scram_verifier(op.password.value)))
    if op.kind == "grant":
        return sql.SQL("GRANT {} TO {}").format(sql.Identifier(str(op.other)), role)
    if op.kind == "revoke":
        return sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(str(op.other)), role)
    if op.kind == "drop":
        return sql.SQL("DROP ROLE IF EXISTS {}").format(role)
    raise ValueError(f"unknown role statement {op.kind!r}")


async def observe(target: Target, names: Sequence[str], within: float = 5.0) -> dict[str, ObservedRole] | None:
    """The roles of `names` the server has (absent ones are missing from the answer); None: no answer."""
    rows = await query(target, within, OBSERVE_SQL, (list(names),))
    if rows is None:
        return None
    return {str(name): ObservedRole(bool(login), int(limit), frozenset(str(g) for g in groups or []))
            for name, login, limit, groups in rows}


async def apply(target: Target, ops: Sequence[Op], within: float = 30.0) -> dict[str, str] | None:
    """Run `ops` in order, each on its own; returns, per role, the server's words for its first refused
    statement ({}: all done); None when the server does not answer (nothing, or only part, was done)."""
    return await run_each(target, [(op.role, functools.partial(statement, op=op)) for op in ops], within)


HBA_LOADED_SQL = """
SELECT position(%s in pg_read_file(current_setting('hba_file'))) > 0,
       (pg_stat_file(current_setting('hba_file'))).modification > pg_conf_load_time()
"""


async def hba_loaded(target: Target, text: str, within: float = 5.0) -> bool | None:
    """Whether the server runs with a pg_hba.conf holding `text`: False while its mounted file lacks it (the kubelet
    has not refreshed it yet) or was just reloaded (pg_reload_conf() when the file is newer than the configuration's
    last load: the postmaster re-reads it in a moment, and the next call says True); None: no answer."""
    rows = await query(target, within, HBA_LOADED_SQL, (text,))
    if not rows:
        return None
    has, newer = rows[0]
    if not has:
        return False
    if newer:
        await query(target, within, "SELECT pg_reload_conf()")
        return False
    return True
