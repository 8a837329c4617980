#!/usr/bin/env bash
# Builds (once) the OLM bundle validator (hack/bundle-validate: operator-sdk's validation library,
# github.com/operator-framework/api) and prints the path of the binary.
#
# The binary lives OUTSIDE the work tree, in $SAMPLEDB_CACHE (default ~/.cache/sampledb-operator),
# under a key made of go.mod, go.sum, main.go and the Go version, so a warm run builds nothing and a
# change of pins always rebuilds. The build runs under nice with at most $SAMPLEDB_GO_PARALLEL (2)
# packages at a time.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src="$here/bundle-validate"
cache_root=${SAMPLEDB_CACHE:-$HOME/.cache/sampledb-operator}

key=$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go <(go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-16)
bin="$cache_root/bundle-validate-$key/bundle-validate"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
api=$(awk '$1=="github.com/operator-framework/api"{print $2; exit}' "$src/go.mod")
echo "building the bundle validator (github.com/operator-framework/api $api) into $(dirname "$bin")" >&2
(cd "$src" && CGO_ENABLED=0 nice go build -p "${SAMPLEDB_GO_PARALLEL:-2}" -mod=readonly -trimpath \
   -ldflags "-s -w" -o "$tmp/bundle-validate" .) >&2
echo "built in $(( $(date +%s) - start ))s" >&2
rm -rf "$(dirname "$bin")"
mv "$tmp" "$(dirname "$bin")"
trap - EXIT
echo "$bin"
