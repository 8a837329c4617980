#!/usr/bin/env bash
# Builds (once) the real node's Go binaries and prints the folder that holds them.
#
# Like hack/build-testcluster.sh, the binaries live OUTSIDE the work tree, in $SAMPLEDB_CACHE
# (default ~/.cache/sampledb-operator), under a key made of every input: the containerd pin, the
# go.mod/go.sum and sources of hack/node/*, and the Go version. A warm run never rebuilds.
#   containerd, containerd-shim-runc-v2, ctr: github.com/containerd/containerd/v2 at $CONTAINERD_VERSION
#   coredns: CoreDNS with the plugins the cluster DNS needs (hack/node/coredns)
#   pause:   the pod sandbox process (hack/node/pause), the only file of the pause image
# kubelet and kube-proxy are in the testcluster binary (same Kubernetes pin as the control plane);
# runc and the CNI plugins come from Debian (hack/bootstrap.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/progress.sh
. "$here/progress.sh"
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
cache_root=${SAMPLEDB_CACHE:-$HOME/.cache/sampledb-operator}

key=$(cat "$here"/node/*/go.mod "$here"/node/*/go.sum "$here"/node/*/*.go 2>/dev/null \
        <(echo "containerd=$CONTAINERD_VERSION") <(go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-16)
bin="$cache_root/node-$key"
want=(containerd containerd-shim-runc-v2 ctr coredns pause)

complete() { local f; for f in "${want[@]}"; do [[ -x $bin/$f ]] || return 1; done; }
if complete; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.build-node-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "building the real node's binaries (containerd $CONTAINERD_VERSION, CoreDNS, pause) into $bin" >&2
for cmd in containerd containerd-shim-runc-v2 ctr; do
  progress "go install of $cmd $CONTAINERD_VERSION" env CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w" "github.com/containerd/containerd/v2/cmd/$cmd@$CONTAINERD_VERSION" >&2
done
build_coredns() { (cd "$here/node/coredns" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" .) >&2; }
progress "go build of CoreDNS" build_coredns
(cd "$here/node/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/pause" .) >&2
echo "built in $(( $(date +%s) - start ))s" >&2
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
echo "$bin"
