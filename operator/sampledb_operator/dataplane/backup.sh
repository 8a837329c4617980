#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: back up $PGDATABASE to $BACKUP_DIR/$BACKUP_NAME.dump (pg_dump custom format),
# the cluster's roles to $BACKUP_NAME.globals.sql (pg_dumpall --globals-only --no-role-passwords,
# skipped with a warning if not permitted) and metadata to $BACKUP_NAME.json.
# Atomic: everything is written under temporary names and renamed into place, the .json last; a
# backup exists exactly when its .json exists. A failure leaves no file under a final name that
# was not there before. Re-running a completed backup verifies it and succeeds without dumping.
set -Eeuo pipefail
SDB_SCRIPT=backup
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

require_env BACKUP_DIR BACKUP_NAME
check_name "$BACKUP_NAME" BACKUP_NAME
if [[ ! -d $BACKUP_DIR || ! -w $BACKUP_DIR ]]; then
    die "$SDB_EXIT_CONFIG" "backup directory $BACKUP_DIR is missing or not writable"
fi
umask 077
final_dump="$BACKUP_DIR/$BACKUP_NAME.dump"
final_globals="$BACKUP_DIR/$BACKUP_NAME.globals.sql"
final_meta="$BACKUP_DIR/$BACKUP_NAME.json"

# meta_field FILE KEY: a string or number member of our own one-line metadata JSON.
meta_field() {
    sed -n -E "s/.*\"$2\":(\"([^\"]*)\"|([0-9]+)).*/\2\3/p" -- "$1" | head -n1
}

if [[ -f $final_meta ]]; then
    recorded=$(meta_field "$final_meta" sha256)
    if [[ -f $final_dump && -n $recorded && $(sha256_of "$final_dump") == "$recorded" ]]; then
        succeed "backup $BACKUP_NAME already exists and is intact" \
            "\"name\":$(json_str "$BACKUP_NAME"),\"outcome\":\"exists\",\"sha256\":\"$recorded\",\"size_bytes\":$(meta_field "$final_meta" size_bytes)"
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

log "dumping database $database"
if ! pg_dump -w --format=custom --file="$tmp_dump" --dbname="$database" 2>"$SDB_TMP/dump.err"; then
    die "$SDB_EXIT_DUMP" "pg_dump of $database failed: $(first_error "$SDB_TMP/dump.err")"
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
printf '{"name":%s,"format":"custom","database":%s,"server_version":%s,"server_version_num":%s,"pg_dump_version":%s,"created":"%s","dump_file":%s,"size_bytes":%s,"sha256":"%s","globals_file":%s,"globals_sha256":%s}\n' \
    "$(json_str "$BACKUP_NAME")" "$(json_str "$database")" "$(json_str "$SDB_SERVER_VERSION")" \
    "$version_num" "$(json_str "$dump_version")" "$(now_utc)" "$(json_str "$BACKUP_NAME.dump")" \
    "$size" "$sha" "$globals_json" "$globals_sha" >"$tmp_meta"

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

succeed "backup $BACKUP_NAME of $database written ($size bytes)" \
    "\"name\":$(json_str "$BACKUP_NAME"),\"outcome\":\"created\",\"database\":$(json_str "$database"),\"sha256\":\"$sha\",\"size_bytes\":$size,\"globals\":$([[ $globals_json != null ]] && echo true || echo false)"
