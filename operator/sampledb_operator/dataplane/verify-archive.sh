#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: prove that the object store's base backups and WAL restore a point in time of
# the live primary with the right data. A restore point is made on the primary while no transaction
# can write the tables, their statistics are recorded in a snapshot of exactly that moment, the
# point's WAL is waited for in the store, recover.sh restores a copy to the point, and the copy's
# statistics are compared with the recorded ones.
#
# Settings: libpq's PGHOST, PGPORT, PGUSER (a superuser), PGPASSWORD, PGDATABASE (the application
# database), optional PGCONNECT_TIMEOUT: the live primary. The store's settings of lib.sh, as for
# base-backup.sh (SAMPLEDB_S3_DESTINATION, SAMPLEDB_S3_SERVER, optional SAMPLEDB_S3_ENDPOINT and
# SAMPLEDB_S3_ADDRESSING_STYLE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional AWS_DEFAULT_REGION
# and AWS_CA_BUNDLE). SAMPLEDB_VERIFY_POINT (required): the restore point's name, 1-63 of A-Z a-z 0-9
# . _ : -, unique in the archive (a recovery stops at the first point of that name after its base
# backup). VERIFY_SCRATCH (default $TMPDIR, else /tmp): room for a full copy of the database, restored
# into a private directory under it that is removed at exit. VERIFY_LOCK_TIMEOUT (default 5s: ms, s or
# min), VERIFY_POINT_ATTEMPTS (default 3), VERIFY_ARCHIVE_WAIT (seconds, default 600), optional
# VERIFY_BINDIR (PostgreSQL binaries of the backup's major; default those on PATH),
# VERIFY_SHARED_BUFFERS (the copy's, default 128MB), RESULT_FILE (lib.sh).
#
# Steps:
# 1. The point. Connection A (a READ COMMITTED database connection), with lock_timeout and statement_timeout set to
#    VERIFY_LOCK_TIMEOUT: one LOCK of every table lib.sh's statistics cover (SDB_STATS_RELATIONS) and of
#    the large-object catalogs IN SHARE MODE (it waits for writers in flight; new writes to those tables
#    wait for this window only), then pg_create_restore_point, pg_export_snapshot, clock_timestamp and
#    pg_walfile_name of the point's LSN in one statement. Connection B: REPEATABLE READ, READ ONLY, SET
#    TRANSACTION SNAPSHOT (the exported one), and ACCESS SHARE locks on the tables it sees (no
#    TRUNCATE or rewrite, which are not MVCC-safe, until it is done). A commits at once: writers waited
#    for the locks, the point and the import only. B checks that it sees exactly the tables A locked (a
#    table created meanwhile was not locked), then computes the statistics at leisure. A lock or
#    statement timeout, a deadlock, a table dropped or created meanwhile: the whole point is retried
#    under the name with "-N" appended (attempt N), up to VERIFY_POINT_ATTEMPTS.
#    Why this is sound: the restore point's WAL record is written while no transaction can write the
#    locked tables, and every commit to them before it is visible to the exported snapshot (a
#    transaction's commit record is in WAL before it becomes visible, and it is visible before its
#    locks are released); the snapshot was taken after the locks, so it sees no later commit to them.
#    recovery_target_name stops replay exactly at that record. Unlogged tables are recorded as empty:
#    no recovery restores their rows.
# 2. The archive: pg_stat_archiver.last_archived_wal on the primary, polled once a second, until it is
#    the point's segment or a later one of its timeline, for up to VERIFY_ARCHIVE_WAIT seconds. No
#    segment switch is forced: archivedSeconds measures the real data-loss window (archive_timeout
#    plus the archiver's latency).
# 3. The restore: recover.sh, without the primary's PG* settings: PGDATA and SAMPLEDB_RUN_DIR under
#    the scratch directory, POSTGRES_USER=sampledb_verifier with a random password (never printed),
#    the point as SAMPLEDB_RECOVERY_TARGET_NAME, the newest completed base backup that ended at or
#    before the point's LSN (SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN).
# 4. The comparison: the copy started privately with pg_ctl (listen_addresses='', a socket in a 0700
#    directory, trust for this uid only, fsync and archive_mode off), lib.sh's compare_stats on the
#    application database against the recorded statistics.
# 5. The copy is stopped and removed (also on every failure).
# Invariants: the primary is only read, but for the restore point and the short SHARE locks; no
# password or key is printed; table names and row counts are reported, never row data.
# Result: outcome ("verified"), point, pointLsn, pointTime (RFC 3339 UTC), walFile, timeline,
# attempts, lockedSeconds (how long writes to the tables waited at most), archivedSeconds, backupId,
# backupName, restoreSeconds, replaySeconds (recover.sh's), rtoSeconds (from the start of the restore
# until the copy answered a query), tables, rows, largeObjects, unloggedTables, mismatched,
# mismatches (bounded); on a failure "check" (point, archive, restore, compare) and the fields known.
# Exit codes (lib.sh): 2 bad settings, a standby, archive_mode off; 9 cannot connect to the primary;
# 5 no consistent point in VERIFY_POINT_ATTEMPTS (locks not taken within VERIFY_LOCK_TIMEOUT, or the
# tables kept changing: "check":"point"), or its WAL segment not archived in time ("check":"archive");
# 6 SQL failed on the primary ("check":"point"); recover.sh's own code and message ("check":"restore":
# 6 a WAL segment missing or damaged, 2 no base backup fits, ...); 8 the copy's data differs
# ("check":"compare"); 1 another unexpected failure.
set -Eeuo pipefail
SDB_SCRIPT=verify-archive
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

HERE=$(dirname -- "${BASH_SOURCE[0]}")
VERIFIER=sampledb_verifier
MISMATCH_REPORT_BYTES=1200 # the mismatch list's bound: the result stays under the 4 KiB termination message

# ---- settings
require_env SAMPLEDB_VERIFY_POINT
POINT=$SAMPLEDB_VERIFY_POINT
if [[ ! $POINT =~ ^[A-Za-z0-9._:-]{1,63}$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_VERIFY_POINT '${POINT:0:100}': a restore point name of 1-63 letters, digits, '.', '_', ':' and '-'"
fi
SCRATCH=${VERIFY_SCRATCH:-${TMPDIR:-/tmp}}
SCRATCH=${SCRATCH%/}
# the copy's sockets go under it: SCRATCH/sdb-va.XXXXXX/run/sampledb-recover.XXXXXX/.s.PGSQL.5432 (107 bytes at most)
if ((${#SCRATCH} > 51)); then
    die "$SDB_EXIT_CONFIG" "VERIFY_SCRATCH '$SCRATCH' is too long for the restored copy's Unix sockets below it: at most 51 bytes"
fi
if [[ $SCRATCH != /?* || $SCRATCH == *[[:space:]\'\"\\]* || ! -d $SCRATCH || ! -w $SCRATCH ]]; then
    die "$SDB_EXIT_CONFIG" "VERIFY_SCRATCH '$SCRATCH' must be a writable directory, an absolute path without spaces or quotes"
fi
LOCK_TIMEOUT=${VERIFY_LOCK_TIMEOUT:-5s}
if [[ ! $LOCK_TIMEOUT =~ ^[1-9][0-9]{0,8}(ms|s|min)?$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid VERIFY_LOCK_TIMEOUT '$LOCK_TIMEOUT': a PostgreSQL duration above 0, e.g. 5s, 800ms or 1min"
fi
ATTEMPTS=${VERIFY_POINT_ATTEMPTS:-3}
if [[ ! $ATTEMPTS =~ ^[1-9][0-9]?$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid VERIFY_POINT_ATTEMPTS '$ATTEMPTS': 1 to 99"
fi
ARCHIVE_WAIT=${VERIFY_ARCHIVE_WAIT:-600}
if [[ ! $ARCHIVE_WAIT =~ ^[0-9]{1,6}$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid VERIFY_ARCHIVE_WAIT '$ARCHIVE_WAIT': whole seconds"
fi
SHARED_BUFFERS=${VERIFY_SHARED_BUFFERS:-128MB}
if [[ ! $SHARED_BUFFERS =~ ^[1-9][0-9]{0,6}(kB|MB|GB)$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid VERIFY_SHARED_BUFFERS '$SHARED_BUFFERS': e.g. 128MB"
fi
bindir=${VERIFY_BINDIR:-}
if [[ -z $bindir ]]; then
    pg_ctl_path=$(command -v pg_ctl || true)
    bindir=${pg_ctl_path%/pg_ctl}
fi
for tool in pg_ctl postgres psql; do
    if [[ ! -x $bindir/$tool ]]; then
        die "$SDB_EXIT_CONFIG" "PostgreSQL binaries incomplete: ${bindir:-PATH}/$tool is missing (set VERIFY_BINDIR)"
    fi
done
if ! store_check; then
    die "$SDB_EXIT_CONFIG" "$SDB_STORE_PROBLEM"
fi

# ---- the primary
connect_check
database=$(sql_value "SELECT current_database()")
superuser=$(sql_value "SELECT session_user")
if [[ $(sql_value "SELECT pg_is_in_recovery()") == t ]]; then
    die "$SDB_EXIT_CONFIG" "the server at PGHOST is a standby: a restore point is made on the primary" "\"check\":\"point\""
fi
if [[ $(sql_value "SHOW archive_mode") == off ]]; then
    die "$SDB_EXIT_CONFIG" "archive_mode is off on the primary: its WAL never reaches the store" "\"check\":\"archive\""
fi
make_temp_dir
WORK=$(mktemp -d "$SCRATCH/sdb-va.XXXXXX")
chmod 0700 -- "$WORK"
on_cleanup "rm -rf -- '$WORK'"

# shellcheck disable=SC2034  # SDB_A and SDB_B are used by name (session_run)
coproc SDB_A { PGCLIENTENCODING=UTF8 exec psql -X -w -q -At -v ON_ERROR_STOP=0 2>>"$SDB_TMP/a.err"; }
# bash warns of a second coprocess while the first runs; both work
# shellcheck disable=SC2034
{ coproc SDB_B { PGCLIENTENCODING=UTF8 exec psql -X -w -q -At -v ON_ERROR_STOP=0 2>>"$SDB_TMP/b.err"; }; } 2>/dev/null
on_cleanup "session_end SDB_B $SDB_B_PID"
on_cleanup "session_end SDB_A $SDB_A_PID"
for conn in SDB_A SDB_B; do
    if ! session_run "$conn" "SELECT 'SDB_UP=1';" || ! session_line SDB_UP= >/dev/null; then
        die "$SDB_EXIT_CONNECT" "cannot open a connection to the primary: $(first_error "$SDB_TMP/${conn#SDB_}.err")"
    fi
done
session_run SDB_B "$SDB_STATS_SETTINGS" || die "$SDB_EXIT_CONNECT" "lost the connection to the primary: $(first_error "$SDB_TMP/b.err")"

# the relations the statistics cover, as format('%I.%I'), and a statement locking them all
REL_SQL="SELECT format('%I.%I', nspname, relname) AS r FROM ($SDB_STATS_RELATIONS) AS rel"
RELSET="md5(coalesce(string_agg(r, ',' ORDER BY r COLLATE \"C\"), ''))"
TIMEOUTS="SET LOCAL lock_timeout = '$LOCK_TIMEOUT';
SET LOCAL statement_timeout = '$LOCK_TIMEOUT';"

# attempt_failed SESSION: classify the session's error (WHY): KIND=lock (a timeout or a deadlock) or
# changed (a table dropped meanwhile), which a new attempt may not meet, else KIND=error.
attempt_failed() {
    WHY=$(first_error "$SDB_TMP/$1.err")
    KIND=error
    if grep -q -E 'canceling statement due to (lock|statement) timeout|deadlock detected' -- "$SDB_TMP/$1.err"; then
        KIND=lock
    elif grep -q -E 'relation .* does not exist' -- "$SDB_TMP/$1.err"; then
        KIND=changed
    fi
    session_run SDB_A "ROLLBACK;" || true
    session_run SDB_B "ROLLBACK;" || true
}

# take_point NAME: make the restore point NAME and record the statistics of its snapshot; false
# (WHY, KIND set) when this attempt failed.
take_point() {
    local name=$1 line relset held
    : >"$SDB_TMP/a.err"
    : >"$SDB_TMP/b.err"
    held=$(now_us)
    session_run SDB_A "BEGIN;
$TIMEOUTS
SELECT $RELSET AS sdb_relset, 'LOCK TABLE pg_catalog.pg_largeobject_metadata, pg_catalog.pg_largeobject'
    || coalesce(', ' || string_agg('ONLY ' || r, ', ' ORDER BY r COLLATE \"C\"), '') || ' IN SHARE MODE' AS sdb_lock
FROM ($REL_SQL) AS l \\gset
SELECT :'sdb_lock' \\gexec
SET LOCAL statement_timeout = 0;
SELECT 'SDB_POINT=' || lsn || ' ' || pg_walfile_name(lsn) || ' ' || snap || ' '
    || to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') || ' ' || extract(epoch FROM at) || ' ' || :'sdb_relset'
FROM (SELECT pg_create_restore_point('$name') AS lsn, pg_export_snapshot() AS snap, clock_timestamp() AS at) AS p;" ||
        die "$SDB_EXIT_CONNECT" "lost the connection to the primary: $(first_error "$SDB_TMP/a.err")" "\"check\":\"point\""
    if ! line=$(session_line SDB_POINT=); then
        attempt_failed a
        return 1
    fi
    read -r POINT_LSN WAL_FILE SNAPSHOT POINT_TIME POINT_EPOCH relset <<<"$line"
    session_run SDB_B "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;
SET TRANSACTION SNAPSHOT '$SNAPSHOT';
$TIMEOUTS
SELECT $RELSET AS sdb_relset, coalesce('LOCK TABLE ' || string_agg('ONLY ' || r, ', ' ORDER BY r COLLATE \"C\")
    || ' IN ACCESS SHARE MODE', 'SELECT') AS sdb_lock FROM ($REL_SQL) AS l \\gset
SELECT :'sdb_lock' \\gexec
SET LOCAL statement_timeout = 0;
SET LOCAL lock_timeout = 0;
SELECT 'SDB_IMPORTED=' || :'sdb_relset';" || die "$SDB_EXIT_CONNECT" "lost the connection to the primary: $(first_error "$SDB_TMP/b.err")" "\"check\":\"point\""
    line=$(session_line SDB_IMPORTED=) || line=
    session_run SDB_A "COMMIT;" || true # writers go on
    LOCKED_S=$(seconds_since "$held")
    if [[ -z $line ]]; then
        attempt_failed b
        return 1
    fi
    if [[ $line != "$relset" ]]; then
        WHY="the tables changed while the point was made (one was created or dropped)"
        KIND=changed
        session_run SDB_B "ROLLBACK;" || true
        return 1
    fi
    log "restore point $name at $POINT_LSN ($POINT_TIME, WAL file $WAL_FILE); writes to the tables waited at most $LOCKED_S s"
    session_run SDB_B "$SDB_STATS_SQL
SELECT 'SDB_RECORDED=' || count(*) || ' ' || (:'sdb_tables'::jsonb || coalesce(jsonb_object_agg(r,
    jsonb_build_object('rows', 0, 'checksum', md5('0:0'))), '{}'))::text
FROM ($REL_SQL) AS u JOIN (SELECT format('%I.%I', n.nspname, c.relname) AS r FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relpersistence = 'u') AS ul USING (r);
COMMIT;" || die "$SDB_EXIT_CONNECT" "lost the connection to the primary: $(first_error "$SDB_TMP/b.err")" "\"check\":\"point\""
    return 0
}

log "making restore point $POINT on the primary (database $database; lock timeout $LOCK_TIMEOUT, $ATTEMPTS attempts)"
attempt=0
while :; do
    attempt=$((attempt + 1))
    name=$POINT
    if ((attempt > 1)); then
        name="${POINT:0:$((63 - ${#attempt} - 1))}-$attempt"
    fi
    if take_point "$name"; then
        break
    fi
    if [[ $KIND == error ]]; then
        die "$SDB_EXIT_SQL" "making restore point $name failed: $WHY" "\"check\":\"point\",\"attempts\":$attempt"
    fi
    if ((attempt >= ATTEMPTS)); then
        if [[ $KIND == lock ]]; then
            WHY="the tables could not be locked in SHARE mode within the lock timeout (VERIFY_LOCK_TIMEOUT=$LOCK_TIMEOUT): a transaction holds a conflicting lock ($WHY)"
        fi
        die "$SDB_EXIT_NOT_READY" "no consistent restore point in $attempt attempts: $WHY" "\"check\":\"point\",\"attempts\":$attempt"
    fi
    log "attempt $attempt: $WHY; trying again"
    sleep 1
done
timeline=$((16#${WAL_FILE:0:8}))
fields="\"point\":$(json_str "$name"),\"pointLsn\":$(json_str "$POINT_LSN"),\"pointTime\":$(json_str "$POINT_TIME")"
fields+=",\"walFile\":$(json_str "$WAL_FILE"),\"timeline\":$timeline,\"attempts\":$attempt,\"lockedSeconds\":$LOCKED_S"
tables_json=$(session_line SDB_RECORDED=) ||
    die "$SDB_EXIT_SQL" "computing the statistics of the point's snapshot failed: $(first_error "$SDB_TMP/b.err")" "$fields,\"check\":\"point\""
unlogged=${tables_json%% *}
tables_json=${tables_json#* }
if ! lobs_json=$(session_line SDB_LOBS=); then
    lobs_json=null
    log "warning: no large-object statistics: $(first_error "$SDB_TMP/b.err")"
fi
STATS_FILE=$(realpath -- "$SDB_TMP")/point-stats.json
stats_object "$tables_json" "$lobs_json" >"$STATS_FILE"
session_end SDB_B "$SDB_B_PID"
fields+=",\"unloggedTables\":$unlogged"

# ---- 2. the point's WAL segment in the store (as the archiver reports it)
log "waiting up to $ARCHIVE_WAIT s for WAL file $WAL_FILE to be archived"
deadline=$((SECONDS + ARCHIVE_WAIT))
while :; do
    if ! session_run SDB_A "SELECT 'SDB_ARCHIVED=' || coalesce(substr(last_archived_wal, 1, 24), '-') || ' '
    || round((extract(epoch FROM CASE WHEN last_archived_wal = '$WAL_FILE' THEN last_archived_time
                                      ELSE clock_timestamp() END) - $POINT_EPOCH)::numeric, 1)
FROM pg_catalog.pg_stat_archiver;" || ! line=$(session_line SDB_ARCHIVED=); then
        die "$SDB_EXIT_CONNECT" "lost the connection to the primary while waiting for WAL file $WAL_FILE: $(first_error "$SDB_TMP/a.err")" "$fields,\"check\":\"archive\""
    fi
    last=${line%% *}
    if [[ $last =~ ^[0-9A-F]{24}$ && ${last:0:8} == "${WAL_FILE:0:8}" && ! $last < $WAL_FILE ]]; then
        archived_s=${line#* }
        break
    fi
    if ((SECONDS >= deadline)); then
        die "$SDB_EXIT_NOT_READY" "the restore point's WAL segment $WAL_FILE was not archived within $ARCHIVE_WAIT s (last archived: $last); see the ContinuousArchiving condition" \
            "$fields,\"check\":\"archive\""
    fi
    sleep 1
done
session_end SDB_A "$SDB_A_PID"
fields+=",\"archivedSeconds\":$archived_s"
log "WAL file $WAL_FILE reached the store $archived_s s after the point"

# ---- 3. restore a copy to the point (recover.sh), without the primary's connection settings
while IFS= read -r var; do
    unset "$var"
done < <(compgen -e | grep '^PG' || true)
password=$(head -c 18 /dev/urandom | base64)
started=$(now_us)
rc=0
PATH="$bindir:$PATH" PGDATA="$WORK/data" SAMPLEDB_RUN_DIR="$WORK/run" RESULT_FILE="$SDB_TMP/recover.json" \
    POSTGRES_USER=$VERIFIER POSTGRES_PASSWORD=$password SAMPLEDB_RECOVERY_SUPERUSER=$superuser \
    SAMPLEDB_RECOVERY_SERVER=$SERVER SAMPLEDB_RECOVERY_DESTINATION=$DEST SAMPLEDB_RECOVERY_TARGET_NAME=$name \
    SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN=$POINT_LSN SAMPLEDB_RECOVERY_TARGET_TIME='' SAMPLEDB_RECOVERY_TARGET_LSN='' \
    SAMPLEDB_RECOVERY_BACKUP='' bash "$HERE/recover.sh" postgres -c "shared_buffers=$SHARED_BUFFERS" \
    -c dynamic_shared_memory_type=mmap -c huge_pages=off -c logging_collector=off </dev/null || rc=$?
read_result "$SDB_TMP/recover.json" message backupId backupName restoreSeconds replaySeconds || true
for key in backupId backupName; do
    if [[ -n ${SDB_RESULT[$key]:-} ]]; then
        fields+=",\"$key\":$(json_str "${SDB_RESULT[$key]}")"
    fi
done
if ((rc != 0)); then
    if [[ -f $WORK/run/sampledb-recover.log ]]; then
        tail -n 15 -- "$WORK/run/sampledb-recover.log" | sed 's/^/sampledb-verify-archive: recovery log: /' >&2 || true
    fi
    message=${SDB_RESULT[message]:-recover.sh failed (exit $rc) without a result}
    die "$rc" "restoring restore point $name failed: ${message% (server log: *)}" "$fields,\"check\":\"restore\""
fi
fields+=",\"restoreSeconds\":${SDB_RESULT[restoreSeconds]:-null},\"replaySeconds\":${SDB_RESULT[replaySeconds]:-null}"

# ---- 4. start the copy privately and compare
sock=$WORK/s
mkdir -m 0700 -- "$sock"
printf 'local all all trust\n' >"$WORK/hba.conf"
options="-c listen_addresses='' -c unix_socket_directories='$sock' -c port=5432 -c hba_file='$WORK/hba.conf'"
options+=" -c fsync=off -c synchronous_commit=off -c autovacuum=off -c archive_mode=off -c archive_command=''"
options+=" -c shared_buffers=$SHARED_BUFFERS -c dynamic_shared_memory_type=mmap -c huge_pages=off"
options+=" -c logging_collector=off -c max_parallel_workers_per_gather=0"
on_cleanup "'$bindir/pg_ctl' -D '$WORK/data' -m immediate -w stop"
if ! "$bindir/pg_ctl" -D "$WORK/data" -l "$WORK/copy.log" -w -t "${VERIFY_START_TIMEOUT:-300}" -o "$options" \
    start >/dev/null 2>&1; then
    die "$SDB_EXIT_INTERNAL" "the restored copy did not start: $(tail -n 3 -- "$WORK/copy.log" 2>/dev/null)" "$fields,\"check\":\"compare\""
fi
export PGHOST=$sock PGPORT=5432 PGUSER=$VERIFIER PGDATABASE=$database PGCLIENTENCODING=UTF8
export PGOPTIONS="-c default_transaction_read_only=off -c statement_timeout=0 -c lock_timeout=0"
sql_value "SELECT 1" >/dev/null 2>"$SDB_TMP/copy.err" ||
    die "$SDB_EXIT_INTERNAL" "cannot query the restored copy: $(first_error "$SDB_TMP/copy.err")" "$fields,\"check\":\"compare\""
rto_s=$(seconds_since "$started")
fields+=",\"rtoSeconds\":$rto_s"
log "the restored copy answers $rto_s s after the restore began; comparing database $database"
compare_stats "$STATS_FILE" "" "$MISMATCH_REPORT_BYTES" "$SDB_TMP/compare.err"
case ${SDB_COMPARE[verdict]} in
verified | mismatch) ;;
*) die "$SDB_EXIT_INTERNAL" "computing the restored copy's statistics failed: $(first_error "$SDB_TMP/compare.err")" \
    "$fields,\"check\":\"compare\"" ;;
esac
tables=${SDB_COMPARE[tables]}
rows=${SDB_COMPARE[rows]}
mismatched=${SDB_COMPARE[mismatched]}
fields+=",\"tables\":$tables,\"rows\":$rows,\"largeObjects\":${SDB_COMPARE[large_objects]},\"mismatched\":$mismatched"
fields+=",\"mismatches\":${SDB_COMPARE[mismatches]}"
if [[ ${SDB_COMPARE[verdict]} == mismatch ]]; then
    what="$mismatched tables differ: ${SDB_COMPARE[names]}"
    if ((mismatched == 0)); then what="no table differs"; fi
    lobs_problem=${SDB_COMPARE[lobs_problem]}
    if [[ $lobs_problem == count || $lobs_problem == checksum ]]; then what+="; large objects differ ($lobs_problem)"; fi
    die "$SDB_EXIT_VERIFY" "restore point $name restores but does not match its snapshot: $what" \
        "$fields,\"check\":\"compare\",\"largeObjectsProblem\":$(json_str "$lobs_problem")"
fi

# ---- 5. stop and remove the copy
"$bindir/pg_ctl" -D "$WORK/data" -m fast -w stop >/dev/null 2>&1 || true
rm -rf -- "$WORK"
note=
if ((unlogged > 0)); then note=" ($unlogged unlogged, empty after any recovery)"; fi
succeed "restore point $name ($POINT_LSN, $POINT_TIME) restored from base backup ${SDB_RESULT[backupId]} (${SDB_RESULT[backupName]:-unnamed}) in $rto_s s and matches: $tables tables$note, $rows rows, ${SDB_COMPARE[large_objects]} large objects; its WAL reached the store $archived_s s after the point" \
    "\"outcome\":\"verified\",$fields"
