#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: PostgreSQL's archive_command. Pushes one WAL file (segment, timeline history,
# backup label or .partial) to the object store with barman-cloud-wal-archive (gzip):
#     archive_command = 'bash /sampledb/scripts/archive-wal.sh %p'
# Run by the server's archiver with the data directory as working directory and the container's
# environment: the store settings of lib.sh (SAMPLEDB_S3_DESTINATION, SAMPLEDB_S3_SERVER, optional
# SAMPLEDB_S3_ENDPOINT and SAMPLEDB_S3_ADDRESSING_STYLE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
# optional AWS_DEFAULT_REGION and AWS_CA_BUNDLE) and SAMPLEDB_RUN_DIR (default /var/run/postgresql).
#
# Exit 0 only when barman-cloud-wal-archive has stored the file (the server then recycles it); any
# other exit makes the server keep it (.ready in pg_wal/archive_status) and retry. Not a Job: no
# result line. A failure is one line on stderr (the server's log) and the file
# $SAMPLEDB_RUN_DIR/sampledb-archive-error, replaced atomically, holding one line
# "<UTC time> <WAL file name> <reason>" (no secrets: the keys are scrubbed from every quoted error),
# which the operator reads with SQL (pg_read_file); the next success removes it.
#
# The first archive of a cluster into a destination and server name checks that the store's WAL
# archive there is empty (barman-cloud-check-wal-archive), so two databases never write the same
# prefix and a recovered copy never writes into its source's archive. A passed check is remembered
# in $PGDATA/sampledb-archive-checked ("<destination> <server>"; another value is checked again).
# That file travels with pg_basebackup and pg_rewind, so a standby cloned after it was written
# continues the archive when promoted. A promoted standby cloned before it (no such file, WAL of a
# later timeline than the cluster's first) checks with --timeline: WAL of the earlier timelines it
# continues is allowed, of its own or later ones is not. The cluster's first timeline is 1, or the
# one written to $PGDATA/sampledb-recovered by recover.sh (a recovered copy is always checked in full).
# Before a new timeline's history file is pushed, the parent timeline's segments a promoted standby
# holds but the store lacks are queued for archiving (backfill, below): no hole after a failover.
# Exit codes (lib.sh): 2 bad settings or not run in a data directory, 1 the push or the check failed.
set -Eeuo pipefail
SDB_SCRIPT=archive-wal
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"
# shellcheck source=store-copy.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/store-copy.sh"
SDB_RESULT_DONE=1 # an archive_command prints no result line

RUN_DIR=${SAMPLEDB_RUN_DIR:-/var/run/postgresql}
ERROR_FILE=$RUN_DIR/sampledb-archive-error
CHECKED=sampledb-archive-checked
RECOVERED=sampledb-recovered
REASON_MAX=300
WAL_PATH=${1:-}
WAL_NAME=${WAL_PATH##*/}
REPORTED=0

# record_error REASON: the error file's line (atomically; a failure to write it is only logged).
record_error() {
    local tmp
    if tmp=$(mktemp "$RUN_DIR/.sampledb-archive-error.XXXXXX" 2>/dev/null); then
        if printf '%s %s %s\n' "$(now_utc)" "${WAL_NAME:--}" "$1" >"$tmp" && chmod 0644 -- "$tmp" &&
            mv -f -- "$tmp" "$ERROR_FILE"; then
            return 0
        fi
        rm -f -- "$tmp"
    fi
    log "warning: cannot write $ERROR_FILE"
}

# fail CODE REASON: report the failure (stderr line, error file) and exit CODE.
fail() {
    local reason
    reason=$(scrub "$(one_line "$2")")
    reason=${reason:0:$REASON_MAX}
    REPORTED=1
    log "error: archiving ${WAL_NAME:-?} failed: $reason"
    record_error "$reason"
    exit "$1"
}

# shellcheck disable=SC2317  # run by the EXIT trap
archive_on_exit() {
    local rc=$1
    set +e
    if ((rc != 0 && REPORTED == 0)); then
        REPORTED=1
        local what
        what="unexpected failure (exit $rc) at line ${SDB_FAILED_LINE:-?}: ${SDB_FAILED_CMD:-?}"
        log "error: archiving ${WAL_NAME:-?} failed: $what"
        record_error "$(scrub "$(one_line "$what")")"
    fi
    run_cleanups
    exit "$rc"
}
trap 'archive_on_exit $?' EXIT

# base_timeline: the cluster's first timeline: recover.sh's record (unreadable: no limit, so every
# check is in full), else 1.
base_timeline() {
    local line tl=1
    if [[ -f $RECOVERED ]]; then
        tl=999999999
        line=$(grep -m1 '^timeline=' -- "$RECOVERED" || true)
        if [[ ${line#timeline=} =~ ^[0-9]{1,9}$ ]]; then
            tl=${line#timeline=}
        fi
    fi
    printf '%s' "$tl"
}

# check_archive: barman-cloud-check-wal-archive for this destination; remembers a pass in $CHECKED.
check_archive() {
    local tl base args=() out rc=0 scope="is empty" tmp
    base=$(base_timeline)
    tl=$((16#${WAL_NAME:0:8}))
    if [[ ! -e $CHECKED ]] && ((tl > base)); then
        args=(--timeline "$tl")
        scope="holds no WAL of timeline $tl or later"
    fi
    out=$(barman-cloud-check-wal-archive "${SDB_STORE_OPTS[@]}" "${args[@]}" "$DEST" "$SERVER" 2>&1) || rc=$?
    case $rc in
    0) ;;
    1) fail 1 "the destination $DEST already holds WAL of server $SERVER (another database's, or the source's of a recovered copy): refusing to archive into it ($(barman_error <(printf '%s\n' "$out")))" ;;
    *) fail 1 "cannot check the WAL archive of $SERVER in $DEST: $(barman_error <(printf '%s\n' "$out"))" ;;
    esac
    tmp=$(mktemp ".$CHECKED.XXXXXX")
    printf '%s\n' "$IDENTITY" >"$tmp"
    chmod 0600 -- "$tmp"
    mv -f -- "$tmp" "$CHECKED"
    log "first archive into $DEST server $SERVER: its WAL archive $scope; checked"
}

# backfill: run before the history file of a new timeline is pushed (the first file a promoted standby
# archives). A standby marks every segment it streams as archived (.done in pg_wal/archive_status)
# and promotion archives only the history file and the old timeline's last, partial segment, so the
# complete segments of the parent timeline that the former primary had not archived yet would be a
# hole in the archive, where a recovery from a base backup of that timeline stops. The parent
# timeline's complete segments still in pg_wal with a .done marker that the store does not hold are
# marked .ready instead: the server archives them next (in name order, before the new timeline's
# segments) and keeps each until it is archived. Nothing to do for a timeline older than the cluster's
# first (a recovered copy's history file names its source's timeline). A failure to list the store
# fails this push (retried), so the hole is never left silently.
backfill() {
    local line parent status name names=() queued=() listed
    local -A stored=()
    line=$(grep -E '^[0-9]+[[:space:]]' -- "$WAL_PATH" | tail -n1 || true)
    [[ $line =~ ^([0-9]+)[[:space:]] ]] || return 0
    parent=$(printf '%08X' "${BASH_REMATCH[1]}")
    ((16#$parent >= $(base_timeline))) || return 0
    for status in pg_wal/archive_status/"$parent"*.done; do
        name=${status##*/}
        name=${name%.done}
        if [[ $name =~ ^[0-9A-F]{24}$ && -f pg_wal/$name ]]; then
            names+=("$name")
        fi
    done
    ((${#names[@]} > 0)) || return 0
    make_temp_dir
    listed=$(store_wal_names "${names[0]:0:16}/") ||
        fail 1 "cannot list the WAL archive of $SERVER in $DEST for the segments of timeline $((16#$parent)) it may lack: $(store_failure)"
    while IFS= read -r line; do
        line=${line##*/}
        stored[${line%%.*}]=1
    done < <(grep -E '^[0-9A-F]{16}/[0-9A-F]{24}(\.(gz|bz2|xz|snappy|zst|lz4))?$' <<<"$listed" || true)
    for name in "${names[@]}"; do
        if [[ -z ${stored[$name]:-} ]]; then
            mv -f -- "pg_wal/archive_status/$name.done" "pg_wal/archive_status/$name.ready"
            queued+=("$name")
        fi
    done
    if ((${#queued[@]} > 0)); then
        log "timeline $((16#${WAL_NAME:0:8})) begins: ${#queued[@]} segment(s) of timeline $((16#$parent)) streamed here but not in $DEST server $SERVER (${queued[0]}..${queued[-1]}) queued for archiving"
    fi
}

if [[ -z $WAL_PATH ]]; then
    fail "$SDB_EXIT_CONFIG" "no WAL path: use archive_command = 'bash /sampledb/scripts/archive-wal.sh %p'"
fi
if [[ ! $WAL_NAME =~ ^[0-9A-F]{8} ]]; then
    fail "$SDB_EXIT_CONFIG" "'$WAL_NAME' is not the name of a WAL file"
fi
if [[ ! -f $WAL_PATH ]]; then
    fail "$SDB_EXIT_CONFIG" "no such file $WAL_PATH (in $PWD)"
fi
if [[ ! -s PG_VERSION ]]; then
    fail "$SDB_EXIT_CONFIG" "not run in a data directory ($PWD has no PG_VERSION): the server runs archive_command there"
fi
if ! store_check; then
    fail "$SDB_EXIT_CONFIG" "$SDB_STORE_PROBLEM"
fi
IDENTITY="$DEST $SERVER"

checked=
if [[ -f $CHECKED ]]; then
    IFS= read -r checked <"$CHECKED" || true
fi
if [[ $checked != "$IDENTITY" ]]; then
    check_archive
fi

if [[ $WAL_NAME =~ ^[0-9A-F]{8}\.history$ ]]; then
    backfill
fi

rc=0
out=$(barman-cloud-wal-archive "${SDB_STORE_OPTS[@]}" --gzip "$DEST" "$SERVER" "$WAL_PATH" 2>&1) || rc=$?
if ((rc != 0)); then
    fail 1 "$(barman_error <(printf '%s\n' "$out"))"
fi
if [[ -e $ERROR_FILE ]]; then
    rm -f -- "$ERROR_FILE"
    log "archived $WAL_NAME into $DEST server $SERVER; the earlier failure is cleared"
fi
exit 0
