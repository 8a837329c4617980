#!/usr/bin/env bash
# sampledb data plane: the primary's self-fence, run by instance.sh in the background of every database
# container (it ends up a child of the postmaster, whose pid it is given):
#     bash /sampledb/scripts/self-fence.sh POSTMASTER_PID
#
# Each look touches sampledb-self-fence in that same directory: the operator's renewal reads there that a self-fence
# watches the server (only then does it count on it to stop a primary it cannot reach).
# The operator renews a lease on the primary of a database with standbys: each pass it writes into sampledb-lease, in
# the server's first socket directory (the run directory in a pod; read from postmaster.pid, as is its port), the time, in milliseconds of the host's /proc/uptime (a clock that never steps),
# until which the server may go on without hearing from it again (pg/client.renew_lease; the server accepts a
# renewal only if it arrives within a bound of being sent, so a late one never extends the lease).
# Every SAMPLEDB_FENCE_POLL seconds (1) this script reads that file. No file: not armed (no standbys, or never
# renewed; a new pod starts without one: the run directory is an emptyDir, kept across the container's restarts
# only). The lease current: nothing to do. The lease ended: the server is asked over its socket whether it is a
# primary and how many of its standbys receive its WAL (STANDBYS_SQL). A standby, a primary without a standby slot
# (the database has no standby any more: nothing would replace it), a primary that still sends WAL to one of its
# standbys (the operator may be down while the database is fine), or a server refusing connections because it starts
# or stops (it accepts no commit either) is left alone. A lease file that holds no number (the operator's "off" for a
# database left without standbys) arms nothing. A primary with none, or one that takes a
# connection but does not answer within 5 s, or cannot be asked for another reason, is stopped at once: the marker
# $SAMPLEDB_RUN_DIR/sampledb-self-fenced is written (instance.sh then never starts the server as a primary again in
# this pod: only the pod's deletion, which the operator decides, clears it), then the postmaster gets SIGQUIT (an
# immediate shutdown: no further commit; crash recovery at its next start). The reason goes to the container's
# termination message, which the operator reads.
#
# The postmaster treats a child that exits with a status other than 0 or 1 as a crashed backend (it would restart
# every session): this script therefore always exits 0 (signals that end it are trapped), and exits once the
# postmaster is gone. It never prints a password (it has none: the socket is trusted).
set -uo pipefail

PM=${1:?usage: self-fence.sh POSTMASTER_PID}
RUN_DIR=${SAMPLEDB_RUN_DIR:-/var/run/postgresql}
PIDFILE=${PGDATA:-/var/lib/postgresql/data}/postmaster.pid
FENCED=$RUN_DIR/sampledb-self-fenced
POLL=${SAMPLEDB_FENCE_POLL:-1}
ANSWER_WITHIN=5
TERMINATION_LOG=${SAMPLEDB_TERMINATION_LOG:-/dev/termination-log}
trap 'exit 0' TERM INT HUP QUIT
# whether the server is a standby; how many of the database's own standbys receive its WAL: WAL senders holding a
# physical slot of the standbys (the operator names them sdb_i<k> and drops no other; a logical decoding client or a
# WAL archiver of someone else's does not keep a primary cut off from its standbys running); and how many such slots
# it has (none: the database has no standby any more, after a scale-down, and nothing is armed)
STANDBYS_SQL="SELECT pg_is_in_recovery(), (SELECT count(*) FROM pg_stat_replication r JOIN pg_replication_slots s
    ON s.active_pid = r.pid WHERE s.slot_type = 'physical' AND s.slot_name LIKE 'sdb\\_i%'),
    (SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'physical' AND slot_name LIKE 'sdb\\_i%')"

log() {
    printf 'sampledb-self-fence: %s\n' "$*" >&2
}

# uptime_ms: the host's uptime in milliseconds (CLOCK_BOOTTIME: it never steps back).
uptime_ms() {
    local up
    read -r up _ </proc/uptime || return 1
    [[ $up =~ ^([0-9]+)\.([0-9]{1,2})$ ]] || return 1
    local frac=${BASH_REMATCH[2]}
    [[ ${#frac} == 1 ]] && frac=${frac}0
    printf '%d' $((10#${BASH_REMATCH[1]} * 1000 + 10#$frac * 10))
}

# listening: the running server's port and first socket directory, from its postmaster.pid (PORT, SOCKET); fails
# while it has not written them (starting: it accepts no connection yet).
listening() {
    local -a lines
    [[ -r $PIDFILE ]] || return 1
    mapfile -t -n 5 lines <"$PIDFILE" 2>/dev/null || return 1
    PORT=${lines[3]:-}
    SOCKET=${lines[4]:-}
    [[ $PORT =~ ^[0-9]{1,5}$ && $SOCKET == /* ]]
}

# lease_ms: the lease's end (a whole number of milliseconds), or fails (no file, or a file being rewritten). The
# operator writes it in the server's first socket directory.
lease_ms() {
    local value lease=$SOCKET/sampledb-lease
    [[ -s $lease ]] || return 1
    read -r value <"$lease" || return 1
    [[ $value =~ ^[0-9]{1,15}$ ]] || return 1
    printf '%d' "$((10#$value))"
}

fence() {
    local why=$1
    printf 'self-fenced at uptime %s ms: %s\n' "$(uptime_ms || printf '?')" "$why" >"$FENCED.tmp" && mv -f -- "$FENCED.tmp" "$FENCED"
    printf 'sampledb: self-fenced: %s\n' "$why" >"$TERMINATION_LOG" 2>/dev/null || true
    log "stopping the server (immediate shutdown): $why"
    kill -QUIT "$PM" 2>/dev/null || true
}

last=
while kill -0 "$PM" 2>/dev/null; do
    sleep "$POLL" &
    wait $! || true
    listening || continue
    : >"$SOCKET/sampledb-self-fence" 2>/dev/null || true # the operator's renewal reads that this watch runs
    end=$(lease_ms) || continue
    now=$(uptime_ms) || continue
    if ((now <= end)); then
        last=
        continue
    fi
    rc=0
    out=$(timeout "$ANSWER_WITHIN" psql -X -q -A -t -h "$SOCKET" -p "$PORT" -U "${POSTGRES_USER:-postgres}" \
        -d postgres -c "$STANDBYS_SQL" 2>&1) || rc=$?
    if ((rc == 124)); then
        fence "the operator's lease ended $((now - end)) ms ago and the server does not answer within ${ANSWER_WITHIN} s"
        break
    elif ((rc != 0)); then
        case $out in
        *"starting up"* | *"shutting down"* | *"in recovery mode"* | *"accepting connections"* | *"No such file or directory"*)
            continue ;; # accepting no connection, so no commit either (starting, crash recovery, stopping)
        esac
        fence "the operator's lease ended $((now - end)) ms ago and the server cannot be asked whether a standby receives its WAL ($(head -c 200 <<<"$out" | tr '\n' ' '))"
        break
    fi
    case $out in
    t\|*) continue ;;  # a standby: nothing to fence
    f\|*\|0) # no standby slot: the database has no standby (any more), nothing would replace it
        if [[ $last != alone ]]; then
            log "the operator's lease ended $((now - end)) ms ago; no standby slot (no standby configured): going on"
            last=alone
        fi
        ;;
    f\|0\|*)
        fence "the operator's lease ended $((now - end)) ms ago and no standby receives WAL from this primary"
        break
        ;;
    f\|*)
        if [[ $last != held ]]; then
            log "the operator's lease ended $((now - end)) ms ago; standby connection(s) still receive WAL ($out): going on"
            last=held
        fi
        ;;
    esac
done
exit 0
