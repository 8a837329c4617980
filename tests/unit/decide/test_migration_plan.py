"""decide/upgrades/migrations.py: which migration files are pending, in what order, and what stops them."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as stb

from sampledb_operator.decide import jobs
from sampledb_operator.decide.upgrades import migrations as mig
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.sampledb_status import AppliedMigration

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
INIT = b"CREATE TABLE users (id int PRIMARY KEY);"
INDEX = b"CREATE INDEX users_id ON users (id);"
COLUMN = b"ALTER TABLE users ADD COLUMN email text;"


def sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def applied(name: str, content: bytes) -> AppliedMigration:
    return AppliedMigration(name=name, checksum=sha(content), applied_at=NOW)


def make_db(uid: str = "uid-1") -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": uid, "generation": 2},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "migrations": {"configMapName": "orders-sql"}},
    })


# ---------------------------------------------------------------- order and pending


def test_files_are_ordered_by_numeric_version_not_by_text() -> None:
    files = {"0010_ten.sql": b"", "0002_two.sql": b"", "00003_three.sql": b"", "0001_one.sql": b""}
    plan = mig.plan_migrations(files, [])
    assert [f.name for f in plan.files] == ["0001_one.sql", "0002_two.sql", "00003_three.sql", "0010_ten.sql"]
    assert [f.version for f in plan.files] == [1, 2, 3, 10]
    assert plan.problem is None


def test_every_file_is_pending_on_a_fresh_database_with_its_checksum() -> None:
    plan = mig.plan_migrations({"0002_add_index.sql": INDEX, "0001_init.sql": INIT}, [])
    assert [(f.name, f.checksum) for f in plan.pending] == [("0001_init.sql", sha(INIT)),
                                                           ("0002_add_index.sql", sha(INDEX))]
    assert len(plan.digest) == 64


def test_only_files_not_yet_applied_are_pending() -> None:
    files = {"0001_init.sql": INIT, "0002_add_index.sql": INDEX, "0003_email.sql": COLUMN}
    plan = mig.plan_migrations(files, [applied("0001_init.sql", INIT), applied("0002_add_index.sql", INDEX)])
    assert [f.name for f in plan.pending] == ["0003_email.sql"]
    assert [f.name for f in plan.files] == ["0001_init.sql", "0002_add_index.sql", "0003_email.sql"]


def test_nothing_is_pending_when_every_file_is_applied() -> None:
    plan = mig.plan_migrations({"0001_init.sql": INIT}, [applied("0001_init.sql", INIT)])
    assert (plan.pending, plan.digest, plan.problem) == ((), "", None)


def test_an_empty_configmap_has_nothing_pending() -> None:
    assert mig.plan_migrations({}, []) == mig.MigrationPlan()


def test_a_renamed_but_unchanged_applied_file_stays_applied() -> None:
    """migrate.sh matches files to its records by version, and so does the plan."""
    plan = mig.plan_migrations({"0001_initial.sql": INIT}, [applied("0001_init.sql", INIT)])
    assert plan.pending == ()
    assert plan.problem is None


def test_applied_records_without_a_file_are_not_a_problem() -> None:
    plan = mig.plan_migrations({"0002_add_index.sql": INDEX}, [applied("0001_init.sql", INIT)])
    assert [f.name for f in plan.pending] == ["0002_add_index.sql"]


# ---------------------------------------------------------------- what stops a run


def test_an_applied_file_whose_content_changed_is_refused_naming_it() -> None:
    files = {"0001_init.sql": INIT + b" -- edited", "0002_add_index.sql": INDEX}
    plan = mig.plan_migrations(files, [applied("0001_init.sql", INIT)])
    assert plan.problem is not None
    assert plan.problem.reason == "MigrationChanged"
    assert "0001_init.sql" in plan.problem.message
    assert plan.pending == ()
    assert plan.digest == ""


def test_a_record_without_checksum_is_not_compared() -> None:
    plan = mig.plan_migrations({"0001_init.sql": INIT}, [AppliedMigration(name="0001_init.sql")])
    assert plan.problem is None
    assert plan.pending == ()


def test_a_new_file_numbered_below_the_newest_applied_is_out_of_order() -> None:
    files = {"0001_init.sql": INIT, "0002_late.sql": COLUMN, "0003_add_index.sql": INDEX}
    plan = mig.plan_migrations(files, [applied("0001_init.sql", INIT), applied("0003_add_index.sql", INDEX)])
    assert plan.problem is not None
    assert plan.problem.reason == "MigrationOutOfOrder"
    assert "0002_late.sql" in plan.problem.message
    assert "0003_add_index.sql" in plan.problem.message
    assert plan.pending == ()


def test_keys_that_are_not_migration_file_names_are_refused_naming_them() -> None:
    files = {"0001_init.sql": INIT, "README.md": b"", "001_short.sql": b"", "0002_has.dot.sql": b""}
    plan = mig.plan_migrations(files, [])
    assert plan.problem is not None
    assert plan.problem.reason == "InvalidMigrationName"
    for name in ("README.md", "001_short.sql", "0002_has.dot.sql"):
        assert name in plan.problem.message
    assert "0001_init.sql" not in plan.problem.message
    assert plan.pending == ()


def test_two_files_with_the_same_version_are_refused() -> None:
    plan = mig.plan_migrations({"0001_init.sql": INIT, "00001_other.sql": INDEX}, [])
    assert plan.problem is not None
    assert plan.problem.reason == "InvalidMigrationName"
    assert "0001_init.sql" in plan.problem.message and "00001_other.sql" in plan.problem.message


def test_the_names_allowed_are_those_migrate_sh_allows() -> None:
    assert mig.NAME_RE.fullmatch("0001_create-users_2.sql")
    assert mig.NAME_RE.fullmatch("20261130120000_stamp.sql")
    for bad in ("0001_.sql", "0001-init.sql", "0001_init.SQL", "0001__init.sql", "0001_init.sql.bak",
                "1234567890123456789_too_long.sql"):
        assert mig.NAME_RE.fullmatch(bad) is None, bad


# ---------------------------------------------------------------- the digest


def test_the_digest_depends_only_on_the_pending_files() -> None:
    two = mig.plan_migrations({"0001_init.sql": INIT, "0002_add_index.sql": INDEX}, [applied("0001_init.sql", INIT)])
    one = mig.plan_migrations({"0002_add_index.sql": INDEX}, [applied("0001_init.sql", INIT)])
    assert two.digest == one.digest
    assert two.digest == mig.pending_digest(two.pending)


def test_a_changed_or_added_pending_file_changes_the_digest() -> None:
    base = mig.plan_migrations({"0001_init.sql": INIT}, []).digest
    edited = mig.plan_migrations({"0001_init.sql": INIT + b"\n"}, []).digest
    added = mig.plan_migrations({"0001_init.sql": INIT, "0002_add_index.sql": INDEX}, []).digest
    renamed = mig.plan_migrations({"0001_create.sql": INIT}, []).digest
    assert len({base, edited, added, renamed}) == 4


@given(stb.dictionaries(stb.integers(1, 9999).map(lambda v: f"{v:04d}_m.sql"), stb.binary(max_size=64),
                        min_size=1, max_size=8),
       stb.randoms())
def test_the_digest_and_order_do_not_depend_on_the_configmaps_key_order(files: dict[str, bytes], rnd: Any) -> None:
    keys = list(files)
    rnd.shuffle(keys)
    shuffled = {k: files[k] for k in keys}
    a, b = mig.plan_migrations(files, []), mig.plan_migrations(shuffled, [])
    assert a == b
    assert [f.version for f in a.files] == sorted(f.version for f in a.files)


# ---------------------------------------------------------------- after a run


def test_applied_records_grow_by_the_pending_files_in_version_order() -> None:
    plan = mig.plan_migrations({"0001_init.sql": INIT, "0002_add_index.sql": INDEX, "0003_email.sql": COLUMN},
                               [applied("0001_init.sql", INIT)])
    later = datetime(2026, 12, 1, tzinfo=UTC)
    out = mig.with_applied([applied("0001_init.sql", INIT)], plan.pending, later)
    assert [(a.name, a.checksum, a.applied_at) for a in out] == [
        ("0001_init.sql", sha(INIT), NOW), ("0002_add_index.sql", sha(INDEX), later),
        ("0003_email.sql", sha(COLUMN), later)]
    assert mig.plan_migrations({"0001_init.sql": INIT, "0002_add_index.sql": INDEX, "0003_email.sql": COLUMN},
                               out).pending == ()


# ---------------------------------------------------------------- the snapshot and the Job


def test_source_files_read_data_and_binary_data_as_a_volume_would() -> None:
    cm = {"data": {"0001_init.sql": "SELECT 'é';"},
          "binaryData": {"0002_bin.sql": base64.b64encode(b"SELECT 2;").decode()}}
    assert mig.source_files(cm) == {"0001_init.sql": "SELECT 'é';".encode(), "0002_bin.sql": b"SELECT 2;"}


def test_the_snapshot_is_an_immutable_owned_copy_of_every_file() -> None:
    db = make_db()
    source = {"data": {"0001_init.sql": INIT.decode(), "0002_add_index.sql": INDEX.decode()}}
    plan = mig.plan_migrations(mig.source_files(source), [applied("0001_init.sql", INIT)])
    cm = mig.snapshot_configmap(db, plan.files, source)
    assert cm["immutable"] is True
    assert cm["data"] == source["data"]  # the applied file too: migrate.sh checks the whole history
    assert cm["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sampledb-operator"
    assert cm["metadata"]["labels"]["app.kubernetes.io/component"] == "migrations"
    assert cm["metadata"]["name"].startswith("orders-migrations-")


def test_the_snapshot_name_stands_for_its_content_and_the_database_incarnation() -> None:
    files = mig.plan_migrations({"0001_init.sql": INIT}, []).files
    edited = mig.plan_migrations({"0001_init.sql": INIT + b" "}, []).files
    assert mig.snapshot_name(make_db(), files) == mig.snapshot_name(make_db(), files)
    assert mig.snapshot_name(make_db(), files) != mig.snapshot_name(make_db(), edited)
    assert mig.snapshot_name(make_db(), files) != mig.snapshot_name(make_db("uid-2"), files)


def test_stale_snapshots_are_those_no_running_job_mounts() -> None:
    assert mig.stale_snapshots(["a", "b", "c"], {"b"}) == ["a", "c"]
    assert mig.stale_snapshots([], set()) == []


def test_the_migration_job_mounts_the_snapshot_and_fails_fast_on_errors_a_retry_cannot_fix() -> None:
    body = jobs.migration_job(make_db(), name="orders-migrate-1234", snapshot_configmap="orders-migrations-ab",
                              digest="d" * 64)
    pod = body["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["bash", "-c", "bash /sampledb/scripts/wait-ready.sh && exec bash"
                                    " /sampledb/scripts/migrate.sh"]
    assert {"name": "MIGRATIONS_DIR", "value": "/sampledb/migrations"} in container["env"]
    assert {"name": "migrations", "mountPath": "/sampledb/migrations", "readOnly": True} in container["volumeMounts"]
    assert {"name": "migrations", "configMap": {"name": "orders-migrations-ab"}} in pod["volumes"]
    assert body["metadata"]["labels"]["app.kubernetes.io/component"] == "migrate"
    assert body["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "migrate"
    [rule] = body["spec"]["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"] == {"containerName": "migrate", "operator": "In", "values": [2, 3, 6]}
    assert body["metadata"]["annotations"][jobs.MIGRATION_DIGEST_ANNOTATION] == "d" * 64


def test_the_job_name_is_per_pending_set_and_per_database_incarnation() -> None:
    assert mig.job_token("uid-1", "abc") != mig.job_token("uid-2", "abc")
    assert mig.job_token("uid-1", "abc") == mig.job_token("uid-1", "abc")


# ---------------------------------------------------------------- the database's migrate Jobs, as cached


def migrate_job(name: str, *, owner: str = "uid-1", finished: bool = False, snapshot: str = "") -> dict[str, Any]:
    conditions = [{"type": "Complete", "status": "True"}] if finished else []
    volumes = [{"name": "migrations", "configMap": {"name": snapshot}}] if snapshot else []
    return {"metadata": {"name": name, "ownerReferences": [{"uid": owner}]},
            "spec": {"template": {"spec": {"volumes": volumes}}}, "status": {"conditions": conditions}}


def test_a_migration_is_in_progress_while_an_owned_job_is_unfinished() -> None:
    db = make_db()
    running, done, foreign = migrate_job("b", snapshot="s1"), migrate_job("a", finished=True, snapshot="s0"), \
        migrate_job("c", owner="uid-2", snapshot="s2")
    assert mig.unfinished_jobs([running, done, foreign], db) == ["b"]
    assert mig.in_progress([running], db) and not mig.in_progress([done, foreign], db)
    assert mig.mounted_snapshots([running, done, foreign], db) == {"s1"}
    assert mig.stale_snapshots(["s0", "s1"], mig.mounted_snapshots([running, done], db)) == ["s0"]
