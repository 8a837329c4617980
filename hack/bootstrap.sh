#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine, idempotently, and fast when warm:
#   - Debian packages: PostgreSQL server (data-plane tests), Prometheus + promtool (metrics tests),
#     ShellCheck for the data-plane scripts' lint, openssl and curl (local control plane); for the real node (hack/real-node, root only): runc,
#     the CNI plugins, iptables/nftables and conntrack, and what builds its images offline
#     (mmdebstrap, buildah, busybox-static). apt-get update runs only when something is missing.
#   - the Python virtualenv .venv with the package, its dev dependencies and Barman Cloud (the
#     barman-cloud-* commands, pinned as in the PostgreSQL images by hack/images/barman-requirements.txt),
#     re-installed only when pyproject.toml or that file changes.
# The local control plane's Go binaries are built on first use by hack/build-testcluster.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"

need=()
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
command -v promtool >/dev/null || need+=(prometheus)
command -v shellcheck >/dev/null || need+=(shellcheck)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if [[ $(id -u) == 0 && ${SAMPLEDB_REAL_NODE:-1} != 0 ]]; then
  command -v runc >/dev/null || need+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null || need+=(iptables)
  command -v nft >/dev/null || need+=(nftables)
  command -v conntrack >/dev/null || need+=(conntrack)
  command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
  command -v buildah >/dev/null || need+=(buildah)
  dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
fi
if ((${#need[@]})); then
  echo "bootstrap: installing Debian packages: ${need[*]}" >&2
  apt=(apt-get)
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || { echo "bootstrap: installing ${need[*]} needs root; install them as root" \
      "(apt-get install ${need[*]}) or through sudo" >&2; exit 1; }
    apt=(sudo DEBIAN_FRONTEND=noninteractive apt-get)
  fi
  command -v apt-get >/dev/null || { echo "bootstrap: no apt-get to install ${need[*]}: install them yourself" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  "${apt[@]}" update -qq >/dev/null
  "${apt[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # The Debian packages start their services; the tests start their own servers instead.
  for svc in prometheus postgresql; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
      systemctl stop "$svc" || true
    fi
  done
fi
if [[ -x hack/install-postgres.sh ]]; then
  hack/install-postgres.sh >/dev/null
fi

command -v go >/dev/null || { echo "bootstrap: Go 1.26+ is required and is not on PATH ($PATH): see hack/prereqs.sh" >&2; exit 1; }

barman_requirements=hack/images/barman-requirements.txt
stamp=.venv/.installed-$(cat pyproject.toml "$barman_requirements" | sha256sum | cut -c1-16)
if [[ ! -f $stamp ]]; then
  echo "bootstrap: creating .venv" >&2
  [[ -x .venv/bin/python ]] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[dev]'
  # --no-deps: the file is the whole resolved set (barman's `psycopg2` is psycopg2-binary's module).
  .venv/bin/python -m pip install -q --no-deps --require-hashes -r "$barman_requirements"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
