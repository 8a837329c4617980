#!/usr/bin/env bash
# Builds (once) the helm CLI and prints the folder that holds it.
#
# helm (helm.sh/helm/v4, Apache-2.0), one static binary built from the Go module proxy. The tests
# use it to lint and render the chart (charts/sampledb-operator) and to install it on the local
# cluster (tests/support/helm.py calls this script when they need the binary).
#
# The binary lives OUTSIDE the work tree, in $SAMPLEDB_CACHE (default ~/.cache/sampledb-operator),
# under a key made of the version, this script's text and the Go version, so a warm run never
# rebuilds and a change of pin always does. Builds are serialised by a lock (parallel test
# processes may all ask at once); the build runs under nice with at most $SAMPLEDB_GO_PARALLEL (2)
# packages at a time, and is given up after $SAMPLEDB_BUILD_TIMEOUT seconds (default 1800: the
# module downloads are part of it).
#   helm: helm.sh/helm/v4/cmd/helm at $HELM_VERSION
set -Eeuo pipefail

HELM_VERSION=${HELM_VERSION:-v4.3.2}
cache_root=${SAMPLEDB_CACHE:-$HOME/.cache/sampledb-operator}

key=$(cat "${BASH_SOURCE[0]}" <(echo "helm=$HELM_VERSION") <(go env GOVERSION GOOS GOARCH) \
        | sha256sum | cut -c1-16)
bin="$cache_root/helm-$key"

if [[ -x "$bin/helm" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.helm-$key.lock"
flock 9
if [[ -x "$bin/helm" ]]; then  # built by another process while this one waited for the lock
  echo "$bin"
  exit 0
fi
tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "building helm $HELM_VERSION into $bin; a cold build takes a few minutes" >&2
# The version is stamped as helm's own release build does (`helm version` prints it; `go install`
# alone leaves the placeholder of its source).
CGO_ENABLED=0 GOBIN="$tmp" timeout "${SAMPLEDB_BUILD_TIMEOUT:-1800}" nice go install -p "${SAMPLEDB_GO_PARALLEL:-2}" -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2
"$tmp/helm" version --short >/dev/null
echo "built in $(( $(date +%s) - start ))s" >&2
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
echo "$bin"
