"""The pooler's role and lookup function on the primary (what decide/children/pooler.py's pgbouncer.ini asks for).

In the database `postgres` (PgBouncer's auth_dbname): the role POOLER_ROLE (LOGIN, its password as a SCRAM
verifier, never in clear text), the schema LOOKUP_SCHEMA and LOOKUP_FUNCTION, a SECURITY DEFINER function owned by
the operator's superuser that returns one role's name and SCRAM verifier from pg_shadow. Only POOLER_ROLE may
execute it (EXECUTE revoked from PUBLIC). Every statement is idempotent; a pass runs them all.
"""

from __future__ import annotations

from typing import Any

from sampledb_operator.model.pooler import LOOKUP_FUNCTION, LOOKUP_SCHEMA, POOLER_ROLE
from sampledb_operator.pg import client as pg
from sampledb_operator.pg.roles import create_if_missing, scram_verifier

FUNCTION_BODY = "SELECT usename, passwd FROM pg_catalog.pg_shadow WHERE usename = i_username"
SQL_VERSION = "1"  # part of the applied hash: a new function body is made again on every database


def statements(password: str) -> list[tuple[str, Any]]:
    """(key, composer) pairs for pg.run_each, in order."""
    verifier = scram_verifier(password)

    def role(sql: Any) -> Any:
        return create_if_missing(sql, POOLER_ROLE)

    def password_(sql: Any) -> Any:
        return sql.SQL("ALTER ROLE {} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD {}").format(
            sql.Identifier(POOLER_ROLE), sql.Literal(verifier))

    def schema(sql: Any) -> Any:
        return sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(LOOKUP_SCHEMA))

    def function(sql: Any) -> Any:
        return sql.SQL(
            "CREATE OR REPLACE FUNCTION {}(i_username text, OUT usename name, OUT passwd text) RETURNS record"
            " LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS {}").format(
            sql.SQL(LOOKUP_FUNCTION), sql.Literal(FUNCTION_BODY))

    def grants(sql: Any) -> Any:
        fn = sql.SQL(f"{LOOKUP_FUNCTION}(text)")
        return sql.SQL("REVOKE ALL ON FUNCTION {fn} FROM PUBLIC; GRANT USAGE ON SCHEMA {schema} TO {role};"
                       " GRANT EXECUTE ON FUNCTION {fn} TO {role}").format(
            fn=fn, schema=sql.Identifier(LOOKUP_SCHEMA), role=sql.Identifier(POOLER_ROLE))

    return [("role", role), ("role", password_), ("function", schema), ("function", function),
            ("function", grants)]


async def apply(target: pg.Target, password: str, within: float = 10.0) -> dict[str, str] | None:
    """Make the role and the function: {} when done, the server's words per part it refused, None: no answer."""
    return await pg.run_each(target, statements(password), within)
