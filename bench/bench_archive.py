"""WAL archiving, base backups and point-in-time recovery to S3 with Barman Cloud, against the disk's floor.

Runs the data-plane scripts as the database pod does (docs/dataplane.md), on this machine, against a local
object store, and measures each against a floor taken in the same run:

1. a PostgreSQL 15 server started as the data-plane tests start theirs (tests/dataplane/pg_harness.py: initdb
   as the ``postgres`` OS user, fsync=off, synchronous_commit=off; wal_level=replica, full_page_writes on,
   archive_mode on, archive_timeout 60 s) holding a database of about --size-mib MiB (pgbench -i); the store
   is versitygw with TLS on a loopback port (hack/build-s3.sh builds it), as in
   tests/dataplane/test_dataplane_archive.py, and barman-cloud-* are the virtualenv's, runnable by
   ``postgres``;
2. the floors: ``cp -a`` of the data directory (without pg_wal's segments, which a base backup does not copy)
   to a directory on the same filesystem plus an fsync of every copied file; ``tar | gzip -9`` of it to
   nowhere (barman's tar stream compresses at zlib level 9, single-threaded: how much of a base backup is
   compression) and ``tar | lz4 -1`` (what barman-cloud-backup --lz4 pays), when lz4 is installed;
3. base-backup.sh (barman-cloud-backup, lz4 by default: SAMPLEDB_BACKUP_COMPRESSION) of the database: MiB/s of
   the data directory's size;
4. a steady pgbench load (-c 4 -R --rate) for --seconds with archive_command = archive-wal.sh, sampled every
   second as the operator samples it (pendingSegments and lagSeconds: the .ready files in
   pg_wal/archive_status and the age of the oldest): WAL generated, segments archived, seconds per segment
   (each archive-wal.sh run timed by a five-line shim around it), the archiver's busy share, max and p95 lag;
5. recover.sh into a fresh PGDATA to the end of the archive (the base backup and the steady load's WAL):
   its restoreSeconds and replaySeconds;
6. heavier loads (pgbench without -R, 4 then 8 then 16 clients; then bulk inserts) for --step-seconds each,
   until one grows a backlog (pending segments rising through the step, ending at 4 or more); the load
   stopped, the backlog drains (the archiver alone on the machine), and one segment's cost is taken apart
   (a barman-cloud command's start-up, gzip -6 of a real segment, the rest); then up to --bisect-steps
   rate-limited loads between the steady one and the one that fell behind bracket the highest WAL rate the
   archiver keeps up with while the load competes with it for the CPU (within --budget-minutes).

Prints three markdown tables (throughput against the floors; archiving under each load; the archiver's
ceiling and one segment's cost) and writes every number, with the per-second samples, to a JSON file
(--json; default /tmp/bench-archive-<time>.json). Progress goes to stderr. Needs root (it runs the scripts
and servers as ``postgres`` with runuser), PostgreSQL 15 (hack/install-postgres.sh), versitygw
(hack/build-s3.sh) and barman-cloud in .venv (make bootstrap). Uses only 127.0.0.1. Every server, process
and directory it starts is stopped and removed at the end, on failure, on Ctrl-C and on SIGTERM. About 10
minutes at the defaults, at most about 15.

Usage: .venv/bin/python bench/bench_archive.py [--size-mib 1024] [--seconds 60] [--rate 200]
       [--step-seconds 60] [--drain-seconds 60] [--bisect-steps 3] [--budget-minutes 14] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "dataplane"))

from pg_harness import (
    SUPERUSER,
    PgServer,
    ScriptRunner,
    as_postgres,
    bindir_for,
    free_port,
    os_user,
    private_dir,
    remove_tree,
)
from test_dataplane_archive import BUCKET, Store, barman_tools, make_certificates, versitygw_binary

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
SEGMENT = 16 * MIB
PREFIX, SERVER = "bench", "src"
NEW_PASSWORD = "bench-recovered-Pa55"
ARCHIVE_TIMEOUT_S = 60
SCALE_MIB = 15.0  # pgbench -i: one unit of scale is ~15 MiB (100,000 accounts and their primary key)
CEILING_LOADS: tuple[tuple[str, int], ...] = (("pgbench", 4), ("pgbench", 8), ("pgbench", 16), ("bulk", 2))
# archive-wal.sh timed: the archive_command runs this instead (one bash and two clock reads more per file)
TIMED_SHIM = """#!/usr/bin/env bash
t0=$EPOCHREALTIME
bash "$(dirname -- "${BASH_SOURCE[0]}")/archive-wal.sh" "$1"
rc=$?
printf '%s %s %s %s\\n' "$t0" "$EPOCHREALTIME" "$rc" "${1##*/}" >>"$SAMPLEDB_BENCH_ARCHIVE_LOG"
exit $rc
"""
# the live data directory (as barman reads it): tar's exit 1 says a file changed while read
TAR_PACK = """tar -C "$1" --exclude=./pg_wal/* --warning=no-file-changed --warning=no-file-removed -cf - . |
$2 | wc -c
rcs=("${PIPESTATUS[@]}")
(( rcs[0] <= 1 && rcs[1] == 0 && rcs[2] == 0 ))
"""
# gzip -6 of a file in barman's interpreter: seconds and compressed bytes
GZIP_TIMED = """import gzip, sys, time
data = open(sys.argv[1], "rb").read()
t0 = time.perf_counter()
n = len(gzip.compress(data, compresslevel=6))
print(time.perf_counter() - t0, n)
"""
BULK_SQL = "INSERT INTO bench_bulk SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, 5000) AS g;\n"
SAMPLE_SQL = """
SELECT (SELECT count(*) FROM pg_ls_archive_statusdir() s WHERE s.name LIKE '%.ready'),
       (SELECT extract(epoch FROM now() - min(s.modification))::float8
          FROM pg_ls_archive_statusdir() s WHERE s.name LIKE '%.ready'),
       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
       a.archived_count, a.failed_count
FROM pg_stat_archiver a
"""


def log(message: str) -> None:
    print(f"[bench_archive {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def p95(values: list[float]) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs (0 when undefined)."""
    if len(xs) < 2:
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def tree_bytes(path: Path, skip: str | None = None) -> int:
    """Bytes of the regular files under ``path`` (not following links), leaving out the top-level ``skip``."""
    total = 0
    for root, dirs, files in os.walk(path):
        if skip and Path(root) == path and skip in dirs:
            dirs.remove(skip)
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


class Interrupted(Exception):
    """SIGTERM: clean up as for Ctrl-C."""


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(f"signal {signum}")


@dataclass
class Sample:
    wall: float  # time.time()
    pending: int
    lag: float
    lsn: int
    archived: int
    failed: int


@dataclass
class Phase:
    """One load, sampled every second."""

    name: str
    load: str
    samples: list[Sample] = field(default_factory=list)
    tps: float | None = None
    archive_runs: list[tuple[float, float, int, str]] = field(default_factory=list)  # start, end, rc, file

    def summary(self) -> dict[str, Any]:
        first, last = self.samples[0], self.samples[-1]
        secs = max(last.wall - first.wall, 1e-9)
        durations = [end - start for start, end, rc, _ in self.archive_runs if rc == 0]
        lags = [s.lag for s in self.samples]
        xs = [s.wall - first.wall for s in self.samples]
        pending_slope = slope(xs, [float(s.pending) for s in self.samples])
        behind = pending_slope > 0.02 and last.pending >= max(4, first.pending + 3)
        return {
            "name": self.name, "load": self.load, "seconds": round(secs, 1), "tps": self.tps,
            "wal_mib_s": (last.lsn - first.lsn) / MIB / secs,
            "archived_files": last.archived - first.archived,
            "archived_segments_s": (last.archived - first.archived) / secs,
            "archived_mib_s": (last.archived - first.archived) * SEGMENT / MIB / secs,
            "failed": last.failed - first.failed,
            "s_per_segment_mean": statistics.fmean(durations) if durations else None,
            "s_per_segment_p95": p95(durations) if durations else None,
            "archiver_busy": min(1.0, sum(durations) / secs),
            "pending_start": first.pending, "pending_end": last.pending,
            "pending_max": max(s.pending for s in self.samples),
            "pending_slope_per_min": pending_slope * 60,
            "lag_max_s": max(lags), "lag_p95_s": p95(lags),
            "falls_behind": behind,
        }  # fmt: skip


class Bench:
    """Everything one run starts, and its cleanup."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.procs: list[subprocess.Popen[Any]] = []
        self.datadirs: list[Path] = []
        self.root: Path | None = None
        self.source: PgServer | None = None
        self.started = time.monotonic()
        self.python: list[str] = []  # the interpreter barman-cloud runs with as postgres, and its environment
        self.python_env: dict[str, str] = {}
        self.store_dir = Path("/nonexistent")  # set once the store runs
        self.archive_log = Path("/nonexistent")  # the timed archive_command's log, set with the server
        self.shim = Path("/nonexistent")
        self.store_tools = Path("/nonexistent")
        self.results: dict[str, Any] = {"args": vars(args)}
        bindir = bindir_for(args.pg_major)
        if bindir is None:
            raise SystemExit(f"bench_archive: PostgreSQL {args.pg_major} is not installed (hack/install-postgres.sh)")
        self.bindir = bindir

    # ---- processes and cleanup

    def popen(self, cmd: list[str], env: Mapping[str, str], **kwargs: Any) -> subprocess.Popen[Any]:
        proc: subprocess.Popen[Any] = subprocess.Popen(
            cmd, env=dict(env), stdin=subprocess.DEVNULL, start_new_session=True, **kwargs
        )
        self.procs.append(proc)
        return proc

    @staticmethod
    def kill(proc: subprocess.Popen[Any], grace: float = 10) -> None:
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(grace)

    def stop_server(self, datadir: Path) -> None:
        if not (datadir / "postmaster.pid").exists():
            return
        pg_ctl = str(self.bindir / "pg_ctl")
        for mode in ("fast", "immediate"):
            with contextlib.suppress(subprocess.TimeoutExpired):
                as_postgres([pg_ctl, "-D", str(datadir), "-m", mode, "-w", "-t", "60", "stop"], check=False, timeout=90)
            if not (datadir / "postmaster.pid").exists():
                return

    def cleanup(self) -> None:
        """Stop and remove everything; not interrupted by Ctrl-C or SIGTERM (every step is bounded)."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for proc in reversed(self.procs):  # pgbench and scripts first, the store last
            if proc.args and "versitygw" not in str(proc.args[0]):
                self.kill(proc)
        if self.source is not None:  # its backlog need not reach the store: a stop would wait for it
            with contextlib.suppress(Exception), self.source.connect() as conn:
                conn.execute("ALTER SYSTEM SET archive_command = '/bin/true'")
                conn.execute("SELECT pg_reload_conf()")
        for datadir in self.datadirs:
            try:
                self.stop_server(datadir)
            except Exception as exc:  # keep cleaning up
                log(f"warning: stopping the server in {datadir}: {exc}")
        for proc in self.procs:
            self.kill(proc)
        if self.root is not None:
            remove_tree(self.root)
            if self.root.exists():
                log(f"warning: {self.root} is left behind")

    # ---- set-up: the store, barman for postgres, the server

    def barman_tools(self) -> Path:
        """barman-cloud-* the postgres user can run (the archive tests' barman_tools)."""
        assert self.root is not None
        try:
            made = barman_tools(self.root)
        except RuntimeError as exc:
            raise SystemExit(f"bench_archive: {exc}") from None
        self.python, self.python_env = made.python, made.python_env
        return made.folder

    def start_store(self, tools: Path) -> Store:
        assert self.root is not None
        try:
            binary = versitygw_binary()
        except BaseException as exc:  # pytest.fail's Failed is a BaseException
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            raise SystemExit(f"bench_archive: no versitygw: {exc}") from None
        base = private_dir(self.root, prefix="s3-")
        base.chmod(0o755)  # the CA file is read by the postgres user
        ca, cert, key = make_certificates(base)
        ca.chmod(0o644)
        (base / "backend").mkdir()
        port = free_port()
        access, secret = "bench-" + secrets.token_hex(4), secrets.token_urlsafe(24)
        with (base / "versitygw.log").open("wb") as out:
            proc = self.popen(
                [str(binary), "--port", f"127.0.0.1:{port}", "--cert", str(cert), "--key", str(key), "--quiet",
                 "posix", str(base / "backend")],
                {"PATH": "/usr/bin:/bin", "ROOT_ACCESS_KEY_ID": access, "ROOT_SECRET_ACCESS_KEY": secret},
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        store = Store(f"https://127.0.0.1:{port}", ca, access, secret, tools)
        deadline = time.monotonic() + 30
        while True:
            try:
                store.client().list_buckets()
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"versitygw did not start: {(base / 'versitygw.log').read_text()}") from None
                time.sleep(0.1)  # poll interval; the loop re-checks the condition
        store.client().create_bucket(Bucket=BUCKET)
        self.store_dir = base / "backend"
        self.store_tools = tools
        return store

    def start_server(self, store: Store, runner: ScriptRunner) -> tuple[PgServer, dict[str, str]]:
        assert self.root is not None
        base = private_dir(self.root, prefix="src-")
        srv = PgServer(bindir=self.bindir, datadir=base / "data", sockdir=base)
        srv.initdb()
        self.datadirs.append(srv.datadir)
        settings = {
            "port": str(srv.port), "listen_addresses": "'127.0.0.1'", "unix_socket_directories": f"'{base}'",
            "fsync": "off", "synchronous_commit": "off", "wal_level": "replica", "full_page_writes": "on",
            "archive_mode": "on", "archive_command": "'/bin/true'", "archive_timeout": str(ARCHIVE_TIMEOUT_S),
        }  # fmt: skip
        with (srv.datadir / "postgresql.conf").open("a") as conf:
            conf.write("\n# bench_archive\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
        self.results["server"] = {"major": self.args.pg_major, "settings": settings}
        shim = runner.dir / "timed-archive-wal.sh"
        shim.write_text(TIMED_SHIM)
        user = os_user()
        os.chown(shim, user.pw_uid, user.pw_gid)
        self.archive_log = base / "archive-times.log"
        env = {**store.env(PREFIX, SERVER, self.bindir), "SAMPLEDB_RUN_DIR": str(base),
               "SAMPLEDB_BENCH_ARCHIVE_LOG": str(self.archive_log)}  # fmt: skip
        srv.logfile = base / "server.log"
        pg_ctl = str(self.bindir / "pg_ctl")
        as_postgres([pg_ctl, "-D", str(srv.datadir), "-l", str(srv.logfile), "-W", "start"], env=env)
        srv.wait_ready()
        self.shim = shim
        self.source = srv
        return srv, env

    def pg_env(self, srv: PgServer) -> dict[str, str]:
        return {"PATH": f"{self.bindir}:/usr/bin:/bin", "LANG": "C.UTF-8", **srv.libpq_env()}

    # ---- measurements

    def load_data(self, srv: PgServer) -> int:
        scale = max(1, round(self.args.size_mib / SCALE_MIB))
        log(f"pgbench -i -s {scale} (~{scale * SCALE_MIB:.0f} MiB), archive_command /bin/true meanwhile")
        t0 = time.monotonic()
        proc = self.popen([str(self.bindir / "pgbench"), "-i", "-q", "-s", str(scale)], self.pg_env(srv),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        out, _ = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"pgbench -i failed: {out[-2000:]}")
        with srv.connect() as conn:
            conn.execute("CHECKPOINT")
            db_bytes = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
        data_bytes = tree_bytes(srv.datadir, skip="pg_wal")
        self.results["data"] = {"pgbench_scale": scale, "database_bytes": db_bytes, "data_dir_bytes": data_bytes,
                                "load_seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
        log(f"loaded in {time.monotonic() - t0:.0f} s: database {db_bytes / MIB:.0f} MiB, data directory "
            f"without pg_wal {data_bytes / MIB:.0f} MiB")  # fmt: skip
        return data_bytes

    def wait_for(self, srv: PgServer, what: str, check: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with srv.connect() as conn:
            while not conn.execute(check).fetchone()[0]:  # type: ignore[index]
                if time.monotonic() > deadline:
                    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
                time.sleep(0.2)  # poll interval; the loop re-checks the condition

    def switch_and_wait(self, srv: PgServer, timeout: float = 120) -> None:
        """Close the current segment and wait until it is archived."""
        with srv.connect() as conn:
            conn.execute("SELECT pg_logical_emit_message(false, 'bench', 'switch')")
            wal = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()[0]  # type: ignore[index]
            conn.execute("SELECT pg_switch_wal()")
        self.wait_for(srv, f"{wal} archived",
                      f"SELECT coalesce(last_archived_wal, '') >= '{wal}' FROM pg_stat_archiver", timeout)  # fmt: skip

    def start_archiving(self, srv: PgServer) -> None:
        """archive_command = the timed archive-wal.sh; its first archive (the destination's check) done."""
        with srv.connect() as conn:
            conn.execute(f"ALTER SYSTEM SET archive_command = 'bash {self.shim} %p'")
            conn.execute("SELECT pg_reload_conf()")
        time.sleep(1)  # the archiver reloads at its next cycle; the log below proves it did
        deadline = time.monotonic() + 120
        while not (self.archive_log.exists() and self.archive_log.read_text().strip()):
            if time.monotonic() > deadline:
                raise RuntimeError("archive-wal.sh never ran")
            self.switch_and_wait(srv)
        bad = [line for line in self.archive_log.read_text().splitlines() if line.split()[2] != "0"]
        if bad:
            raise RuntimeError(f"archive-wal.sh failed: {bad[:3]}; log: {srv.logfile}")

    def floors(self, srv: PgServer, data_bytes: int) -> None:
        assert self.root is not None
        subprocess.run(["sync"], check=True, timeout=600)  # nothing of the load left to write back meanwhile
        dest = self.root / "copy-floor"
        dest.mkdir()
        entries = sorted(str(p) for p in srv.datadir.iterdir() if p.name != "pg_wal")
        t0 = time.monotonic()
        subprocess.run(["cp", "-a", "--", *entries, str(dest)], check=True, timeout=1800)
        (dest / "pg_wal").mkdir()
        t1 = time.monotonic()
        for root, _, files in os.walk(dest):
            for name in files:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            fd = os.open(root, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        t2 = time.monotonic()
        copied = tree_bytes(dest)
        shutil.rmtree(dest)
        cp = {"seconds": t2 - t0, "copy_seconds": t1 - t0, "sync_seconds": t2 - t1, "bytes": copied,
              "mib_s": copied / MIB / (t2 - t0)}  # fmt: skip
        log(f"floor cp -a + fsync: {cp['seconds']:.1f} s ({cp['sync_seconds']:.1f} s of it fsync), "
            f"{cp['mib_s']:.0f} MiB/s")  # fmt: skip
        self.results["floors"] = {"cp": cp}
        for key, packer in (("tar_gzip9", "gzip -9"), ("tar_lz4", "lz4 -1")):
            if not shutil.which(packer.split()[0]):
                continue
            t0 = time.monotonic()
            out = subprocess.run(["bash", "-c", TAR_PACK, "tar", str(srv.datadir), packer],
                                 check=True, capture_output=True, text=True, timeout=1800)  # fmt: skip
            secs = time.monotonic() - t0
            packed: dict[str, Any] = {"command": f"tar | {packer}", "seconds": secs, "bytes": data_bytes,
                      "compressed_bytes": int(out.stdout.strip()), "mib_s": data_bytes / MIB / secs}  # fmt: skip
            log(f"floor tar | {packer}: {secs:.1f} s, {packed['mib_s']:.0f} MiB/s, "
                f"{packed['compressed_bytes'] / MIB:.0f} MiB")  # fmt: skip
            self.results["floors"][key] = packed

    def run_script(self, runner: ScriptRunner, name: str, env: Mapping[str, str], timeout: float) -> dict[str, Any]:
        full = runner.environment(env)
        full["RESULT_FILE"] = str(runner.work / f"result-{name}-{time.monotonic_ns()}.json")
        t0 = time.monotonic()
        proc = self.popen(runner.command(name), full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(proc)
            raise RuntimeError(f"{name} did not finish in {timeout:.0f} s") from None
        wall = time.monotonic() - t0
        path = Path(full["RESULT_FILE"])
        result: dict[str, Any] = json.loads(path.read_text()) if path.exists() and path.read_text().strip() else {}
        if proc.returncode != 0:
            raise RuntimeError(f"{name} failed ({proc.returncode}): {result.get('message')}\n{err[-3000:]}")
        result["wallSeconds"] = wall
        return result

    def base_backup(self, runner: ScriptRunner, srv: PgServer, env: dict[str, str], data_bytes: int) -> None:
        log(f"base-backup.sh (barman-cloud-backup, {env.get('SAMPLEDB_BACKUP_COMPRESSION', 'lz4')})")
        result = self.run_script(runner, "base-backup.sh",
                                 {**env, **srv.libpq_env(), "SAMPLEDB_BACKUP_NAME": "bench-base"}, 1800)  # fmt: skip
        stored = tree_bytes(self.store_dir / BUCKET / PREFIX / SERVER / "base")
        wall = result["wallSeconds"]
        self.results["base_backup"] = {**result, "stored_bytes": stored, "mib_s": data_bytes / MIB / wall}
        log(f"base backup: {wall:.1f} s, {data_bytes / MIB / wall:.0f} MiB/s, {stored / MIB:.0f} MiB stored")

    def recover(self, runner: ScriptRunner, srv: PgServer, env: dict[str, str], data_bytes: int) -> None:
        assert self.root is not None
        with srv.connect() as conn:
            end_lsn = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").fetchone()[0]  # type: ignore[index]
            begin = conn.execute("SELECT pg_wal_lsn_diff(%s, '0/0')::bigint",
                                 (self.results["base_backup"]["beginLsn"],)).fetchone()[0]  # type: ignore[index]  # fmt: skip
        base = private_dir(self.root, prefix="rec-")
        run_dir = base / "run"
        run_dir.mkdir()
        user = os_user()
        os.chown(run_dir, user.pw_uid, user.pw_gid)
        pgdata = base / "data"
        self.datadirs.append(pgdata)
        renv = {**env, "PGDATA": str(pgdata), "POSTGRES_USER": SUPERUSER, "POSTGRES_PASSWORD": NEW_PASSWORD,
                "SAMPLEDB_RUN_DIR": str(run_dir), "SAMPLEDB_RECOVERY_SERVER": SERVER,
                "SAMPLEDB_RECOVERY_DESTINATION": env["SAMPLEDB_S3_DESTINATION"]}  # fmt: skip
        renv.pop("SAMPLEDB_S3_SERVER")
        wal_segments = (end_lsn - begin) / SEGMENT
        log(f"recover.sh to the end of the archive (~{wal_segments:.0f} segments of WAL after the backup's start)")
        result = self.run_script(runner, "recover.sh", renv, 1800)
        restored = tree_bytes(pgdata, skip="pg_wal")
        restore_s, replay_s = float(result["restoreSeconds"]), float(result["replaySeconds"])
        self.results["recover"] = {
            **result, "restored_bytes": restored, "restore_mib_s": data_bytes / MIB / restore_s,
            "wal_segments": wal_segments, "replay_s_per_segment": replay_s / wal_segments if wal_segments else None,
        }  # fmt: skip
        log(f"recovered: restore {restore_s} s ({data_bytes / MIB / restore_s:.0f} MiB/s), replay {replay_s} s")
        self.stop_server(pgdata)
        remove_tree(base)

    def archive_runs(self) -> list[tuple[float, float, int, str]]:
        runs = []
        for line in self.archive_log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                runs.append((float(parts[0]), float(parts[1]), int(parts[2]), parts[3]))
        return runs

    def observe(self, srv: PgServer, phase: Phase, proc: subprocess.Popen[Any] | None, seconds: float,
                until_drained: bool = False) -> Phase:  # fmt: skip
        """Sample every second until ``proc`` ends (or ``seconds`` pass without one), within a deadline."""
        deadline = time.monotonic() + seconds + 30
        with srv.connect() as conn:

            def sample() -> Sample:
                row = conn.execute(SAMPLE_SQL).fetchone()
                assert row is not None
                return Sample(time.time(), int(row[0]), float(row[1] or 0.0), int(row[2]), int(row[3]), int(row[4]))

            phase.samples.append(sample())
            start = time.monotonic()
            tick = start
            while True:
                tick += 1.0
                time.sleep(max(0.0, tick - time.monotonic()))
                phase.samples.append(sample())
                now = time.monotonic()
                if proc is not None and proc.poll() is not None:
                    break
                if proc is None and (now - start >= seconds or (until_drained and phase.samples[-1].pending == 0)):
                    break
                if now > deadline:
                    if proc is not None:
                        self.kill(proc)
                    break
        if proc is not None:
            out = proc.communicate(timeout=30)[0] or ""
            for line in out.splitlines():
                if line.startswith("tps = "):
                    phase.tps = float(line.split()[2])
        t0, t1 = phase.samples[0].wall, phase.samples[-1].wall
        phase.archive_runs = [r for r in self.archive_runs() if t0 < r[1] <= t1]
        s = phase.summary()
        log(f"{phase.name}: WAL {s['wal_mib_s']:.1f} MiB/s, archived {s['archived_segments_s']:.2f} segments/s, "
            f"{s['s_per_segment_mean'] or 0:.2f} s/segment, busy {s['archiver_busy']:.0%}, pending "
            f"{s['pending_start']}->{s['pending_end']} (max {s['pending_max']}), lag max {s['lag_max_s']:.1f} s"
            f"{', FALLS BEHIND' if s['falls_behind'] else ''}")  # fmt: skip
        return phase

    def pgbench(self, srv: PgServer, clients: int, seconds: int, rate: int | None = None,
                script: Path | None = None) -> subprocess.Popen[Any]:  # fmt: skip
        cmd = [str(self.bindir / "pgbench"), "-n", "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds)]
        if rate is not None:
            cmd += ["-R", str(rate)]
        if script is not None:
            cmd += ["-f", str(script)]
        return self.popen(cmd, self.pg_env(srv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def drain(self, srv: PgServer, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with srv.connect() as conn:
            while conn.execute(SAMPLE_SQL).fetchone()[0]:  # type: ignore[index]
                if time.monotonic() > deadline:
                    log(f"warning: WAL still waiting after {timeout:.0f} s")
                    return
                time.sleep(0.5)  # poll interval; the loop re-checks the condition

    def steady(self, srv: PgServer) -> None:
        a = self.args
        load = f"pgbench -c 4 -j 2 -R {a.rate} -T {a.seconds}"
        log(f"steady load: {load}")
        phase = self.observe(srv, Phase("steady", load), self.pgbench(srv, 4, a.seconds, rate=a.rate), a.seconds)
        self.results["phases"] = [phase]

    def step(self, srv: PgServer, name: str, clients: int, rate: int | None = None, bulk: Path | None = None) -> Phase:
        a = self.args
        load = f"pgbench -c {clients} -j {min(clients, 2)}{f' -R {rate}' if rate else ''} -T {a.step_seconds}"
        if bulk is not None:
            load = f"pgbench -c {clients} -T {a.step_seconds}, bulk inserts (5,000 rows of 200 B a transaction)"
        log(f"load: {load}")
        proc = self.pgbench(srv, clients, a.step_seconds, rate=rate, script=bulk)
        phase = self.observe(srv, Phase(name, load), proc, a.step_seconds)
        self.results["phases"].append(phase)
        return phase

    def ceiling(self, srv: PgServer, runner: ScriptRunner, env: dict[str, str]) -> None:
        """Heavier loads until the backlog grows through a step; the backlog drained with no load (the
        archiver alone); then rate-limited steps between the steady load (kept up) and that one."""
        assert self.root is not None
        a = self.args
        bulk = self.root / "bulk.sql"
        bulk.write_text(BULK_SQL)
        with srv.connect() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS bench_bulk (id int, pad text)")
        phases: list[Phase] = self.results["phases"]
        behind: Phase | None = None
        for kind, clients in CEILING_LOADS:
            phase = self.step(srv, f"load-{kind}-{clients}", clients, bulk=bulk if kind == "bulk" else None)
            if phase.summary()["falls_behind"]:
                behind = phase
                break
        log(f"the load stopped: the backlog drains for up to {a.drain_seconds} s")
        phases.append(self.observe(srv, Phase("drain", "none: the backlog left by the load above drains"), None,
                                   a.drain_seconds, until_drained=True))  # fmt: skip
        if behind is not None:
            self.drain(srv, 180)  # the archiver idle: nothing of it in the breakdown's times
            self.breakdown(behind, runner, env)
        steady = phases[0].summary()
        if behind is None or not behind.tps or "-f" in behind.load or steady["falls_behind"]:
            return
        lo, hi = float(a.rate), behind.tps  # transactions per second: kept up, fell behind
        for _ in range(a.bisect_steps):
            if hi / lo < 1.2 or self.remaining() < a.step_seconds + 150:
                break
            self.drain(srv, 120)
            rate = round((lo + hi) / 2)
            phase = self.step(srv, f"rate-{rate}", 4, rate=rate)
            if phase.summary()["falls_behind"]:
                hi = rate
            else:
                lo = rate

    def breakdown(self, behind: Phase, runner: ScriptRunner, env: dict[str, str]) -> None:
        """What one segment's archive costs, the archiver otherwise idle, each the best of three: the whole
        barman-cloud-wal-archive --gzip of a real segment (taken back from the store; into server names of
        its own) as archive-wal.sh runs it, the start-up of such a command (Python, barman's and boto3's
        imports, an S3 client) and gzip -6 of the segment (barman's default level for WAL)."""
        runs = [r for r in behind.archive_runs if r[2] == 0 and len(r[3]) == 24]
        if not runs:
            return
        name = runs[-1][3]
        obj = self.store_dir / BUCKET / PREFIX / SERVER / "wals" / name[:16] / f"{name}.gz"
        segment = gzip.decompress(obj.read_bytes())
        path = runner.work / name
        path.write_bytes(segment)
        user = os_user()
        os.chown(path, user.pw_uid, user.pw_gid)
        tool = str(self.store_tools / "barman-cloud-wal-archive")
        opts = [
            "--cloud-provider",
            "aws-s3",
            "--endpoint-url",
            env["SAMPLEDB_S3_ENDPOINT"],
            "--addressing-style",
            "path",
        ]
        code = (
            "import boto3, barman.clients.cloud_walarchive, barman.cloud_providers.aws_s3; "
            "boto3.Session().client('s3', endpoint_url='https://127.0.0.1:9', region_name='us-east-1')"
        )
        whole, startup, packing = [], [], []
        for i in range(3):
            t0 = time.monotonic()
            as_postgres([tool, *opts, "--gzip", env["SAMPLEDB_S3_DESTINATION"], f"breakdown-{i}", str(path)], env=env)
            whole.append(time.monotonic() - t0)
            t0 = time.monotonic()
            as_postgres([*self.python, "-c", code], env=self.python_env, timeout=60)
            startup.append(time.monotonic() - t0)
            timed = as_postgres([*self.python, "-c", GZIP_TIMED, str(path)], env=self.python_env, timeout=60)
            packing.append(float(timed.stdout.split()[0]))
            packed_bytes = int(timed.stdout.split()[1])
        path.unlink()
        self.results["segment_breakdown"] = {
            "segment": name, "bytes": len(segment), "gzip6_bytes": packed_bytes, "whole_seconds": min(whole),
            "startup_seconds": min(startup), "gzip6_seconds": min(packing),
            "rest_seconds": min(whole) - min(startup) - min(packing),
            "samples": {"whole": whole, "startup": startup, "gzip6": packing},
        }  # fmt: skip
        log(f"one segment, best of 3: barman-cloud-wal-archive {min(whole):.2f} s, its start-up {min(startup):.2f} s, "
            f"gzip -6 {min(packing):.2f} s ({packed_bytes / MIB:.1f} MiB)")  # fmt: skip

    def remaining(self) -> float:
        budget: float = self.args.budget_minutes * 60
        return self.started + budget - time.monotonic()

    # ---- the run

    def run(self) -> None:
        self.started = time.monotonic()
        self.root = private_dir(prefix="bench-archive-")
        self.results["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.results["commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                                capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
        self.results["machine"] = {"cores": os.cpu_count(), "loadavg_start": os.getloadavg()}
        tools = self.barman_tools()
        store = self.start_store(tools)
        runner = ScriptRunner(self.root, self.bindir)
        srv, env = self.start_server(store, runner)
        data_bytes = self.load_data(srv)
        self.start_archiving(srv)
        self.floors(srv, data_bytes)
        self.base_backup(runner, srv, env, data_bytes)
        self.steady(srv)
        self.drain(srv, 300)
        self.switch_and_wait(srv)  # the end of the archive: every segment the steady load wrote
        self.recover(runner, srv, env, data_bytes)
        self.ceiling(srv, runner, env)
        self.results["machine"]["loadavg_end"] = os.getloadavg()
        self.results["total_seconds"] = round(time.monotonic() - self.started, 1)


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def report(results: dict[str, Any]) -> None:
    data = results["data"]
    cp = results["floors"]["cp"]
    bb, rec = results["base_backup"], results["recover"]
    size = data["data_dir_bytes"] / MIB
    print(f"| {size:,.0f} MiB (pgbench -s {data['pgbench_scale']}) | seconds | MiB/s | vs cp floor |")
    print("|---|---:|---:|---:|")
    print(f"| floor: `cp -a` of the data directory ({cp['copy_seconds']:.1f} s) + fsync ({cp['sync_seconds']:.1f} s) | "
          f"{cp['seconds']:.1f} | {cp['mib_s']:,.0f} | 1.00x |")  # fmt: skip
    for key in ("tar_gzip9", "tar_lz4"):
        if key in results["floors"]:
            f = results["floors"][key]
            command = f["command"].replace("|", "\\|")
            print(f"| `{command}` to nowhere ({f['compressed_bytes'] / MIB:,.0f} MiB) | {f['seconds']:.1f} | "
                  f"{f['mib_s']:,.0f} | {f['mib_s'] / cp['mib_s']:.2f}x |")  # fmt: skip
    print(f"| base-backup.sh, lz4 ({bb['stored_bytes'] / MIB:,.0f} MiB stored) | {bb['wallSeconds']:.1f} | "
          f"{bb['mib_s']:,.0f} | {bb['mib_s'] / cp['mib_s']:.2f}x |")  # fmt: skip
    print(f"| recover.sh: restore | {rec['restoreSeconds']} | {rec['restore_mib_s']:,.0f} | "
          f"{rec['restore_mib_s'] / cp['mib_s']:.2f}x |")  # fmt: skip
    print(f"| recover.sh: replay of {rec['wal_segments']:.0f} segments to the end "
          f"({fmt(rec['replay_s_per_segment'], 2)} s/segment) | {rec['replaySeconds']} | "
          f"{rec['wal_segments'] * 16 / rec['replaySeconds']:,.1f} of WAL | |")  # fmt: skip
    print()
    print(
        "| load | tps | WAL MiB/s | archived MiB/s | segments/s | s/segment (p95) | archiver busy | "
        "pending max (end) | lag p95 / max s | falls behind |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for s in results["phase_summaries"]:
        print(f"| {s['load']} | {fmt(s['tps'], 0)} | {s['wal_mib_s']:.1f} | {s['archived_mib_s']:.1f} | "
              f"{s['archived_segments_s']:.2f} | "
              f"{fmt(s['s_per_segment_mean'], 2)} ({fmt(s['s_per_segment_p95'], 2)}) | "
              f"{s['archiver_busy']:.0%} | {s['pending_max']} ({s['pending_end']}) | "
              f"{s['lag_p95_s']:.1f} / {s['lag_max_s']:.1f} | {'yes' if s['falls_behind'] else 'no'} |")  # fmt: skip
    ceiling, parts = results["ceiling"], results.get("segment_breakdown")
    print()
    print("| the archiver (16 MiB segments, one at a time) | MiB/s of WAL | s/segment |")
    print("|---|---:|---:|")
    if ceiling["kept_up"]:
        k = ceiling["kept_up"]
        print(f"| kept up with: {k['load']} | {k['wal_mib_s']:.1f} | {fmt(k['s_per_segment_mean'], 2)} |")
    if ceiling["fell_behind"]:
        b = ceiling["fell_behind"]
        print(f"| fell behind: {b['load']} | {b['wal_mib_s']:.1f} | |")
        print(f"| archived meanwhile (its ceiling under that load) | {b['archived_mib_s']:.1f} | "
              f"{fmt(b['s_per_segment_mean'], 2)} |")  # fmt: skip
    if ceiling["drain"]:
        d = ceiling["drain"]
        print(f"| archived with no load (the backlog draining) | {d['archived_mib_s']:.1f} | "
              f"{fmt(d['s_per_segment_mean'], 2)} |")  # fmt: skip
    if parts:
        whole = parts["whole_seconds"]
        print(f"| one segment, no load: barman-cloud-wal-archive --gzip alone (archive-wal.sh's push) | "
              f"{16 / whole:.1f} | {whole:.2f} |")  # fmt: skip
        print(f"| of which start-up (Python, barman's and boto3's imports, an S3 client) | | "
              f"{parts['startup_seconds']:.2f} |")  # fmt: skip
        print(f"| of which gzip -6 of the segment (to {parts['gzip6_bytes'] / MIB:.1f} MiB) | | "
              f"{parts['gzip6_seconds']:.2f} |")  # fmt: skip
        rest = parts["rest_seconds"]
        print(f"| of which the rest (reading the segment, the S3 requests over TLS) | | "
              f"{'~0 (within the noise)' if rest < 0.05 else f'{rest:.2f}'} |")  # fmt: skip
    m = results["machine"]
    print()
    print(
        f"{m['cores']} cores; load average {m['loadavg_start'][0]:.1f} at the start, "
        f"{m.get('loadavg_end', [float('nan')])[0]:.1f} at the end; {results.get('total_seconds', 0):.0f} s in all"
    )


def ceiling_summary(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The highest WAL rate archived without a growing backlog, the lowest that grew one, and the drain."""
    loads = [s for s in summaries if s["name"] != "drain"]
    kept = [s for s in loads if not s["falls_behind"]]
    behind = [s for s in loads if s["falls_behind"]]
    drain = [s for s in summaries if s["name"] == "drain"]
    out: dict[str, Any] = {
        "kept_up": max(kept, key=lambda s: s["wal_mib_s"]) if kept else None,
        "fell_behind": min(behind, key=lambda s: s["wal_mib_s"]) if behind else None,
        "drain": drain[0] if drain else None,
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="database size (pgbench -i scale from it)")
    parser.add_argument("--seconds", type=int, default=60, help="the steady load's duration")
    parser.add_argument("--rate", type=int, default=200, help="the steady load's transactions per second (-R)")
    parser.add_argument("--step-seconds", type=int, default=60, help="each heavier load's duration")
    parser.add_argument("--drain-seconds", type=int, default=60, help="the backlog's drain, observed at most")
    parser.add_argument("--bisect-steps", type=int, default=3, help="rate-limited loads to bracket the ceiling")
    parser.add_argument("--budget-minutes", type=float, default=14, help="no further bracketing step after this")
    parser.add_argument("--pg-major", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None, help="result file (default /tmp/bench-archive-<time>.json)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench_archive: run as root (servers and scripts run as the postgres user via runuser)")
    if args.json is None:
        args.json = Path(f"/tmp/bench-archive-{time.strftime('%Y%m%dT%H%M%S')}.json")
    os_user()
    signal.signal(signal.SIGTERM, on_sigterm)
    bench = Bench(args)
    results = bench.results
    interrupted = False
    try:
        bench.run()
    except (KeyboardInterrupt, Interrupted) as exc:
        results["error"] = f"interrupted ({type(exc).__name__})"
        interrupted = True
    except BaseException as exc:
        results["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        log("cleaning up")
        bench.cleanup()
        phases: list[Phase] = results.pop("phases", [])
        results["phase_summaries"] = [p.summary() for p in phases if len(p.samples) > 1]
        results["ceiling"] = ceiling_summary(results["phase_summaries"])
        results["phases"] = [{**asdict(p), "samples": [asdict(s) for s in p.samples]} for p in phases]
        results["args"] = {k: str(v) for k, v in results["args"].items()}
        args.json.write_text(json.dumps(results, indent=1, default=str))
        log(f"results in {args.json}")
    if interrupted:
        raise SystemExit("bench_archive: interrupted; everything it started is stopped and removed")
    report(results)


if __name__ == "__main__":
    main()
