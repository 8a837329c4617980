"""spec.pgHba: the lines pg_hba.conf gets, where they go, and how an edit reaches the server (a reload)."""

from __future__ import annotations

from typing import Any

from sampledb_operator.decide import job_ttl
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.children import pgconfig
from sampledb_operator.decide.upgrades import reload as rl
from sampledb_operator.model import hba
from sampledb_operator.model.sampledb import SampleDB

REPORTING_REJECTED = {"type": "host", "users": ["reporting"], "address": "10.1.0.0/16", "method": "reject"}


def make_db(rules: list[dict[str, Any]] | None = None, *, tls: dict[str, Any] | None = None,
            roles: list[dict[str, Any]] | None = None, **status: Any) -> SampleDB:
    spec: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}, "parameters": {"work_mem": "8MB"}}
    if rules is not None:
        spec["pgHba"] = rules
    if tls is not None:
        spec["tls"] = tls
    if roles is not None:
        spec["roles"] = roles
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "generation": 1},
        "spec": spec, "status": status})


def hba_of(db: SampleDB) -> list[str]:
    """The effective lines of the database's pg_hba.conf, without comments, whitespace collapsed."""
    text = d.configmap(db)["data"][pgconfig.HBA_KEY]
    return [" ".join(line.split()) for line in text.splitlines() if line and not line.startswith("#")]


def test_without_rules_the_file_and_every_hash_are_what_they_always_were() -> None:
    db = make_db()
    assert d.configmap(db)["data"][pgconfig.HBA_KEY] == pgconfig.HBA
    assert rl.wanted_hash(db) == pgconfig.parameters_hash({"work_mem": "8MB"})
    assert make_db([]).spec.pg_hba == [] and d.configmap(make_db([]))["data"][pgconfig.HBA_KEY] == pgconfig.HBA


def test_rules_come_after_the_operators_lines_and_before_the_default_in_their_order() -> None:
    lines = hba_of(make_db([REPORTING_REJECTED, {"users": ["+readers", "alice"], "databases": ["app", "sameuser"],
                                                 "address": "fd00::/8", "method": "md5"}]))
    assert lines == [
        "local all all trust",
        "local replication all trust",
        "host replication all all scram-sha-256",
        "host all postgres,app all scram-sha-256",  # the operator's users first: no rule locks them out
        "host all reporting 10.1.0.0/16 reject",
        "hostssl app,sameuser +readers,alice fd00::/8 md5",
        "host all all all scram-sha-256",
    ]


def test_with_required_tls_the_operators_lines_are_hostssl_and_certificate_roles_follow_the_rules() -> None:
    lines = hba_of(make_db([{"users": ["alice"], "address": "10.0.0.0/8", "method": "reject", "type": "host"}],
                           tls={"required": True}, roles=[{"name": "bob", "certificate": True}]))
    assert lines[2:] == [
        "hostssl replication all all scram-sha-256",
        "hostssl all postgres,app all scram-sha-256",
        "host all alice 10.0.0.0/8 reject",
        "hostssl all +sampledb_certificate all cert",
        "hostssl all all all scram-sha-256",
    ]


def test_an_edit_of_the_rules_is_a_reload_not_a_restart() -> None:
    before, after = make_db(), make_db([REPORTING_REJECTED])
    assert rl.wanted_hash(after) != rl.wanted_hash(before)
    assert rl.wanted_hash(make_db([{**REPORTING_REJECTED, "method": "scram-sha-256"}])) != rl.wanted_hash(after)
    assert d.statefulset(after)["spec"]["template"] == d.statefulset(before)["spec"]["template"]
    job = rl.reload_job(after, rl.wanted_hash(after))
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HBA_FILE"] == pgconfig.HBA_FILE  # reload.sh waits for the server's copy of the rules too
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
    assert {"key": pgconfig.HBA_KEY, "path": pgconfig.HBA_KEY} in volume["configMap"]["items"]


def test_a_reload_job_of_rules_since_changed_expires() -> None:
    db = make_db([REPORTING_REJECTED])
    job = rl.reload_job(db, rl.wanted_hash(db))
    assert not job_ttl.outcome_recorded(db, job)
    assert job_ttl.outcome_recorded(make_db([REPORTING_REJECTED], appliedParameters=rl.wanted_hash(db)), job)
    assert job_ttl.outcome_recorded(make_db(), job)


def test_every_line_is_written_field_by_field() -> None:
    rule = hba.HbaRule(type="hostnossl", databases=["a", "b"], users=["c"], address="samenet", method="reject")
    assert hba.line(rule) == "hostnossl a,b c samenet reject"
    default = hba.HbaRule(address="10.0.0.0/8")
    assert hba.line(default) == "hostssl all all 10.0.0.0/8 scram-sha-256"  # encrypted, with a password
