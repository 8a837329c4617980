#!/usr/bin/env bash
# Builds (once) the local cluster's S3-compatible object store and prints the folder that holds it.
#
# versitygw (github.com/versity/versitygw, Apache-2.0): an S3 API server over a POSIX directory,
# one static binary built from the Go module proxy. hack/cluster runs it as the component `s3`
# (WAL archiving and backups tests).
#
# The binary lives OUTSIDE the work tree, in $SAMPLEDB_CACHE (default ~/.cache/sampledb-operator),
# under a key made of the version, this script's text and the Go version, so a warm run never
# rebuilds and a change of pin always does.
#   versitygw: github.com/versity/versitygw/cmd/versitygw at $VERSITYGW_VERSION
set -euo pipefail

VERSITYGW_VERSION=${VERSITYGW_VERSION:-v1.8.0}
cache_root=${SAMPLEDB_CACHE:-$HOME/.cache/sampledb-operator}

key=$(cat "${BASH_SOURCE[0]}" <(echo "versitygw=$VERSITYGW_VERSION") <(go env GOVERSION GOOS GOARCH) \
        | sha256sum | cut -c1-16)
bin="$cache_root/s3-$key"

if [[ -x "$bin/versitygw" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "building the object store (versitygw $VERSITYGW_VERSION) into $bin; a cold build takes a while" >&2
CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" \
  "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" >&2
echo "built in $(( $(date +%s) - start ))s" >&2
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
echo "$bin"
