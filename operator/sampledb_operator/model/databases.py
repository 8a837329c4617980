"""Declarative databases inside the server (spec.databases) and what the status says of each (status.databases).

Pure data, no I/O. A database listed with `ensure: present` is created with its owner, and its owner and connection
limit kept as written; `ensure: absent` drops it (the server refuses while clients are connected, and the status
says so). A database removed from the list is never dropped: the status keeps it as Retained, with its data.
Names follow the role names' rule (plain lower-case identifiers), never the server's own (postgres, template0,
template1) nor the application's database (app): the CRD refuses anything else at admission, and
decide/sql/databases.py again for objects stored before a rule existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from sampledb_operator.model.roles import ROLE_NAME_RE, Ensure, RoleName
from sampledb_operator.model.schema import Rule, SpecModel, StatusModel

RESERVED_DATABASES = ("app", "postgres", "template0", "template1")
MAX_DATABASES = 64
DEFAULT_OWNER = "app"  # the application's user (desired_config.DEFAULT_USER)
DatabaseName = Annotated[str, Field(min_length=1, max_length=63, pattern=ROLE_NAME_RE)]


def database_name_error(name: str, owner: str) -> str | None:
    """Why a database `name` owned by `owner` cannot be declared (None: it can)."""
    if name in RESERVED_DATABASES:
        return f"{name!r} is reserved (the server's own databases and the application's)"
    if owner.startswith("pg_"):
        return f"owner {owner!r}: roles starting with pg_ are PostgreSQL's own"
    return None


class DatabaseSpec(SpecModel):
    """One database of the server."""

    cel_rules = (
        Rule("!(self.name in " + "[" + ", ".join(f"'{d}'" for d in RESERVED_DATABASES) + "])",
             "this name is reserved (the server's own databases and the application's)", field_path=".name"),
        Rule("!has(self.owner) || !self.owner.startsWith('pg_')", "roles starting with pg_ are PostgreSQL's own",
             field_path=".owner"),
    )

    name: DatabaseName = Field(description="The database's name: lower-case letters, digits and _.")
    ensure: Ensure = Field(
        default=Ensure.PRESENT,
        description="present: created and kept as written; absent: dropped (refused by PostgreSQL, and said in"
        " status, while clients are connected to it). A database removed from the list is not dropped.")
    owner: RoleName = Field(
        default=DEFAULT_OWNER,
        description="The role that owns it (a declared role, or app); a change is applied (ALTER DATABASE ..."
        " OWNER TO).")
    connection_limit: int = Field(default=-1, ge=-1, le=100000,
                                  description="Most connections to it at once (-1: no limit).")


class DatabaseState(StrEnum):
    READY = "Ready"  # as the spec says
    DROPPED = "Dropped"  # ensure: absent, and it is gone
    RETAINED = "Retained"  # removed from spec.databases: left as it was, with its data, no longer managed
    FAILED = "Failed"  # the server refused a statement (the message has its words)


class DatabaseStatus(StatusModel):
    """What the operator did with one database."""

    name: str = Field(description="The database.")
    state: DatabaseState = Field(description="Ready, Dropped, Retained or Failed.")
    message: str | None = Field(default=None, max_length=1024, description="Why it failed, when it did.")


DatabasesList = Annotated[list[DatabaseSpec], Field(max_length=MAX_DATABASES, json_schema_extra={
    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})]


@dataclass(frozen=True, slots=True)
class ObservedDatabase:
    """A database as the server has it."""

    owner: str
    connection_limit: int


@dataclass(frozen=True, slots=True)
class DatabaseOp:
    """One statement: create, owner, limit or drop (of `database`)."""

    kind: str
    database: str
    owner: str = DEFAULT_OWNER
    connection_limit: int = -1
