"""The exporters' role on the primary (what decide/children/exporter.py's container connects as).

MONITOR_ROLE: LOGIN without a password (only the pod's socket admits it; every TCP line of pg_hba asks for a
password it does not have), not a superuser, member of pg_monitor (every statistics view and function, no table
data), with a statement timeout on every query it runs. Every statement is idempotent; a pass runs them all.
"""

from __future__ import annotations

from typing import Any

from sampledb_operator.model.monitoring import MONITOR_ROLE, MONITOR_STATEMENT_TIMEOUT
from sampledb_operator.pg import client as pg
from sampledb_operator.pg.roles import create_if_missing

SQL_VERSION = "1"  # part of the applied hash: new statements are run again on every database


def statements() -> list[tuple[str, Any]]:
    """(key, composer) pairs for pg.run_each, in order."""
    role = MONITOR_ROLE

    def create(sql: Any) -> Any:
        return create_if_missing(sql, role)

    def attributes(sql: Any) -> Any:
        return sql.SQL("ALTER ROLE {} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
                       " PASSWORD NULL").format(sql.Identifier(role))

    def grant(sql: Any) -> Any:
        return sql.SQL("GRANT pg_monitor TO {}").format(sql.Identifier(role))

    def timeout(sql: Any) -> Any:
        return sql.SQL("ALTER ROLE {} SET statement_timeout = {}").format(
            sql.Identifier(role), sql.Literal(MONITOR_STATEMENT_TIMEOUT))

    return [("role", create), ("role", attributes), ("role", grant), ("role", timeout)]


async def apply(target: pg.Target, within: float = 3.0) -> dict[str, str] | None:
    """Make the role: {} when done, the server's words when it refused, None: no answer."""
    return await pg.run_each(target, statements(), within)
