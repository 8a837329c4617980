#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: prove that the backup $BACKUP_DIR/$BACKUP_NAME is intact, restores, and restores
# the data it was taken from. Needs no database connection and changes nothing outside $TMPDIR.
#
# 1. Integrity: the dump's (and the roles file's) SHA-256 must equal the metadata's; a damaged,
#    truncated or missing file is exit 4 and nothing else runs.
# 2. Restore: initdb a throw-away cluster under $TMPDIR with the image's own binaries (the backup's
#    encoding, locale C), start it on a private unix socket only (no TCP, trust for this uid alone),
#    apply the roles file (errors ignored, e.g. tablespaces whose directory does not exist here),
#    then pg_restore --exit-on-error --single-transaction --no-owner (plus --no-privileges when the
#    backup has no roles file). A failure is exit 6.
# 3. Compare: compute lib.sh's statistics on the restored database and compare them with the
#    metadata's "stats": per table the row count and checksum, tables missing or unexpected, and
#    large objects. A difference is exit 8, reporting table names and row counts, never data. A
#    backup without statistics (taken before they existed, or when they could not be computed) is
#    reported as restorable with "compared": false.
# The binaries must be of the backup's major or newer (pg_restore reads older archives, not newer).
set -Eeuo pipefail
SDB_SCRIPT=verify
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

MISMATCH_REPORT_BYTES=1500 # bound on the mismatch list in the result (the termination message is 4 KiB)
# The throw-away cluster's superuser: not a role the roles file creates or alters, so the backup's
# role settings (a statement_timeout, default_transaction_read_only) never apply to this script.
VERIFIER=sampledb_verifier

require_env BACKUP_DIR BACKUP_NAME
check_name "$BACKUP_NAME" BACKUP_NAME
dump="$BACKUP_DIR/$BACKUP_NAME.dump"
meta="$BACKUP_DIR/$BACKUP_NAME.json"
ident="\"name\":$(json_str "$BACKUP_NAME")"
if [[ ! -f $meta ]]; then
    die "$SDB_EXIT_CONFIG" "backup $BACKUP_NAME not found: no $BACKUP_NAME.json in $BACKUP_DIR" "$ident,\"check\":\"metadata\""
fi

# ---- 1. integrity
if [[ ! -f $dump ]]; then
    die "$SDB_EXIT_INTEGRITY" "backup $BACKUP_NAME is incomplete: $BACKUP_NAME.dump is missing" "$ident,\"check\":\"integrity\""
fi
recorded=$(meta_field "$meta" sha256)
recorded_size=$(meta_field "$meta" size_bytes)
if [[ ! $recorded =~ ^[0-9a-f]{64}$ || $(meta_field "$meta" format) != custom ]]; then
    die "$SDB_EXIT_INTEGRITY" "backup metadata $BACKUP_NAME.json is unreadable or not a custom-format dump" \
        "$ident,\"check\":\"integrity\""
fi
log "verifying checksum of $BACKUP_NAME.dump"
actual=$(sha256_of "$dump")
actual_size=$(stat -c %s -- "$dump")
if [[ $actual != "$recorded" ]]; then
    detail="checksum mismatch for $BACKUP_NAME.dump: metadata says $recorded, file is $actual"
    if [[ -n $recorded_size && $recorded_size != "$actual_size" ]]; then
        detail+=" (the file has $actual_size bytes, the backup wrote $recorded_size)"
    fi
    die "$SDB_EXIT_INTEGRITY" "$detail" \
        "$ident,\"check\":\"integrity\",\"expected_sha256\":\"$recorded\",\"actual_sha256\":\"$actual\",\"size_bytes\":$actual_size"
fi
globals=
globals_name=$(meta_field "$meta" globals_file)
if [[ -n $globals_name ]]; then
    globals="$BACKUP_DIR/$BACKUP_NAME.globals.sql"
    if [[ $globals_name != "$BACKUP_NAME.globals.sql" ]]; then
        die "$SDB_EXIT_INTEGRITY" "backup metadata $BACKUP_NAME.json names an unexpected roles file" "$ident,\"check\":\"integrity\""
    fi
    if [[ ! -f $globals ]]; then
        die "$SDB_EXIT_INTEGRITY" "backup $BACKUP_NAME is incomplete: $globals_name is missing" "$ident,\"check\":\"integrity\""
    fi
    globals_actual=$(sha256_of "$globals")
    if [[ $globals_actual != "$(meta_field "$meta" globals_sha256)" ]]; then
        die "$SDB_EXIT_INTEGRITY" "checksum mismatch for $globals_name: the roles file changed since the backup" \
            "$ident,\"check\":\"integrity\""
    fi
fi

# ---- binaries: the image's own, of the backup's major or newer
bindir=${VERIFY_BINDIR:-}
if [[ -z $bindir ]]; then
    initdb_path=$(command -v initdb || true)
    bindir=${initdb_path%/initdb}
fi
for tool in initdb pg_ctl postgres pg_restore psql; do
    if [[ ! -x $bindir/$tool ]]; then
        die "$SDB_EXIT_CONFIG" "PostgreSQL binaries incomplete: ${bindir:-PATH}/$tool is missing (set VERIFY_BINDIR)"
    fi
done
local_version=$("$bindir/postgres" --version)
local_major=$(sed -E 's/^[^0-9]*([0-9]+).*/\1/' <<<"$local_version")
dump_major=$(sed -E 's/^[^0-9]*([0-9]+).*/\1/' <<<"$(meta_field "$meta" pg_dump_version)")
backup_version=$(meta_field "$meta" server_version)
if [[ $dump_major =~ ^[0-9]+$ && $local_major =~ ^[0-9]+$ ]] && ((dump_major > local_major)); then
    die "$SDB_EXIT_CONFIG" "backup $BACKUP_NAME was written by pg_dump $dump_major; verifying it needs PostgreSQL $dump_major or newer, this is $local_version" \
        "$ident,\"check\":\"version\""
fi
encoding=$(meta_field "$meta" encoding)
if [[ ! $encoding =~ ^[A-Z0-9_]+$ ]]; then
    encoding=UTF8 # older backups do not record it
fi
database=$(meta_field "$meta" database)
database=${database:-sampledb_verify}

# ---- 2. a throw-away server on a private socket, and the restore
make_temp_dir
sock="$SDB_TMP/sock"
data="$SDB_TMP/data"
mkdir -m 0700 -- "$sock"
log "initdb a throw-away cluster ($local_version, $encoding)"
if ! "$bindir/initdb" -D "$data" -U "$VERIFIER" --auth=trust "--encoding=$encoding" --locale=C --no-sync \
    >"$SDB_TMP/initdb.log" 2>&1; then
    die "$SDB_EXIT_INTERNAL" "initdb of the throw-away cluster failed: $(first_error "$SDB_TMP/initdb.log")"
fi
options="-c listen_addresses='' -c unix_socket_directories='$sock' -c port=5432 -c max_connections=10"
options+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c autovacuum=off"
options+=" -c wal_level=minimal -c max_wal_senders=0 -c archive_mode=off -c dynamic_shared_memory_type=mmap"
options+=" -c shared_buffers=${VERIFY_SHARED_BUFFERS:-64MB} -c max_parallel_workers_per_gather=0"
on_cleanup "'$bindir/pg_ctl' -D '$data' -m immediate -w stop"
if ! "$bindir/pg_ctl" -D "$data" -l "$SDB_TMP/server.log" -w -t "${VERIFY_START_TIMEOUT:-120}" -o "$options" \
    start >/dev/null 2>&1; then
    die "$SDB_EXIT_INTERNAL" "the throw-away server did not start: $(tail -n 3 "$SDB_TMP/server.log" 2>/dev/null)"
fi
while IFS= read -r var; do
    unset "$var" # connect only to the throw-away server, whatever the Job's environment says
done < <(compgen -e | grep '^PG' || true)
export PGHOST=$sock PGPORT=5432 PGUSER=$VERIFIER PGDATABASE=postgres PGCLIENTENCODING=UTF8
export PGOPTIONS="-c default_transaction_read_only=off -c statement_timeout=0 -c lock_timeout=0"
quoted=${database//\\/\\\\}
conninfo="dbname='${quoted//\'/\\\'}'"

sql -v db="$database" <<'SQL' >/dev/null 2>"$SDB_TMP/createdb.err" ||
SELECT format('CREATE DATABASE %I TEMPLATE template0', :'db')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
    die "$SDB_EXIT_INTERNAL" "cannot create the database to restore into: $(first_error "$SDB_TMP/createdb.err")"
restore_options=(--exit-on-error --single-transaction --no-owner --no-tablespaces --no-subscriptions)
if [[ -n $globals ]]; then
    psql -X -w -q -v ON_ERROR_STOP=0 -f "$globals" >/dev/null 2>"$SDB_TMP/globals.err" || true
    failed=$(grep -c 'ERROR:' "$SDB_TMP/globals.err" || true)
    log "roles applied from $globals_name (${failed:-0} statements failed and were ignored)"
else
    restore_options+=(--no-privileges)
fi
log "restoring $BACKUP_NAME into the throw-away server"
if ! pg_restore -w "${restore_options[@]}" --dbname="$conninfo" -- "$dump" 2>"$SDB_TMP/restore.err"; then
    die "$SDB_EXIT_SQL" "backup $BACKUP_NAME does not restore: $(first_error "$SDB_TMP/restore.err")" \
        "$ident,\"check\":\"restore\",\"sha256\":\"$actual\""
fi

# ---- 3. statistics of the restored database, compared with the recorded ones (lib.sh, in SQL)
log "computing table statistics of the restored database"
compare_stats "$(realpath -- "$meta")" stats "$MISMATCH_REPORT_BYTES" "$SDB_TMP/stats.err" -d "$conninfo"
verdict=${SDB_COMPARE[verdict]}
if [[ -z $verdict ]]; then
    die "$SDB_EXIT_INTERNAL" "computing the restored database's statistics failed: $(first_error "$SDB_TMP/stats.err")" \
        "$ident,\"check\":\"compare\""
fi
tables=${SDB_COMPARE[tables]}
rows=${SDB_COMPARE[rows]}
mismatched=${SDB_COMPARE[mismatched]}
lobs=${SDB_COMPARE[large_objects]}
lobs_problem=${SDB_COMPARE[lobs_problem]}
mismatches=${SDB_COMPARE[mismatches]}
summary="$tables tables, $rows rows, $lobs large objects"
extra="$ident,\"sha256\":\"$actual\",\"size_bytes\":$actual_size,\"server_version\":$(json_str "$local_version")"
extra+=",\"backup_server_version\":$(json_str "$backup_version"),\"tables\":$tables,\"rows\":$rows,\"large_objects\":$lobs"
case $verdict in
    verified)
        note=
        if [[ $lobs_problem == not-recorded ]]; then note="; large objects not compared (not recorded)"; fi
        if [[ $lobs_problem == not-computed ]]; then note="; large objects not compared (not computed)"; fi
        succeed "backup $BACKUP_NAME verified: intact, restores, and matches its snapshot ($summary)$note" \
            "$extra,\"compared\":true,\"mismatched\":0,\"mismatches\":[]"
        ;;
    unrecorded)
        why=$(meta_field "$meta" stats_error)
        succeed "backup $BACKUP_NAME is intact and restores ($summary); its metadata has no table statistics (${why:-taken by an older version}), so the data was not compared" \
            "$extra,\"compared\":false"
        ;;
    *)
        what="$mismatched tables differ: ${SDB_COMPARE[names]}"
        if ((mismatched == 0)); then what="no table differs"; fi
        if [[ $lobs_problem == count || $lobs_problem == checksum ]]; then what+="; large objects differ ($lobs_problem)"; fi
        die "$SDB_EXIT_VERIFY" "backup $BACKUP_NAME restores but does not match its snapshot: $what" \
            "$extra,\"check\":\"compare\",\"compared\":true,\"mismatched\":$mismatched,\"large_objects_problem\":$(json_str "$lobs_problem"),\"mismatches\":${mismatches:-[]}"
        ;;
esac
