"""upgrade.sh on real clusters: network (Kubernetes) flow, pg_upgrade and local dump flows, failures."""

from __future__ import annotations

import json
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
    bindir_for,
    installed_majors,
    private_dir,
)

pytestmark = pytest.mark.postgres

MARKER = "SAMPLEDB_UPGRADE_COMPLETE"
TARGET_MAJORS = [m for m in installed_majors() if m >= 15]


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
