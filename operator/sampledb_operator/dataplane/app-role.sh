# shellcheck shell=bash
# sampledb data plane: the application's role, made once, at initdb. Mounted as
# /docker-entrypoint-initdb.d/sampledb-app-role.sh: the image's entrypoint (docker-entrypoint.sh, ours or the
# official image's) sources it right after initdb, while its private socket-only server runs as $POSTGRES_USER (the
# bootstrap superuser). It creates $SAMPLEDB_APP_USER with $SAMPLEDB_APP_PASSWORD: LOGIN and nothing more (no
# SUPERUSER, CREATEDB, CREATEROLE, REPLICATION or BYPASSRLS), the owner of $POSTGRES_DB and of its public schema, so
# the application creates and owns its tables and cannot read the server's files, make roles or replicate.
# Nothing is done when SAMPLEDB_APP_USER is unset or is the bootstrap superuser itself (a database whose
# application role is its superuser, the layout of earlier versions).
# The password is read by psql from the environment (\getenv), with statement logging off: never on a command line
# or in a log. A failure stops the entrypoint (set -e there), so the container restarts and says why.
if [[ -n ${SAMPLEDB_APP_USER:-} && $SAMPLEDB_APP_USER != "${POSTGRES_USER:-postgres}" ]]; then
    # shellcheck disable=SC2016  # psql text, not shell
    psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet --username "${POSTGRES_USER:-postgres}" --no-password \
        --dbname postgres --set sdb_app="$SAMPLEDB_APP_USER" --set sdb_db="${POSTGRES_DB:-${POSTGRES_USER:-postgres}}" <<'SQL'
SET log_statement = 'none';
SET log_min_error_statement = 'panic';
SET log_min_duration_statement = -1;
\getenv sdb_password SAMPLEDB_APP_PASSWORD
CREATE ROLE :"sdb_app" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'sdb_password';
ALTER DATABASE :"sdb_db" OWNER TO :"sdb_app";
\connect :"sdb_db"
ALTER SCHEMA public OWNER TO :"sdb_app";
SQL
    echo "sampledb: role $SAMPLEDB_APP_USER made, owner of database ${POSTGRES_DB:-}" >&2
fi
