#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: wait until the server accepts connections (pg_isready), up to $WAIT_TIMEOUT
# seconds (default 60). Polls; never waits past the deadline. Exit 0 when ready, 5 on timeout,
# 2 when pg_isready rejects the connection settings.
set -Eeuo pipefail
SDB_SCRIPT=wait-ready
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

timeout=${WAIT_TIMEOUT:-60}
if [[ ! $timeout =~ ^[0-9]+$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid WAIT_TIMEOUT '$timeout': want whole seconds"
fi
interval=${WAIT_INTERVAL:-1}
start=$SECONDS
deadline=$((start + timeout))
attempts=0
status=2
while :; do
    remaining=$((deadline - SECONDS))
    per_try=$((remaining < 5 ? (remaining < 1 ? 1 : remaining) : 5))
    attempts=$((attempts + 1))
    status=0
    pg_isready -q -t "$per_try" || status=$?
    case $status in
        0)
            waited=$((SECONDS - start))
            succeed "server is accepting connections after ${waited}s" \
                "\"ready\":true,\"waited_seconds\":$waited,\"attempts\":$attempts"
            ;;
        3)
            die "$SDB_EXIT_CONFIG" "pg_isready made no attempt: invalid connection settings"
            ;;
    esac
    if ((SECONDS >= deadline)); then
        break
    fi
    if ((attempts == 1)); then
        log "waiting up to ${timeout}s for the server (pg_isready status $status)"
    fi
    sleep "$interval"
done
case $status in
    1) state="rejecting connections (starting up or shutting down)" ;;
    *) state="not responding" ;;
esac
die "$SDB_EXIT_NOT_READY" "server not ready after ${timeout}s: $state" \
    "\"ready\":false,\"waited_seconds\":$((SECONDS - start)),\"attempts\":$attempts"
