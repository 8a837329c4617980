"""Client access rules of the server's pg_hba.conf (spec.pgHba).

Pure data, no I/O. Each rule is one line of pg_hba.conf, written field by field (never as text the user wrote),
between the operator's own lines (the pod's socket, the standbys' replication, the operator's user) and the default
password rule, in the order given: the first line that matches a connection decides (decide/children/pgconfig.py renders
them). A change is applied by a reload, without a restart (decide/upgrades/reload.py).

Invariants: every token is a plain word from a closed set or a lower-case identifier, an address is a CIDR or one
of PostgreSQL's address keywords, so no rule can add a line, include a file (`@file`) or reach another field. No
rule admits a connection without a password or certificate (`trust`), sends a password in clear text
(`password`), matches replication connections (the operator's), names the operator's own user, or, with
spec.tls.required, admits an unencrypted connection. The CRD refuses these at admission; `rule_error` (the rules'
Python twin, for objects stored before a rule existed) says the same in the same words.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import Field

from sampledb_operator.model.schema import Rule, SpecModel

TYPES = ("host", "hostssl", "hostnossl")
METHODS = ("scram-sha-256", "md5", "cert", "reject")
MAX_RULES = 64
MAX_TOKENS = 16
# The database's superuser, whom the operator's connections, the standbys and the Jobs use: `postgres`, or `app` in a
# database made before the superuser had a Secret of its own (decide/children/desired_config.SUPERUSER).
OPERATOR_USERS = ("postgres", "app")
DATABASE_TOKEN_RE = r"^(all|sameuser|samerole|[a-z_][a-z0-9_]{0,62})$"
USER_TOKEN_RE = r"^(all|[+]?[a-z_][a-z0-9_]{0,62})$"
ADDRESS_KEYWORDS = ("all", "samehost", "samenet")
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4_CIDR_RE = rf"^({_OCTET}[.]){{3}}{_OCTET}/(3[0-2]|[12]?[0-9])$"
IPV6_CIDR_RE = r"^[0-9a-f]{0,4}(:[0-9a-f]{0,4}){2,7}/(12[0-8]|1[01][0-9]|[1-9]?[0-9])$"
ADDRESS_RE = rf"^(all|samehost|samenet)$|{IPV4_CIDR_RE}|{IPV6_CIDR_RE}"

METHOD_MESSAGE = ("method must be scram-sha-256, md5, cert or reject: trust would admit whoever reaches the port"
                  " without a password, password sends it in clear text, and the others need settings the operator"
                  " does not manage")
TYPE_MESSAGE = "type must be host, hostssl or hostnossl (the socket's local lines are the operator's)"
REPLICATION_MESSAGE = "the replication keyword is refused: replication connections are the operator's (the standbys')"
OPERATOR_USER_MESSAGE = ("'postgres' and 'app' are refused: they are the operator's users (the superuser, and the"
                         " application's role of a database made before the superuser had a Secret of its own), whose"
                         " line comes first so that no rule can lock the operator out")
CERT_MESSAGE = "method cert needs type hostssl (a client certificate is only presented over TLS)"
ADDRESS_MESSAGE = "address must be a CIDR (10.0.0.0/8, fd00::/8) or all, samehost or samenet"
TLS_REQUIRED_MESSAGE = ("with spec.tls.required every rule that admits a connection must be hostssl (host and"
                        " hostnossl would admit an unencrypted one)")
TLS_DISABLED_MESSAGE = "hostssl rules need spec.tls.enabled (without TLS they never match)"

DatabaseToken = Annotated[str, Field(min_length=1, max_length=63, pattern=DATABASE_TOKEN_RE)]
UserToken = Annotated[str, Field(min_length=1, max_length=64, pattern=USER_TOKEN_RE)]


class HbaRule(SpecModel):
    """One pg_hba.conf line: which connections (type, databases, users, address) and how they authenticate."""

    cel_rules = (
        Rule(f"self.type in [{', '.join(repr(t) for t in TYPES)}]", TYPE_MESSAGE, field_path=".type"),
        Rule(f"self.method in [{', '.join(repr(m) for m in METHODS)}]", METHOD_MESSAGE, field_path=".method"),
        Rule("!has(self.databases) || !('replication' in self.databases)", REPLICATION_MESSAGE,
             field_path=".databases"),
        Rule("!has(self.users) || !self.users.exists(u, "
             + " || ".join(f"u == '{user}' || u == '+{user}'" for user in OPERATOR_USERS) + ")",
             OPERATOR_USER_MESSAGE, field_path=".users"),
        Rule("self.method != 'cert' || self.type == 'hostssl'", CERT_MESSAGE, field_path=".method"),
    )

    type: str = Field(default="hostssl", max_length=16,
                      description="host (any TCP connection), hostssl (encrypted only) or hostnossl (unencrypted"
                      " only).")
    databases: list[DatabaseToken] = Field(
        default_factory=lambda: ["all"], min_length=1, max_length=MAX_TOKENS,
        description="Database names, or all, sameuser, samerole (not replication: the operator's).")
    users: list[UserToken] = Field(
        default_factory=lambda: ["all"], min_length=1, max_length=MAX_TOKENS,
        description="Role names, +group for a group's members, or all (not the operator's user, app, whose line"
        " comes first).")
    address: str = Field(max_length=64, pattern=ADDRESS_RE,
                         description="Client addresses: a CIDR (10.0.0.0/8, fd00::/8), or all, samehost, samenet.")
    method: str = Field(default="scram-sha-256", max_length=32,
                        description="scram-sha-256 or md5 (a password), cert (a client certificate whose common"
                        " name is the role; hostssl only) or reject.")


HbaRules = Annotated[list[HbaRule], Field(max_length=MAX_RULES)]

# Rules of the spec as a whole (SampleDBSpec.cel_rules): they read spec.tls too.
SPEC_RULES = (
    Rule("!has(self.pgHba) || !has(self.tls) || !has(self.tls.required) || !self.tls.required"
         " || self.pgHba.all(r, r.type == 'hostssl' || r.method == 'reject')",
         TLS_REQUIRED_MESSAGE, field_path=".pgHba"),
    Rule("!has(self.pgHba) || !has(self.tls) || !has(self.tls.enabled) || self.tls.enabled"
         " || !self.pgHba.exists(r, r.type == 'hostssl')",
         TLS_DISABLED_MESSAGE, field_path=".pgHba"),
)


def rule_error(rule: HbaRule, *, tls_enabled: bool, tls_required: bool) -> str | None:
    """Why the CRD refuses `rule` (its rule's message), or None; also an address the pattern lets through that is
    not an address (1:::2/64), which the server itself would refuse."""
    if rule.type not in TYPES:
        return TYPE_MESSAGE
    if rule.method not in METHODS:
        return METHOD_MESSAGE
    if "replication" in rule.databases:
        return REPLICATION_MESSAGE
    if any(user in rule.users or f"+{user}" in rule.users for user in OPERATOR_USERS):
        return OPERATOR_USER_MESSAGE
    if rule.method == "cert" and rule.type != "hostssl":
        return CERT_MESSAGE
    if not re.fullmatch(ADDRESS_RE, rule.address) or not _address_ok(rule.address):
        return ADDRESS_MESSAGE
    if tls_required and rule.type != "hostssl" and rule.method != "reject":
        return TLS_REQUIRED_MESSAGE
    if not tls_enabled and rule.type == "hostssl":
        return TLS_DISABLED_MESSAGE
    return None


def _address_ok(address: str) -> bool:
    if address in ADDRESS_KEYWORDS:
        return True
    try:
        ipaddress.ip_network(address, strict=False)
    except ValueError:
        return False
    return True


def line(rule: HbaRule) -> str:
    """The pg_hba.conf line of a valid rule."""
    return " ".join((rule.type, ",".join(rule.databases), ",".join(rule.users), rule.address, rule.method))
