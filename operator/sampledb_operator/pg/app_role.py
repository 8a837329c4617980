"""The application's role on the primary: its password set from the credentials Secret (reconcilers/app_role.py).

The role is made at initdb (dataplane/app-role.sh: LOGIN only, owner of its database); here it is made again if it
is missing, and its password is set to the Secret's, sent as a SCRAM-SHA-256 verifier computed here (pg/roles.py),
never the password itself. No other attribute is touched: what an administrator granted it stays. Every statement is
idempotent; a pass runs them all.
"""

from __future__ import annotations

from typing import Any

from sampledb_operator.pg import client as pg
from sampledb_operator.pg.roles import create_if_missing, scram_verifier

SQL_VERSION = "1"  # part of the applied hash: new statements are run again on every database


def statements(role: str, password: str) -> list[tuple[str, Any]]:
    """(key, composer) pairs for pg.run_each, in order; the verifier is computed once."""
    verifier = scram_verifier(password)

    def create(sql: Any) -> Any:
        return create_if_missing(sql, role)

    def login(sql: Any) -> Any:
        return sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(verifier))

    return [("role", create), ("role", login)]


async def apply(target: pg.Target, role: str, password: str, within: float = 3.0) -> dict[str, str] | None:
    """Make the role and set its password: {} when done, the server's words when it refused, None: no answer."""
    return await pg.run_each(target, statements(role, password), within)
