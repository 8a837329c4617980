#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: a physical base backup of the server into the object store with
# barman-cloud-backup (immediate checkpoint), named $SAMPLEDB_BACKUP_NAME (barman's --name), compressed
# as SAMPLEDB_BACKUP_COMPRESSION says: lz4 (the default: many times faster than gzip for about twice
# gzip's size; needs the lz4 Python module beside barman), gzip or none. A restore reads whichever it was.
# Runs as the server's OS user where the server's data directory is readable at the path the server
# reports (SHOW data_directory): in the database's pod. libpq's environment points at the server
# (PGHOST, PGPORT, PGUSER and PGPASSWORD or PGPASSFILE; a superuser, or a role with the backup
# functions and pg_read_all_settings). Store settings: lib.sh's (SAMPLEDB_S3_DESTINATION,
# SAMPLEDB_S3_SERVER, optional SAMPLEDB_S3_ENDPOINT and SAMPLEDB_S3_ADDRESSING_STYLE,
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional AWS_DEFAULT_REGION and AWS_CA_BUNDLE).
# The WAL the backup needs reaches the store through the server's archive_command (archive-wal.sh);
# barman-cloud-backup waits for it, so archiving must work for a backup to complete.
#
# Configuration files: barman-cloud-backup stores the server's config_file, hba_file and ident_file
# when they lie outside the data directory (the operator's /etc/sampledb) at the data directory's top
# level, under their base names: over the data directory's own postgresql.conf and pg_hba.conf
# (initdb's settings: listen_addresses, locale, time zone), which a restore would lose. Where those
# outside paths are writable scratch (the base backup Job mounts an emptyDir there), this script writes
# there the data directory's own file of the same base name first, so the backup restores the data
# directory as it is; the operator's files come back from its ConfigMap. Elsewhere it says so and goes on.
#
# Idempotent: a completed backup of the same name in the store is reported (outcome "exists") and
# not taken again; unfinished or failed ones of that name are left as they are and ignored.
# Result: name, outcome (created or exists), backupId (barman's id), beginWal, endWal, beginLsn,
# endLsn, beginTime, endTime (RFC 3339 UTC), timeline, sizeBytes (the cluster's size as barman
# measured it; the compressed objects are smaller), fromStandby, endWalArchived (whether the WAL up to the
# backup's end is in the store: always on a primary, where pg_backup_stop waits for it; on a standby
# waited for up to SAMPLEDB_BACKUP_WAL_TIMEOUT seconds, default 120, since the primary archives it).
# Retention: optional SAMPLEDB_RETENTION, a recovery window of N days, weeks or months ("7d", "4w",
# "1m"; barman's RECOVERY WINDOW OF N DAYS|WEEKS|MONTHS). After the backup (also one that exists),
# barman-cloud-backup-delete --retention-policy deletes the completed backups no recovery to a time in
# the window needs (the newest one that ended before the window's start stays, and every newer one;
# --minimum-redundancy 1: never the last) and the WAL older than the oldest kept backup. A failed
# retention run does not fail the backup: the result gets "retentionError" (barman's error, scrubbed)
# and the log a warning; else "retention" (the policy) and "deletedBackups" (ids, at most 20). Then
# "catalog": the store's completed backups after it (count, oldestEnd, the newest 8: id, name, end, size).
# Exit codes (lib.sh): 2 bad settings (also before any backup: an invalid SAMPLEDB_RETENTION) or data
# directory not readable here, 9 cannot connect, 7 barman-cloud-backup failed, 1 the store cannot be
# listed or another unexpected failure.
set -Eeuo pipefail
SDB_SCRIPT=base-backup
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

require_env SAMPLEDB_BACKUP_NAME
NAME=$SAMPLEDB_BACKUP_NAME
if [[ ! $NAME =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_BACKUP_NAME '$NAME': use 1-63 lower-case letters, digits and '-', starting and ending with a letter or digit"
fi
case $NAME in
latest | last | oldest | first | last-failed | latest-full | last-full | auto)
    die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_BACKUP_NAME '$NAME': a word barman reserves" ;;
esac
if ! store_check; then
    die "$SDB_EXIT_CONFIG" "$SDB_STORE_PROBLEM"
fi
ident="\"name\":$(json_str "$NAME")"
WAL_TIMEOUT=${SAMPLEDB_BACKUP_WAL_TIMEOUT:-120}
if [[ ! $WAL_TIMEOUT =~ ^[0-9]{1,6}$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_BACKUP_WAL_TIMEOUT '$WAL_TIMEOUT': want whole seconds"
fi
POLICY=
if [[ -n ${SAMPLEDB_RETENTION:-} ]]; then
    if [[ ! $SAMPLEDB_RETENTION =~ ^([1-9][0-9]{0,3})([dwm])$ ]]; then
        die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_RETENTION '$SAMPLEDB_RETENTION': a recovery window such as 7d, 4w or 1m (1-9999 days, weeks or months)"
    fi
    case ${BASH_REMATCH[2]} in
    d) POLICY="RECOVERY WINDOW OF ${BASH_REMATCH[1]} DAYS" ;;
    w) POLICY="RECOVERY WINDOW OF ${BASH_REMATCH[1]} WEEKS" ;;
    m) POLICY="RECOVERY WINDOW OF ${BASH_REMATCH[1]} MONTHS" ;;
    esac
fi
DELETED_MAX=20
CATALOG_MAX=8 # backups listed in the result (the termination message is 4 KiB)
case ${SAMPLEDB_BACKUP_COMPRESSION:-lz4} in
    lz4) COMPRESS=(--lz4) ;;
    gzip) COMPRESS=(--gzip) ;;
    none) COMPRESS=() ;;
    *) die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_BACKUP_COMPRESSION '$SAMPLEDB_BACKUP_COMPRESSION': lz4, gzip or none" ;;
esac
make_temp_dir

# lsn_segment TIMELINE LSN SEGMENT_SIZE: the WAL file that holds the last byte before LSN.
lsn_segment() {
    local size=${3:-16777216} pos per segno
    if [[ ! $size =~ ^[0-9]+$ ]] || ((size < 1048576)); then
        size=16777216
    fi
    pos=$(((16#${2%/*} << 32) + 16#${2#*/}))
    segno=$(((pos - 1) / size))
    per=$((0x100000000 / size))
    printf '%08X%08X%08X' "$1" $((segno / per)) $((segno % per))
}

connect_check
in_recovery=$(sql_value "SELECT pg_is_in_recovery()")
data_directory=$(sql_value "SHOW data_directory" 2>"$SDB_TMP/sql.err") ||
    die "$SDB_EXIT_CONFIG" "cannot read the server's data_directory: $(first_error "$SDB_TMP/sql.err")" "$ident"
if [[ ! -r $data_directory/PG_VERSION || ! -r $data_directory/global/pg_control ]]; then
    die "$SDB_EXIT_CONFIG" "the server's data directory $data_directory is not readable here: run where it is mounted, as the server's OS user" "$ident"
fi

# keep_own_config: the data directory's own files under the outside config paths (see the header).
keep_own_config() {
    local setting path own
    for setting in config_file hba_file ident_file; do
        path=$(sql_value "SHOW $setting" 2>/dev/null) || continue
        [[ -n $path && $path != "$data_directory"/* ]] || continue
        own=$data_directory/$(basename -- "$path")
        if [[ ! -f $own ]]; then
            continue
        fi
        if [[ -w $(dirname -- "$path") ]] && { [[ ! -e $path ]] || [[ -w $path && ! -L $path ]]; }; then
            cp -- "$own" "$path"
        else
            log "warning: $setting $path lies outside $data_directory and is not writable here: the backup restores it over $own"
        fi
    done
}

# list_backups: SDB_CATALOG for the backup named $NAME (backup_catalog, lib.sh).
list_backups() {
    if ! barman-cloud-backup-list "${SDB_STORE_OPTS[@]}" --format json "$DEST" "$SERVER" \
        >"$SDB_TMP/list.json" 2>"$SDB_TMP/list.err"; then
        die "$SDB_EXIT_INTERNAL" "cannot list the backups of $SERVER in $DEST: $(barman_error "$SDB_TMP/list.err")" "$ident"
    fi
    backup_catalog "$SDB_TMP/list.json" name "$NAME" 2>"$SDB_TMP/catalog.err" ||
        die "$SDB_EXIT_INTERNAL" "cannot read the backup list: $(first_error "$SDB_TMP/catalog.err")" "$ident"
}

# backup_ids: the ids of every backup of $SERVER in $DEST (any status), one a line; false if the
# store cannot be listed (barman's error in $SDB_TMP/ids.err).
backup_ids() {
    local py
    barman-cloud-backup-list "${SDB_STORE_OPTS[@]}" --format json "$DEST" "$SERVER" >"$SDB_TMP/ids.json" 2>"$SDB_TMP/ids.err" ||
        return 1
    py=$(catalog_python) || return 1
    "$py" -c 'import json, sys
for b in json.load(open(sys.argv[1], encoding="utf-8")).get("backups_list") or []:
    print(b.get("backup_id"))' "$SDB_TMP/ids.json" 2>>"$SDB_TMP/ids.err"
}

# apply_retention: run the retention policy (header); sets RETENTION_JSON (result members) and
# RETENTION_NOTE (for the message).
apply_retention() {
    local before after id deleted=() shown=() err='' what
    RETENTION_JSON=
    RETENTION_NOTE=
    [[ -n $POLICY ]] || return 0
    if ! before=$(backup_ids); then
        err="cannot list the backups: $(barman_error "$SDB_TMP/ids.err")"
    elif ! barman-cloud-backup-delete "${SDB_STORE_OPTS[@]}" --retention-policy "$POLICY" --minimum-redundancy 1 \
        "$DEST" "$SERVER" >"$SDB_TMP/delete.out" 2>"$SDB_TMP/delete.err"; then
        err=$(barman_error "$SDB_TMP/delete.err")
    elif ! after=$(backup_ids); then
        err="cannot list the backups after the deletion: $(barman_error "$SDB_TMP/ids.err")"
    fi
    if [[ -n $err ]]; then
        RETENTION_JSON=",\"retentionError\":$(json_str "$err")"
        RETENTION_NOTE="; retention $POLICY failed: $err"
        log "warning: retention $POLICY failed (the backup stands): $err"
        return 0
    fi
    for id in $before; do
        if ! grep -qxF -- "$id" <<<"$after"; then
            deleted+=("$id")
        fi
    done
    shown=("${deleted[@]:0:$DELETED_MAX}")
    RETENTION_JSON=",\"retention\":$(json_str "$POLICY"),\"deletedBackups\":["
    for id in "${shown[@]}"; do
        RETENTION_JSON+="$(json_str "$id"),"
    done
    RETENTION_JSON="${RETENTION_JSON%,}]"
    what="${#deleted[@]} backups"
    if ((${#deleted[@]} == 1)); then what="1 backup"; fi
    RETENTION_NOTE="; retention $POLICY deleted $what${deleted[*]:+ (${shown[*]}${deleted[$DELETED_MAX]:+ ...})}"
    log "retention $POLICY: $what deleted${deleted[*]:+: ${deleted[*]}}"
}

# catalog_json: ',"catalog":{...}' for the result: the completed backups of $SERVER in the store now
# (after retention): how many, the oldest one's end (the first point a recovery can target) and the
# newest CATALOG_MAX (id, name, end time, size), newest first; nothing if the store cannot be listed.
catalog_json() {
    local py
    barman-cloud-backup-list "${SDB_STORE_OPTS[@]}" --format json "$DEST" "$SERVER" >"$SDB_TMP/catalog.json" \
        2>"$SDB_TMP/catalog-list.err" || return 0
    py=$(catalog_python) || return 0
    "$py" -c 'import datetime, json, sys
def utc(t):
    return datetime.datetime.fromisoformat(t).astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
done = [b for b in json.load(open(sys.argv[1], encoding="utf-8")).get("backups_list") or []
        if b.get("status") == "DONE" and b.get("end_time_iso")]
done.sort(key=lambda b: (datetime.datetime.fromisoformat(b["end_time_iso"]), b["backup_id"]), reverse=True)
newest = [{"id": b.get("backup_id"), "name": b.get("backup_name"), "end": utc(b["end_time_iso"]),
           "size": b.get("cluster_size")} for b in done[:int(sys.argv[2])]]
oldest = utc(done[-1]["end_time_iso"]) if done else None
print(",\"catalog\":" + json.dumps({"count": len(done), "oldestEnd": oldest, "newest": newest}, separators=(",", ":")))
' "$SDB_TMP/catalog.json" "$CATALOG_MAX" 2>>"$SDB_TMP/catalog-list.err" || true
}

# number VALUE: VALUE if it is a whole number, else null.
number() {
    if [[ $1 =~ ^[0-9]+$ ]]; then printf '%s' "$1"; else printf 'null'; fi
}

# report OUTCOME MESSAGE: apply the retention policy, then succeed with the chosen backup's members.
report() {
    apply_retention
    succeed "$2$RETENTION_NOTE" "$ident,\"outcome\":\"$1\",\"backupId\":$(json_str "${SDB_CATALOG[id]}")$(
        printf ',"beginWal":%s,"endWal":%s,"beginLsn":%s,"endLsn":%s,"beginTime":%s,"endTime":%s' \
            "$(json_str "${SDB_CATALOG[begin_wal]}")" "$(json_str "${SDB_CATALOG[end_wal]}")" \
            "$(json_str "${SDB_CATALOG[begin_lsn]}")" "$(json_str "${SDB_CATALOG[end_lsn]}")" \
            "$(json_str "${SDB_CATALOG[begin_time]}")" "$(json_str "${SDB_CATALOG[end_time]}")"
    ),\"timeline\":$(number "${SDB_CATALOG[timeline]}"),\"sizeBytes\":$(number "${SDB_CATALOG[size]}"),\"fromStandby\":$([[ $in_recovery == t ]] && echo true || echo false),\"endWalArchived\":${end_archived:-true}$RETENTION_JSON$(catalog_json)"
}

keep_own_config
list_backups
if [[ ${SDB_CATALOG[found]} == 1 ]]; then
    report exists "backup $NAME (${SDB_CATALOG[id]}) of $SERVER is already in $DEST"
fi
if [[ -n ${SDB_CATALOG[others]} ]]; then
    log "earlier attempts named $NAME are in the store and stay unused: ${SDB_CATALOG[others]}"
fi

role=primary
if [[ $in_recovery == t ]]; then
    role=standby
fi
log "taking base backup $NAME of the $role ($data_directory) into $DEST server $SERVER"
start=${EPOCHREALTIME//[!0-9]/}
if ! barman-cloud-backup "${SDB_STORE_OPTS[@]}" "${COMPRESS[@]}" --immediate-checkpoint --name "$NAME" \
    "$DEST" "$SERVER" >"$SDB_TMP/backup.out" 2>"$SDB_TMP/backup.err"; then
    die "$SDB_EXIT_DUMP" "barman-cloud-backup of $NAME failed: $(barman_error "$SDB_TMP/backup.err")" "$ident"
fi
us=$((${EPOCHREALTIME//[!0-9]/} - start))
list_backups
if [[ ${SDB_CATALOG[found]} != 1 ]]; then
    die "$SDB_EXIT_INTERNAL" "barman-cloud-backup succeeded but no completed backup named $NAME is listed${SDB_CATALOG[others]:+ (found ${SDB_CATALOG[others]})}" "$ident"
fi
# A backup is restorable once the WAL up to its end is in the store. On a primary, pg_backup_stop
# waited for that; on a standby it does not (the primary archives that WAL at its next segment
# switch), so wait for it here, up to SAMPLEDB_BACKUP_WAL_TIMEOUT seconds.
end_archived=true
if [[ $in_recovery == t ]]; then
    end_segment=$(lsn_segment "${SDB_CATALOG[timeline]}" "${SDB_CATALOG[end_lsn]}" "${SDB_CATALOG[segment_size]}")
    deadline=$((SECONDS + WAL_TIMEOUT))
    until wal_in_store "$DEST" "$SERVER" "$end_segment" "$SDB_TMP"; do
        if ((SECONDS >= deadline)); then
            end_archived=false
            log "warning: WAL file $end_segment, which backup $NAME ends in, is not in the store after ${WAL_TIMEOUT}s: the backup is restorable once the primary has archived it"
            break
        fi
        sleep 2
    done
fi
report created "base backup $NAME (${SDB_CATALOG[id]}, ${SDB_CATALOG[size]} bytes, WAL ${SDB_CATALOG[begin_wal]}..${SDB_CATALOG[end_wal]}) of the $role taken in $((us / 1000000)).$((us % 1000000 / 100000)) s"
