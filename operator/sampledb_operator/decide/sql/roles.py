"""spec.roles: what to do to the server's roles, and what the status says of each, as pure functions.

`plan` compares the declared roles with what the server has (`observed`, read by pg/roles.py) and the status of
the last pass (the memberships the operator granted), and returns the statements to run, in an order that lets
each succeed (creations first, so that a membership in a declared role finds it; drops last). `statuses` turns the
statements' outcomes into status.roles. `applied_hash` identifies what was applied (the roles as written and their
password Secrets' versions), so that a pass with nothing new sends no SQL at all.

A role with `certificate: true` is made a member of CERTIFICATE_GROUP (created, without login, when first needed),
the group pg_hba admits by client certificate; like any membership the operator granted, it is revoked when the role
no longer asks for it.

Invariants: a role is dropped only when written `ensure: absent`; one removed from spec.roles is Retained, never
touched again; a membership is revoked only if the operator granted it (status) and it left `inRoles`; a password
is set only when its Secret's version differs from the one last set; nothing here holds or returns a password in a
message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from sampledb_operator.model.roles import (
    CERTIFICATE_GROUP,
    Ensure,
    ObservedRole,
    Op,
    Password,
    RoleSpec,
    RoleState,
    RoleStatus,
    role_name_error,
)
from sampledb_operator.model.sampledb import Problem


def applied_hash(roles: Sequence[RoleSpec], passwords: Mapping[str, Password | None]) -> str:
    """What a pass applies: the roles as written and the versions of their passwords."""
    body = [r.model_dump(mode="json", by_alias=True) for r in roles]
    versions = {name: (p.version if p else None) for name, p in sorted(passwords.items())}
    text = json.dumps([body, versions], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def memberships(role: RoleSpec) -> list[str]:
    """The roles `role` is to be a member of: its inRoles, and CERTIFICATE_GROUP when it logs in with a certificate
    (pg_hba admits that group's members by certificate)."""
    return [*role.in_roles, *([CERTIFICATE_GROUP] if role.certificate and CERTIFICATE_GROUP not in role.in_roles
                              else [])]


def certificate_roles(roles: Sequence[RoleSpec]) -> list[str]:
    """The declared roles that log in with a client certificate (present ones)."""
    return [r.name for r in roles if r.certificate and r.ensure is Ensure.PRESENT]


def problems(roles: Sequence[RoleSpec], *, tls_enabled: bool = True) -> list[Problem]:
    """Declared roles the CRD would refuse today (an object stored before a rule existed), or that ask for a
    certificate login without TLS: never applied."""
    out = []
    for role in roles:
        why = role_name_error(role.name) or next((f"member of {r!r}: a role cannot be a member of itself"
                                                  for r in role.in_roles if r == role.name), None)
        if why is None and role.certificate and not tls_enabled:
            why = "certificate: true needs spec.tls.enabled (a client certificate is only presented over TLS)"
        if why:
            out.append(Problem("InvalidRole", f"role {role.name!r}: {why}", "spec.roles"))
    return out


def plan(roles: Sequence[RoleSpec], observed: Mapping[str, ObservedRole], previous: Sequence[RoleStatus],
         passwords: Mapping[str, Password | None]) -> list[Op]:
    """The statements that make the server's roles what `roles` says."""
    before = {s.name: s for s in previous}
    creates: list[Op] = []
    if certificate_roles(roles) and CERTIFICATE_GROUP not in observed:
        creates.append(Op("create", CERTIFICATE_GROUP, login=False))
    alters: list[Op] = []
    grants: list[Op] = []
    drops: list[Op] = []
    for role in roles:
        have = observed.get(role.name)
        if role.ensure is Ensure.ABSENT:
            if have is not None:
                drops.append(Op("drop", role.name))
            continue
        password = passwords.get(role.name)
        if have is None:
            creates.append(Op("create", role.name, role.login, role.connection_limit, password=password))
        else:
            if (have.login, have.connection_limit) != (role.login, role.connection_limit):
                alters.append(Op("alter", role.name, role.login, role.connection_limit))
            last = before.get(role.name)
            if password is not None and (last is None or last.password_version != password.version):
                alters.append(Op("password", role.name, password=password))
        member_of = have.member_of if have is not None else frozenset()
        wanted = memberships(role)
        grants += [Op("grant", role.name, other=r) for r in wanted if r not in member_of]
        granted = before[role.name].in_roles if role.name in before else []
        grants += [Op("revoke", role.name, other=r) for r in granted if r not in wanted and r in member_of]
    return [*creates, *alters, *grants, *drops]


def statuses(roles: Sequence[RoleSpec], previous: Sequence[RoleStatus], passwords: Mapping[str, Password | None],
             failed: Mapping[str, str], missing_secrets: Mapping[str, str]) -> list[RoleStatus]:
    """status.roles after a pass: `failed` maps a role to the server's words for its first refused statement;
    `missing_secrets` a role to why its password Secret could not be read."""
    out = []
    declared = {r.name for r in roles}
    before = {s.name: s for s in previous}
    for role in roles:
        last = before.get(role.name)
        why = missing_secrets.get(role.name) or failed.get(role.name)
        if why is not None:
            out.append(RoleStatus(name=role.name, state=RoleState.FAILED, message=why[:1024],
                                  in_roles=last.in_roles if last else [],
                                  password_version=last.password_version if last else None))
        elif role.ensure is Ensure.ABSENT:
            out.append(RoleStatus(name=role.name, state=RoleState.DROPPED))
        else:
            password = passwords.get(role.name)
            out.append(RoleStatus(name=role.name, state=RoleState.READY, in_roles=memberships(role),
                                  password_version=password.version if password else None))
    out += [RoleStatus(name=s.name, state=RoleState.RETAINED if s.state is not RoleState.DROPPED else s.state)
            for s in previous if s.name not in declared]
    return out
