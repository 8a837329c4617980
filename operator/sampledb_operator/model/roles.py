"""Declarative PostgreSQL roles (spec.roles) and what the status says of each (status.roles).

Pure data, no I/O. A role listed with `ensure: present` is created, and its login, connection limit, memberships,
password (from a Secret) and certificate login (membership in CERTIFICATE_GROUP) kept as written; `ensure: absent`
drops it. A role removed from the list is never dropped: the status keeps it as Retained (the data it owns stays
reachable). Names are plain lower-case identifiers, never the operator's own (the application's user, `postgres`,
CERTIFICATE_GROUP) nor PostgreSQL's reserved `pg_` ones: the CRD refuses anything else at admission (and
decide/sql/roles.py again for objects stored before a rule existed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from sampledb_operator.model.schema import KeyRef, Rule, SpecModel, StatusModel

ROLE_NAME_RE = r"^[a-z_][a-z0-9_]{0,62}$"
# Not the operator's to hand out: its own users, PostgreSQL's reserved prefix and words SQL gives a meaning.
CERTIFICATE_GROUP = "sampledb_certificate"  # its members log in over TLS with a client certificate (pg_hba `cert`)
POOLER_ROLE = "sampledb_pooler"  # the pooler's lookups (model/pooler.py)
MONITOR_ROLE = "sampledb_monitor"  # the exporters' (model/monitoring.py)
RESERVED_ROLES = ("app", "postgres", "public", "none", "current_user", "session_user", "current_role", "all",
                  CERTIFICATE_GROUP, POOLER_ROLE, MONITOR_ROLE)
MAX_ROLES = 64
RoleName = Annotated[str, Field(min_length=1, max_length=63, pattern=ROLE_NAME_RE)]


def role_name_error(name: str) -> str | None:
    """Why `name` cannot be a declared role (None: it can)."""
    if name.startswith("pg_"):
        return "names starting with pg_ are reserved by PostgreSQL"
    if name in RESERVED_ROLES:
        return f"{name!r} is reserved (the operator's own or a word SQL gives a meaning)"
    return None


class Ensure(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"


class RoleSpec(SpecModel):
    """One role of the database's server."""

    cel_rules = (
        Rule("!self.name.startsWith('pg_')", "names starting with pg_ are reserved by PostgreSQL", field_path=".name"),
        Rule("!(self.name in " + "[" + ", ".join(f"'{r}'" for r in RESERVED_ROLES) + "])",
             "this name is reserved (the operator's own users, or a word SQL gives a meaning)", field_path=".name"),
        Rule("!has(self.inRoles) || !(self.name in self.inRoles)", "a role cannot be a member of itself",
             field_path=".inRoles"),
        Rule("!has(self.certificate) || !self.certificate || !has(self.login) || self.login",
             "a role that logs in with a certificate must be able to log in (login: true)", field_path=".certificate"),
    )

    name: RoleName = Field(description="The role's name: lower-case letters, digits and _, not starting with pg_.")
    ensure: Ensure = Field(
        default=Ensure.PRESENT,
        description="present: created and kept as written; absent: dropped (refused by PostgreSQL, and said in"
        " status, while it owns objects). A role removed from the list is not dropped.")
    login: bool = Field(default=True, description="The role may log in.")
    connection_limit: int = Field(default=-1, ge=-1, le=100000,
                                  description="Most connections the role may have at once (-1: no limit).")
    in_roles: list[RoleName] = Field(
        default_factory=list, max_length=32,
        description="Roles it is a member of (GRANT ... TO it); memberships the operator granted and that leave"
        " this list are revoked. Each must exist (a declared role, or one of the server's, such as"
        " pg_read_all_data).")
    password_secret: KeyRef | None = Field(
        default=None,
        description="A key of a Secret in the database's namespace holding the role's password; a change of it is"
        " applied (that is how to rotate it). None: no password (a role without one cannot log in over TCP).")
    certificate: bool = Field(
        default=False,
        description="Log in with a client certificate over TLS (pg_hba `cert`: the certificate's common name is the"
        " role), instead of a password there. With the operator's own certificate authority (no"
        " spec.tls.secretName) it issues one: Secret <name>-client.<role> (tls.crt, tls.key, ca.crt; `_` in the"
        " role's name written `-`), renewed 30 days before its end. Needs spec.tls.enabled.")


class RoleState(StrEnum):
    READY = "Ready"  # as the spec says
    DROPPED = "Dropped"  # ensure: absent, and it is gone
    RETAINED = "Retained"  # removed from spec.roles: left as it was, no longer managed
    FAILED = "Failed"  # the server refused a statement (the message has its words), or its Secret is missing


class RoleStatus(StatusModel):
    """What the operator did with one role."""

    name: str = Field(description="The role.")
    state: RoleState = Field(description="Ready, Dropped, Retained or Failed.")
    message: str | None = Field(default=None, max_length=1024, description="Why it failed, when it did.")
    in_roles: list[str] = Field(default_factory=list, description="The memberships the operator granted.")
    password_version: str | None = Field(default=None, description="The version of the password last set.")


RolesList = Annotated[list[RoleSpec], Field(max_length=MAX_ROLES, json_schema_extra={
    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})]


@dataclass(frozen=True, slots=True)
class ObservedRole:
    """A role as the server has it."""

    login: bool
    connection_limit: int
    member_of: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Password:
    """A role's password from its Secret: the Secret's version and the value (never printed)."""

    version: str
    value: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class Op:
    """One statement: create, alter, password, grant, revoke or drop (of `role`; `other`: the granted role)."""

    kind: str
    role: str
    login: bool = True
    connection_limit: int = -1
    other: str | None = None
    password: Password | None = field(default=None, repr=False)
