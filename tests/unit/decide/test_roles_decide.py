"""decide/sql/roles.py: the statements that make the server's roles what spec.roles says, their order, and the status;
pg/roles.py's SQL (identifiers quoted, passwords sent as SCRAM verifiers only)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from psycopg import sql

from sampledb_operator.decide.sql import roles as r
from sampledb_operator.model.roles import ObservedRole, Op, Password, RoleSpec, RoleState, RoleStatus
from sampledb_operator.pg.roles import scram_verifier, statement

PW = Password("uid/7", "s3cret")


def spec(name: str, **kw: object) -> RoleSpec:
    return RoleSpec.model_validate({"name": name, **kw})


def kinds(ops: list[Op]) -> list[tuple[str, str, str | None]]:
    return [(o.kind, o.role, o.other) for o in ops]


def test_a_new_role_is_created_with_its_password_then_granted() -> None:
    ops = r.plan([spec("reporting", inRoles=["pg_read_all_data", "auditors"]), spec("auditors", login=False)],
                 {}, [], {"reporting": PW})
    assert kinds(ops) == [("create", "reporting", None), ("create", "auditors", None),
                          ("grant", "reporting", "pg_read_all_data"), ("grant", "reporting", "auditors")]
    assert ops[0].password is PW and ops[1].login is False
    assert "s3cret" not in repr(ops)


def test_an_existing_role_is_altered_only_where_it_differs_and_its_password_set_once_per_version() -> None:
    have = {"reporting": ObservedRole(login=True, connection_limit=-1, member_of=frozenset({"pg_monitor"}))}
    last = [RoleStatus(name="reporting", state=RoleState.READY, in_roles=["pg_monitor"], password_version="uid/7")]
    role = spec("reporting", connectionLimit=5, inRoles=["pg_read_all_data"])
    ops = r.plan([role], have, last, {"reporting": PW})
    assert kinds(ops) == [("alter", "reporting", None), ("grant", "reporting", "pg_read_all_data"),
                          ("revoke", "reporting", "pg_monitor")]
    assert r.plan([role], have, last, {"reporting": Password("uid/8", "new")})[1].kind == "password"
    # a membership granted by hand, not by the operator, is left alone
    by_hand = {"reporting": ObservedRole(True, 5, frozenset({"pg_read_all_data", "hand"}))}
    assert r.plan([role], by_hand, last, {"reporting": PW}) == []


def test_only_ensure_absent_drops_and_a_role_left_out_is_retained() -> None:
    have = {"old": ObservedRole(True, -1)}
    assert kinds(r.plan([spec("old", ensure="absent")], have, [], {})) == [("drop", "old", None)]
    assert r.plan([spec("old", ensure="absent")], {}, [], {}) == []  # gone already
    previous = [RoleStatus(name="old", state=RoleState.READY), RoleStatus(name="gone", state=RoleState.DROPPED)]
    assert r.plan([], have, previous, {}) == []  # removed from the list: nothing done to it
    out = r.statuses([], previous, {}, {}, {})
    assert [(s.name, s.state) for s in out] == [("old", RoleState.RETAINED), ("gone", RoleState.DROPPED)]


def test_statuses_say_ready_failed_or_dropped_without_a_password() -> None:
    roles = [spec("a", inRoles=["pg_monitor"]), spec("b"), spec("c", ensure="absent"), spec("d")]
    out = r.statuses(roles, [], {"a": PW}, {"b": 'role "b" cannot be dropped'},
                     {"d": "Secret x with key 'password' (its password) does not exist"})
    assert [(s.name, s.state) for s in out] == [("a", RoleState.READY), ("b", RoleState.FAILED),
                                                ("c", RoleState.DROPPED), ("d", RoleState.FAILED)]
    assert out[0].in_roles == ["pg_monitor"] and out[0].password_version == "uid/7"
    assert "s3cret" not in repr(out)


def test_the_hash_follows_the_roles_and_the_password_versions_only() -> None:
    roles = [spec("a")]
    assert r.applied_hash(roles, {"a": PW}) == r.applied_hash(roles, {"a": Password("uid/7", "other value")})
    assert r.applied_hash(roles, {"a": PW}) != r.applied_hash(roles, {"a": Password("uid/8", "s3cret")})
    assert r.applied_hash(roles, {}) != r.applied_hash([spec("a", login=False)], {})


def test_names_stored_before_the_rules_are_problems() -> None:
    bad = RoleSpec.model_construct(name="pg_evil", in_roles=[], ensure="present", login=True, connection_limit=-1,
                                   password_secret=None)
    selfish = RoleSpec.model_construct(name="x", in_roles=["x"], ensure="present", login=True, connection_limit=-1,
                                       password_secret=None)
    assert [p.reason for p in r.problems([bad, selfish, spec("fine")])] == ["InvalidRole", "InvalidRole"]


def test_statements_quote_identifiers_and_carry_only_a_verifier() -> None:
    create = statement(sql, Op("create", 'we"ird', connection_limit=3, password=PW)).as_string(None)
    assert create.startswith('CREATE ROLE "we""ird" WITH LOGIN CONNECTION LIMIT 3 PASSWORD \'SCRAM-SHA-256$4096:')
    assert "s3cret" not in create
    assert statement(sql, Op("drop", "old")).as_string(None) == 'DROP ROLE IF EXISTS "old"'
    assert statement(sql, Op("revoke", "a", other="pg_monitor")).as_string(None) == 'REVOKE "pg_monitor" FROM "a"'


def test_the_scram_verifier_is_rfc_7677s() -> None:
    salt = b"0123456789abcdef"
    verifier = scram_verifier("pencil", salt=salt, iterations=4096)
    head, keys = verifier.split("$", 1)[1].split("$")
    iterations, salt_b64 = head.split(":")
    stored, server = (base64.b64decode(k) for k in keys.split(":"))
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", base64.b64decode(salt_b64), int(iterations))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    assert stored == hashlib.sha256(client_key).digest()
    assert server == hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    assert scram_verifier("pencil") != scram_verifier("pencil")  # a new salt each time
