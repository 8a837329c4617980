#!/usr/bin/env bash
# `make run`: start (or reuse) the local control plane, install the CRDs and the example database,
# then run the operator in the foreground against it. Ctrl-C stops the operator (the cluster keeps
# running: `make cluster-down` stops it). Watch it with:
#   export KUBECONFIG=.cluster/kubeconfig; kubectl get sdb -w
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(hack/cluster up)"
kubectl() { "$SAMPLEDB_TESTCLUSTER_BIN/testcluster" kubectl "$@"; }
kubectl apply --server-side --force-conflicts -f manifests/crd/ >/dev/null
kubectl wait --for=condition=Established --timeout=60s -f manifests/crd/ >/dev/null
# The example asks for a version whose image the local cluster has (built offline from Debian's
# packages: PostgreSQL 15 and 18); on another cluster the sample's own version is used as written.
# (No list without a real node: the sample as written.)
version=$( (sed -nE 's#.* docker\.io/library/postgres:([0-9]+\.[0-9]+)( .*)?$#\1#p' \
  "${SAMPLEDB_CACHE:-$HOME/.cache/sampledb-operator}/images/images.list" 2>/dev/null || true) | sort -V | tail -1)
if [[ -n $version ]]; then
  sed -E "s/^(  version: ).*/\1\"$version\"/" manifests/samples/sampledb-minimal.yaml | kubectl apply -f -
else
  kubectl apply -f manifests/samples/sampledb-minimal.yaml
fi
real_nodes=$(kubectl get nodes -l 'type!=kwok' -o name 2>/dev/null | wc -l)
if [[ $real_nodes == 0 ]]; then
  cat >&2 <<MSG

The local control plane is up with fake (kwok) nodes only: there is no real node (it needs root), so the
example database is accepted and its objects are made, but its pods stay Pending and it never becomes Ready.
To run databases: \`sudo make run\` on this machine, or install the operator on a cluster of yours (kind, k3s:
docs/user-guide.md "Install"; \`make image\` builds the operator's image and loads it there). In another shell:
  export KUBECONFIG=$KUBECONFIG
  kubectl get sdb -w                       # the example database, Provisioning
  kubectl describe sdb example-database    # its conditions and events

Starting the operator (Ctrl-C to stop)...
MSG
else
cat >&2 <<MSG

The local control plane is up. In another shell:
  export KUBECONFIG=$KUBECONFIG
  kubectl get sdb -w                       # the example database becoming Ready
  kubectl describe sdb example-database    # its conditions and events
  make psql                                # psql on it (kubectl port-forward + the credentials Secret)
  curl -s localhost:${SAMPLEDB_METRICS_PORT:-8080}/metrics | grep controller_runtime_reconcile_total

Starting the operator (Ctrl-C to stop)...
MSG
fi
exec .venv/bin/sampledb-operator run --kubeconfig "$KUBECONFIG" --no-leader-elect \
  --metrics-bind "127.0.0.1:${SAMPLEDB_METRICS_PORT:-8080}" --health-bind "127.0.0.1:${SAMPLEDB_HEALTH_PORT:-8081}" \
  "$@"
