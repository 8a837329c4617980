#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: the start of every database container. It prepares $PGDATA for the role the
# operator gave the pod (label sampledb.io/role in the downward-API file $SAMPLEDB_PODINFO), then
# execs the image's entrypoint with its own arguments:
#     bash /sampledb/scripts/instance.sh postgres -c config_file=/etc/sampledb/postgresql.conf
#
# Always: writes $SAMPLEDB_RUN_DIR/.pgpass (0600) and $SAMPLEDB_RUN_DIR/sampledb-instance.conf
# (cluster_name, primary_conninfo, primary_slot_name; the operator's postgresql.conf includes it).
# Nothing is ever written to postgresql.auto.conf (it is read after that include and would win).
# With SAMPLEDB_TLS_DIR (the server certificate's Secret: tls.crt, tls.key, ca.crt), the same file turns
# ssl on with those files (a reload reads them again: the operator reloads after a new certificate), and
# replication checks the primary's certificate against ca.crt (sslmode=verify-ca). A server built without
# OpenSSL starts without TLS (and logs why), or, with SAMPLEDB_TLS_REQUIRED=1, does not start (exit 2).
#
# role=primary: never touches the data. An empty $PGDATA goes to the entrypoint (initdb); a data
#   directory starts as it is, so a standby (standby.signal) stays a standby: only the operator's
#   pg_promote() promotes, a restart never does. Data of another major than the binaries (an image
#   that does not run the data's version) is refused with exit 2, naming both majors.
#   With SAMPLEDB_RECOVERY_SERVER set, an empty $PGDATA (or an unfinished recovery, marked by
#   $PGDATA.recovering) is first recovered from the object store by recover.sh (point in time,
#   promoted, stopped cleanly), which gets this script's arguments; its exit status is ours on failure.
# role=replica:
#   - no cluster yet: wait for the primary (pg_isready), pg_basebackup, create standby.signal;
#   - standby.signal present: start (a standby);
#   - a cluster without standby.signal (a demoted primary): pg_rewind from the primary, then
#     standby.signal; if the rewind fails the directory is moved aside and cloned afresh;
#   - a cluster of another major than the binaries: moved aside, cloned afresh.
# Data is never deleted, with one exception: a clone this script itself started and did not finish
# (marked by the file $PGDATA.cloning, created before pg_basebackup and removed after standby.signal)
# is removed and cloned again. Anything else in the way is moved aside, in the same directory:
#   $PGDATA.partial-<UTC time>    non-empty, no PG_VERSION, not our clone
#   $PGDATA.diverged-<UTC time>   pg_rewind failed
#   $PGDATA.major-<N>-<UTC time>  data of major N, binaries of another
# Those copies are kept for a human (they use space on the data volume).
# Self-fence: self-fence.sh runs beside the server (started here, before the exec; see that script): a primary
# whose lease from the operator ended while no standby received its WAL is stopped, and the marker
# $SAMPLEDB_RUN_DIR/sampledb-self-fenced written. With that marker (the run directory outlives the container's
# restarts, not the pod) role=primary never starts the server: it waits until the pod is deleted (the operator's
# failover, or its release of the fence when no standby can take over) or its role label says replica (then it
# goes on as a replica, rewinding, and the marker goes).
# Every decision is one line on stderr. Exit codes (lib.sh): 2 bad settings or role label, 5 no role
# label or no primary in time, 9 the primary refuses our connection, 1 a clone failed; the kubelet
# restarts the container.
set -Eeuo pipefail
SDB_SCRIPT=instance
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

ROLE_LABEL=sampledb.io/role
RUN_DIR=${SAMPLEDB_RUN_DIR:-/var/run/postgresql}
PODINFO=${SAMPLEDB_PODINFO:-/etc/sampledb/podinfo/labels}
PRIMARY_PORT=${SAMPLEDB_PRIMARY_PORT:-5432}
ROLE_TIMEOUT=${SAMPLEDB_ROLE_TIMEOUT:-300}
PRIMARY_TIMEOUT=${SAMPLEDB_PRIMARY_TIMEOUT:-300}
PASSFILE=$RUN_DIR/.pgpass
INSTANCE_CONF=$RUN_DIR/sampledb-instance.conf
ROLE_POLL=0.5
T0=${EPOCHREALTIME//[!0-9]/}

now_us() {
    printf '%s' "${EPOCHREALTIME//[!0-9]/}"
}

# since START_US: the time since START_US, e.g. "2.4 s".
since() {
    local us=$(($(now_us) - $1))
    printf '%d.%d s' $((us / 1000000)) $((us % 1000000 / 100000))
}

# conn_value VALUE: VALUE as a libpq connection-string value (quoted unless plainly safe).
conn_value() {
    local s=$1
    if [[ $s =~ ^[A-Za-z0-9._/:@+-]+$ ]]; then
        printf '%s' "$s"
    else
        s=${s//\\/\\\\}
        s=${s//\'/\\\'}
        printf "'%s'" "$s"
    fi
}

# conf_str VALUE: VALUE as a postgresql.conf string literal.
conf_str() {
    local s=${1//\\/\\\\}
    s=${s//\'/\'\'}
    printf "'%s'" "$s"
}

# pgpass_field VALUE: VALUE escaped for a password file (':' and '\').
pgpass_field() {
    local s=${1//\\/\\\\}
    printf '%s' "${s//:/\\:}"
}

# write_private PATH CONTENT: replace PATH atomically by a 0600 file holding CONTENT.
write_private() {
    local tmp
    tmp=$(mktemp "$RUN_DIR/.sampledb-instance.XXXXXX")
    chmod 0600 -- "$tmp"
    printf '%s' "$2" >"$tmp"
    mv -f -- "$tmp" "$1"
}

# read_role: print the role label's value; fails while the file or the label is missing.
read_role() {
    local line
    line=$(grep -m1 -F "$ROLE_LABEL=" -- "$PODINFO" 2>/dev/null) || return 1
    [[ $line == "$ROLE_LABEL="* ]] || return 1
    line=${line#*=}
    line=${line#\"}
    printf '%s' "${line%\"}"
}

wait_for_role() {
    local start deadline logged=0
    start=$(now_us)
    deadline=$((start + ROLE_TIMEOUT * 1000000))
    until ROLE=$(read_role); do
        if (($(now_us) >= deadline)); then
            die "$SDB_EXIT_NOT_READY" "no label $ROLE_LABEL in $PODINFO after ${ROLE_TIMEOUT}s (the operator labels each database pod with its role)"
        fi
        if ((!logged)); then
            log "waiting for the label $ROLE_LABEL in $PODINFO (up to ${ROLE_TIMEOUT}s)"
            logged=1
        fi
        sleep "$ROLE_POLL"
    done
    if ((logged)); then
        log "label $ROLE_LABEL=$ROLE after $(since "$start")"
    fi
}

# has_files DIR: DIR exists and holds at least one entry.
has_files() {
    [[ -d $1 && -n $(find "$1" -mindepth 1 -maxdepth 1 -print -quit) ]]
}

# move_aside KIND: rename $PGDATA to $PGDATA.KIND-<UTC time>; sets MOVED_TO.
move_aside() {
    local stamp n=1
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    MOVED_TO=$PGDATA.$1-$stamp
    while [[ -e $MOVED_TO ]]; do
        MOVED_TO=$PGDATA.$1-$stamp-$n
        n=$((n + 1))
    done
    mv -- "$PGDATA" "$MOVED_TO"
}

wait_for_primary() {
    local start deadline logged=0
    start=$(now_us)
    deadline=$((start + PRIMARY_TIMEOUT * 1000000))
    until pg_isready -q -h "$SAMPLEDB_PRIMARY_HOST" -p "$PRIMARY_PORT" -t 2 >/dev/null 2>&1; do
        if (($(now_us) >= deadline)); then
            die "$SDB_EXIT_NOT_READY" "role=$ROLE: the primary $PRIMARY did not accept connections within ${PRIMARY_TIMEOUT}s"
        fi
        if ((!logged)); then
            log "role=$ROLE: waiting for the primary $PRIMARY (up to ${PRIMARY_TIMEOUT}s)"
            logged=1
        fi
        sleep 1
    done
    if ((logged)); then
        log "role=$ROLE: the primary $PRIMARY accepts connections after $(since "$start")"
    fi
}

# primary_sql QUERY: one value from the primary, over the connection the standby will use.
primary_sql() {
    PGCONNECT_TIMEOUT=10 sql -At -d "$CONNINFO dbname=postgres" -c "$1"
}

# check_primary: fail with SDB_EXIT_CONNECT unless we can log in to the primary; sets SLOT_STATE
# (free, active or absent) for our replication slot.
check_primary() {
    local out
    if ! out=$(primary_sql "SELECT coalesce((SELECT CASE WHEN active THEN 'active' ELSE 'free' END
        FROM pg_catalog.pg_replication_slots WHERE slot_name = '$SAMPLEDB_SLOT' AND slot_type = 'physical'), 'absent')" 2>&1); then
        die "$SDB_EXIT_CONNECT" "role=$ROLE: cannot connect to the primary $PRIMARY: $(one_line "$(grep -m1 -E 'error|FATAL' <<<"$out" || printf '%s' "$out")")"
    fi
    SLOT_STATE=$out
}

# clone REASON: pg_basebackup from the primary into $PGDATA (absent or empty), then standby.signal.
clone() {
    local start out args slot_note
    wait_for_primary
    check_primary
    start=$(now_us)
    printf 'clone of %s started %s by instance.sh\n' "$SAMPLEDB_INSTANCE" "$(now_utc)" >"$MARKER"
    args=(-D "$PGDATA" -X stream -c fast --no-password -d "$CONNINFO")
    if [[ $SLOT_STATE == free ]]; then
        args+=(-S "$SAMPLEDB_SLOT")
        slot_note="through slot $SAMPLEDB_SLOT"
    else
        slot_note="with a temporary slot (slot $SAMPLEDB_SLOT is $SLOT_STATE)"
    fi
    if ! out=$(PGPASSFILE=$PASSFILE pg_basebackup "${args[@]}" 2>&1); then
        die "$SDB_EXIT_INTERNAL" "role=$ROLE: pg_basebackup from $PRIMARY failed after $(since "$start"): $(one_line "$(grep -m1 -E 'error|FATAL' <<<"$out" || printf '%s' "$out")")"
    fi
    : >"$PGDATA/standby.signal"
    rm -f -- "$MARKER"
    log "role=$ROLE: $1; cloned from $PRIMARY $slot_note in $(since "$start"); starting as a standby"
    drop_older_majors
}

# drop_older_majors: after a clone, the data directories of older majors that major upgrades left beside $PGDATA on
# this standby's volume (named as the operator names them: pgdata, pgdata-<major>) are removed: they are this
# standby's copies (the primary keeps its own old directory), and kept they would double the volume's use. A
# directory moved aside (pgdata.<why>-<time>) is never removed: it is kept for a person to look at.
drop_older_majors() {
    local dir other major
    major=$(server_major)
    for dir in "$(dirname -- "$PGDATA")"/pgdata "$(dirname -- "$PGDATA")"/pgdata-*; do
        [[ -d $dir && $dir != "$PGDATA" && -s $dir/PG_VERSION && ! -L $dir ]] || continue
        [[ $(basename -- "$dir") =~ ^pgdata(-[0-9]+)?$ ]] || continue
        other=$(tr -d '[:space:]' <"$dir/PG_VERSION")
        if [[ $other =~ ^[0-9]+$ ]] && ((other < major)); then
            rm -rf -- "$dir"
            log "role=$ROLE: removed $dir, this standby's copy of major $other (the primary keeps its own)"
        fi
    done
}

# clear_stale_pidfile: remove postmaster.pid when no other process holds it (the old postmaster
# was this container's pid 1, as we are now; postgres --single, run by pg_rewind, would refuse it).
clear_stale_pidfile() {
    local pid
    [[ -f $PGDATA/postmaster.pid ]] || return 0
    pid=$(head -n1 -- "$PGDATA/postmaster.pid" || true)
    if [[ $pid =~ ^[0-9]+$ && $pid != "$$" ]] && kill -0 "$pid" 2>/dev/null; then
        die "$SDB_EXIT_CONFIG" "role=$ROLE: process $pid holds $PGDATA/postmaster.pid: another server uses this data directory"
    fi
    rm -f -- "$PGDATA/postmaster.pid"
}

# config_file_arg ARGS...: the value of "-c config_file=..." (or --config_file=/--config-file=) in ARGS.
config_file_arg() {
    local prev='' arg
    for arg in "$@"; do
        case $prev/$arg in
        -c/config_file=* | -c/config-file=*) printf '%s' "${arg#*=}" ;;
        */--config_file=* | */--config-file=*) printf '%s' "${arg#*=}" ;;
        esac
        prev=$arg
    done
}

# rewind: a demoted primary follows the primary: pg_rewind, else moved aside and cloned.
rewind() {
    local start out args cfg note
    wait_for_primary
    check_primary
    clear_stale_pidfile
    start=$(now_us)
    # A just-promoted primary writes its new timeline into pg_control only at its next checkpoint;
    # before that, pg_rewind (15) reads the old timeline and answers "no rewind required" for a
    # diverged target, which then never follows. So: a checkpoint first (superuser's right).
    if ! out=$(primary_sql "CHECKPOINT" 2>&1); then
        log "role=$ROLE: CHECKPOINT on the primary $PRIMARY failed ($(one_line "$(grep -m1 -E 'error|FATAL' <<<"$out" || printf '%s' "$out")")); rewinding anyway"
    fi
    args=(--target-pgdata="$PGDATA" --source-server="$CONNINFO dbname=postgres")
    cfg=$(config_file_arg "${SERVER_ARGS[@]}")
    # pg_rewind runs crash recovery (postgres --single) on an unclean target: with the server's
    # real configuration (wal_log_hints), where pg_rewind can be told it (15 and later)
    if [[ -n $cfg ]] && pg_rewind --help 2>/dev/null | grep -q -- '--config-file'; then
        args+=(--config-file="$cfg")
    fi
    if out=$(PGPASSFILE=$PASSFILE pg_rewind "${args[@]}" 2>&1); then
        : >"$PGDATA/standby.signal"
        note=$(tail -n1 <<<"$out")
        if grep -q 'crash recovery' <<<"$out"; then
            note="after crash recovery of the unclean target; $note"
        fi
        log "role=$ROLE: no standby.signal (a former primary); rewound from $PRIMARY in $(since "$start") ($(one_line "$note")); starting as a standby"
        return 0
    fi
    move_aside diverged
    log "role=$ROLE: pg_rewind from $PRIMARY failed after $(since "$start"): $(one_line "$(grep -m1 -E 'error|FATAL' <<<"$out" || tail -n1 <<<"$out")"); moved the data to $MOVED_TO"
    clone "former primary could not be rewound (data kept in $MOVED_TO)"
}

server_major() {
    local v
    v=$(postgres --version)
    [[ $v =~ \(PostgreSQL\)\ ([0-9]+) ]] || die "$SDB_EXIT_INTERNAL" "cannot read the server's version from: $v"
    printf '%s' "${BASH_REMATCH[1]}"
}

# recover: recover.sh fills $PGDATA from the object store; its own error and result lines stand.
recover() {
    local rc=0
    log "role=primary: recovering $PGDATA from the object store (server $SAMPLEDB_RECOVERY_SERVER) ($(since "$T0"))"
    # recover.sh takes the source store's own settings (SAMPLEDB_RECOVERY_*) itself
    (exec bash "$(dirname -- "${BASH_SOURCE[0]}")/recover.sh" "${SERVER_ARGS[@]}" {SDB_LOG_FD}>&-) || rc=$?
    if ((rc != 0)); then
        SDB_RESULT_DONE=1
        exit "$rc"
    fi
    log "role=primary: recovered; starting the primary ($(since "$T0"))"
}

prepare_primary() {
    if [[ -e $MARKER ]]; then
        die "$SDB_EXIT_CONFIG" "role=primary: $PGDATA is an unfinished clone ($MARKER): it cannot be a primary"
    fi
    if [[ -e $PGDATA.recovering ]]; then
        recover
        return 0
    fi
    if [[ -n ${SAMPLEDB_RECOVERY_SERVER:-} && ! -s $PGDATA/PG_VERSION ]] && ! has_files "$PGDATA"; then
        recover
        return 0
    fi
    if [[ ! -s $PGDATA/PG_VERSION ]]; then
        if has_files "$PGDATA"; then
            die "$SDB_EXIT_CONFIG" "role=primary: $PGDATA is not empty but holds no cluster (no PG_VERSION): refusing to initialize a primary over it"
        fi
        log "role=primary: $PGDATA is empty; the entrypoint initializes a new cluster ($(since "$T0"))"
        return 0
    fi
    local data_major major
    data_major=$(tr -d '[:space:]' <"$PGDATA/PG_VERSION")
    major=$(server_major)
    if [[ $data_major != "$major" ]]; then
        die "$SDB_EXIT_CONFIG" "role=primary: $PGDATA holds a PostgreSQL $data_major cluster but this image runs PostgreSQL $major: the image must run the data's major (a major upgrade is a change of spec.version, which the operator carries out)"
    fi
    if [[ -e $PGDATA/standby.signal ]]; then
        log "role=primary: standby.signal present; starting as a standby, unchanged (only pg_promote() promotes) ($(since "$T0"))"
    else
        log "role=primary: starting the primary ($(since "$T0"))"
    fi
}

prepare_replica() {
    local major data_major
    major=$(server_major)
    if [[ -e $MARKER ]]; then
        rm -rf -- "$PGDATA"
        rm -f -- "$MARKER"
        clone "removed an unfinished clone of our own"
    elif ! has_files "$PGDATA"; then
        clone "$PGDATA is empty or absent"
    elif [[ ! -s $PGDATA/PG_VERSION ]]; then
        move_aside partial
        clone "moved a directory without PG_VERSION (an unfinished clone?) to $MOVED_TO"
    else
        data_major=$(tr -d '[:space:]' <"$PGDATA/PG_VERSION")
        if [[ $data_major != "$major" ]]; then
            move_aside "major-$data_major"
            clone "data of major $data_major, server $major: moved to $MOVED_TO"
        elif [[ -e $PGDATA/standby.signal ]]; then
            log "role=replica: standby.signal present; starting as a standby ($(since "$T0"))"
        else
            rewind
        fi
    fi
}

SERVER_ARGS=("$@")
require_env PGDATA POSTGRES_USER POSTGRES_PASSWORD SAMPLEDB_INSTANCE SAMPLEDB_SLOT SAMPLEDB_PRIMARY_HOST
check_name "$SAMPLEDB_INSTANCE" SAMPLEDB_INSTANCE
if [[ ! $SAMPLEDB_SLOT =~ ^[a-z0-9_]{1,63}$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_SLOT '$SAMPLEDB_SLOT': use 1-63 lower-case letters, digits and '_'"
fi
if [[ ! $SAMPLEDB_PRIMARY_HOST =~ ^[A-Za-z0-9._:-]{1,253}$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_PRIMARY_HOST '$SAMPLEDB_PRIMARY_HOST'"
fi
for setting in PRIMARY_PORT ROLE_TIMEOUT PRIMARY_TIMEOUT; do
    if [[ ! ${!setting} =~ ^[0-9]{1,6}$ ]]; then
        die "$SDB_EXIT_CONFIG" "invalid SAMPLEDB_$setting '${!setting}': use a whole number"
    fi
done
if [[ $POSTGRES_PASSWORD == *[$'\n\r']* ]]; then
    die "$SDB_EXIT_CONFIG" "POSTGRES_PASSWORD holds a line break, which a password file cannot hold"
fi
PGDATA=${PGDATA%/}
if [[ $PGDATA != /?* ]]; then
    die "$SDB_EXIT_CONFIG" "PGDATA must be an absolute path below /, not '$PGDATA'"
fi
MARKER=$PGDATA.cloning
FENCED_MARKER=$RUN_DIR/sampledb-self-fenced
PRIMARY=$SAMPLEDB_PRIMARY_HOST:$PRIMARY_PORT

mkdir -p -- "$RUN_DIR"
write_private "$PASSFILE" "*:*:*:$(pgpass_field "$POSTGRES_USER"):$(pgpass_field "$POSTGRES_PASSWORD")"$'\n'
CONNINFO="host=$(conn_value "$SAMPLEDB_PRIMARY_HOST") port=$PRIMARY_PORT user=$(conn_value "$POSTGRES_USER")"
CONNINFO+=" passfile=$(conn_value "$PASSFILE") application_name=$(conn_value "$SAMPLEDB_INSTANCE")"
TLS_CONF=
server=$(command -v postgres || true)
if [[ -n ${SAMPLEDB_TLS_DIR:-} && -n $server ]] && ! grep -qa SSL_CTX_new "$server"; then
    # a build without OpenSSL refuses ssl = on: serve without TLS (the operator says so: Encrypted=False), unless
    # TLS is required, which such a server cannot honour
    if [[ ${SAMPLEDB_TLS_REQUIRED:-} == 1 ]]; then
        die "$SDB_EXIT_CONFIG" "spec.tls.required is set but this image's PostgreSQL ($server) is built without SSL support: use an image built with OpenSSL"
    fi
    log "TLS asked for, but this image's PostgreSQL ($server) is built without SSL support: serving without TLS"
    SAMPLEDB_TLS_DIR=
fi
if [[ -n ${SAMPLEDB_TLS_DIR:-} ]]; then
    for file in tls.crt tls.key ca.crt; do
        [[ -s $SAMPLEDB_TLS_DIR/$file ]] || die "$SDB_EXIT_CONFIG" "TLS is on but $SAMPLEDB_TLS_DIR/$file is missing or empty"
    done
    CONNINFO+=" sslmode=verify-ca sslrootcert=$(conn_value "$SAMPLEDB_TLS_DIR/ca.crt")"
    TLS_CONF="ssl = on
ssl_cert_file = $(conf_str "$SAMPLEDB_TLS_DIR/tls.crt")
ssl_key_file = $(conf_str "$SAMPLEDB_TLS_DIR/tls.key")
"
    log "TLS on: serving $SAMPLEDB_TLS_DIR/tls.crt"
fi
write_private "$INSTANCE_CONF" "# written by sampledb instance.sh at each start of the container; edits are overwritten
cluster_name = $(conf_str "$SAMPLEDB_INSTANCE")
primary_conninfo = $(conf_str "$CONNINFO")
primary_slot_name = $(conf_str "$SAMPLEDB_SLOT")
$TLS_CONF"

# wait_while_fenced: role=primary in a pod whose server stopped itself (self-fence.sh's marker): never start it
# again here; wait for the pod's deletion, or for the role label to say replica (then the marker goes).
wait_while_fenced() {
    [[ $ROLE == primary && -e $FENCED_MARKER ]] || return 0
    local why
    why=$(one_line "$(cat -- "$FENCED_MARKER" 2>/dev/null || true)")
    log "role=primary: this server stopped itself ($why); not starting it again in this pod: waiting for the operator (a failover deletes the pod)"
    # the operator reads it in the pod's status once this container ends (the liveness probe restarts it)
    printf 'sampledb: self-fenced: %s\n' "$why" >"${SAMPLEDB_TERMINATION_LOG:-/dev/termination-log}" 2>/dev/null || true
    while [[ $ROLE == primary ]]; do
        sleep "$ROLE_POLL"
        ROLE=$(read_role) || ROLE=primary
    done
    rm -f -- "$FENCED_MARKER"
    log "label $ROLE_LABEL=$ROLE: no longer a primary; the self-fence marker is removed"
}

wait_for_role
wait_while_fenced
case $ROLE in
primary) prepare_primary ;;
replica) prepare_replica ;;
*) die "$SDB_EXIT_CONFIG" "invalid label $ROLE_LABEL=\"$ROLE\" in $PODINFO: expected primary or replica" ;;
esac

# the self-fence watches the process that becomes the postmaster (this one: exec keeps the pid)
bash "$(dirname -- "${BASH_SOURCE[0]}")/self-fence.sh" "$$" </dev/null {SDB_LOG_FD}>&- &
ENTRYPOINT=${SAMPLEDB_ENTRYPOINT:-docker-entrypoint.sh}
shopt -s execfail # a failed exec returns, and the lines after it say why
# shellcheck disable=SC2093  # with execfail the script does continue when the exec fails
exec "$ENTRYPOINT" "$@" {SDB_LOG_FD}>&-
exec {SDB_LOG_FD}>&2 # the failed exec closed it
die "$SDB_EXIT_INTERNAL" "cannot run the entrypoint $ENTRYPOINT"
