#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: apply the SQL migrations in $MIGRATIONS_DIR that are not yet applied.
# Files are named NNNN_description.sql (4+ digits, then [A-Za-z0-9_-]) and run in numeric order;
# dot-entries are ignored (a mounted ConfigMap's ..data links), any other name is refused (exit 2).
# Each file runs in its own transaction together with its row in sampledb_meta.schema_migrations
# (version, name, sha256, applied_at), under an advisory lock. An applied file whose hash changed,
# or a pending file older than the newest applied one, is refused (exit 3) before anything runs.
# A failing file stops the run (exit 6) naming the file and the server's error; earlier ones stay.
# The table is the record of what ran: a file it already holds is never run again, whoever asks (an
# operator whose own records are gone, e.g. for a database adopted from a retained volume); the
# result lists those files' versions as "already", next to the "applied" ones of this run.
# With $SAMPLEDB_OWNER_ROLE (the application's role) each file runs as that role (lib.sh SDB_GUARDED_INCLUDE).
set -Eeuo pipefail
SDB_SCRIPT=migrate
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

require_env MIGRATIONS_DIR
if [[ ! -d $MIGRATIONS_DIR || ! -r $MIGRATIONS_DIR ]]; then
    die "$SDB_EXIT_CONFIG" "migrations directory $MIGRATIONS_DIR is missing or unreadable"
fi

# 1. Collect and validate file names; index them by numeric version.
declare -A file_by_version=()
versions=()
shopt -s nullglob
for path in "$MIGRATIONS_DIR"/*; do
    name=${path##*/}
    if [[ ! $name =~ ^([0-9]{4,18})_[A-Za-z0-9][A-Za-z0-9_-]*\.sql$ ]]; then
        die "$SDB_EXIT_CONFIG" "invalid migration file name '$name': want NNNN_description.sql"
    fi
    if [[ ! -f $path ]]; then
        die "$SDB_EXIT_CONFIG" "migration '$name' is not a regular file"
    fi
    version=$((10#${BASH_REMATCH[1]}))
    if [[ -n ${file_by_version[$version]:-} ]]; then
        die "$SDB_EXIT_CONFIG" "migrations '${file_by_version[$version]##*/}' and '$name' have the same version $version"
    fi
    file_by_version[$version]=$path
    versions+=("$version")
done
shopt -u nullglob
if ((${#versions[@]} > 0)); then
    mapfile -t versions < <(printf '%s\n' "${versions[@]}" | sort -n)
fi

# 2. Read what is applied.
connect_check
make_temp_dir
if ! sql -At -F ' ' >"$SDB_TMP/applied" 2>"$SDB_TMP/meta.err" <<'SQL'
SELECT pg_advisory_lock(hashtext('sampledb_meta.schema_migrations'));
CREATE SCHEMA IF NOT EXISTS sampledb_meta;
CREATE TABLE IF NOT EXISTS sampledb_meta.schema_migrations (
    version bigint PRIMARY KEY,
    name text NOT NULL,
    sha256 text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
SELECT pg_advisory_unlock(hashtext('sampledb_meta.schema_migrations')) \g /dev/null
SELECT version, sha256, name FROM sampledb_meta.schema_migrations ORDER BY version;
SQL
then
    die "$SDB_EXIT_SQL" "cannot read sampledb_meta.schema_migrations: $(first_error "$SDB_TMP/meta.err")"
fi
declare -A applied_sha=()
latest=0
while read -r version sha name; do
    [[ $version =~ ^[0-9]+$ ]] || continue
    applied_sha[$version]=$sha
    latest=$version
done <"$SDB_TMP/applied"

# 3. Refuse drift before running anything.
pending=()
already=()
declare -A file_sha=()
for version in "${versions[@]}"; do
    path=${file_by_version[$version]}
    file_sha[$version]=$(sha256_of "$path")
    if [[ -n ${applied_sha[$version]:-} ]]; then
        if [[ ${applied_sha[$version]} != "${file_sha[$version]}" ]]; then
            die "$SDB_EXIT_DRIFT" "migration ${path##*/} changed since it was applied (recorded sha256 ${applied_sha[$version]}, file ${file_sha[$version]})"
        fi
        already+=("$version")
    elif ((version < latest)); then
        die "$SDB_EXIT_DRIFT" "migration ${path##*/} is older than the newest applied version $latest; out-of-order migrations are refused"
    else
        pending+=("$version")
    fi
done
for version in "${!applied_sha[@]}"; do
    if [[ -z ${file_by_version[$version]:-} ]]; then
        log "warning: applied migration version $version has no file in $MIGRATIONS_DIR"
    fi
done

# 4. Apply pending files in order, each in its own transaction with its record.
control="
BEGIN;
SET LOCAL sampledb.guard = 'on';
SELECT pg_advisory_xact_lock(hashtext('sampledb_meta.schema_migrations'));
SELECT EXISTS (SELECT 1 FROM sampledb_meta.schema_migrations WHERE version = :sdb_version) AS sdb_done \gset
\if :sdb_done
ROLLBACK;
\echo SDB_OUTCOME=already
\else
$SDB_GUARDED_INCLUDE
\if :sdb_intx
INSERT INTO sampledb_meta.schema_migrations (version, name, sha256) VALUES (:sdb_version, :'sdb_name', :'sdb_hash');
COMMIT;
\echo SDB_OUTCOME=applied
\else
\echo SDB_OUTCOME=txn_ended
\endif
\endif
"
applied=()
json_list() {
    local IFS=,
    printf '[%s]' "$*"
}
for version in "${pending[@]}"; do
    path=${file_by_version[$version]}
    name=${path##*/}
    log "applying $name"
    run_guarded "$control" "$SDB_TMP/psql.err" -v sdb_file="$path" -v sdb_version="$version" \
        -v sdb_name="$name" -v sdb_hash="${file_sha[$version]}"
    case $SDB_OUTCOME in
        applied) applied+=("$version") ;;
        already)
            log "$name was applied concurrently; skipping"
            already+=("$version")
            ;;
        txn_ended)
            die "$SDB_EXIT_SQL" "migration $name ended the transaction itself (COMMIT/ROLLBACK); its effects may be partly committed and it is not recorded" \
                "\"applied\":$(json_list "${applied[@]}"),\"already\":$(json_list "${already[@]}"),\"failed\":$(json_str "$name")"
            ;;
        *)
            die "$SDB_EXIT_SQL" "migration $name failed: $(first_error "$SDB_TMP/psql.err")" \
                "\"applied\":$(json_list "${applied[@]}"),\"already\":$(json_list "${already[@]}"),\"failed\":$(json_str "$name")"
            ;;
    esac
done

current=$(sql_value "SELECT coalesce(max(version), 0) FROM sampledb_meta.schema_migrations")
if ((${#applied[@]} == 0)); then
    message="no pending migrations; schema at version $current"
else
    message="applied ${#applied[@]} migration(s); schema at version $current"
fi
if ((${#already[@]} > 0)); then
    message+="; ${#already[@]} already recorded in sampledb_meta.schema_migrations, not run again"
fi
succeed "$message" "\"applied\":$(json_list "${applied[@]}"),\"already\":$(json_list "${already[@]}"),\"current_version\":$current"
