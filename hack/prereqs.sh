#!/usr/bin/env bash
# hack/prereqs.sh run|test: what `make run` and `make test` need from this machine, checked before anything is
# installed or built. Every missing piece is named with how to get it, then the script exits 1; notes that do not
# stop the run (a cold first build, where a tool was found) go to stderr too. Nothing here changes the machine.
#
# Needed:
#   - Linux (the real node runs kubelet, containerd and runc on this kernel);
#   - root for the real node: kubelet and containerd mount volumes, make cgroups, network namespaces, a bridge and
#     iptables rules. Without root: `make run` with SAMPLEDB_REAL_NODE=0 runs the control plane with fake nodes
#     only (databases are accepted but their pods never run); `make test` only against a cluster the user names
#     (SAMPLEDB_TEST_USE_KUBECONFIG=1), never half a suite;
#   - apt-get, when a Debian package hack/bootstrap.sh installs is missing (as root, or through sudo);
#   - Python 3.11+ with the venv module (python3-venv), unless .venv exists;
#   - Go 1.26+ on PATH (the local control plane, kwok and the S3 server are built from the Go module proxy);
#   - disk: at least WARM_GIB free under the cache ($SAMPLEDB_CACHE, default ~/.cache/sampledb-operator); a first
#     run (the images, containerd's store, Go's build cache) needs about FIRST_RUN_GIB (a note, not a stop).
set -uo pipefail
mode=${1:-run}
[[ $mode == run || $mode == test ]] || { echo "usage: hack/prereqs.sh run|test" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${SAMPLEDB_CACHE:-$HOME/.cache/sampledb-operator}
FIRST_RUN_GIB=25
WARM_GIB=3
GO_MIN=1.26
PY_MIN=3.11

missing=()
miss() { missing+=("$*"); }
note() { echo "prereqs: $*" >&2; }

[[ $(uname -s) == Linux ]] || miss "Linux: the local cluster's real node runs kubelet, containerd and runc on this" \
  "machine's kernel ($(uname -s) here). On another system, install the operator on a cluster of yours" \
  "(docs/user-guide.md \"Install\")."

if [[ $(id -u) != 0 ]]; then
  sudo_hint="sudo is not installed: run it as root"
  command -v sudo >/dev/null && sudo_hint="e.g. \`sudo make $mode\`"
  if [[ $mode == run && ${SAMPLEDB_REAL_NODE:-1} != 0 ]]; then
    miss "root: \`make run\` starts a real node (kubelet and containerd mount volumes, make cgroups, network" \
      "namespaces, a bridge and iptables rules), which needs root ($sudo_hint). Without root:" \
      "\`SAMPLEDB_REAL_NODE=0 make run\` runs the control plane with fake nodes only, where databases are accepted" \
      "but their pods never run; to run databases without root, install the operator on a cluster of yours" \
      "(kind, k3s: docs/user-guide.md \"Install\", \`make image\` builds and loads the image)."
  elif [[ $mode == run ]]; then
    note "SAMPLEDB_REAL_NODE=0: fake nodes only; the example database is accepted but its pods never run"
  elif [[ ${SAMPLEDB_TEST_USE_KUBECONFIG:-} != 1 ]]; then
    miss "root: \`make test\` runs real PostgreSQL on the local cluster's real node (kubelet, containerd: mounts," \
      "cgroups, network namespaces, iptables), which needs root ($sudo_hint); or run it against a cluster of" \
      "yours with KUBECONFIG=... SAMPLEDB_TEST_USE_KUBECONFIG=1 make test."
  fi
fi

if ! command -v apt-get >/dev/null; then
  # only a problem when bootstrap would have to install something: its list is the authority
  for tool in openssl curl promtool shellcheck; do
    command -v "$tool" >/dev/null || miss "$tool: not found and no apt-get to install it (hack/bootstrap.sh" \
      "installs the Debian packages it needs; on another distribution install $tool yourself)"
  done
elif [[ $(id -u) != 0 ]] && ! command -v sudo >/dev/null; then
  note "not root and no sudo: hack/bootstrap.sh can install missing Debian packages only through sudo"
fi

# version_at_least HAVE WANT (dotted numbers)
version_at_least() { [[ $(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1) == "$2" ]]; }

if [[ ! -x $repo/.venv/bin/python ]]; then
  if ! command -v python3 >/dev/null; then
    miss "Python $PY_MIN+: python3 is not on PATH (apt-get install python3 python3-venv)"
  else
    py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 0)
    if ! version_at_least "$py" "$PY_MIN"; then
      miss "Python $PY_MIN+: $(command -v python3) is $py"
    elif ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
      miss "Python's venv module: $(command -v python3) cannot make a virtualenv (apt-get install python3-venv)"
    fi
  fi
fi

if command -v go >/dev/null; then
  have=$(go env GOVERSION 2>/dev/null | sed -E 's/^go//; s/[^0-9.].*$//')
  version_at_least "${have:-0}" "$GO_MIN" || miss "Go $GO_MIN+: $(command -v go) is ${have:-of an unknown version}" \
    "(https://go.dev/dl, or your distribution's golang-$GO_MIN package)"
else
  where=
  for candidate in /usr/local/go/bin/go /usr/lib/go-*/bin/go "$HOME"/go/bin/go "$HOME"/sdk/go*/bin/go; do
    [[ -x $candidate ]] && { where=$candidate; break; }
  done
  if [[ -n $where ]]; then
    miss "Go $GO_MIN+ on PATH: not on PATH ($PATH), but there is $where: export PATH=$(dirname "$where"):\$PATH"
  else
    miss "Go $GO_MIN+: not on PATH ($PATH) nor in /usr/local/go/bin, /usr/lib/go-*/bin, ~/go/bin, ~/sdk;" \
      "install it (https://go.dev/dl, or your distribution's golang-$GO_MIN package)"
  fi
fi

probe=$cache
while [[ ! -d $probe ]]; do probe=$(dirname "$probe"); done
free_gib=$(( $(df -Pk "$probe" | awk 'NR==2 {print $4}') / 1024 / 1024 ))
if [[ -d $cache/images ]]; then want=$WARM_GIB; else want=$FIRST_RUN_GIB; fi
if (( free_gib < WARM_GIB )); then
  miss "disk: $free_gib GiB free under $probe; a run needs at least $WARM_GIB GiB there, a first run about" \
    "$FIRST_RUN_GIB GiB (SAMPLEDB_CACHE moves the cache elsewhere)"
elif [[ $want == "$FIRST_RUN_GIB" ]]; then
  note "first run: the control plane, kwok and the S3 server are built from the Go module proxy and the" \
    "PostgreSQL and operator images from Debian's packages into $cache (10-20 minutes; later runs reuse them)"
  (( free_gib >= FIRST_RUN_GIB )) || note "only $free_gib GiB free under $probe: a first run needs about" \
    "$FIRST_RUN_GIB GiB (SAMPLEDB_CACHE moves the cache elsewhere)"
fi

if ((${#missing[@]})); then
  echo "make $mode cannot start on this machine:" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  exit 1
fi
exit 0
