"""A PgBouncer connection pooler in front of the database (spec.pooler).

Pure data, no I/O. With spec.pooler set, the operator runs `instances` PgBouncer pods (a Deployment) behind the Service
`<name>-pooler`, pooling client connections onto at most `defaultPoolSize` server connections per (database, user) pair.
Clients log in with their own roles' passwords: PgBouncer asks the server for a role's SCRAM verifier through a function
only the pooler's own role (POOLER_ROLE) may call (auth_query), so no file lists every user's password.
decide/children/pooler.py makes the objects; reconcilers/pooler.py the role, its Secret and the function.

Invariants: the pgbouncer.ini the operator writes holds only settings it composes from closed sets (the mode),
bounded integers and the allow-listed `parameters`, each a plain word; no parameter can point PgBouncer at a file,
another server, another authentication or another listener (the CRD refuses every other name, and values with
anything but letters, digits and `._-`; `parameter_error` is the Python twin).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from sampledb_operator.model.roles import POOLER_ROLE
from sampledb_operator.model.schema import Rule, SpecModel, cel_string
from sampledb_operator.model.spec_rules import Image, ResourceRequirements

DEFAULT_IMAGE = "ghcr.io/cloudnative-pg/pgbouncer:1.24.1"  # PgBouncer 1.19 or later, `pgbouncer` on its PATH
# PgBouncer settings spec.pooler.parameters may set: timeouts, limits, logging. Everything else (files, listeners,
# TLS, authentication, the servers) is the operator's.
PARAMETERS: tuple[str, ...] = (
    "application_name_add_host", "autodb_idle_timeout", "client_idle_timeout", "client_login_timeout",
    "idle_transaction_timeout", "log_connections", "log_disconnections", "log_pooler_errors",
    "log_stats", "max_db_connections", "max_prepared_statements", "max_user_connections", "min_pool_size",
    "query_timeout", "query_wait_timeout", "reserve_pool_size", "reserve_pool_timeout", "server_check_delay",
    "server_connect_timeout", "server_idle_timeout", "server_lifetime", "server_login_retry",
    "server_reset_query_always", "stats_period", "tcp_keepalive", "tcp_keepcnt", "tcp_keepidle",
    "tcp_keepintvl", "track_extra_parameters",
)
PARAMETER_VALUE_RE = r"^[A-Za-z0-9._-]{1,64}$"
PARAMETER_NAME_MESSAGE = ("pooler parameters are limited to PgBouncer's timeouts, limits and logging"
                          f" ({', '.join(PARAMETERS)}): files, listeners, TLS, authentication and servers are the"
                          " operator's")
PARAMETER_VALUE_MESSAGE = "pooler parameter values are one word: letters, digits and . _ -"
MAX_INSTANCES = 10
LOOKUP_SCHEMA = "sampledb_pooler"  # in the database postgres: the function PgBouncer's auth_query calls
LOOKUP_FUNCTION = f"{LOOKUP_SCHEMA}.lookup"
AUTH_DATABASE = "postgres"
__all__ = ["AUTH_DATABASE", "DEFAULT_IMAGE", "LOOKUP_FUNCTION", "LOOKUP_SCHEMA", "PARAMETERS", "POOLER_ROLE",
           "PoolMode", "PoolerSpec", "parameter_error"]


class PoolMode(StrEnum):
    SESSION = "session"  # a server connection per client session: every feature works
    TRANSACTION = "transaction"  # per transaction: most clients per server connection, no session state
    STATEMENT = "statement"  # per statement: no multi-statement transactions


_NAMES = "[" + ", ".join(f"'{p}'" for p in PARAMETERS) + "]"
PoolerParameters = Annotated[
    dict[str, Annotated[str, Field(max_length=64)]], Field(max_length=len(PARAMETERS)),
    Rule(f"self.all(k, k in {_NAMES})", PARAMETER_NAME_MESSAGE),
    Rule(f"self.all(k, self[k].matches({cel_string(PARAMETER_VALUE_RE)}))", PARAMETER_VALUE_MESSAGE),
]


class PoolerSpec(SpecModel):
    """PgBouncer in front of the primary."""

    instances: int = Field(default=2, ge=1, le=MAX_INSTANCES,
                           description="PgBouncer pods (spread over nodes when it can). 2 keeps the pooler up while"
                           " one restarts.")
    read_only_instances: int = Field(
        default=0, ge=0, le=MAX_INSTANCES,
        description="PgBouncer pods in front of the standbys, at the Service <name>-pooler-ro (read-only"
        " connections, as <name>-ro; with spec.replicas above 1). 0: none.")
    mode: PoolMode = Field(default=PoolMode.SESSION,
                           description="When a server connection goes back to the pool: session (at the client's"
                           " disconnect; every feature works), transaction (at each transaction's end: many more"
                           " clients per server connection, no session state such as SET or advisory locks) or"
                           " statement.")
    default_pool_size: int = Field(default=20, ge=1, le=10000,
                                   description="Server connections per (database, user) pair, per pooler pod.")
    max_client_connections: int = Field(default=1000, ge=1, le=100000,
                                        description="Client connections each pooler pod accepts.")
    image: Image | None = Field(
        default=None,
        description=f"A PgBouncer image (1.19 or later, `pgbouncer` on its PATH); {DEFAULT_IMAGE} when omitted.")
    resources: ResourceRequirements | None = Field(
        default=None,
        description="Compute resources of each PgBouncer container; requests cpu 50m, memory 32Mi when omitted.")
    parameters: PoolerParameters | None = Field(
        default=None,
        description="More PgBouncer settings, from its timeouts, limits and logging (server_idle_timeout,"
        " query_timeout, max_db_connections, ...): each value one word.")


def parameter_error(name: str, value: str) -> str | None:
    """Why the CRD refuses this pooler parameter (its rule's message), or None."""
    if name not in PARAMETERS:
        return PARAMETER_NAME_MESSAGE
    if not re.fullmatch(PARAMETER_VALUE_RE, value):
        return PARAMETER_VALUE_MESSAGE
    return None
