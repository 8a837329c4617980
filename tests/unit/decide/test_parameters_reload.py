"""spec.parameters by file and reload: rendering, the restart hash, the reload decision and Job."""

from __future__ import annotations

from typing import Any

import pytest

from sampledb_operator.decide import job_ttl
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.children import pgconfig
from sampledb_operator.decide.labels import DATABASE_LABEL
from sampledb_operator.decide.status import JobState
from sampledb_operator.decide.upgrades import reload as rl
from sampledb_operator.model import names
from sampledb_operator.model.pg_settings import POSTMASTER_PARAMETERS, needs_restart
from sampledb_operator.model.sampledb import SampleDB


def make_db(parameters: dict[str, str] | None = None, **status: Any) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "generation": 1},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "parameters": parameters or {}},
        "status": status,
    })


def test_the_file_includes_pgdatas_own_file_first_then_the_parameters_in_order() -> None:
    text = pgconfig.render({"work_mem": "8MB", "max_connections": "200"}, "/var/lib/postgresql/data/pgdata")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["include_if_exists = '/var/lib/postgresql/data/pgdata/postgresql.conf'",
                     "hba_file = '/etc/sampledb/pg_hba.conf'", "wal_log_hints = 'on'", "wal_keep_size = '256MB'",
                     "synchronous_standby_names = ''",
                     "wal_sender_timeout = '15s'", "wal_receiver_timeout = '15s'",
                     "include_if_exists = '/var/run/postgresql/sampledb-instance.conf'",
                     "max_connections = '200'", "work_mem = '8MB'"]


def test_the_replication_timeouts_are_the_operators_unless_the_parameters_set_them() -> None:
    lines = pgconfig.render({"wal_sender_timeout": "30s"}, "/d").splitlines()
    assert lines.index("wal_sender_timeout = '15s'") < lines.index("wal_sender_timeout = '30s'")  # the last wins
    assert "wal_receiver_timeout = '15s'" in lines


def test_synchronous_replication_waits_for_any_one_standby() -> None:
    text = pgconfig.render({}, "/d", synchronous=True)
    assert "synchronous_standby_names = 'ANY 1 (*)'" in text.splitlines()
    assert text.endswith("\n")


@pytest.mark.parametrize(("value", "literal"), [
    ("plain", "'plain'"),
    ("it's", "'it''s'"),
    ("'; fsync = 'off", "'''; fsync = ''off'"),
    ("a\\b", "'a\\\\b'"),
    ('"$user", public', "'\"$user\", public'"),
    ("", "''"),
])
def test_values_are_one_single_quoted_literal(value: str, literal: str) -> None:
    assert pgconfig.quote(value) == literal
    assert pgconfig.render({"search_path": value}, "/d").splitlines()[-1] == f"search_path = {literal}"


def test_the_configmap_holds_the_file_for_the_running_data_directory() -> None:
    db = make_db({"work_mem": "8MB"})
    assert "'/var/lib/postgresql/data/pgdata/postgresql.conf'" in d.configmap(db)["data"]["postgresql.conf"]
    upgraded = d.Inputs(db, {}, d.Running("17.2", "postgres:17.2", "pgdata-17"))
    cm = next(c for c in d.children(upgraded) if c["metadata"]["name"] == names.configmap_name("orders"))
    assert "'/var/lib/postgresql/data/pgdata-17/postgresql.conf'" in cm["data"]["postgresql.conf"]
    assert "ownerReferences" not in cm["metadata"]
    assert cm["metadata"]["labels"][DATABASE_LABEL] == "orders"


def template_annotation(parameters: dict[str, str]) -> str:
    sts = d.statefulset(make_db(parameters))
    return str(sts["spec"]["template"]["metadata"]["annotations"][pgconfig.RESTART_ANNOTATION])


def test_only_postmaster_parameters_change_the_pod_template() -> None:
    base = template_annotation({"work_mem": "4MB", "max_connections": "100"})
    assert template_annotation({"work_mem": "64MB", "max_connections": "100"}) == base
    assert template_annotation({"max_connections": "100", "statement_timeout": "5s"}) == base
    assert template_annotation({"work_mem": "4MB", "max_connections": "200"}) != base
    assert template_annotation({"work_mem": "4MB", "max_connections": "100", "shared_buffers": "1GB"}) != base
    sts = d.statefulset(make_db({"work_mem": "4MB"}))
    assert d.statefulset(make_db({"work_mem": "8MB"}))["spec"]["template"] == sts["spec"]["template"]


def test_the_hashes_are_the_ones_earlier_versions_recorded() -> None:
    # status.appliedParameters and the pod template's restart annotation hold these: a new hash for the same
    # parameters would reload (or restart) every running database after an upgrade of the operator
    parameters = {"work_mem": "4MB", "shared_buffers": "128MB"}
    for _ in range(2):  # computed, then kept
        assert pgconfig.parameters_hash(parameters) == "33a9f3ca59cb83b0"
        assert pgconfig.parameters_hash({}) == "44136fa355b3678a"
        assert pgconfig.restart_hash(parameters) == "a18efa9c97af3791"


def test_the_parameters_hash_covers_every_parameter_and_ignores_order() -> None:
    assert pgconfig.parameters_hash({"a": "1", "b": "2"}) == pgconfig.parameters_hash({"b": "2", "a": "1"})
    assert pgconfig.parameters_hash({"work_mem": "4MB"}) != pgconfig.parameters_hash({"work_mem": "8MB"})
    assert pgconfig.parameters_hash(None) == pgconfig.parameters_hash({})


def test_the_postmaster_list_holds_the_usual_restart_settings() -> None:
    for name in ("max_connections", "shared_buffers", "max_wal_senders", "max_replication_slots", "wal_level",
                 "max_worker_processes", "max_prepared_transactions", "max_locks_per_transaction", "huge_pages",
                 "shared_preload_libraries", "port", "listen_addresses", "autovacuum_max_workers"):
        assert needs_restart(name), name
    for name in ("work_mem", "statement_timeout", "log_min_duration_statement", "autovacuum_naptime",
                 "max_wal_size", "pg_stat_statements.max"):
        assert not needs_restart(name), name
    assert all(n == n.lower() for n in POSTMASTER_PARAMETERS)


DONE = JobState(finished=True, succeeded=True, reason="Complete", message="")
FAILED = JobState(finished=True, succeeded=False, reason="PodFailurePolicy", message="bad value")
RUNNING = JobState(finished=False, succeeded=False, reason="", message="")


@pytest.mark.parametrize(("applied", "ready", "busy", "job", "step"), [
    ("h", True, False, None, rl.Step.NOTHING),
    ("h", False, True, FAILED, rl.Step.NOTHING),
    (None, True, False, None, rl.Step.CREATE_JOB),
    ("old", True, False, None, rl.Step.CREATE_JOB),
    ("old", False, False, None, rl.Step.WAIT),
    ("old", True, True, None, rl.Step.WAIT),
    ("old", True, False, RUNNING, rl.Step.WAIT),
    ("old", False, False, DONE, rl.Step.RECORD),
    ("old", True, False, FAILED, rl.Step.FAILED),
])
def test_the_reload_decision(applied: str | None, ready: bool, busy: bool, job: JobState | None,
                             step: rl.Step) -> None:
    decision = rl.decide(rl.ReloadInput(wanted="h", applied=applied, db_ready=ready, busy=busy, job=job))
    assert decision.step is step


def test_a_succeeded_job_another_reload_came_after_is_replaced_and_a_failed_one_is_the_record() -> None:
    again = rl.ReloadInput(wanted="h", applied="other", db_ready=True, busy=False, job=DONE, overtaken=True)
    assert rl.decide(again).step is rl.Step.REPLACE_JOB
    failed = rl.ReloadInput(wanted="h", applied="other", db_ready=True, busy=False, job=FAILED, overtaken=True)
    assert rl.decide(failed).step is rl.Step.FAILED


def test_back_to_the_recorded_parameters_after_another_reload_records_that_one() -> None:
    back = rl.ReloadInput(wanted="h", applied="h", db_ready=True, busy=False, job=DONE, last_reload="between")
    assert rl.decide(back).step is rl.Step.RECORD_LAST
    same = rl.ReloadInput(wanted="h", applied="h", db_ready=True, busy=False, job=DONE, last_reload="h")
    assert rl.decide(same).step is rl.Step.NOTHING


def reload_job_done(h: str, at: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Complete" if at else "Failed", "status": "True"}]}
    if at:
        status["completionTime"] = at
    return {"metadata": {"annotations": {pgconfig.PARAMETERS_HASH_ANNOTATION: h}}, "status": status}


def test_the_last_reload_is_the_latest_succeeded_job_after_the_recorded_ones() -> None:
    a, b = reload_job_done("a", "2026-12-01T10:00:00Z"), reload_job_done("b", "2026-12-01T10:05:00Z")
    assert rl.last_reload((a, b), "a") == "b"
    assert rl.last_reload((b, a), "b") is None  # the recorded one is the latest
    assert rl.last_reload((a,), "gone") == "a"  # recorded without a Job (or its Job expired): older than any
    assert rl.last_reload((a, reload_job_done("c", None)), "a") is None  # a failed Job reloaded nothing
    assert rl.last_reload((), "a") is None
    assert rl.last_reload((a, reload_job_done("b", "2026-12-01T10:00:00Z")), "a") is None  # a tie: no claim


def test_a_database_whose_statefulset_is_being_created_records_its_parameters_at_once() -> None:
    new = rl.ReloadInput(wanted="h", applied=None, db_ready=False, busy=False, job=None, statefulset_exists=False)
    assert rl.decide(new).step is rl.Step.RECORD_NEW
    # an existing pod (e.g. one made by an older operator) is never assumed to run the file
    assert rl.decide(rl.ReloadInput(wanted="h", applied=None, db_ready=True, busy=False, job=None)).step \
        is rl.Step.CREATE_JOB
    # a recorded hash is never replaced without a Job
    old = rl.ReloadInput(wanted="h", applied="old", db_ready=False, busy=False, job=None, statefulset_exists=False)
    assert rl.decide(old).step is rl.Step.WAIT


def test_the_reload_job_mounts_the_same_file_and_fails_at_once_on_a_bad_value() -> None:
    db = make_db({"work_mem": "8MB"})
    h = pgconfig.parameters_hash(db.spec.parameters)
    job = rl.reload_job(db, h)
    assert job["metadata"]["name"] == names.reload_job_name("orders", "uid-1", h)
    assert job["metadata"]["annotations"] == {pgconfig.PARAMETERS_HASH_ANNOTATION: h}
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"][-1].endswith("exec bash /sampledb/scripts/reload.sh")
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CONFIG_FILE"] == "/etc/sampledb/postgresql.conf"
    assert {"PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE"} <= set(env)
    assert {"name": "config", "mountPath": "/etc/sampledb", "readOnly": True} in container["volumeMounts"]
    sts_config = next(v for v in d.statefulset(db)["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
    assert next(v for v in pod["volumes"] if v["name"] == "config") == sts_config
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0]["onExitCodes"]["values"] == [2]
    assert names.reload_job_name("orders", "uid-1", "other") != job["metadata"]["name"]


def test_a_finished_reload_job_expires_once_recorded_or_superseded() -> None:
    db = make_db({"work_mem": "8MB"})
    h = pgconfig.parameters_hash(db.spec.parameters)
    job = rl.reload_job(db, h)
    assert not job_ttl.outcome_recorded(db, job)
    assert job_ttl.outcome_recorded(make_db({"work_mem": "8MB"}, appliedParameters=h), job)
    assert job_ttl.outcome_recorded(make_db({"work_mem": "16MB"}), job)


def test_required_tls_restarts_the_instances_and_leaves_every_other_hash_as_it_was() -> None:
    params = {"max_connections": "200", "work_mem": "8MB"}
    assert pgconfig.restart_hash(params, tls_required=False) == pgconfig.restart_hash(params)
    assert pgconfig.restart_hash(params, tls_required=True) != pgconfig.restart_hash(params)
    assert "hostssl" in pgconfig.hba(tls_required=True) and "\nhost " not in pgconfig.hba(tls_required=True)
    assert pgconfig.hba() == pgconfig.HBA and "hostssl" not in pgconfig.HBA
