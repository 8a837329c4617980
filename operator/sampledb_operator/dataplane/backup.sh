#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: back up $PGDATABASE to $BACKUP_DIR/$BACKUP_NAME.dump (pg_dump custom format),
# the cluster's roles to $BACKUP_NAME.globals.sql (pg_dumpall --globals-only --no-role-passwords,
# skipped with a warning if not permitted) and metadata to $BACKUP_NAME.json.
# Atomic: everything is written under temporary names and renamed into place, the .json last; a
# backup exists exactly when its .json exists. A failure leaves no file under a final name that
# was not there before. Re-running a completed backup verifies it and succeeds without dumping.
# Statistics (BACKUP_STATS=1, the default): a psql coprocess holds a REPEATABLE READ transaction
# open and exports its snapshot to pg_dump --snapshot; in that same transaction it then computes
# per-table row counts and checksums (lib.sh's SDB_STATS_SQL), which go into the metadata's last
# member, "stats", for verify.sh. Statistics that cannot be computed leave "stats": null, the reason
# in "stats_error" and a warning; the backup does not fail for them.
# Off the cluster: with the store settings of lib.sh (SAMPLEDB_S3_DESTINATION, SAMPLEDB_S3_SERVER, ...),
# the three files are then copied to <destination>/<server>/logical/$BACKUP_REASON/ (store-copy.sh; the
# .json last), and when BACKUP_STORE_KEEP is a number above 0, the older copies of that folder beyond
# the newest BACKUP_STORE_KEEP are deleted. A failed copy fails the backup (its files on the volume
# stay, and a re-run only copies them); the result's "store" is the dump's URL in the store.
set -Eeuo pipefail
SDB_SCRIPT=backup
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"
# shellcheck source=store-copy.sh
. "$(dirname -- "${SDB_LIB:-${BASH_SOURCE[0]}}")/store-copy.sh"

require_env BACKUP_DIR BACKUP_NAME
check_name "$BACKUP_NAME" BACKUP_NAME
if [[ ! -d $BACKUP_DIR || ! -w $BACKUP_DIR ]]; then
    die "$SDB_EXIT_CONFIG" "backup directory $BACKUP_DIR is missing or not writable"
fi
umask 077
final_dump="$BACKUP_DIR/$BACKUP_NAME.dump"
final_globals="$BACKUP_DIR/$BACKUP_NAME.globals.sql"
final_meta="$BACKUP_DIR/$BACKUP_NAME.json"
store_result=

# copy_to_store: with store settings, copy the backup's files to the store (the .json last), prune
# the folder to BACKUP_STORE_KEEP copies, and set store_result (result members); else nothing.
copy_to_store() {
    local reason=${BACKUP_REASON:-manual} keep=${BACKUP_STORE_KEEP:-0} files=() pruned
    [[ -n ${SAMPLEDB_S3_DESTINATION:-} ]] || return 0
    store_check || die "$SDB_EXIT_CONFIG" "cannot copy the backup to the object store: $SDB_STORE_PROBLEM"
    check_name "$reason" BACKUP_REASON
    [[ $keep =~ ^[0-9]{1,4}$ ]] || die "$SDB_EXIT_CONFIG" "invalid BACKUP_STORE_KEEP '$keep': want a number"
    [[ -n ${SDB_TMP:-} ]] || make_temp_dir
    files=("$BACKUP_NAME.dump")
    if [[ -f $final_globals ]]; then
        files+=("$BACKUP_NAME.globals.sql")
    fi
    files+=("$BACKUP_NAME.json")
    log "copying the backup to $DEST/$SERVER/logical/$reason/"
    if ! store_objects put "$reason" "$BACKUP_DIR" "${files[@]}" >/dev/null; then
        die "$SDB_EXIT_INTERNAL" "copy of backup $BACKUP_NAME to the object store $DEST failed (the backup is on the volume): $(store_failure)"
    fi
    pruned=0
    if ((10#$keep > 0)); then
        pruned=$(store_objects prune "$reason" "$((10#$keep))" | grep -c '^deleted ' || true)
        if [[ -s $SDB_TMP/store.err ]]; then
            log "warning: older copies in the store not pruned: $(store_failure)"
        elif ((pruned > 0)); then
            log "deleted $pruned older copies of $reason backups from the store (keeping $((10#$keep)))"
        fi
    fi
    store_result=",\"store\":$(json_str "$DEST/$SERVER/logical/$reason/$BACKUP_NAME.dump"),\"store_pruned\":$pruned"
}

if [[ -f $final_meta ]]; then
    recorded=$(meta_field "$final_meta" sha256)
    if [[ -f $final_dump && -n $recorded && $(sha256_of "$final_dump") == "$recorded" ]]; then
        copy_to_store
        succeed "backup $BACKUP_NAME already exists and is intact" \
            "\"name\":$(json_str "$BACKUP_NAME"),\"outcome\":\"exists\",\"sha256\":\"$recorded\",\"size_bytes\":$(meta_field "$final_meta" size_bytes)$store_result"
    fi
    die "$SDB_EXIT_INTEGRITY" "backup $BACKUP_NAME already exists but its dump does not match its metadata"
fi

connect_check
database=${PGDATABASE:-${PGUSER:-$(id -un)}}
version_num=$(sql_value "SHOW server_version_num")
tmp_suffix=".tmp-$$"
tmp_dump="$BACKUP_DIR/.$BACKUP_NAME.dump$tmp_suffix"
tmp_globals="$BACKUP_DIR/.$BACKUP_NAME.globals.sql$tmp_suffix"
tmp_meta="$BACKUP_DIR/.$BACKUP_NAME.json$tmp_suffix"
on_cleanup "rm -f -- '$tmp_dump' '$tmp_globals' '$tmp_meta'"
make_temp_dir

encoding=$(sql_value "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()")

# ---- the snapshot: a REPEATABLE READ transaction held open by a psql coprocess
snapshot=
stats_error=
if [[ ${BACKUP_STATS:-1} == 1 ]]; then
    coproc SDB_SNAP { PGCLIENTENCODING=UTF8 exec psql -X -w -q -At -v ON_ERROR_STOP=0 2>"$SDB_TMP/snapshot.err"; }
    if session_run SDB_SNAP "$SDB_STATS_SETTINGS
BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;
SELECT 'SDB_SNAPSHOT=' || pg_export_snapshot();" && snapshot=$(session_line SDB_SNAPSHOT=); then
        # Locks in a savepoint: a table dropped meanwhile costs the statistics, not the snapshot.
        if ! { session_run SDB_SNAP "SAVEPOINT sdb_locks;
$SDB_STATS_LOCK_SQL
SELECT 'SDB_LOCKED=1';" && session_line SDB_LOCKED= >/dev/null; }; then
            stats_error="cannot lock the tables: $(first_error "$SDB_TMP/snapshot.err")"
            session_run SDB_SNAP "ROLLBACK TO SAVEPOINT sdb_locks;" || true
        fi
    else
        snapshot=
        stats_error="cannot export a snapshot: $(first_error "$SDB_TMP/snapshot.err")"
    fi
else
    stats_error="statistics disabled (BACKUP_STATS=$BACKUP_STATS)"
fi

log "dumping database $database${snapshot:+ (snapshot $snapshot)}"
if ! pg_dump -w --format=custom ${snapshot:+"--snapshot=$snapshot"} --file="$tmp_dump" --dbname="$database" \
    2>"$SDB_TMP/dump.err"; then
    die "$SDB_EXIT_DUMP" "pg_dump of $database failed: $(first_error "$SDB_TMP/dump.err")"
fi

# ---- statistics in the dump's snapshot (the same transaction), then the transaction ends
stats_json=null
if [[ -n $snapshot && -z $stats_error ]]; then
    log "computing table statistics"
    if session_run SDB_SNAP "$SDB_STATS_SQL" && tables_json=$(session_line SDB_TABLES=); then
        if ! lobs_json=$(session_line SDB_LOBS=); then
            lobs_json=null
            log "warning: no large-object statistics: $(first_error "$SDB_TMP/snapshot.err")"
        fi
        stats_json=$(stats_object "$tables_json" "$lobs_json")
    else
        stats_error="statistics failed: $(first_error "$SDB_TMP/snapshot.err")"
    fi
fi
if [[ -n ${SDB_SNAP[1]:-} ]]; then
    printf 'COMMIT;\n\\q\n' >&"${SDB_SNAP[1]}" || true
    wait "$SDB_SNAP_PID" || true
fi
if [[ -n $stats_error ]]; then
    log "warning: no table statistics recorded: $stats_error"
fi
globals_json=null
globals_sha=null
if pg_dumpall -w --globals-only --no-role-passwords --file="$tmp_globals" 2>"$SDB_TMP/globals.err"; then
    globals_json=$(json_str "$BACKUP_NAME.globals.sql")
    globals_sha=$(json_str "$(sha256_of "$tmp_globals")")
else
    log "warning: roles not dumped (pg_dumpall --globals-only failed: $(first_error "$SDB_TMP/globals.err"))"
    rm -f -- "$tmp_globals"
fi

sha=$(sha256_of "$tmp_dump")
size=$(stat -c %s -- "$tmp_dump")
dump_version=$(pg_dump --version)
# "stats" stays the last member: its keys are table names, and meta_field (lib.sh) reads only what
# comes before it.
printf '{"name":%s,"format":"custom","database":%s,"server_version":%s,"server_version_num":%s,"pg_dump_version":%s,"created":"%s","dump_file":%s,"size_bytes":%s,"sha256":"%s","globals_file":%s,"globals_sha256":%s,"encoding":%s,"stats_error":%s,"stats":%s}\n' \
    "$(json_str "$BACKUP_NAME")" "$(json_str "$database")" "$(json_str "$SDB_SERVER_VERSION")" \
    "$version_num" "$(json_str "$dump_version")" "$(now_utc)" "$(json_str "$BACKUP_NAME.dump")" \
    "$size" "$sha" "$globals_json" "$globals_sha" "$(json_str "$encoding")" \
    "$(if [[ -n $stats_error ]]; then json_str "$stats_error"; else echo null; fi)" "$stats_json" >"$tmp_meta"

# Durable before visible: flush the data, rename, then publish the metadata last.
to_sync=("$tmp_dump" "$tmp_meta")
if [[ $globals_json != null ]]; then
    to_sync+=("$tmp_globals")
fi
sync -- "${to_sync[@]}"
if [[ $globals_json != null ]]; then
    mv -f -- "$tmp_globals" "$final_globals"
fi
mv -f -- "$tmp_dump" "$final_dump"
mv -f -- "$tmp_meta" "$final_meta"
sync -- "$BACKUP_DIR" || true
copy_to_store

succeed "backup $BACKUP_NAME of $database written ($size bytes)" \
    "\"name\":$(json_str "$BACKUP_NAME"),\"outcome\":\"created\",\"database\":$(json_str "$database"),\"sha256\":\"$sha\",\"size_bytes\":$size,\"globals\":$([[ $globals_json != null ]] && echo true || echo false),\"stats\":$([[ $stats_json != null ]] && echo true || echo false)$store_result"
