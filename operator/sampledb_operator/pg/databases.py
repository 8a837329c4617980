"""The server's databases: read them, and run decide/sql/databases.py's statements, on one short connection to the
primary.

Identifiers and values are composed by psycopg.sql (never by string formatting). Each statement runs on its own
(autocommit: CREATE and DROP DATABASE cannot run in a transaction): a refused one (a drop while clients are
connected, an owner that does not exist) fails that database only, with the server's words; the calls never raise,
and return None when the server does not answer.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sampledb_operator.model.databases import DatabaseOp, ObservedDatabase
from sampledb_operator.pg.client import Target, query, run_each

OBSERVE_SQL = "SELECT datname, pg_get_userbyid(datdba), datconnlimit FROM pg_database WHERE datname = ANY(%s)"


def statement(sql: Any, op: DatabaseOp) -> Any:
    """The SQL of one DatabaseOp (psycopg.sql composed: identifiers quoted)."""
    database = sql.Identifier(op.database)
    if op.kind == "create":
        return sql.SQL("CREATE DATABASE {} OWNER {} CONNECTION LIMIT {}").format(
            database, sql.Identifier(op.owner), sql.Literal(op.connection_limit))
    if op.kind == "owner":
        return sql.SQL("ALTER DATABASE {} OWNER TO {}").format(database, sql.Identifier(op.owner))
    if op.kind == "limit":
        return sql.SQL("ALTER DATABASE {} CONNECTION LIMIT {}").format(database, sql.Literal(op.connection_limit))
    if op.kind == "drop":
        return sql.SQL("DROP DATABASE IF EXISTS {}").format(database)
    raise ValueError(f"unknown database statement {op.kind!r}")


async def observe(target: Target, names: Sequence[str], within: float = 5.0) -> dict[str, ObservedDatabase] | None:
    """The databases of `names` the server has (absent ones are missing from the answer); None: no answer."""
    rows = await query(target, within, OBSERVE_SQL, (list(names),))
    if rows is None:
        return None
    return {str(name): ObservedDatabase(str(owner), int(limit)) for name, owner, limit in rows}


async def apply(target: Target, ops: Sequence[DatabaseOp], within: float = 60.0) -> dict[str, str] | None:
    """Run `ops` in order, each on its own; returns, per database, the server's words for its refused statement
    ({}: all done); None when the server does not answer (nothing, or only part, was done)."""
    return await run_each(target, [(op.database, functools.partial(statement, op=op)) for op in ops], within)
