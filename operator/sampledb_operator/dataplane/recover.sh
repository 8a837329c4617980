#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: point-in-time recovery of a new primary's $PGDATA from the object store:
# a base backup (barman-cloud-restore) and WAL replay (barman-cloud-wal-restore) to a target, then
# promotion. Called by instance.sh for role=primary when $PGDATA is empty and
# $SAMPLEDB_RECOVERY_SERVER is set, with the server's arguments (e.g. postgres -c config_file=...);
# returns so that instance.sh execs the entrypoint, which starts the recovered cluster normally.
#
# Settings: PGDATA, POSTGRES_USER, POSTGRES_PASSWORD (the new database's; never printed),
# SAMPLEDB_RECOVERY_SERVER (the source's server name in the store), SAMPLEDB_RECOVERY_DESTINATION
# (the source's destination URL; default SAMPLEDB_S3_DESTINATION), at most one of
# SAMPLEDB_RECOVERY_TARGET_TIME (a timestamp with an offset, e.g. 2026-12-05T07:30:00Z),
# SAMPLEDB_RECOVERY_TARGET_NAME (a restore point, pg_create_restore_point) and
# SAMPLEDB_RECOVERY_TARGET_LSN (none: the end of the archive), optional SAMPLEDB_RECOVERY_BACKUP (a
# backup id or name; default: the newest completed backup that ended at or before the target time
# or LSN, else the newest), optional SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN (with a restore point or no
# target, whose position the catalog cannot know: choose the newest completed backup that ended at or
# before this LSN instead of the newest; verify-archive.sh gives its restore point's LSN), optional
# SAMPLEDB_RECOVERY_SUPERUSER (a superuser role of the source to connect as over the private socket
# when $POSTGRES_USER is not a role there; the OS user's name is tried last), SAMPLEDB_RUN_DIR
# (default /var/run/postgresql: the private socket and scratch files), and the store's connection
# settings of lib.sh (endpoint, keys, CA, region), or the source store's own under SAMPLEDB_RECOVERY_*
# (ACCESS_KEY_ID, SECRET_ACCESS_KEY, ENDPOINT, REGION, CA_BUNDLE: lib.sh's store_from_recovery_settings).
#
# Steps: $PGDATA.recovering marks the recovery (an interrupted one of our own is removed and
# redone; a non-empty $PGDATA without it is refused); barman-cloud-restore into $PGDATA; the
# server is started privately (postgres in the background: listen_addresses='' so no TCP, a socket
# in a private 0700 directory, an hba_file allowing only local trust, hot_standby=off, an empty
# archive_command: WAL due for archiving waits, .ready, for the normal start), with the
# recovery settings (restore_command, target, recovery_target_action=promote,
# recovery_target_timeline=latest) on its command line only, never in a file a later start reads,
# and recovery.signal; it is waited for until it has promoted (accepts connections and
# pg_is_in_recovery() is false) or has exited. Then the password of $POSTGRES_USER is set (the role
# is created as a superuser if the source had none of that name), and that of the application's role
# $SAMPLEDB_APP_USER to $SAMPLEDB_APP_PASSWORD when they are set (created with LOGIN only if the source
# had none of that name; a source whose application role was its superuser keeps it so) over the socket, with statement
# logging off and the password read by psql from the environment (\getenv); a clean stop
# (pg_ctl stop -m fast); the marker is removed. The restore command fails hard (exit 126: the
# server stops recovery with FATAL, naming the file) when barman-cloud-wal-restore fails other than
# by not finding the file, so a damaged segment or an unreachable store never ends a recovery early.
# With no target, replay ends at the first segment the archive lacks; when the archive has the one
# after it, that is a gap (a deleted segment), not the end, and the recovery fails.
# $PGDATA/sampledb-archive-checked (from the source) is removed and $PGDATA/sampledb-recovered
# written (source, server, backup, target, timeline): archive-wal.sh then checks the new
# destination in full (a recovered copy never archives into its source's WAL).
# Result: backupId, backupName, target, timeline (the new one), restoreSeconds, replaySeconds,
# lastTransactionTime (of the last replayed transaction, when the server logged it).
# Exit codes (lib.sh): 2 bad settings, non-empty $PGDATA, no backup fits the target; 6 recovery
# failed (the reason from the server's log: the WAL file that could not be fetched, "recovery ended
# before the configured recovery target was reached", ...; the log is kept in
# $SAMPLEDB_RUN_DIR/sampledb-recover.log); 9 cannot connect to the recovered server; 1 the store
# cannot be listed, the restore or another command failed unexpectedly.
set -Eeuo pipefail
SDB_SCRIPT=recover
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"
# shellcheck source=store-copy.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/store-copy.sh"

RUN_DIR=${SAMPLEDB_RUN_DIR:-/var/run/postgresql}
RECOVERED_FILE=sampledb-recovered
CHECKED_FILE=sampledb-archive-checked
POLL=0.2

require_env PGDATA POSTGRES_USER POSTGRES_PASSWORD SAMPLEDB_RECOVERY_SERVER
PGDATA=${PGDATA%/}
if [[ $PGDATA != /?* || $PGDATA == *[[:space:]\'\"\\]* ]]; then
    die "$SDB_EXIT_CONFIG" "PGDATA must be an absolute path below / without spaces or quotes, not '$PGDATA'"
fi
if [[ $POSTGRES_PASSWORD == *[$'\n\r']* ]]; then
    die "$SDB_EXIT_CONFIG" "POSTGRES_PASSWORD holds a line break"
fi
store_from_recovery_settings
DEST=${SAMPLEDB_RECOVERY_DESTINATION:-${SAMPLEDB_S3_DESTINATION:-}}
SERVER=$SAMPLEDB_RECOVERY_SERVER
DEST_SETTING=SAMPLEDB_RECOVERY_DESTINATION
if [[ -z ${SAMPLEDB_RECOVERY_DESTINATION:-} ]]; then
    DEST_SETTING="SAMPLEDB_RECOVERY_DESTINATION (or SAMPLEDB_S3_DESTINATION)"
fi
problem=$(store_destination_problem "$DEST" "$SERVER" "$DEST_SETTING" SAMPLEDB_RECOVERY_SERVER)
if [[ -n $problem ]]; then
    die "$SDB_EXIT_CONFIG" "$problem"
fi
DEST=${DEST%/}
if ! store_setup; then
    die "$SDB_EXIT_CONFIG" "$SDB_STORE_PROBLEM"
fi

# ---- the target
targets=0
target_desc="the end of the archive"
target_json="{\"kind\":\"end\"}"
target_args=()
select_mode=latest
select_arg=
if [[ -n ${SAMPLEDB_RECOVERY_TARGET_TIME:-} ]]; then
    targets=$((targets + 1))
    if ! select_arg=$(iso_time "$SAMPLEDB_RECOVERY_TARGET_TIME"); then
        die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_RECOVERY_TARGET_TIME '$SAMPLEDB_RECOVERY_TARGET_TIME': want a timestamp with an offset, e.g. 2026-12-05T07:30:00Z or 2026-12-05 08:30:00+01:00"
    fi
    select_mode=before-time
    target_args=(-c "recovery_target_time=$select_arg")
    target_desc="time $SAMPLEDB_RECOVERY_TARGET_TIME"
    target_json="{\"kind\":\"time\",\"value\":$(json_str "$SAMPLEDB_RECOVERY_TARGET_TIME")}"
fi
if [[ -n ${SAMPLEDB_RECOVERY_TARGET_NAME:-} ]]; then
    targets=$((targets + 1))
    if [[ ${#SAMPLEDB_RECOVERY_TARGET_NAME} -gt 63 || $SAMPLEDB_RECOVERY_TARGET_NAME == *[[:cntrl:]]* ]]; then
        die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_RECOVERY_TARGET_NAME: a restore point name has at most 63 bytes and no control characters"
    fi
    target_args=(-c "recovery_target_name=$SAMPLEDB_RECOVERY_TARGET_NAME")
    target_desc="restore point '$SAMPLEDB_RECOVERY_TARGET_NAME'"
    target_json="{\"kind\":\"name\",\"value\":$(json_str "$SAMPLEDB_RECOVERY_TARGET_NAME")}"
fi
if [[ -n ${SAMPLEDB_RECOVERY_TARGET_LSN:-} ]]; then
    targets=$((targets + 1))
    if [[ ! $SAMPLEDB_RECOVERY_TARGET_LSN =~ ^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$ ]]; then
        die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_RECOVERY_TARGET_LSN '$SAMPLEDB_RECOVERY_TARGET_LSN': want an LSN such as 0/16B3748"
    fi
    select_mode=before-lsn
    select_arg=$SAMPLEDB_RECOVERY_TARGET_LSN
    target_args=(-c "recovery_target_lsn=$SAMPLEDB_RECOVERY_TARGET_LSN")
    target_desc="LSN $SAMPLEDB_RECOVERY_TARGET_LSN"
    target_json="{\"kind\":\"lsn\",\"value\":$(json_str "$SAMPLEDB_RECOVERY_TARGET_LSN")}"
fi
if ((targets > 1)); then
    die "$SDB_EXIT_CONFIG" "set at most one of SAMPLEDB_RECOVERY_TARGET_TIME, SAMPLEDB_RECOVERY_TARGET_NAME and SAMPLEDB_RECOVERY_TARGET_LSN"
fi
if [[ -n ${SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN:-} ]]; then
    if [[ ! $SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN =~ ^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$ ]]; then
        die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN '$SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN': want an LSN such as 0/16B3748"
    fi
    if [[ $select_mode != latest || -n ${SAMPLEDB_RECOVERY_BACKUP:-} ]]; then
        die "$SDB_EXIT_CONFIG" "SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN chooses the backup for a restore point or the end of the archive: not with a target time or LSN, nor with SAMPLEDB_RECOVERY_BACKUP"
    fi
    select_mode=before-lsn
    select_arg=$SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN
fi
if [[ -n ${SAMPLEDB_RECOVERY_BACKUP:-} ]]; then
    if [[ ! $SAMPLEDB_RECOVERY_BACKUP =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ ]]; then
        die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_RECOVERY_BACKUP '$SAMPLEDB_RECOVERY_BACKUP': a backup id or name"
    fi
    select_mode=name
    select_arg=$SAMPLEDB_RECOVERY_BACKUP
fi
ident="\"source\":$(json_str "$DEST"),\"server\":$(json_str "$SERVER"),\"target\":$target_json"

# ---- the server's arguments (as the entrypoint gets them): "postgres" and options
SERVER_ARGS=("$@")
if [[ ${SERVER_ARGS[0]:-} == postgres ]]; then
    SERVER_ARGS=("${SERVER_ARGS[@]:1}")
fi
major=$(postgres --version)
[[ $major =~ \(PostgreSQL\)\ ([0-9]+) ]] || die "$SDB_EXIT_INTERNAL" "cannot read the server's version from: $major"
major=${BASH_REMATCH[1]}

# ---- $PGDATA: empty, or an unfinished recovery of our own
MARKER=$PGDATA.recovering
if [[ -e $MARKER ]]; then
    rm -rf -- "$PGDATA"
    rm -f -- "$MARKER"
    log "removed an unfinished recovery of our own ($MARKER); recovering again"
elif [[ -d $PGDATA && -n $(find "$PGDATA" -mindepth 1 -maxdepth 1 -print -quit) ]]; then
    die "$SDB_EXIT_CONFIG" "$PGDATA is not empty: refusing to recover into it" "$ident"
fi

mkdir -p -- "$RUN_DIR"
SDB_TMP=$(mktemp -d "$RUN_DIR/sampledb-recover.XXXXXX")
chmod 0700 "$SDB_TMP"
on_cleanup "rm -rf -- '$SDB_TMP'"
SERVER_LOG=$SDB_TMP/server.log
KEPT_LOG=$RUN_DIR/sampledb-recover.log

# ---- the backup
if ! barman-cloud-backup-list "${SDB_STORE_OPTS[@]}" --format json "$DEST" "$SERVER" \
    >"$SDB_TMP/list.json" 2>"$SDB_TMP/list.err"; then
    die "$SDB_EXIT_INTERNAL" "cannot list the backups of $SERVER in $DEST: $(barman_error "$SDB_TMP/list.err")" "$ident"
fi
backup_catalog "$SDB_TMP/list.json" "$select_mode" ${select_arg:+"$select_arg"} 2>"$SDB_TMP/catalog.err" ||
    die "$SDB_EXIT_INTERNAL" "cannot read the backup list: $(first_error "$SDB_TMP/catalog.err")" "$ident"
if [[ ${SDB_CATALOG[done]} == 0 ]]; then
    die "$SDB_EXIT_CONFIG" "no completed base backup of $SERVER in $DEST (${SDB_CATALOG[count]} listed)" "$ident"
fi
if [[ ${SDB_CATALOG[found]} != 1 ]]; then
    case $select_mode in
    name) die "$SDB_EXIT_CONFIG" "no completed backup named or with id '$select_arg' for $SERVER in $DEST${SDB_CATALOG[others]:+ (found ${SDB_CATALOG[others]})}" "$ident" ;;
    before-time) die "$SDB_EXIT_CONFIG" "no base backup of $SERVER ended at or before the target time $SAMPLEDB_RECOVERY_TARGET_TIME: the oldest, ${SDB_CATALOG[oldest_id]} (${SDB_CATALOG[oldest_name]:-unnamed}), ended at ${SDB_CATALOG[oldest_end_time]}" "$ident" ;;
    *) die "$SDB_EXIT_CONFIG" "no base backup of $SERVER ended at or before the ${SAMPLEDB_RECOVERY_TARGET_LSN:+target }LSN $select_arg: the oldest, ${SDB_CATALOG[oldest_id]} (${SDB_CATALOG[oldest_name]:-unnamed}), ended at ${SDB_CATALOG[oldest_end_lsn]}" "$ident" ;;
    esac
fi
BACKUP_ID=${SDB_CATALOG[id]}
BACKUP_NAME=${SDB_CATALOG[name]}
BACKUP_END=${SDB_CATALOG[end_time]}
BACKUP_END_LSN=${SDB_CATALOG[end_lsn]}
backup_major=$((${SDB_CATALOG[version]:-0} / 10000))
ident+=",\"backupId\":$(json_str "$BACKUP_ID"),\"backupName\":$(json_str "$BACKUP_NAME")"
if [[ $backup_major != "$major" ]]; then
    die "$SDB_EXIT_CONFIG" "backup $BACKUP_ID is of PostgreSQL $backup_major, the binaries here are $major" "$ident"
fi
if [[ ${SDB_CATALOG[tablespaces]:-0} != 0 ]]; then
    die "$SDB_EXIT_CONFIG" "backup $BACKUP_ID has tablespaces, which recovery does not relocate" "$ident"
fi

# ---- restore the base backup
printf 'recovery of %s from %s server %s started %s by recover.sh\n' "$PGDATA" "$DEST" "$SERVER" "$(now_utc)" >"$MARKER"
mkdir -p -- "$PGDATA"
chmod 0700 -- "$PGDATA"
log "restoring backup $BACKUP_ID (${BACKUP_NAME:-unnamed}, ended $BACKUP_END at $BACKUP_END_LSN) of $SERVER from $DEST into $PGDATA, to recover to $target_desc"
t0=$(now_us)
if ! barman-cloud-restore "${SDB_STORE_OPTS[@]}" "$DEST" "$SERVER" "$BACKUP_ID" "$PGDATA" \
    >"$SDB_TMP/restore.out" 2>"$SDB_TMP/restore.err"; then
    die "$SDB_EXIT_INTERNAL" "barman-cloud-restore of backup $BACKUP_ID failed: $(barman_error "$SDB_TMP/restore.err")" "$ident"
fi
restore_s=$(seconds_since "$t0")
chmod 0700 -- "$PGDATA"
log "restored backup $BACKUP_ID in $restore_s s"
ident+=",\"restoreSeconds\":$restore_s"
# What the source left that must not act here: its archive check, signals, a stale pid file.
rm -f -- "$PGDATA/$CHECKED_FILE" "$PGDATA/standby.signal" "$PGDATA/postmaster.pid" "$PGDATA/postmaster.opts"
mkdir -p -- "$PGDATA/pg_wal/archive_status"
: >"$PGDATA/recovery.signal"

# ---- replay, privately
printf 'local all all trust\n' >"$SDB_TMP/pg_hba.conf"
restore_cmd="barman-cloud-wal-restore ${SDB_STORE_OPTS[*]} $DEST $SERVER %f %p; rc=\$?; if [ \$rc -gt 1 ]; then exit 126; fi; exit \$rc"
private=(
    -c listen_addresses=
    -c port=5432
    -c "unix_socket_directories=$SDB_TMP"
    -c "hba_file=$SDB_TMP/pg_hba.conf"
    -c hot_standby=off
    -c archive_command=
    -c "restore_command=$restore_cmd"
    -c recovery_target_action=promote
    -c recovery_target_timeline=latest
    "${target_args[@]}"
)
log "replaying WAL from $DEST server $SERVER to $target_desc (private server: no TCP, socket in $SDB_TMP)"
t1=$(now_us)
postgres -D "$PGDATA" "${SERVER_ARGS[@]}" "${private[@]}" >"$SERVER_LOG" 2>&1 </dev/null &
pm_pid=$!
# shellcheck disable=SC2317  # run as a cleanup
stop_private() {
    if kill -0 "$pm_pid" 2>/dev/null; then
        pg_ctl -D "$PGDATA" stop -m fast -w -t 60 >/dev/null 2>&1 || kill -QUIT "$pm_pid" 2>/dev/null || true
        wait "$pm_pid" 2>/dev/null || true
    fi
}
on_cleanup stop_private

# private_sql USER SQL...: psql over the private socket (template1, always there).
private_sql() {
    local user=$1
    shift
    PGCONNECT_TIMEOUT=5 psql -X -w -v ON_ERROR_STOP=1 -q -At -h "$SDB_TMP" -p 5432 -U "$user" -d template1 "$@"
}

# recovery_failure: the reason in the private server's log, for a recovery that ended without promoting.
recovery_failure() {
    local line file detail
    line=$(grep -m1 -E 'FATAL: +could not restore file "[^"]+" from archive' -- "$SERVER_LOG" || true)
    if [[ $line =~ could\ not\ restore\ file\ \"([^\"]+)\" ]]; then
        file=${BASH_REMATCH[1]}
        detail=$(grep -E 'ERROR: ' -- "$SERVER_LOG" | grep -v -E 'FATAL|LOG:' | tail -n1 || true)
        detail=${detail#*ERROR: }
        detail=${detail#Barman cloud WAL restore exception: }
        printf 'the restore command could not fetch WAL file %s from %s server %s: %s' "$file" "$DEST" "$SERVER" "$(scrub "$(one_line "${detail:-see the log}")")"
        return 0
    fi
    line=$(grep -m1 -E '(invalid magic number|invalid page header|incorrect resource manager data checksum|invalid record length|contrecord is requested|unexpected pageaddr).*(log|WAL) (segment|file) [0-9A-F]{24}' -- "$SERVER_LOG" || true)
    if [[ -n $line && $line =~ (segment|file)\ ([0-9A-F]{24}) ]] && grep -q 'recovery ended before configured recovery target was reached' -- "$SERVER_LOG"; then
        file=${BASH_REMATCH[2]}
        line=${line#*LOG: }
        printf 'recovery ended before the configured recovery target was reached: WAL file %s from the archive is damaged (%s)' "$file" "$(one_line "${line#"${line%%[![:space:]]*}"}")"
        return 0
    fi
    if grep -q 'recovery ended before configured recovery target was reached' -- "$SERVER_LOG"; then
        file=$(grep -E 'WAL file [0-9A-F]{24} for server .* does not exist' -- "$SERVER_LOG" | tail -n1 | sed -E 's/.*WAL file ([0-9A-F]{24}) .*/\1/' || true)
        detail="recovery ended before the configured recovery target ($target_desc) was reached"
        if [[ -n $file ]]; then
            detail+=": WAL file $file is not in the archive of $SERVER in $DEST"
        fi
        local last
        last=$(grep -E 'restored log file "[0-9A-F]{24}" from archive' -- "$SERVER_LOG" | tail -n1 | sed -E 's/.*restored log file "([0-9A-F]{24})".*/\1/' || true)
        if [[ -n $last ]]; then
            detail+=" (the last restored was $last)"
        fi
        if [[ -n ${SAMPLEDB_RECOVERY_TARGET_NAME:-} ]]; then
            detail+="; a restore point made before the end of backup $BACKUP_ID is never reached from it: choose an older backup with SAMPLEDB_RECOVERY_BACKUP"
        fi
        printf '%s' "$detail"
        return 0
    fi
    line=$(grep -E '(FATAL|PANIC): ' -- "$SERVER_LOG" | grep -v -E 'the database system is (starting up|not accepting connections|not yet accepting connections|shutting down)' | head -n1 || true)
    if [[ -n $line ]]; then
        line=${line#*FATAL: }
        line=${line#*PANIC: }
        printf 'the server stopped during recovery: %s' "$(scrub "$(one_line "${line#"${line%%[![:space:]]*}"}")")"
        return 0
    fi
    printf 'the server stopped during recovery without saying why'
}

# in_archive SEGMENT: whether the source's archive has SEGMENT.
in_archive() {
    wal_in_store "$DEST" "$SERVER" "$1" "$SDB_TMP"
}

# check_no_gap: with no target, recovery ends at the first WAL segment the archive does not have.
# Fail when the archive holds a later segment (of its timeline or a later one, complete or partial)
# but still not that one: a gap, not the end of the archive (a live source archives in order, so a
# segment that arrived meanwhile is no gap). A hole in the parent timeline is found too, e.g. the
# segments a failed primary never archived, which the new timeline's segments follow.
check_no_gap() {
    local missing later
    missing=$(grep -E 'WAL file [0-9A-F]{24} for server .* does not exist' -- "$SERVER_LOG" | tail -n1 |
        sed -E 's/.*WAL file ([0-9A-F]{24}) .*/\1/' || true)
    [[ -n $missing ]] || return 0
    later=$(later_segment "$missing")
    if [[ -n $later ]] && ! in_archive "$missing"; then
        fail_recovery "the archive of $SERVER in $DEST has a gap: WAL file $missing is missing but $later is there, so replay stopped short of the end of the archive (set a recovery target before $missing to accept that)"
    fi
}

# later_segment NAME: print the first WAL segment in the archive after NAME (same or later timeline,
# later position; complete or partial), nothing when there is none. Fails the recovery when the store
# cannot be listed: the end of the archive is then unknown.
later_segment() {
    local name=$1 listed line base
    listed=$(store_wal_names "${name:0:16}/") ||
        fail_recovery "cannot list the WAL archive of $SERVER in $DEST to tell its end from a gap after $name: $(store_failure)"
    while IFS= read -r line; do
        base=${line##*/}
        base=${base:0:24}
        if [[ $base =~ ^[0-9A-F]{24}$ ]] && ((16#${base:0:8} >= 16#${name:0:8})) && [[ ${base:8} > ${name:8} ]]; then
            printf '%s' "${line##*/}"
            return 0
        fi
    done <<<"$listed"
}

fail_recovery() {
    if cp -f -- "$SERVER_LOG" "$KEPT_LOG" 2>/dev/null; then
        chmod 0600 -- "$KEPT_LOG" || true
    fi
    die "$SDB_EXIT_SQL" "$1 (server log: $KEPT_LOG)" "$ident"
}

promoted=0
refused=0
while ((!promoted)); do
    if ! kill -0 "$pm_pid" 2>/dev/null; then
        wait "$pm_pid" 2>/dev/null || true
        fail_recovery "$(recovery_failure)"
    fi
    # hot_standby is off: the server accepts connections only once recovery has ended, when the
    # status line of postmaster.pid (its 8th) says "ready"; nothing connects before that
    if [[ $(sed -n '8p' -- "$PGDATA/postmaster.pid" 2>/dev/null) == ready* ]]; then
        state=
        for user in "$POSTGRES_USER" ${SAMPLEDB_RECOVERY_SUPERUSER:+"$SAMPLEDB_RECOVERY_SUPERUSER"} "$(id -un)"; do
            if state=$(private_sql "$user" -c 'SELECT pg_is_in_recovery()' 2>"$SDB_TMP/connect.err"); then
                SQL_USER=$user
                break
            fi
        done
        if [[ $state == f ]]; then
            promoted=1
            break
        elif [[ -z $state ]]; then
            refused=$((refused + 1))
            if ((refused >= 10)); then
                die "$SDB_EXIT_CONNECT" "cannot connect to the recovered server over its socket as $POSTGRES_USER${SAMPLEDB_RECOVERY_SUPERUSER:+, $SAMPLEDB_RECOVERY_SUPERUSER} or $(id -un): $(first_error "$SDB_TMP/connect.err")" "$ident"
            fi
        fi
    fi
    sleep "$POLL"
done
replay_s=$(seconds_since "$t1")
if ((targets == 0)); then
    check_no_gap
fi
timeline=$(private_sql "$SQL_USER" -c "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")
stopped=$(grep -E 'recovery stopping (before|after|at)' -- "$SERVER_LOG" | tail -n1 || true)
stopped=${stopped#*LOG: }
last_tx=$(grep -E 'last completed transaction was at log time' -- "$SERVER_LOG" | tail -n1 | sed -E 's/.*log time (.*)$/\1/' || true)
if [[ -z $last_tx && $stopped =~ after\ (commit|abort)\ of\ transaction\ [0-9]+,\ time\ (.*)$ ]]; then
    last_tx=${BASH_REMATCH[2]}
fi
log "replayed to $target_desc in $replay_s s${stopped:+ (${stopped#"${stopped%%[![:space:]]*}"})}; promoted on timeline $timeline${last_tx:+; last transaction at $last_tx}"
ident+=",\"replaySeconds\":$replay_s,\"timeline\":$timeline,\"lastTransactionTime\":$(if [[ -n $last_tx ]]; then json_str "$last_tx"; else echo null; fi)"

# ---- the new database's password (the cluster holds the source's), never printed or logged
# shellcheck disable=SC2016  # psql text, not shell
app_args=()
if [[ -n ${SAMPLEDB_APP_USER:-} && $SAMPLEDB_APP_USER != "$POSTGRES_USER" && -n ${SAMPLEDB_APP_PASSWORD:-} ]]; then
    app_args=(-v sdb_app="$SAMPLEDB_APP_USER")
fi
if ! private_sql "$SQL_USER" "${app_args[@]}" -f - >/dev/null 2>"$SDB_TMP/password.err" <<'SQL'; then
SET log_statement = 'none';
SET log_min_error_statement = 'panic';
SET log_min_duration_statement = -1;
\getenv sdb_user POSTGRES_USER
\getenv sdb_password POSTGRES_PASSWORD
SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = :'sdb_user') AS sdb_create \gset
\if :sdb_create
CREATE ROLE :"sdb_user" SUPERUSER LOGIN PASSWORD :'sdb_password';
\else
ALTER ROLE :"sdb_user" LOGIN PASSWORD :'sdb_password';
\endif
\if :{?sdb_app}
\getenv sdb_app_password SAMPLEDB_APP_PASSWORD
SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = :'sdb_app') AS sdb_create_app \gset
\if :sdb_create_app
CREATE ROLE :"sdb_app" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'sdb_app_password';
\else
ALTER ROLE :"sdb_app" LOGIN PASSWORD :'sdb_app_password';
\endif
\endif
SQL
    die "$SDB_EXIT_SQL" "cannot set the password of $POSTGRES_USER: $(sql_error_withheld "$SDB_TMP/password.err")" "$ident"
fi

# ---- stop cleanly; nothing of the recovery stays for the normal start
if ! pg_ctl -D "$PGDATA" stop -m fast -w -t 300 >"$SDB_TMP/stop.out" 2>&1; then
    die "$SDB_EXIT_INTERNAL" "pg_ctl stop of the recovered server failed: $(first_error "$SDB_TMP/stop.out")" "$ident"
fi
wait "$pm_pid" 2>/dev/null || true
rm -f -- "$PGDATA/recovery.signal" "$PGDATA/postmaster.opts"
printf 'source=%s\nserver=%s\nbackup=%s\ntarget=%s\ntimeline=%s\nrecovered=%s\n' \
    "$DEST" "$SERVER" "$BACKUP_ID" "$target_desc" "$timeline" "$(now_utc)" >"$PGDATA/$RECOVERED_FILE"
chmod 0600 -- "$PGDATA/$RECOVERED_FILE"
sync -f -- "$PGDATA/$RECOVERED_FILE" 2>/dev/null || true
rm -f -- "$MARKER"
succeed "recovered $SERVER from $DEST to $target_desc: backup $BACKUP_ID restored in $restore_s s, replayed in $replay_s s, promoted on timeline $timeline" "$ident"
