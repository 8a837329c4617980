#!/usr/bin/env bash
# install-barman.sh ROOT WHEELS REQUIREMENTS: an mmdebstrap customize hook of hack/build-images.sh.
# Installs Barman Cloud into the rootfs ROOT (which has Debian's python3, and python3-pip-whl for the
# install only) as the virtualenv /opt/barman, with ROOT's own python, offline: the packages
# REQUIREMENTS pins (and hashes), from WHEELS (downloaded from PyPI on the host). Links every
# barman-cloud-* command into /usr/local/bin and checks that they run as the postgres user (999).
set -euo pipefail
root=$1 wheels=$2 requirements=$3
venv=/opt/barman
in_root() {
  chroot "$root" env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 "$@"
}
as_postgres() {
  chroot --userspec=999:999 "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/var/lib/postgresql \
    LANG=C.UTF-8 "$@"
}

stage=$(mktemp -d "$root/tmp/barman-wheels.XXXXXX")
cp "$wheels"/*.whl "$stage/"
cp "$requirements" "$stage/requirements.txt"
in_root python3 -m venv --without-pip "$venv"
# pip runs from Debian's wheel of it (removed afterwards), so the virtualenv carries neither pip nor
# setuptools.
pip_whl=$(cd "$root" && echo usr/share/python-wheels/pip-*.whl)
[[ -f $root/$pip_whl ]] || { echo "install-barman: no pip wheel in $root (python3-pip-whl)" >&2; exit 1; }
in_root "$venv/bin/python" "/$pip_whl/pip" install --quiet --no-index --no-cache-dir --no-compile \
  --disable-pip-version-check --no-deps --require-hashes --find-links "${stage#"$root"}" \
  --requirement "${stage#"$root"}/requirements.txt"
rm -rf "$stage"
in_root dpkg --purge python3-pip-whl >/dev/null
# The bytecode (6 MB) is compiled here: the archive command runs once per WAL segment as the postgres
# user, who cannot write it, and compiling at every run would double its start (0.7 s, not 0.35).
# Checked against the sources' hashes, not their mtimes, which the rootfs tar clamps to its start.
in_root "$venv/bin/python" -m compileall -q -j 0 --invalidation-mode checked-hash "$venv/lib" >/dev/null

# botocore's models of the AWS services that barman-cloud never calls are most of its size (about
# 28 MB): keep S3's and those of its credential providers (STS, SSO, SSO OIDC, sign-in), and every
# file beside them (endpoints, partitions, retry and default settings).
data=$(echo "$root$venv"/lib/python3*/site-packages/botocore/data)
[[ -f $data/endpoints.json && -d $data/s3 ]] || { echo "install-barman: no botocore data in $data" >&2; exit 1; }
find "$data" -mindepth 1 -maxdepth 1 -type d \
  ! -name s3 ! -name sts ! -name sso ! -name sso-oidc ! -name signin -exec rm -rf {} +
rm -f "$root$venv"/bin/Activate.ps1 "$root$venv"/bin/activate*

tools=(wal-archive wal-restore backup backup-list backup-delete backup-show restore check-wal-archive backup-keep)
mkdir -p "$root/usr/local/bin"
for tool in "$root$venv"/bin/barman-cloud-*; do
  ln -s "$venv/bin/${tool##*/}" "$root/usr/local/bin/${tool##*/}"
done
for tool in "${tools[@]}"; do
  [[ -L $root/usr/local/bin/barman-cloud-$tool ]] || { echo "install-barman: no barman-cloud-$tool" >&2; exit 1; }
done
as_postgres barman-cloud-wal-archive --version >/dev/null
as_postgres barman-cloud-backup --help >/dev/null
as_postgres "$venv/bin/python" -c 'import boto3, psycopg2; boto3.session.Session().client("s3", region_name="us-east-1")'
