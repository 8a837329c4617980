#!/usr/bin/env bash
# `make psql [DB=example-database] [NS=default]`: psql on a database of the local cluster, through
# `kubectl port-forward` to its client Service, with the password from its credentials Secret in
# psql's environment only (the `kubectl sampledb psql` plugin, with the cluster's own kubectl).
# Arguments after `--` go to psql:  make psql ARGS='-- -c "SELECT version()"'
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(hack/cluster env)"
[[ -f $KUBECONFIG ]] || { echo "psql: the local cluster is not up (make run)" >&2; exit 1; }
export KUBECONFIG
exec .venv/bin/python -m sampledb_operator.plugin psql "${DB:-example-database}" --namespace "${NS:-default}" \
  --kubectl "$SAMPLEDB_TESTCLUSTER_BIN/testcluster kubectl" "$@"
