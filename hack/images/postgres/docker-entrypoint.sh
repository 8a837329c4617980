#!/usr/bin/env bash
# docker-entrypoint.sh of the local PostgreSQL images (hack/build-images.sh).
#
# The behaviour of the official `postgres` image's entrypoint that the operator (and most users)
# rely on, and nothing else:
#   - `docker-entrypoint.sh postgres ARGS...` (or only flags): when $PGDATA holds no cluster yet,
#     initdb as $POSTGRES_USER (default postgres) with $POSTGRES_PASSWORD, scram-sha-256 for every
#     host connection (listening on every address comes from the image's postgresql.conf.sample,
#     which hack/build-images.sh edits as the official image's build does), create $POSTGRES_DB (default: the user's name),
#     run /docker-entrypoint-initdb.d/*.sql and *.sh on a socket-only temporary server; then exec
#     postgres in the foreground with ARGS.
#   - run as root, it makes $PGDATA and the socket directory the postgres user's, then re-runs
#     itself as that user (setpriv instead of gosu); run as any other uid, it uses that uid.
#   - any other command is exec'ed as given.
# Not covered: POSTGRES_INITDB_WALDIR, POSTGRES_HOST_AUTH_METHOD other than scram-sha-256/trust,
# *_FILE variants of the variables, compressed init scripts.
set -Eeuo pipefail

if [[ ${1:-} == -* ]]; then
  set -- postgres "$@"
fi
if [[ ${1:-} != postgres ]]; then
  exec "$@"
fi

: "${PGDATA:?PGDATA must be set}"
if [[ $(id -u) == 0 ]]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

mkdir -p "$PGDATA"
chmod 0700 "$PGDATA" 2>/dev/null || true

if [[ ! -s $PGDATA/PG_VERSION ]]; then
  POSTGRES_USER=${POSTGRES_USER:-postgres}
  POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}
  auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
  if [[ -z ${POSTGRES_PASSWORD:-} && $auth != trust ]]; then
    echo "docker-entrypoint: the database is uninitialized and POSTGRES_PASSWORD is not set" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  trap 'rm -f "$pwfile"' EXIT
  printf '%s\n' "${POSTGRES_PASSWORD:-}" > "$pwfile"
  # shellcheck disable=SC2086  # POSTGRES_INITDB_ARGS is a list of words, as in the official image
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth" \
    ${POSTGRES_INITDB_ARGS:-} -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  trap - EXIT
  printf '\nhost all all all %s\n' "$auth" >> "$PGDATA/pg_hba.conf"
  # listen_addresses = '*' comes from the image's postgresql.conf.sample, as in the official image.

  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p ${PGPORT:-5432}" -w -t 60 start >/dev/null
  psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --no-password --dbname postgres)
  if [[ $POSTGRES_DB != postgres ]]; then
    "${psql[@]}" --set db="$POSTGRES_DB" -q <<<'CREATE DATABASE :"db";'
  fi
  shopt -s nullglob
  for f in /docker-entrypoint-initdb.d/*; do
    case $f in
      *.sh) echo "docker-entrypoint: running $f" >&2; . "$f" ;;
      *.sql) echo "docker-entrypoint: running $f" >&2; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
      *) echo "docker-entrypoint: ignoring $f" >&2 ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "docker-entrypoint: PostgreSQL init process complete; ready for start up." >&2
fi

exec "$@"
