#!/usr/bin/env bash
# Builds (once) the local control plane's binaries and prints the folder that holds them.
#
# The binaries live OUTSIDE the work tree, in $SAMPLEDB_CACHE (default ~/.cache/sampledb-operator),
# under a key made of go.mod, go.sum, the Go sources of hack/testcluster, the kwok pin and the Go
# version, so a warm run never rebuilds and a change of pins always does.
#   testcluster: multi-call binary (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)
#   kwok:        sigs.k8s.io/kwok/cmd/kwok at $KWOK_VERSION
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/progress.sh
. "$here/progress.sh"
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
K8S_VERSION=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$here/testcluster/go.mod")
cache_root=${SAMPLEDB_CACHE:-$HOME/.cache/sampledb-operator}

key=$(cat "$here/testcluster/go.mod" "$here/testcluster/go.sum" "$here"/testcluster/*.go \
        <(echo "kwok=$KWOK_VERSION") <(go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-16)
bin="$cache_root/testcluster-$key"

if [[ -x "$bin/testcluster" && -x "$bin/kwok" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "building the local control plane ($K8S_VERSION, kwok $KWOK_VERSION) into $bin; a cold build takes a while" >&2
ldflags="-s -w"
for v in gitVersion=$K8S_VERSION gitTreeState=clean gitMajor=$(echo "$K8S_VERSION" | sed -E 's/^v([0-9]+)\..*/\1/') \
         gitMinor=$(echo "$K8S_VERSION" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/'); do
  ldflags="$ldflags -X k8s.io/component-base/version.$v -X k8s.io/client-go/pkg/version.$v"
done
build_testcluster() { (cd "$here/testcluster" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/testcluster" .) >&2; }
progress "go build of etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl" \
  build_testcluster
progress "go install of kwok $KWOK_VERSION" \
  env CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
echo "built in $(( $(date +%s) - start ))s" >&2
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
echo "$bin"
