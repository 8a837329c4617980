"""SQL calls the operator makes to one PostgreSQL instance, each on its own short connection.

Every call is bounded by `within` seconds (connect and statement alike) and never raises for an
unreachable or failing server: it returns None/False and logs why, so a reconcile pass is never stuck
on a database. Credentials are passed to the driver only; they are never logged.

psycopg is imported on the first call, in a worker thread (the event loop goes on meanwhile): only some steps
need SQL from the operator (replicas, archiving, autoGrow, the TLS check once a server starts, declared roles and
databases), and the import costs ~10.7 MiB of resident memory and ~150 ms, paid on the first of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from sampledb_operator.model import names
from sampledb_operator.model.archive import ArchiverState
from sampledb_operator.model.instances import LeaseRenewal, ServerState
from sampledb_operator.observability.logging import get_logger

log = get_logger(__name__)

SLOT_PREFIX = names.SLOT_PREFIX
STATE_SQL = """
SELECT pg_is_in_recovery(),
       CASE WHEN pg_is_in_recovery() THEN NULL ELSE (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint END,
       (pg_last_wal_receive_lsn() - '0/0'::pg_lsn)::bigint,
       (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint,
       (SELECT timeline_id FROM pg_control_checkpoint()),
       (pg_stat_file(current_setting('config_file'))).modification > pg_conf_load_time(),
       CASE WHEN pg_is_in_recovery() THEN NULL ELSE (SELECT s.slot_name FROM pg_replication_slots s
            WHERE NOT s.active AND s.restart_lsn IS NOT NULL ORDER BY s.restart_lsn, s.slot_name LIMIT 1) END,
       CASE WHEN pg_is_in_recovery() THEN NULL ELSE (SELECT (pg_current_wal_lsn() - min(s.restart_lsn))::bigint
            FROM pg_replication_slots s WHERE NOT s.active AND s.restart_lsn IS NOT NULL) END,
       EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')
"""


_LOADED: dict[str, ModuleType] = {}  # "psycopg" -> the module, once its import has finished


async def driver() -> ModuleType:
    """psycopg, imported off the event loop by the first calls (concurrent first calls each wait in a thread
    for the one import: the import lock serialises them, so none sees a half-initialised module)."""
    loaded = _LOADED.get("psycopg")
    if loaded is None:
        loaded = _LOADED["psycopg"] = await asyncio.to_thread(importlib.import_module, "psycopg")
    return loaded


@dataclass(frozen=True, slots=True)
class Target:
    """Where and as whom to connect (the database's superuser from its Secret)."""

    host: str
    port: int
    user: str
    password: str

    def __repr__(self) -> str:  # never the password
        return f"Target({self.host}:{self.port} as {self.user})"


async def connect(psycopg: ModuleType, target: Target, within: float, *, autocommit: bool = True,
                  dbname: str = "postgres") -> Any:
    """A new connection to `target`'s `dbname` (the database postgres; PgBouncer's admin console is `pgbouncer`)
    as the operator (connect timeout: `within`, at least 1 s); the caller bounds what it does with it and closes
    it."""
    return await psycopg.AsyncConnection.connect(
        host=target.host, port=target.port, user=target.user, password=target.password, dbname=dbname,
        connect_timeout=max(1, int(within)), application_name="sampledb-operator", autocommit=autocommit)


async def query(target: Target, within: float, sql: str, params: tuple[Any, ...] = (),
                *, autocommit: bool = True) -> list[tuple[Any, ...]] | None:
    """One statement's rows ([] without a result), or None when the server does not answer or refuses it (logged)."""
    psycopg = await driver()

    async def go() -> list[tuple[Any, ...]]:
        conn = await connect(psycopg, target, within, autocommit=autocommit)
        try:
            async with conn.cursor() as cur:
                await cur.execute(sql, params)
                return list(await cur.fetchall()) if cur.description else []
        finally:
            await conn.close()

    try:
        return await asyncio.wait_for(go(), within)
    except (TimeoutError, psycopg.Error, OSError) as exc:
        log.info("SQL call failed", host=target.host, error=type(exc).__name__, detail=str(exc).splitlines()[0][:200]
                 if str(exc) else "")
        return None


async def run_each(target: Target, statements: Sequence[tuple[str, Callable[[Any], Any]]],
                   within: float = 30.0) -> dict[str, str] | None:
    """Run `statements` (a key, and a function composing the SQL from psycopg.sql) in order on one connection, each
    on its own (autocommit): once a key's statement is refused, that key's later ones are skipped and the others
    go on. Returns, per key, the server's words for its refused statement ({}: all done); None when the server
    does not answer (nothing, or only part, was done). Never raises."""
    psycopg = await driver()
    from psycopg import sql

    async def go() -> dict[str, str]:
        failed: dict[str, str] = {}
        async with await connect(psycopg, target, within) as conn:
            for key, compose in statements:
                if key in failed:
                    continue
                try:
                    await conn.execute(compose(sql))
                except psycopg.errors.Error as exc:  # the server refused this one: the others go on
                    failed[key] = (exc.diag.message_primary or str(exc)).splitlines()[0]
        return failed

    try:
        return await asyncio.wait_for(go(), within)
    except (TimeoutError, psycopg.OperationalError, OSError) as exc:
        log.info("SQL call failed", host=target.host, error=type(exc).__name__)
        return None


async def server_state(target: Target, within: float = 3.0) -> ServerState | None:
    """The server's recovery state and WAL positions, or None when it does not answer."""
    rows = await query(target, within, STATE_SQL)
    if not rows:
        return None
    in_recovery, current, received, replayed, timeline, config_changed, idle_slot, idle_retained, receiving = rows[0]
    return ServerState(in_recovery=bool(in_recovery), current_lsn=current, receive_lsn=received,
                       replay_lsn=replayed, timeline=timeline, config_changed=bool(config_changed),
                       idle_slot=idle_slot, idle_slot_retained=idle_retained, receiving=bool(receiving))


ARCHIVE_ERROR_FILE = "/var/run/postgresql/sampledb-archive-error"  # dataplane/archive-wal.sh writes it
ARCHIVER_SQL = """
SELECT a.archived_count, a.last_archived_wal, a.last_archived_time, a.failed_count, a.last_failed_wal,
       a.last_failed_time,
       (SELECT count(*) FROM pg_ls_archive_statusdir() s WHERE s.name LIKE '%%.ready'),
       (SELECT min(s.modification) FROM pg_ls_archive_statusdir() s WHERE s.name LIKE '%%.ready'),
       pg_read_file(%s, 0, 1024, true),
       now()
FROM pg_stat_archiver a
"""


async def archiver_state(target: Target, within: float = 3.0) -> ArchiverState | None:
    """The primary's WAL archiver: pg_stat_archiver, the segments still waiting (their .ready files) and the
    last error archive-wal.sh recorded; None when the server does not answer."""
    rows = await query(target, within, ARCHIVER_SQL, (ARCHIVE_ERROR_FILE,))
    if not rows:
        return None
    (archived, last_wal, last_at, failed, failed_wal, failed_at, pending, oldest, error, now) = rows[0]
    return ArchiverState(archived_count=int(archived or 0), last_archived_wal=last_wal, last_archived_at=last_at,
                         failed_count=int(failed or 0), last_failed_wal=failed_wal, last_failed_at=failed_at,
                         pending=int(pending or 0), oldest_pending_at=oldest,
                         error=(error.strip() or None) if isinstance(error, str) else None, now=now)


DF_FILE = "/var/run/postgresql/sampledb-df"  # the run directory (an emptyDir), as the archive error file
DF_SQL = f"COPY (SELECT 1) TO PROGRAM 'df -P -B1 . > {DF_FILE}.tmp && mv -f {DF_FILE}.tmp {DF_FILE}'"


async def data_filesystem(target: Target, within: float = 5.0) -> str | None:
    """`df -P -B1` of the server's data directory (its working directory), run by the server itself (COPY TO
    PROGRAM: the operator's superuser, no exec into the pod), then read back; None when it does not answer."""
    if await query(target, within, DF_SQL) is None:
        return None
    rows = await query(target, within, "SELECT pg_read_file(%s, 0, 4096, true)", (DF_FILE,))
    return str(rows[0][0]) if rows and rows[0][0] is not None else None


async def reload_config(target: Target, within: float = 5.0) -> bool:
    """pg_reload_conf(): the server re-reads its configuration files. True when it answered."""
    rows = await query(target, within, "SELECT pg_reload_conf()")
    return bool(rows and rows[0][0])


async def ssl_on(target: Target, within: float = 3.0) -> bool | None:
    """Whether the server serves TLS (its `ssl` setting), or None when it does not answer."""
    rows = await query(target, within, "SELECT current_setting('ssl') = 'on'")
    return bool(rows[0][0]) if rows else None


RELOAD_IF_NEWER_SQL = ("SELECT CASE WHEN (pg_stat_file(%s, true)).modification > pg_conf_load_time()"
                       " THEN pg_reload_conf() ELSE false END")


async def reload_if_newer(target: Target, path: str, within: float = 5.0) -> bool | None:
    """Reload the server's configuration when the file `path` changed after it was last loaded (a certificate the
    kubelet has refreshed in a mounted Secret): True when it reloaded, False when it had no need, None when the
    server does not answer."""
    rows = await query(target, within, RELOAD_IF_NEWER_SQL, (path,))
    return bool(rows[0][0]) if rows else None


async def promote(target: Target, within: float = 60.0) -> bool:
    """pg_promote(): the standby leaves recovery; True when it has (waits up to `within` seconds)."""
    wait = max(1, int(within) - 5)
    rows = await query(target, within, "SELECT pg_promote(true, %s)", (wait,))
    return bool(rows and rows[0][0])


# The primary's lease (decide/replicas/primary_lease.py, dataplane/self-fence.sh): the end, in milliseconds of the
# host's uptime, written to LEASE_FILE in the server's first socket directory (the pod's run directory), but only if
# the renewal arrives by the deadline given (RENEW_SQL's {deadline} and {ttl}: whole numbers the operator formats in;
# it is sent without parameters).
LEASE_FILE = "sampledb-lease"
WATCH_FILE = "sampledb-self-fence"  # self-fence.sh touches it at each look
_UPTIME = "(split_part(pg_read_file('/proc/uptime'), ' ', 1)::numeric * 1000)::bigint"
_SOCKET_DIR = "split_part(current_setting('unix_socket_directories'), ',', 1)"
# the server's uptime (ms); whether its self-fence looked in the last 5 s and the standbys' slots exist (without
# them the self-fence stops nothing: self-fence.sh); and its wal_sender_timeout (ms)
UPTIME_SQL = f"""
SELECT {_UPTIME},
       coalesce((pg_stat_file({_SOCKET_DIR} || '/{WATCH_FILE}', true)).modification > now() - interval '5 s', false)
       AND EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_type = 'physical' AND slot_name LIKE '{SLOT_PREFIX}%'),
       (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_sender_timeout')
"""
# a database left without standbys: the lease file says "off" (no number: self-fence.sh arms nothing), if there is one
# (sent with parameters, so a percent sign is doubled)
DISARM_SQL = f"""
DO $do$ BEGIN
  IF (pg_stat_file({_SOCKET_DIR} || '/{LEASE_FILE}', true)).size IS NOT NULL THEN
    EXECUTE format('COPY (SELECT %%L) TO %%L', 'off', {_SOCKET_DIR} || '/{LEASE_FILE}');
  END IF;
END $do$
"""
RENEW_SQL = f"""
DO $do$ DECLARE up bigint := {_UPTIME};
BEGIN
  IF up > {{deadline}} THEN
    RAISE EXCEPTION 'lease renewal arrived % ms after its deadline', up - {{deadline}};
  END IF;
  EXECUTE format('COPY (SELECT %s) TO %L', up + {{ttl}}, {_SOCKET_DIR} || '/{LEASE_FILE}');
END $do$
"""


def deadline_ms(uptime_ms: int, answered: float, sending: float, transit: float) -> int:
    """The latest server uptime (ms) at which a renewal sent at `sending` may arrive, from the uptime `uptime_ms` the
    server answered at `answered` (both the operator's monotonic clock, in seconds). `uptime_ms` was read before
    `answered`, so the result is at most the server's uptime at `sending` plus `transit`: a renewal accepted by it
    arrived within `transit` of being sent (decide/replicas/primary_lease.py)."""
    return uptime_ms + round(max(0.0, sending - answered) * 1000) + round(transit * 1000)


async def renew_lease(target: Target, ttl: float, transit: float, sending: Callable[[], None],
                      within: float = 5.0) -> LeaseRenewal | None:
    """Renew the server's lease to `ttl` seconds past the renewal's arrival, refused by the server if it arrives more
    than `transit` seconds after it was sent (one connection: the server's uptime, then the renewal); `sending` is
    called just before the renewal itself is sent (never when the connection or the first question failed: then no
    renewal can arrive). The renewal and what the server said with it (its self-fence watching, its
    wal_sender_timeout) when it wrote it, else None."""
    psycopg = await driver()
    loop = asyncio.get_running_loop()

    async def go() -> LeaseRenewal:
        async with await connect(psycopg, target, within) as conn:
            row = await (await conn.execute(UPTIME_SQL)).fetchone()
            answered = loop.time()  # the renewal is sent at once: deadline_ms adds any time in between
            deadline = deadline_ms(int(row[0]), answered, loop.time(), transit)
            sending()
            await conn.execute(RENEW_SQL.format(deadline=deadline, ttl=round(ttl * 1000)))
        return LeaseRenewal(watched=bool(row[1]), sender_timeout=int(row[2]) / 1000)

    try:
        return await asyncio.wait_for(go(), within)
    except (TimeoutError, psycopg.Error, OSError) as exc:
        log.info("lease renewal failed", host=target.host, error=type(exc).__name__,
                 detail=str(exc).splitlines()[0][:200] if str(exc) else "")
        return None


async def disarm_lease(target: Target, within: float = 5.0) -> bool:
    """The server's lease, if it has one, turned off (a database left without standbys); True when it answered."""
    return await query(target, within, DISARM_SQL) is not None


# An immediate shutdown of the server (SIGQUIT to its postmaster, whose pid is the first line of postmaster.pid in
# its data directory), run by the server itself (COPY TO PROGRAM, a superuser's): the fence of a primary whose
# kubelet does not stop it. The connection that asks ends with the server. Sent without parameters (no placeholder
# is read in it).
# A fast shutdown (SIGINT: sessions ended, no new ones; the walsenders send every WAL record, up to the shutdown
# checkpoint, to the standbys still connected and wait for them to confirm it, so even an asynchronous standby has
# every commit), then, if the server still runs STOP_ESCALATE_SECONDS later (a standby that does not confirm, a
# checkpoint that does not end), an immediate one (SIGQUIT). A bash in the background sends both, so the statement
# returns at once. It first closes every descriptor it inherited from this session's backend (its client socket
# would keep the connection open past the backend's end), ignores the SIGTERM the fast shutdown sends to the
# session's process group, and sends the SIGQUIT only while postmaster.pid still names the same process (a server
# that stopped removed it).
STOP_ESCALATE_SECONDS = 6
# The program, as a PostgreSQL format() string (%1$s: the data directory) inside an SQL literal ('' is a quote).
_STOP_PROGRAM = (
    """f=%1$s/postmaster.pid; p="$(head -n 1 "$f")"; bash -c ''"""
    """for d in /proc/self/fd/*; do n=${d##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done;"""
    f""" trap "" TERM INT HUP; kill -INT "$0"; sleep {STOP_ESCALATE_SECONDS};"""
    """ [ "$(head -n 1 "$1" 2>/dev/null)" = "$0" ] && kill -QUIT "$0"'' "$p" "$f" </dev/null >/dev/null 2>&1 &"""
)
STOP_SQL = f"""
DO $do$ BEGIN
  EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', format('{_STOP_PROGRAM}', current_setting('data_directory')));
END $do$
"""
STOPPED_POLL = 0.2  # seconds between looks at a server told to stop


async def stop_server(target: Target, within: float = 5.0) -> bool:
    """Tell the server to stop now: a fast shutdown, which first sends its last WAL to the standbys connected to it,
    escalated to an immediate one (as a power cut leaves it: crash recovery at its next start) if it still runs
    STOP_ESCALATE_SECONDS later (STOP_SQL). True when the server itself took the order: connected as the superuser,
    and the statement done or the connection ended by the shutdown (SQLSTATE class 57, or no SQLSTATE: the server
    closed it). False when it could not be reached or refused (not a superuser, an error): then nothing says it
    stops."""
    psycopg = await driver()

    async def go() -> bool:
        conn = await connect(psycopg, target, within)
        try:
            await conn.execute(STOP_SQL)
        except psycopg.OperationalError as exc:
            state = getattr(exc, "sqlstate", None)
            return state is None or str(state).startswith("57")
        finally:
            with contextlib.suppress(Exception):
                await conn.close()
        return True

    try:
        return await asyncio.wait_for(go(), within)
    except (TimeoutError, psycopg.Error, OSError) as exc:
        log.info("stopping the server failed", host=target.host, error=type(exc).__name__,
                 detail=str(exc).splitlines()[0][:200] if str(exc) else "")
        return False


async def refuses(target: Target, within: float = 3.0) -> bool:
    """Whether the server's address refuses a TCP connection to its port: its host answers, and nothing listens
    there. False when it accepts, or does not answer within `within` (unknown). A refusal alone proves nothing
    about a server never reached (a firewall may refuse in its name): read it after stop_server only."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(target.host, target.port), within)
    except ConnectionRefusedError:
        return True
    except (TimeoutError, OSError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return False


async def refused_within(target: Target, within: float) -> bool:
    """Whether the server's address refuses connections within `within` seconds (a server told to stop exits);
    `within` 0: one look (each look waits up to 3 s for an answer)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        if await refuses(target):
            return True
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(STOPPED_POLL)  # poll interval: the loop re-checks the address


async def sync_slots(target: Target, wanted: frozenset[str], within: float = 5.0) -> bool:
    """Make the primary's physical slots named SLOT_PREFIX* exactly `wanted`: create missing ones (reserving
    WAL at once), drop the ones no instance uses any more (a slot kept for nobody keeps WAL forever), ending
    a removed standby's connection first. True when it answered."""
    rows = await query(target, within,
                      "SELECT slot_name, active_pid FROM pg_replication_slots WHERE slot_type = 'physical'")
    if rows is None:
        return False
    have = {str(name): pid for name, pid in rows}
    for name in sorted(wanted - set(have)):
        await query(target, within, "SELECT pg_create_physical_replication_slot(%s, true)", (name,))
    for name in sorted(n for n in have if n.startswith(SLOT_PREFIX) and n not in wanted):
        # A removed standby may still stream (and reconnect): end its connection, then drop the slot
        # while it is free, in one statement; the next pass tries again if it was taken back meanwhile.
        await query(target, within + 5,
                   "SELECT pg_terminate_backend(active_pid, 5000) FROM pg_replication_slots"
                   " WHERE slot_name = %s AND active_pid IS NOT NULL", (name,))
        await query(target, within,
                   "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                   " WHERE slot_name = %s AND NOT active", (name,))
    return True
