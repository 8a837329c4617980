#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: restore $BACKUP_DIR/$BACKUP_NAME.dump into $PGDATABASE.
# The dump's SHA-256 is checked against $BACKUP_NAME.json first (mismatch -> exit 4, nothing
# touched); then pg_restore --clean --if-exists --no-owner --single-transaction --exit-on-error, so
# the database is either fully restored or left as it was. Roles (the .globals.sql) are not applied.
# RESTORE_NO_PRIVILEGES=1 adds --no-privileges (for targets that lack the backup's roles);
# SAMPLEDB_OWNER_ROLE restores as that role (pg_restore --role): the objects are the application's.
# From the object store: with RESTORE_FROM_STORE=1 and the store settings of lib.sh naming the source
# database as SAMPLEDB_S3_SERVER, the copy $BACKUP_NAME (store-copy.sh: any reason's folder) is first
# downloaded into $BACKUP_DIR (scratch space), then checked and restored as above; a copy that is not
# in the store exits 2 (config), one whose dump is missing exits 4 (integrity).
set -Eeuo pipefail
SDB_SCRIPT=restore
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"
# shellcheck source=store-copy.sh
. "$(dirname -- "${SDB_LIB:-${BASH_SOURCE[0]}}")/store-copy.sh"

require_env BACKUP_DIR BACKUP_NAME
check_name "$BACKUP_NAME" BACKUP_NAME
make_temp_dir
if [[ ${RESTORE_FROM_STORE:-0} == 1 ]]; then
    store_check || die "$SDB_EXIT_CONFIG" "cannot read the object store: $SDB_STORE_PROBLEM"
    rc=0
    reason=$(store_objects find "$BACKUP_NAME") || rc=$?
    if ((rc == 3)); then
        die "$SDB_EXIT_CONFIG" "backup $BACKUP_NAME not found in the object store under $DEST/$SERVER/logical/"
    elif ((rc != 0)); then
        die "$SDB_EXIT_INTERNAL" "cannot list the backups of $SERVER in the object store $DEST: $(store_failure)"
    fi
    log "downloading backup $BACKUP_NAME from $DEST/$SERVER/logical/$reason/"
    for file in "$BACKUP_NAME.json" "$BACKUP_NAME.dump"; do
        rc=0
        store_objects get "$reason" "$BACKUP_DIR" "$file" >/dev/null || rc=$?
        if ((rc == 3)); then
            die "$SDB_EXIT_INTEGRITY" "backup $BACKUP_NAME in the object store is incomplete: $file is missing"
        elif ((rc != 0)); then
            die "$SDB_EXIT_INTERNAL" "cannot download $file from the object store $DEST: $(store_failure)"
        fi
    done
fi
dump="$BACKUP_DIR/$BACKUP_NAME.dump"
meta="$BACKUP_DIR/$BACKUP_NAME.json"
if [[ ! -f $meta ]]; then
    die "$SDB_EXIT_CONFIG" "backup $BACKUP_NAME not found: no $BACKUP_NAME.json in $BACKUP_DIR"
fi
if [[ ! -f $dump ]]; then
    die "$SDB_EXIT_INTEGRITY" "backup $BACKUP_NAME is incomplete: $BACKUP_NAME.dump is missing"
fi
recorded=$(sed -n -E 's/.*"sha256":"([0-9a-f]{64})".*/\1/p' -- "$meta" | head -n1)
format=$(sed -n -E 's/.*"format":"([a-z]+)".*/\1/p' -- "$meta" | head -n1)
if [[ -z $recorded || $format != custom ]]; then
    die "$SDB_EXIT_INTEGRITY" "backup metadata $BACKUP_NAME.json is unreadable or not a custom-format dump"
fi
log "verifying checksum of $BACKUP_NAME.dump"
actual=$(sha256_of "$dump")
if [[ $actual != "$recorded" ]]; then
    die "$SDB_EXIT_INTEGRITY" "checksum mismatch for $BACKUP_NAME.dump: metadata says $recorded, file is $actual; not restoring" \
        "\"name\":$(json_str "$BACKUP_NAME"),\"expected_sha256\":\"$recorded\",\"actual_sha256\":\"$actual\""
fi

connect_check
database=${PGDATABASE:-${PGUSER:-$(id -un)}}
options=(--clean --if-exists --no-owner --single-transaction --exit-on-error)
if [[ ${RESTORE_NO_PRIVILEGES:-0} == 1 ]]; then
    options+=(--no-privileges)
fi
if [[ -n ${SAMPLEDB_OWNER_ROLE:-} ]]; then
    options+=("--role=$SAMPLEDB_OWNER_ROLE") # what is restored is that role's (the application's), not the superuser's
fi
log "restoring $BACKUP_NAME into $database"
if ! pg_restore -w "${options[@]}" --dbname="$database" -- "$dump" 2>"$SDB_TMP/restore.err"; then
    die "$SDB_EXIT_SQL" "pg_restore of $BACKUP_NAME into $database failed (nothing changed): $(first_error "$SDB_TMP/restore.err")" \
        "\"name\":$(json_str "$BACKUP_NAME"),\"database\":$(json_str "$database")"
fi
succeed "backup $BACKUP_NAME restored into $database" \
    "\"name\":$(json_str "$BACKUP_NAME"),\"database\":$(json_str "$database"),\"sha256\":\"$actual\""
