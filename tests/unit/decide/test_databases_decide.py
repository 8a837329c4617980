"""decide/sql/databases.py: the statements that make the server's databases what spec.databases says, their order, and
the status; pg/databases.py's SQL (identifiers quoted); names the CRD refuses."""

from __future__ import annotations

import pytest
from psycopg import sql
from pydantic import ValidationError

from sampledb_operator.decide.sql import databases as d
from sampledb_operator.model.databases import (
    DatabaseOp,
    DatabaseSpec,
    DatabaseState,
    DatabaseStatus,
    ObservedDatabase,
)
from sampledb_operator.pg.databases import statement


def spec(name: str, **kw: object) -> DatabaseSpec:
    return DatabaseSpec.model_validate({"name": name, **kw})


def kinds(ops: list[DatabaseOp]) -> list[tuple[str, str]]:
    return [(o.kind, o.database) for o in ops]


def test_a_new_database_is_created_with_its_owner_and_limit_and_drops_come_last() -> None:
    ops = d.plan([spec("old", ensure="absent"), spec("reports", owner="reporting", connectionLimit=10)],
                 {"old": ObservedDatabase("app", -1)})
    assert kinds(ops) == [("create", "reports"), ("drop", "old")]
    assert (ops[0].owner, ops[0].connection_limit) == ("reporting", 10)


def test_an_existing_database_is_changed_only_where_it_differs() -> None:
    have = {"reports": ObservedDatabase("app", -1)}
    assert d.plan([spec("reports")], have) == []
    ops = d.plan([spec("reports", owner="reporting", connectionLimit=3)], have)
    assert [(o.kind, o.owner, o.connection_limit) for o in ops] == [("owner", "reporting", -1), ("limit", "app", 3)]


def test_only_ensure_absent_drops_and_a_database_left_out_is_retained() -> None:
    have = {"reports": ObservedDatabase("app", -1)}
    assert d.plan([spec("reports", ensure="absent")], {}) == []  # gone already
    assert d.plan([], have) == []  # removed from the list: nothing done to it
    previous = [DatabaseStatus(name="reports", state=DatabaseState.READY),
                DatabaseStatus(name="gone", state=DatabaseState.DROPPED)]
    out = d.statuses([], previous, {})
    assert [(s.name, s.state) for s in out] == [("reports", "Retained"), ("gone", "Dropped")]


def test_statuses_say_ready_failed_or_dropped() -> None:
    declared = [spec("a"), spec("b", ensure="absent"), spec("c")]
    out = d.statuses(declared, [], {"c": 'database "c" is being accessed by other users'})
    assert [(s.name, s.state) for s in out] == [("a", "Ready"), ("b", "Dropped"), ("c", "Failed")]
    assert "accessed by other users" in (out[2].message or "")


def test_the_applied_hash_follows_what_is_written() -> None:
    assert d.applied_hash([spec("a")]) == d.applied_hash([spec("a", owner="app")])  # the default, spelled out
    assert d.applied_hash([spec("a")]) != d.applied_hash([spec("a", connectionLimit=2)])


@pytest.mark.parametrize("name", ["postgres", "template0", "template1", "app"])
def test_reserved_names_are_refused_by_decide_for_old_objects(name: str) -> None:
    problems = d.problems([DatabaseSpec.model_construct(name=name, owner="app")])
    assert [p.reason for p in problems] == ["InvalidDatabase"] and "reserved" in problems[0].message


@pytest.mark.parametrize("name", ['x"; DROP DATABASE app; --', "Orders", "a b", "", "x" * 64])
def test_names_that_are_not_plain_identifiers_do_not_parse(name: str) -> None:
    with pytest.raises(ValidationError):
        spec(name)
    with pytest.raises(ValidationError):
        spec("ok", owner=name)


def test_statements_quote_every_identifier() -> None:
    def text(op: DatabaseOp) -> str:
        return " ".join(str(statement(sql, op).as_string(None)).split())
    assert text(DatabaseOp("create", "reports", "reporting", 5)) == \
        'CREATE DATABASE "reports" OWNER "reporting" CONNECTION LIMIT 5'
    assert text(DatabaseOp("owner", "reports", "b")) == 'ALTER DATABASE "reports" OWNER TO "b"'
    assert text(DatabaseOp("limit", "reports", connection_limit=-1)) == 'ALTER DATABASE "reports" CONNECTION LIMIT -1'
    assert text(DatabaseOp("drop", "reports")) == 'DROP DATABASE IF EXISTS "reports"'
    with pytest.raises(ValueError, match="unknown"):
        text(DatabaseOp("truncate", "reports"))
