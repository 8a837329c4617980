"""upgrade.sh on real clusters: network (Kubernetes) flow, pg_upgrade and local dump flows, failures."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg_dataset
import psycopg
import pytest
from pg_harness import (
    PASSWORD,
    PgServer,
    ScriptRun,
    ScriptRunner,
    as_postgres,
    bindir_for,
    default_bindir,
    installed_majors,
    private_dir,
)

pytestmark = pytest.mark.postgres

MARKER = "SAMPLEDB_UPGRADE_COMPLETE"
TARGET_MAJORS = [m for m in installed_majors() if m >= 15]


def default_major() -> int:
    out = subprocess.run([str(default_bindir() / "postgres"), "--version"], capture_output=True, text=True,
                         check=True, timeout=30)
    return int(re.search(r"(\d+)", out.stdout).group(1))  # type: ignore[union-attr]


# pg_upgrade --link from the default server's major (fresh_server's) to each newer one installed (15 -> 18 here)
LINK_MAJORS = [m for m in installed_majors() if m > default_major()]


def prepare_old(server: PgServer) -> dict[str, Any]:
    """Load the data set, a second database and a login role; return the fingerprint."""
    with server.connect() as conn:
        conn.execute("CREATE ROLE app LOGIN PASSWORD 'app-pw'")
        conn.execute("CREATE DATABASE appdb OWNER app")
    with server.connect("appdb") as conn:
        pg_dataset.load(conn)
        conn.execute("GRANT SELECT ON customers TO app")
        return pg_dataset.fingerprint(conn)


def start_upgraded(datadir: Path, bindir: Path, parent: Path) -> PgServer:
    server = PgServer(bindir=bindir, datadir=datadir, sockdir=private_dir(parent, prefix="new-"))
    server.start()
    return server


def upgrade(runner: ScriptRunner, env: dict[str, str], new_bindir: Path) -> ScriptRun:
    return runner.run("upgrade.sh", {**env, "NEW_BINDIR": str(new_bindir)}, bindir=new_bindir)


@pytest.fixture
def stopped_old(fresh_server: PgServer) -> Iterator[tuple[PgServer, dict[str, Any]]]:
    print_ = prepare_old(fresh_server)
    fresh_server.stop()
    yield fresh_server, print_


def assert_new_cluster_matches(new: PgServer, expected: dict[str, Any]) -> None:
    with new.connect("appdb") as conn:
        assert pg_dataset.fingerprint(conn) == expected
        owner = conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'appdb'")
        assert owner.fetchone() == ("app",)
    conninfo = f"host=127.0.0.1 port={new.port} user=app password=app-pw dbname=appdb"
    with psycopg.connect(conninfo, connect_timeout=10) as conn:
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (20000,)


@pytest.mark.parametrize("new_major", TARGET_MAJORS)
def test_network_flow_rebuilds_identical_cluster_and_writes_marker(
    runner: ScriptRunner, fresh_server: PgServer, pg_root: Path, new_major: int
) -> None:
    old = fresh_server
    expected = prepare_old(old)
    new_bindir = bindir_for(new_major)
    assert new_bindir is not None
    new_dir = old.sockdir / f"pgdata-{new_major}"
    env = {**old.libpq_env(), "NEW_PGDATA": str(new_dir), "OLD_PGDATA": str(old.datadir)}

    run = upgrade(runner, env, new_bindir)

    assert run.returncode == 0, run.stderr
    assert run.result["method"] == "logical"
    assert run.result["rows"] >= pg_dataset.MIN_ROWS
    marker = json.loads((new_dir / MARKER).read_text())
    assert marker["method"] == "logical"
    assert marker["new_version"].startswith(f"postgres (PostgreSQL) {new_major}")
    assert not Path(f"{new_dir}.sampledb-staging").exists()
    assert PASSWORD not in run.stdout + run.stderr
    with old.connect() as conn:
        assert conn.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
    new = start_upgraded(new_dir, new_bindir, pg_root)
    try:
        assert new.major == new_major
        assert_new_cluster_matches(new, expected)
    finally:
        new.stop()

    again = upgrade(runner, env, new_bindir)
    assert again.returncode == 0, again.stderr
    assert again.result["outcome"] == "exists"


@pytest.mark.parametrize("new_major", TARGET_MAJORS)
@pytest.mark.parametrize("method", ["auto", "logical"])
def test_stopped_old_cluster_upgrades_locally_and_stays_usable(
    runner: ScriptRunner, stopped_old: tuple[PgServer, dict[str, Any]], pg_root: Path, method: str, new_major: int
) -> None:
    old, expected = stopped_old
    new_bindir = bindir_for(new_major)
    assert new_bindir is not None
    new_dir = old.sockdir / "pgdata-new"
    env = {
        "PGUSER": "postgres",
        "OLD_BINDIR": str(old.bindir),
        "OLD_PGDATA": str(old.datadir),
        "NEW_PGDATA": str(new_dir),
        "UPGRADE_METHOD": method,
    }

    run = upgrade(runner, env, new_bindir)

    assert run.returncode == 0, run.stderr
    assert run.result["method"] == ("pg_upgrade" if method == "auto" else "logical")
    assert (new_dir / MARKER).exists()
    new = start_upgraded(new_dir, new_bindir, pg_root)
    try:
        assert new.major == new_major
        assert_new_cluster_matches(new, expected)
    finally:
        new.stop()
    old.start()
    with old.connect("appdb") as conn:
        assert pg_dataset.fingerprint(conn) == expected


def test_failed_restore_leaves_no_new_directory_and_unfreezes_old(
    runner: ScriptRunner, fresh_server: PgServer, pg_bindir: Path
) -> None:
    old = fresh_server
    with old.connect() as conn:
        conn.execute(
            """
            CREATE TABLE zz_parent (id int PRIMARY KEY);
            CREATE FUNCTION parent_exists(x int) RETURNS boolean LANGUAGE sql
                AS 'SELECT EXISTS (SELECT 1 FROM public.zz_parent WHERE id = x)';
            CREATE TABLE aa_child (id int CHECK (parent_exists(id)));
            INSERT INTO zz_parent VALUES (1);
            INSERT INTO aa_child VALUES (1);
            """
        )
    new_dir = old.sockdir / "pgdata-new"

    run = upgrade(runner, {**old.libpq_env(), "NEW_PGDATA": str(new_dir)}, pg_bindir)

    assert run.returncode == 6
    assert "violates check constraint" in run.result["message"]
    assert not new_dir.exists()
    assert not Path(f"{new_dir}.sampledb-staging").exists()
    with old.connect() as conn:
        assert conn.execute("SHOW default_transaction_read_only").fetchone() == ("off",)
        assert conn.execute("SELECT count(*) FROM aa_child").fetchone() == (1,)


def test_foreign_new_directory_is_refused_and_left_alone(
    runner: ScriptRunner, pg_server: PgServer, work_dir: Path, pg_bindir: Path
) -> None:
    new_dir = work_dir / "pgdata-new"
    new_dir.mkdir()
    (new_dir / "precious").write_text("keep me")

    run = upgrade(runner, {**pg_server.libpq_env(), "NEW_PGDATA": str(new_dir)}, pg_bindir)

    assert run.returncode == 2
    assert "refusing to touch it" in run.result["message"]
    assert (new_dir / "precious").read_text() == "keep me"


def test_non_superuser_is_refused_before_anything_changes(
    runner: ScriptRunner, fresh_server: PgServer, pg_bindir: Path
) -> None:
    with fresh_server.connect() as conn:
        conn.execute("CREATE ROLE plain LOGIN PASSWORD 'plain-pw'")
    env = {**fresh_server.libpq_env(), "PGUSER": "plain", "PGPASSWORD": "plain-pw"}
    new_dir = fresh_server.sockdir / "pgdata-new"

    run = upgrade(runner, {**env, "NEW_PGDATA": str(new_dir)}, pg_bindir)

    assert run.returncode == 2
    assert "superuser" in run.result["message"]
    assert not new_dir.exists()


def copy_binaries(runner: ScriptRunner, old_bindir: Path, dest: Path) -> ScriptRun:
    """upgrade.sh copy-binaries DEST with the old installation on PATH (the init container's run)."""
    result = runner.work / f"copy-result-{dest.name}.json"
    env = runner.environment({"RESULT_FILE": str(result)}, old_bindir)
    proc = as_postgres(["bash", str(runner.dir / "upgrade.sh"), "copy-binaries", str(dest)], env=env, check=False)
    return ScriptRun(proc.returncode, proc.stdout, proc.stderr, json.loads(result.read_text()))


def link_env(old: PgServer, old_bindir: Path, new_dir: Path) -> dict[str, str]:
    return {"PGUSER": "postgres", "OLD_BINDIR": str(old_bindir), "OLD_PGDATA": str(old.datadir),
            "NEW_PGDATA": str(new_dir), "UPGRADE_METHOD": "link", "UPGRADE_ANALYZE": "0"}


@pytest.mark.parametrize("new_major", LINK_MAJORS)
def test_link_mode_with_the_copied_old_binaries_shares_the_files_and_disables_the_old_directory(
    runner: ScriptRunner, stopped_old: tuple[PgServer, dict[str, Any]], pg_root: Path, new_major: int
) -> None:
    old, expected = stopped_old
    new_bindir = bindir_for(new_major)
    assert new_bindir is not None
    dest = private_dir(pg_root, prefix="old-")  # the init container's emptyDir

    copy = copy_binaries(runner, old.bindir, dest)

    assert copy.returncode == 0, copy.stderr
    assert copy.result["old_bindir"] == str(dest / "bin")
    assert (dest / "root" / str(old.bindir.resolve()).lstrip("/") / "postgres").is_file()
    assert any((dest / "lib").iterdir())  # the libraries the old programs need, outside the C library
    assert not list((dest / "lib").glob("libc.so*"))
    new_dir = old.sockdir / "pgdata-new"

    run = upgrade(runner, link_env(old, dest / "bin", new_dir), new_bindir)

    assert run.returncode == 0, run.stderr
    assert run.result["method"] == "link"
    assert json.loads((new_dir / MARKER).read_text())["method"] == "link"
    # the point of no return was passed: the old directory cannot start any more
    assert (old.datadir / "global" / "pg_control.old").exists()
    assert not (old.datadir / "global" / "pg_control").exists()
    # the new cluster's relation files are the old ones (hard links), not copies
    linked = [f for f in (new_dir / "base").rglob("*") if f.is_file() and f.stat().st_nlink > 1]
    assert len(linked) > 10
    new = start_upgraded(new_dir, new_bindir, pg_root)
    try:
        assert new.major == new_major
        assert_new_cluster_matches(new, expected)
    finally:
        new.stop()


@pytest.mark.parametrize("new_major", LINK_MAJORS)
def test_a_refused_link_check_says_so_and_leaves_the_old_cluster_usable(
    runner: ScriptRunner, fresh_server: PgServer, pg_root: Path, new_major: int
) -> None:
    new_bindir = bindir_for(new_major)
    assert new_bindir is not None
    # the refusal: an extension whose library the new installation lacks
    assert not (new_bindir.parent / "lib" / "pgcrypto.so").exists(), f"{new_bindir} has pgcrypto"
    old = fresh_server
    with old.connect() as conn:
        conn.execute("CREATE EXTENSION pgcrypto")
        conn.execute("CREATE TABLE kept AS SELECT g AS id, gen_random_uuid() AS u FROM generate_series(1, 500) g")
    old.stop()
    new_dir = old.sockdir / "pgdata-new"
    run = upgrade(runner, link_env(old, old.bindir, new_dir), new_bindir)

    assert run.returncode == 6, run.stderr
    assert run.result["check_failed"] is True
    assert run.result["old_usable"] is True
    assert "pgcrypto" in run.result["message"]
    assert not new_dir.exists()
    assert not Path(f"{new_dir}.sampledb-staging").exists()
    assert (old.datadir / "global" / "pg_control").exists()
    old.start()
    with old.connect() as conn:
        assert conn.execute("SELECT count(*) FROM kept").fetchone() == (500,)


def test_copy_binaries_refuses_a_missing_directory(runner: ScriptRunner, pg_root: Path, pg_bindir: Path) -> None:
    run = copy_binaries(runner, pg_bindir, private_dir(pg_root, prefix="old-") / "absent")

    assert run.returncode == 2
    assert "writable directory" in run.result["message"]


ATTVER_SCRIPT = """CREATE TABLE standin (id int, label text);
ALTER TABLE ONLY public.standin ALTER COLUMN id SET (pg_attver=22158952);
ALTER TABLE ONLY public.standin ALTER COLUMN label SET (n_distinct=-1);
INSERT INTO standin VALUES (1, 'ALTER TABLE ONLY public.standin ALTER COLUMN id SET (pg_attver=1);');
"""


def restore_stand_in(runner: ScriptRunner, server: PgServer, work: Path,
                     script: str) -> subprocess.CompletedProcess[str]:
    """upgrade.sh pg-restore-filtered as pg_upgrade calls its pg_restore, with a bindir whose
    pg_restore writes `script` as the archive's SQL (and records its arguments) and whose psql is real."""
    bindir = work / "bin"
    bindir.mkdir(exist_ok=True)
    (work / "archive.sql").write_text(script)
    (bindir / "pg_restore").write_text(f'#!/bin/sh\necho "$@" > {work}/restore-args\ncat {work}/archive.sql\n')
    (bindir / "pg_restore").chmod(0o755)
    if not (bindir / "psql").exists():
        (bindir / "psql").symlink_to(server.bindir / "psql")
    return as_postgres(["bash", str(runner.dir / "upgrade.sh"), "pg-restore-filtered", str(bindir),
                        "--host", str(server.sockdir), "--port", str(server.port), "--username", "postgres",
                        "--create", "--exit-on-error", "--verbose", "--transaction-size=1000",
                        "--dbname", "postgres", str(work / "pg_upgrade_dump_5.custom")], check=False)


def test_the_pg_restore_stand_in_drops_exactly_the_pg_attver_lines_and_stops_at_an_error(
    runner: ScriptRunner, fresh_server: PgServer, work_dir: Path
) -> None:
    run = restore_stand_in(runner, fresh_server, work_dir, ATTVER_SCRIPT)

    assert run.returncode == 0, run.stderr
    args = (work_dir / "restore-args").read_text().split()
    assert args == ["--create", "--exit-on-error", "--verbose", "--transaction-size=1000", "-f", "-", "--",
                    str(work_dir / "pg_upgrade_dump_5.custom")]  # no connection: the SQL goes to psql
    with fresh_server.connect() as conn:
        options = dict(conn.execute("SELECT attname, attoptions FROM pg_attribute"
                                    " WHERE attrelid = 'standin'::regclass AND attnum > 0").fetchall())
        assert options == {"id": None, "label": ["n_distinct=-1"]}  # any other column option is kept
        assert conn.execute("SELECT label FROM standin").fetchone() == (
            "ALTER TABLE ONLY public.standin ALTER COLUMN id SET (pg_attver=1);",)

    # --exit-on-error: the first failing statement ends the restore with a failure
    run = restore_stand_in(runner, fresh_server, work_dir,
                           "CREATE TABLE after_error (id int) WITH (no_such_option=1);\nCREATE TABLE later (id int);\n")

    assert run.returncode != 0
    assert "no_such_option" in run.stderr
    with fresh_server.connect() as conn:
        assert conn.execute("SELECT to_regclass('later')").fetchone() == (None,)


@pytest.mark.parametrize("new_major", LINK_MAJORS)
def test_a_table_the_old_count_cannot_read_ends_a_link_upgrade_before_the_point_of_no_return(
    runner: ScriptRunner, fresh_server: PgServer, new_major: int
) -> None:
    new_bindir = bindir_for(new_major)
    assert new_bindir is not None
    old = fresh_server
    with old.connect() as conn:
        conn.execute("CREATE DATABASE guarded")
        conn.execute("CREATE ROLE nobody NOLOGIN")
    with old.connect("guarded") as conn:
        conn.execute("CREATE TABLE secret AS SELECT g AS id FROM generate_series(1, 100) g")
    with old.connect() as conn:
        # every later session of the superuser in that database runs as a role that may not read the table
        conn.execute("ALTER ROLE postgres IN DATABASE guarded SET role = nobody")
    old.stop()
    new_dir = old.sockdir / "pgdata-new"

    run = upgrade(runner, link_env(old, old.bindir, new_dir), new_bindir)

    # the count failed: the script stops before pg_upgrade, instead of comparing without that database
    assert run.returncode == 6, run.stderr
    assert "counting the rows of the old cluster failed" in run.result["message"]
    assert "permission denied" in run.result["message"]
    assert run.result["old_usable"] is True
    assert (old.datadir / "global" / "pg_control").exists()
    assert not new_dir.exists()
