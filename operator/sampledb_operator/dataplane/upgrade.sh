#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: major upgrade (not implemented yet).
set -Eeuo pipefail
SDB_SCRIPT=upgrade
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"
die "$SDB_EXIT_CONFIG" "upgrade.sh is not implemented yet"
