#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: make the server writable again after a failed major upgrade.
# upgrade.sh freezes the old server (ALTER SYSTEM SET default_transaction_read_only = on) and undoes
# it when it fails, but a Job killed by SIGKILL or its deadline cannot; the operator then runs this.
# Idempotent: resetting a setting that is not set is a no-op.
set -Eeuo pipefail
SDB_SCRIPT=thaw
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

connect_check
sql -c "ALTER SYSTEM RESET default_transaction_read_only" -c "SELECT pg_reload_conf()" >/dev/null
state=$(sql_value "SHOW default_transaction_read_only")
if [[ $state != off ]]; then
    die "$SDB_EXIT_SQL" "default_transaction_read_only is still '$state' (set elsewhere than by ALTER SYSTEM?)"
fi
succeed "the server accepts writes again" "\"read_only\":false"
