#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: run the init SQL in $INIT_SQL_FILE exactly once per database.
# The SQL and the record of its SHA-256 in sampledb_meta.init_state commit in one transaction
# (serialised by an advisory lock). Recorded with the same hash -> no-op success; recorded with a
# different hash -> exit 3 without running anything. A failing file leaves no record and no effects.
# The file must not contain COMMIT/ROLLBACK or statements that cannot run in a transaction.
# With $SAMPLEDB_OWNER_ROLE (the application's role) it runs as that role (lib.sh SDB_GUARDED_INCLUDE).
# It may hold secrets (from a Secret): a failure reports the server's SQLSTATE, first line and the
# file's line number, never text of the SQL (quoted fragments withheld, no "LINE n:" context).
set -Eeuo pipefail
SDB_SCRIPT=init
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

require_env INIT_SQL_FILE
if [[ ! -f $INIT_SQL_FILE || ! -r $INIT_SQL_FILE ]]; then
    die "$SDB_EXIT_CONFIG" "init SQL file $INIT_SQL_FILE is missing or unreadable"
fi
hash=$(sha256_of "$INIT_SQL_FILE")
connect_check
make_temp_dir

control="
BEGIN;
SET LOCAL sampledb.guard = 'on';
SELECT pg_advisory_xact_lock(hashtext('sampledb_meta.init_state'));
CREATE SCHEMA IF NOT EXISTS sampledb_meta;
CREATE TABLE IF NOT EXISTS sampledb_meta.init_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    sha256 text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
SELECT coalesce((SELECT sha256 FROM sampledb_meta.init_state), '') AS sdb_recorded \gset
SELECT :'sdb_recorded' = '' AS sdb_fresh, :'sdb_recorded' = :'sdb_hash' AS sdb_same \gset
\if :sdb_fresh
$SDB_GUARDED_INCLUDE
\if :sdb_intx
INSERT INTO sampledb_meta.init_state (sha256) VALUES (:'sdb_hash');
COMMIT;
\echo SDB_OUTCOME=applied
\else
\echo SDB_OUTCOME=txn_ended
\endif
\elif :sdb_same
ROLLBACK;
\echo SDB_OUTCOME=unchanged
\else
ROLLBACK;
\echo SDB_OUTCOME=changed :sdb_recorded
\endif
"
# VERBOSITY=verbose: the server's error line carries its SQLSTATE (the message withholds the SQL text)
run_guarded "$control" "$SDB_TMP/psql.err" -v VERBOSITY=verbose -v sdb_file="$INIT_SQL_FILE" -v sdb_hash="$hash"

extra="\"sha256\":$(json_str "$hash")"
case $SDB_OUTCOME in
    applied)
        succeed "init SQL applied" "\"outcome\":\"applied\",$extra"
        ;;
    unchanged)
        succeed "init SQL already applied; nothing to do" "\"outcome\":\"unchanged\",$extra"
        ;;
    changed)
        die "$SDB_EXIT_DRIFT" "init SQL changed since it ran (recorded sha256 $SDB_DETAIL, file sha256 $hash); refusing to run it again" \
            "\"outcome\":\"changed\",\"recorded_sha256\":$(json_str "$SDB_DETAIL"),$extra"
        ;;
    txn_ended)
        die "$SDB_EXIT_SQL" "init SQL ended the transaction itself (COMMIT/ROLLBACK); its effects may be partly committed and it is not recorded" \
            "\"outcome\":\"failed\",$extra"
        ;;
    *)
        die "$SDB_EXIT_SQL" "init SQL failed: $(sql_error_withheld "$SDB_TMP/psql.err")" \
            "\"outcome\":\"failed\",$extra"
        ;;
esac
