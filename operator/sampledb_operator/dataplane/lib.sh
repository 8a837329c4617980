# shellcheck shell=bash
# shellcheck disable=SC2034  # the constants and variables here are used by the scripts that source it
# sampledb data plane: helpers sourced by every script in this directory.
#
# Invariants:
# - Connection settings come only from libpq's environment (PGHOST, PGPORT, PGUSER, PGPASSWORD,
#   PGDATABASE); nothing here prints the environment or a password, and no script uses `set -x`.
# - Every script ends with exactly one JSON result line (to $RESULT_FILE if set, else as the last
#   line of stdout) and one human-readable line on stderr for failures.
# - Exit codes are the SDB_EXIT_* values below; an unexpected failure maps to SDB_EXIT_INTERNAL, so a
#   stray exit status of a client tool (psql exits 3, for instance) is never mistaken for one of them.

SDB_EXIT_OK=0
SDB_EXIT_INTERNAL=1    # unexpected failure of a command
SDB_EXIT_CONFIG=2      # missing or invalid settings or input files
SDB_EXIT_DRIFT=3       # init SQL or an applied migration changed since it ran, or out-of-order migration
SDB_EXIT_INTEGRITY=4   # a backup's checksum does not match its metadata, or metadata is unreadable
SDB_EXIT_NOT_READY=5   # the server did not accept connections in time
SDB_EXIT_SQL=6         # SQL failed (init SQL, a migration, a restore, a verification's restore)
SDB_EXIT_DUMP=7        # pg_dump / pg_dumpall failed
SDB_EXIT_VERIFY=8      # upgrade or backup verification found different data
SDB_EXIT_CONNECT=9     # cannot connect or authenticate (server up but refusing us, or unreachable)

SDB_SCRIPT=${SDB_SCRIPT:-$(basename "${0%.sh}")}
SDB_RESULT_DONE=0
SDB_CLEANUPS=()
SDB_MESSAGE_MAX=1000 # characters; keeps the result line under the 4 KiB termination message

# json_str VALUE: VALUE as a JSON string literal (control characters escaped or dropped).
json_str() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    s=${s//$'\t'/\\t}
    s=$(printf '%s' "$s" | tr -d '\000-\010\013\014\016-\037\177')
    printf '"%s"' "$s"
}

# one_line TEXT: TEXT on a single line (newlines become " | "), cut to SDB_MESSAGE_MAX bytes.
one_line() {
    local s=$1
    s=${s//$'\r'/}
    s=${s//$'\n'/ | }
    s=${s//$'\t'/ }
    printf '%s' "${s:0:$SDB_MESSAGE_MAX}"
}

exec {SDB_LOG_FD}>&2 # log lines still reach stderr while a cleanup's own output is discarded
log() {
    printf 'sampledb-%s: %s\n' "$SDB_SCRIPT" "$(one_line "$*")" >&"$SDB_LOG_FD"
}

# emit_result OK(true|false) CODE MESSAGE [EXTRA]: write the result line. EXTRA is a JSON fragment
# of further members without braces, e.g. "\"name\":\"x\",\"size\":3".
emit_result() {
    local ok=$1 code=$2 message=$3 extra=${4:-} line
    line="{\"script\":$(json_str "$SDB_SCRIPT"),\"ok\":$ok,\"code\":$code,\"message\":$(json_str "$(one_line "$message")")"
    if [[ -n $extra ]]; then
        line+=",$extra"
    fi
    line+="}"
    if [[ -n ${RESULT_FILE:-} ]]; then
        printf '%s\n' "$line" >"$RESULT_FILE"
    else
        printf '%s\n' "$line"
    fi
    SDB_RESULT_DONE=1
}

# succeed MESSAGE [EXTRA]: report success and exit 0.
succeed() {
    log "$1"
    emit_result true 0 "$1" "${2:-}"
    exit "$SDB_EXIT_OK"
}

# die CODE MESSAGE [EXTRA]: report failure and exit CODE.
die() {
    local code=$1 message=$2
    log "error: $message"
    emit_result false "$code" "$message" "${3:-}"
    exit "$code"
}

# on_cleanup COMMAND...: run COMMAND (a function name and args) when the script exits, last first.
on_cleanup() {
    SDB_CLEANUPS+=("$*")
}

_sdb_on_err() {
    SDB_FAILED_LINE=$1
    SDB_FAILED_CMD=$2
}

# run_cleanups: the on_cleanup commands, last first (each once; failures ignored).
run_cleanups() {
    local i
    for ((i = ${#SDB_CLEANUPS[@]} - 1; i >= 0; i--)); do
        eval "${SDB_CLEANUPS[$i]}" >/dev/null 2>&1 || true
    done
    SDB_CLEANUPS=()
}

_sdb_on_exit() {
    local rc=$?
    set +e
    run_cleanups
    if [[ $SDB_RESULT_DONE -eq 0 ]]; then
        if [[ $rc -eq 0 ]]; then
            emit_result true 0 "done"
        else
            local what="unexpected failure (exit $rc) at line ${SDB_FAILED_LINE:-?}: ${SDB_FAILED_CMD:-?}"
            log "error: $what"
            emit_result false "$SDB_EXIT_INTERNAL" "$what"
            exit "$SDB_EXIT_INTERNAL"
        fi
    fi
    exit "$rc"
}

trap '_sdb_on_err "$LINENO" "$BASH_COMMAND"' ERR
trap _sdb_on_exit EXIT
trap 'SDB_FAILED_CMD="terminated by a signal"; exit 143' TERM
trap 'SDB_FAILED_CMD="interrupted"; exit 130' INT

# require_env NAME...: fail with SDB_EXIT_CONFIG unless every NAME is set and non-empty.
require_env() {
    local name
    for name in "$@"; do
        if [[ -z ${!name:-} ]]; then
            die "$SDB_EXIT_CONFIG" "missing required setting $name"
        fi
    done
}

# check_name VALUE WHAT: fail unless VALUE is a safe file name stem ([A-Za-z0-9][A-Za-z0-9._-]*).
check_name() {
    if [[ ! $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$ ]]; then
        die "$SDB_EXIT_CONFIG" "invalid $2 '$1': use letters, digits, '.', '_' and '-'"
    fi
}

# sql ARGS...: psql that never reads ~/.psqlrc, never prompts for a password, stops on the first error.
sql() {
    psql -X -w -v ON_ERROR_STOP=1 -q "$@"
}

# sql_value QUERY: the single value QUERY returns (unaligned, tuples only).
sql_value() {
    sql -At -c "$1"
}

# connect_check: fail with SDB_EXIT_CONNECT unless a trivial query succeeds; sets SDB_SERVER_VERSION.
connect_check() {
    local err
    if ! SDB_SERVER_VERSION=$(sql -At -c 'SHOW server_version' 2>&1); then
        err=$SDB_SERVER_VERSION
        SDB_SERVER_VERSION=
        die "$SDB_EXIT_CONNECT" "cannot connect to the database: $err"
    fi
}

# sha256_of FILE: the file's hex SHA-256.
sha256_of() {
    local out
    out=$(sha256sum -- "$1")
    printf '%s' "${out%% *}"
}

# first_error FILE: the most useful line of a client's stderr (the first ERROR/FATAL line, else the
# first non-empty line), without psql's "psql:file:line:" prefix.
first_error() {
    local line
    line=$(grep -m1 -E '(ERROR|FATAL|error):' -- "$1" || true)
    if [[ -z $line ]]; then
        line=$(grep -m1 -v -E '^[[:space:]]*$' -- "$1" || true)
    fi
    if [[ $line =~ ^psql:([^:]*):([0-9]+):\ (.*)$ ]]; then
        line=${BASH_REMATCH[3]}
        if [[ ${BASH_REMATCH[1]} != "<stdin>" ]]; then
            line+=" (${BASH_REMATCH[1]##*/} line ${BASH_REMATCH[2]})"
        fi
    fi
    printf '%s' "${line:-no error output}"
}

# sql_error_withheld FILE: first_error of a psql run with VERBOSITY=verbose, without any text of the
# SQL: the server's first line keeps its SQLSTATE, its words and the file's line number, but the
# "at or near ..." fragment is cut and the text from the first to the last double quote (identifiers,
# literal values the server quotes) becomes "…"; psql's "LINE n: ..." context, DETAIL and QUERY
# lines are never read. For SQL that may hold secrets (init SQL from a Secret), whose errors go to
# the Job's result and logs.
sql_error_withheld() {
    local line where=
    if ! grep -q -E '(ERROR|FATAL|error):' -- "$1"; then
        printf 'psql failed without an error line (its output is withheld)'
        return 0
    fi
    line=$(first_error "$1")
    if [[ $line =~ ^(.*)(\ \([^\(\)]*\ line\ [0-9]+\))$ ]]; then
        line=${BASH_REMATCH[1]}
        where=${BASH_REMATCH[2]}
    fi
    line=${line%% at or near *}
    # from the first to the last quote; a single unpaired quote: from it to the end
    line=$(sed -E 's/".*"/"…"/; /^[^"]*"[^"]*$/s/"[^"]*$/"…/' <<<"$line")
    printf '%s%s' "$line" "$where"
}

# make_temp_dir: set SDB_TMP to a private (0700) temporary directory that is removed at exit.
make_temp_dir() {
    SDB_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sampledb-${SDB_SCRIPT}.XXXXXX")
    chmod 0700 "$SDB_TMP"
    on_cleanup "rm -rf -- '$SDB_TMP'"
}

# now_utc: the current time as RFC 3339 UTC.
now_utc() {
    date -u +%Y-%m-%dT%H:%M:%SZ
}

# now_us: the current time in microseconds since the epoch.
now_us() {
    printf '%s' "${EPOCHREALTIME//[!0-9]/}"
}

# seconds_since START_US: the time since START_US (now_us) in seconds, one decimal.
seconds_since() {
    local us=$(($(now_us) - $1))
    printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}

# run_guarded CONTROL_SQL ERR_FILE PSQL_ARGS...: run a psql control script (from a string) that
# brackets a user SQL file in one transaction and prints "SDB_OUTCOME=<word> [detail]" on stdout.
# Sets SDB_OUTCOME and SDB_DETAIL; on a psql failure sets SDB_OUTCOME=failed and leaves psql's
# stderr in ERR_FILE. The user file's own output is discarded.
run_guarded() {
    local control=$1 err_file=$2 out rc=0
    shift 2
    if [[ -n ${SAMPLEDB_OWNER_ROLE:-} ]]; then
        set -- "$@" -v sdb_owner="$SAMPLEDB_OWNER_ROLE"
    fi
    out=$(sql -At "$@" -f - <<<"$control" 2>"$err_file") || rc=$?
    SDB_OUTCOME=failed
    SDB_DETAIL=
    if [[ $rc -eq 0 ]]; then
        local line
        line=$(grep -m1 '^SDB_OUTCOME=' <<<"$out" || true)
        line=${line#SDB_OUTCOME=}
        SDB_OUTCOME=${line%% *}
        if [[ $line == *" "* ]]; then
            SDB_DETAIL=${line#* }
        fi
        if [[ -z $SDB_OUTCOME ]]; then
            SDB_OUTCOME=failed
            printf 'control script printed no outcome\n' >>"$err_file"
        fi
    fi
}

# The SQL that runs a user file (psql variable sdb_file) inside the current transaction, discarding
# its output, then sets psql variable sdb_intx to whether the transaction is still the one opened
# by the control script (a COMMIT or ROLLBACK in the user file ends it and resets the guard).
# With $SAMPLEDB_OWNER_ROLE (psql variable sdb_owner: run_guarded sets it), the file runs as that
# role (SET ROLE), so what it creates is the application's; a file that needs the superuser says
# RESET ROLE first. Either way the role is reset after it.
# shellcheck disable=SC2016  # psql text, not shell
SDB_GUARDED_INCLUDE='
\if :{?sdb_owner}
SET ROLE :"sdb_owner";
\endif
\o /dev/null
\i :sdb_file
\o
SELECT coalesce(current_setting($$sampledb.guard$$, true), $$$$) = $$on$$ AS sdb_intx \gset
RESET ROLE;
'

# meta_field FILE KEY: a string or number member of a backup's one-line metadata JSON (written by
# backup.sh), read from the part before "stats" (whose keys are table names); empty if absent.
meta_field() {
    sed -n -E -e 's/,"stats":.*$//' -e "s/.*\"$2\":(\"([^\"]*)\"|([0-9]+)).*/\2\3/p" -- "$1" | head -n1
}

# ---- table statistics: recorded by backup.sh (in the dump's snapshot), recomputed by verify.sh;
# recorded and recomputed by verify-archive.sh (a restore point's snapshot, its recovered copy)
# What is counted: ordinary tables (relkind r, partitions included, partitioned parents not) outside
# pg_catalog, information_schema, pg_toast and temporary schemas, that no extension owns (pg_dump
# leaves their data out). Per table: the row count and an order-independent checksum, md5 of the
# two 64-bit halves of each row text's md5 summed over all rows (exact numeric sums: no sort, no
# memory per row). Large objects: count, and the same sum over md5(oid || ':' || md5(contents)).
# The settings below fix every output format a row's text depends on, so two servers (also two
# majors) print the same row the same way. It is a consistency check, not a cryptographic one:
# the dump file's integrity is its SHA-256.
SDB_STATS_METHOD=row-md5-sum128-v1
SDB_STATS_SETTINGS="SET extra_float_digits = 3;
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET TimeZone = 'UTC';
SET bytea_output = 'hex';
SET lc_monetary = 'C';
SET search_path = pg_catalog;
SET row_security = off;
SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;"
SDB_STATS_RELATIONS="SELECT n.nspname, c.relname FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND c.relpersistence <> 't'
  AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::regclass
                  AND d.objid = c.oid AND d.deptype = 'e')"
# Locks what the statistics read (ACCESS SHARE, as pg_dump does), so no TRUNCATE or table rewrite
# (neither is MVCC-safe) changes a table between the snapshot and its statistics.
SDB_STATS_LOCK_SQL="SELECT format('LOCK TABLE ONLY %I.%I IN ACCESS SHARE MODE', nspname, relname)
FROM ($SDB_STATS_RELATIONS) AS rel \gexec"
# Sets the psql variables sdb_tables ({"<schema>.<table>": {"rows": N, "checksum": "..."}}, names
# quoted as by format('%I.%I')) and sdb_lobs ({"count": N, "checksum": "..."}), and prints each as
# one line, SDB_TABLES=<json> and SDB_LOBS=<json>. A failed query leaves its line out.
# shellcheck disable=SC2016  # psql text, not shell
SDB_STATS_SQL='\unset sdb_q
\unset sdb_tables
\unset sdb_lobs
SELECT coalesce(string_agg(format(
    $f$SELECT %L AS t, count(*) AS n, md5(coalesce(sum(($x$x$x$ || substr(h, 1, 16))::bit(64)::bigint::numeric), 0)::text
       || $x$:$x$ || coalesce(sum(($x$x$x$ || substr(h, 17, 16))::bit(64)::bigint::numeric), 0)::text) AS c
       FROM (SELECT md5((r.*)::text) AS h FROM %I.%I AS r) AS s$f$,
    format($f$%I.%I$f$, nspname, relname), nspname, relname), $$ UNION ALL $$ ORDER BY nspname, relname),
  $$SELECT NULL::text AS t, 0::bigint AS n, NULL::text AS c WHERE false$$) AS sdb_q
FROM ('"$SDB_STATS_RELATIONS"') AS rel \gset
SELECT coalesce(jsonb_object_agg(t, jsonb_build_object($$rows$$, n, $$checksum$$, c)), $${}$$)::text AS sdb_tables
FROM (:sdb_q) AS q \gset
SELECT $$SDB_TABLES=$$ || :'"'sdb_tables'"';
SELECT jsonb_build_object($$count$$, count(*), $$checksum$$,
    md5(coalesce(sum(($$x$$ || substr(h, 1, 16))::bit(64)::bigint::numeric), 0)::text
        || $$:$$ || coalesce(sum(($$x$$ || substr(h, 17, 16))::bit(64)::bigint::numeric), 0)::text))::text AS sdb_lobs
FROM (SELECT md5(oid::text || $$:$$ || md5(lo_get(oid))) AS h FROM pg_catalog.pg_largeobject_metadata) AS s \gset
SELECT $$SDB_LOBS=$$ || :'"'sdb_lobs'"';'

# stats_object TABLES_JSON LOBS_JSON: the statistics as backup.sh records them under "stats".
stats_object() {
    printf '{"method":"%s","tables":%s,"large_objects":%s}' "$SDB_STATS_METHOD" "$1" "${2:-null}"
}

# ---- psql sessions held open by a coprocess: `coproc NAME { exec psql -X -w -q -At -v ON_ERROR_STOP=0 ...; }`
# session_run NAME SQL: run SQL in the coprocess NAME (the array bash's coproc made: its output and
# input descriptors); SDB_SESSION_OUT holds the output lines. False once psql has ended.
session_run() {
    local -n _sdb_session=$1
    local line marker="SDB_DONE_${RANDOM}_$RANDOM"
    SDB_SESSION_OUT=()
    [[ -n ${_sdb_session[1]:-} ]] || return 1
    printf '%s\n\\echo %s\n' "$2" "$marker" >&"${_sdb_session[1]}" || return 1
    while IFS= read -r line <&"${_sdb_session[0]}"; do
        if [[ $line == "$marker" ]]; then
            return 0
        fi
        SDB_SESSION_OUT+=("$line")
    done
    return 1
}

# session_line PREFIX: print the rest of the first line of SDB_SESSION_OUT that starts with PREFIX;
# false if none.
session_line() {
    local line
    for line in "${SDB_SESSION_OUT[@]}"; do
        if [[ $line == "$1"* ]]; then
            printf '%s' "${line#"$1"}"
            return 0
        fi
    done
    return 1
}

# session_end NAME PID: end the coprocess NAME (PID its NAME_PID), committing nothing still open.
session_end() {
    local -n _sdb_session=$1
    if [[ -n ${_sdb_session[1]:-} ]] && kill -0 "$2" 2>/dev/null; then
        { printf 'ROLLBACK;\n\\q\n' >&"${_sdb_session[1]}"; } 2>/dev/null || true
    fi
    wait "$2" 2>/dev/null || true
}

# ---- comparison of recorded statistics with a database's (verify.sh, verify-archive.sh)
# After SDB_STATS_SQL in the same psql run: reads the recorded statistics with pg_read_binary_file
# (psql variable sdb_meta: an absolute path the server can read; sdb_member: the member of that
# JSON object holding them, or '' for the whole object), compares them with :sdb_tables and
# :sdb_lobs, and prints SDB_VERDICT (verified, mismatch, or unrecorded when the file has no
# statistics of method :sdb_method), SDB_COUNTS ("tables rows mismatched large_objects" of the
# database), SDB_LOBS_PROBLEM, SDB_NAMES (the tables that differ, about 400 bytes at most) and
# SDB_MISMATCHES (a JSON array, cut at :sdb_report bytes). Table names and row counts only.
# shellcheck disable=SC2016  # psql text, not shell
SDB_COMPARE_SQL='\if :{?sdb_lobs}
\else
\set sdb_lobs null
\endif
\if :{?sdb_tables}
WITH meta AS (
    SELECT CASE WHEN s->>$$method$$ = :'"'sdb_method'"' AND jsonb_typeof(s->$$tables$$) = $$object$$ THEN s END AS s
    FROM (SELECT CASE WHEN :'"'sdb_member'"' = $$$$ THEN j ELSE j -> :'"'sdb_member'"' END AS s
          FROM (SELECT convert_from(pg_read_binary_file(:'"'sdb_meta'"'), $$UTF8$$)::jsonb AS j) AS f) AS m),
rec AS (SELECT key AS t, value AS v FROM meta, jsonb_each(coalesce(meta.s->$$tables$$, $${}$$))),
act AS (SELECT key AS t, value AS v FROM jsonb_each(:'"'sdb_tables'"'::jsonb)),
cmp AS (
    SELECT t, (rec.v->>$$rows$$)::bigint AS expected_rows, (act.v->>$$rows$$)::bigint AS actual_rows,
           CASE WHEN act.v IS NULL THEN $$missing$$ WHEN rec.v IS NULL THEN $$unexpected$$
                WHEN rec.v->$$rows$$ <> act.v->$$rows$$ THEN $$rows$$
                WHEN rec.v->$$checksum$$ IS DISTINCT FROM act.v->$$checksum$$ THEN $$checksum$$ END AS problem
    FROM rec FULL JOIN act USING (t)
    WHERE (SELECT s IS NOT NULL FROM meta)),
bad AS (SELECT *, sum(octet_length(t) + 80) OVER (ORDER BY t) AS used FROM cmp WHERE problem IS NOT NULL),
lobs AS (
    SELECT r AS recorded, a AS actual,
           CASE WHEN r IS NULL OR jsonb_typeof(r) <> $$object$$ THEN $$not-recorded$$
                WHEN a IS NULL OR jsonb_typeof(a) <> $$object$$ THEN $$not-computed$$
                WHEN r->$$count$$ <> a->$$count$$ THEN $$count$$
                WHEN r->$$checksum$$ IS DISTINCT FROM a->$$checksum$$ THEN $$checksum$$ END AS problem
    FROM (SELECT (SELECT s->$$large_objects$$ FROM meta) AS r, :'"'sdb_lobs'"'::jsonb AS a) AS x)
SELECT $$SDB_VERDICT=$$ || CASE WHEN (SELECT s IS NULL FROM meta) THEN $$unrecorded$$
           WHEN EXISTS (SELECT FROM bad) OR (SELECT problem IN ($$count$$, $$checksum$$) FROM lobs) THEN $$mismatch$$
           ELSE $$verified$$ END
UNION ALL SELECT $$SDB_COUNTS=$$ || (SELECT count(*) FROM act) || $$ $$
    || (SELECT coalesce(sum((v->>$$rows$$)::bigint), 0) FROM act) || $$ $$ || (SELECT count(*) FROM bad) || $$ $$
    || coalesce((SELECT actual->>$$count$$ FROM lobs), $$0$$)
UNION ALL SELECT $$SDB_LOBS_PROBLEM=$$ || coalesce((SELECT problem FROM lobs), $$$$)
UNION ALL SELECT $$SDB_NAMES=$$ || coalesce((SELECT string_agg(t || $$ ($$ || problem || $$)$$, $$, $$ ORDER BY t)
    FROM bad WHERE used <= 400), $$$$)
UNION ALL SELECT $$SDB_MISMATCHES=$$ || coalesce((SELECT jsonb_agg(jsonb_build_object($$table$$, t, $$problem$$, problem,
    $$expected_rows$$, expected_rows, $$actual_rows$$, actual_rows) ORDER BY t) FROM bad WHERE used <= :sdb_report), $$[]$$)::text;
\endif'

# compare_stats FILE MEMBER REPORT_BYTES ERR_FILE [PSQL_ARGS...]: compute lib.sh's statistics of the
# database psql connects to (its environment and PSQL_ARGS, e.g. -d CONNINFO) and compare them with
# those recorded in FILE (absolute, readable by the server: it reads it) at MEMBER ('' for the whole
# object; backup.sh's metadata has them at "stats"). Sets the associative array SDB_COMPARE: verdict
# (verified, mismatch or unrecorded; empty when the statistics could not be computed, psql's error in
# ERR_FILE), tables, rows, mismatched, large_objects (of the database), lobs_problem (count,
# checksum, not-recorded, not-computed or empty), names (the tables that differ, "t (problem), ...")
# and mismatches (a JSON array of {table, problem, expected_rows, actual_rows}, cut at REPORT_BYTES).
compare_stats() {
    local file=$1 member=$2 report=$3 err=$4 out tables rows mismatched lobs
    shift 4
    out=$(sql -At -v ON_ERROR_STOP=0 -v sdb_meta="$file" -v sdb_member="$member" -v sdb_method="$SDB_STATS_METHOD" \
        -v sdb_report="$report" "$@" -f - 2>"$err" <<<"$SDB_STATS_SETTINGS
$SDB_STATS_SQL
$SDB_COMPARE_SQL") || true
    read -r tables rows mismatched lobs <<<"$(line_field "$out" SDB_COUNTS)"
    declare -gA SDB_COMPARE=([verdict]="$(line_field "$out" SDB_VERDICT)" [tables]="${tables:-0}" [rows]="${rows:-0}"
        [mismatched]="${mismatched:-0}" [large_objects]="${lobs:-0}" [lobs_problem]="$(line_field "$out" SDB_LOBS_PROBLEM)"
        [names]="$(line_field "$out" SDB_NAMES)" [mismatches]="$(line_field "$out" SDB_MISMATCHES)")
    SDB_COMPARE[mismatches]=${SDB_COMPARE[mismatches]:-[]}
}

# line_field TEXT NAME: the rest of TEXT's first line that starts with NAME= (empty if none).
line_field() {
    sed -n "s/^$2=//p" <<<"$1" | head -n1
}

# ---- object store (Barman Cloud over S3): the settings of archive-wal.sh, base-backup.sh, recover.sh
# SAMPLEDB_S3_DESTINATION (s3://BUCKET[/PATH]), SAMPLEDB_S3_SERVER (the database's name in the store),
# optional SAMPLEDB_S3_ENDPOINT (https://host[:port]), optional SAMPLEDB_S3_ADDRESSING_STYLE (auto,
# virtual or path; default path with an endpoint, auto without), AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY (boto3 reads both from the environment; never on a command line, never
# printed), optional AWS_DEFAULT_REGION and AWS_CA_BUNDLE (a CA file for the endpoint's certificate).

# store_url_ok VALUE: VALUE is a barman destination URL, s3://BUCKET or s3://BUCKET/PATH.
store_url_ok() {
    [[ $1 =~ ^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9._-]+)*/?$ && $1 != *..* ]]
}

# store_server_ok VALUE: VALUE is a server name (a path element of the store: letters, digits, . _ -).
store_server_ok() {
    [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ ]]
}

# store_from_recovery_settings: when the source store of a recovery is named apart
# (SAMPLEDB_RECOVERY_ACCESS_KEY_ID, _SECRET_ACCESS_KEY, _ENDPOINT, _REGION, _CA_BUNDLE: a database may
# recover from one store and archive to another), export them as the store settings below, in place of
# the archive's; without SAMPLEDB_RECOVERY_ACCESS_KEY_ID nothing changes (one store for both).
store_from_recovery_settings() {
    [[ -n ${SAMPLEDB_RECOVERY_ACCESS_KEY_ID+set} ]] || return 0
    unset AWS_DEFAULT_REGION AWS_CA_BUNDLE SAMPLEDB_S3_ENDPOINT
    export AWS_ACCESS_KEY_ID=$SAMPLEDB_RECOVERY_ACCESS_KEY_ID
    export AWS_SECRET_ACCESS_KEY=${SAMPLEDB_RECOVERY_SECRET_ACCESS_KEY-}
    [[ -z ${SAMPLEDB_RECOVERY_ENDPOINT:-} ]] || export SAMPLEDB_S3_ENDPOINT=$SAMPLEDB_RECOVERY_ENDPOINT
    [[ -z ${SAMPLEDB_RECOVERY_REGION:-} ]] || export AWS_DEFAULT_REGION=$SAMPLEDB_RECOVERY_REGION
    [[ -z ${SAMPLEDB_RECOVERY_CA_BUNDLE:-} ]] || export AWS_CA_BUNDLE=$SAMPLEDB_RECOVERY_CA_BUNDLE
    return 0
}

# store_setup: check the store's connection settings (not destinations or server names); sets
# SDB_STORE_OPTS, the barman-cloud options they give. On a bad setting, sets SDB_STORE_PROBLEM and
# returns 1 (the caller reports it: archive-wal.sh has no result line).
store_setup() {
    local name style
    SDB_STORE_OPTS=(--cloud-provider aws-s3)
    SDB_STORE_PROBLEM=
    for name in AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY; do
        if [[ -z ${!name:-} ]]; then
            SDB_STORE_PROBLEM="missing required setting $name"
            return 1
        fi
        if [[ ${!name} == *[[:space:]]* ]]; then
            SDB_STORE_PROBLEM="$name holds white space"
            return 1
        fi
    done
    style=${SAMPLEDB_S3_ADDRESSING_STYLE:-}
    if [[ -n ${SAMPLEDB_S3_ENDPOINT:-} ]]; then
        if [[ ! $SAMPLEDB_S3_ENDPOINT =~ ^https?://([A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])(:[0-9]{1,5})?/?$ ]]; then
            SDB_STORE_PROBLEM="invalid SAMPLEDB_S3_ENDPOINT '$SAMPLEDB_S3_ENDPOINT': want http(s)://host[:port]"
            return 1
        fi
        SDB_STORE_OPTS+=(--endpoint-url "${SAMPLEDB_S3_ENDPOINT%/}")
        style=${style:-path}
    fi
    if [[ -n $style ]]; then
        if [[ ! $style =~ ^(auto|virtual|path)$ ]]; then
            SDB_STORE_PROBLEM="invalid SAMPLEDB_S3_ADDRESSING_STYLE '$style': want auto, virtual or path"
            return 1
        fi
        SDB_STORE_OPTS+=(--addressing-style "$style")
    fi
    if [[ -n ${AWS_DEFAULT_REGION:-} && ! $AWS_DEFAULT_REGION =~ ^[a-z0-9][a-z0-9-]{0,39}$ ]]; then
        SDB_STORE_PROBLEM="invalid AWS_DEFAULT_REGION '$AWS_DEFAULT_REGION'"
        return 1
    fi
    if [[ -n ${AWS_CA_BUNDLE:-} && ! (-f $AWS_CA_BUNDLE && -r $AWS_CA_BUNDLE) ]]; then
        SDB_STORE_PROBLEM="AWS_CA_BUNDLE $AWS_CA_BUNDLE is not a readable file"
        return 1
    fi
    return 0
}

# store_destination_problem URL SERVER URL_SETTING SERVER_SETTING: print what is wrong with a
# destination and server name (nothing when both are valid).
store_destination_problem() {
    if [[ -z $1 ]]; then
        printf 'missing required setting %s' "$3"
    elif ! store_url_ok "$1"; then
        printf "invalid %s '%s': want s3://BUCKET or s3://BUCKET/PATH (bucket: 3-63 of a-z 0-9 . -; path: A-Z a-z 0-9 . _ - and /)" "$3" "$1"
    elif [[ -z $2 ]]; then
        printf 'missing required setting %s' "$4"
    elif ! store_server_ok "$2"; then
        printf "invalid %s '%s': use 1-128 letters, digits, '.', '_' and '-'" "$4" "$2"
    fi
}

# store_check: store_setup, then SAMPLEDB_S3_DESTINATION and SAMPLEDB_S3_SERVER; sets DEST and SERVER.
# On a bad setting, sets SDB_STORE_PROBLEM and returns 1 (the caller reports it).
store_check() {
    store_setup || return 1
    SDB_STORE_PROBLEM=$(store_destination_problem "${SAMPLEDB_S3_DESTINATION:-}" "${SAMPLEDB_S3_SERVER:-}" \
        SAMPLEDB_S3_DESTINATION SAMPLEDB_S3_SERVER)
    [[ -z $SDB_STORE_PROBLEM ]] || return 1
    DEST=${SAMPLEDB_S3_DESTINATION%/}
    SERVER=$SAMPLEDB_S3_SERVER
}

# scrub TEXT: TEXT with the store's access key id and secret key (and a session token) replaced by
# "…", for any message that quotes a client's error.
scrub() {
    local s=$1 k
    for k in "${AWS_SECRET_ACCESS_KEY:-}" "${AWS_ACCESS_KEY_ID:-}" "${AWS_SESSION_TOKEN:-}"; do
        if ((${#k} >= 4)); then
            s=${s//"$k"/…}
        fi
    done
    printf '%s' "$s"
}

# barman_error FILE: the reason in a barman-cloud command's stderr: the text after "ERROR: " of its
# last error line, without barman's "... exception: " prefix (else the last non-empty line), scrubbed.
barman_error() {
    local line
    line=$(grep -E '(ERROR|CRITICAL): ' -- "$1" | tail -n1 || true)
    if [[ -n $line ]]; then
        line=${line#*ERROR: }
        line=${line#*CRITICAL: }
        if [[ $line =~ ^Barman\ cloud\ [A-Za-z\ ]*exception:\ (.*)$ ]]; then
            line=${BASH_REMATCH[1]}
        fi
    else
        line=$(grep -v -E '^[[:space:]]*$' -- "$1" | tail -n1 || true)
    fi
    scrub "$(one_line "${line:-no error output}")"
}

# wal_in_store DESTINATION SERVER SEGMENT DIR: whether the store has the WAL file SEGMENT (fetched
# with barman-cloud-wal-restore into DIR, then removed; barman's stderr in DIR/probe.err).
wal_in_store() {
    local rc=0
    barman-cloud-wal-restore "${SDB_STORE_OPTS[@]}" "$1" "$2" "$3" "$4/probe" >/dev/null 2>"$4/probe.err" || rc=$?
    rm -f -- "$4/probe"
    return "$rc"
}

# barman_python: print the Python interpreter Barman Cloud's commands run with (the shebang of
# barman-cloud-backup: its virtualenv, with boto3); false if there is none.
barman_python() {
    local first
    first=$(head -n1 -- "$(command -v barman-cloud-backup || echo /dev/null)" 2>/dev/null || true)
    first=${first#\#!}
    first=${first%% *}
    [[ $first == /*python* && -x $first ]] || return 1
    printf '%s' "$first"
}

# catalog_python: print the Python interpreter that reads barman's JSON (python3 on PATH, else
# barman_python); false if there is none.
catalog_python() {
    if command -v python3 >/dev/null 2>&1; then
        printf 'python3'
        return 0
    fi
    barman_python
}

# The program of backup_catalog (Python standard library only).
# shellcheck disable=SC2016  # Python text, not shell
SDB_CATALOG_PY='
import datetime, json, sys

def lsn(text):
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)

def when(text):
    return datetime.datetime.fromisoformat(text)

def utc(text):
    if not text:
        return ""
    return when(text).astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")

def clean(value):
    return " ".join(str("" if value is None else value).split())

def show(prefix, b):
    fields = {"id": b.get("backup_id"), "name": b.get("backup_name"), "status": b.get("status"),
              "begin_wal": b.get("begin_wal"), "end_wal": b.get("end_wal"),
              "begin_lsn": b.get("begin_xlog"), "end_lsn": b.get("end_xlog"),
              "begin_time": utc(b.get("begin_time_iso")), "end_time": utc(b.get("end_time_iso")),
              "timeline": b.get("timeline"), "size": b.get("cluster_size"), "systemid": b.get("systemid"),
              "version": b.get("version"), "error": b.get("error"),
              "tablespaces": len(b.get("tablespaces") or []), "segment_size": b.get("xlog_segment_size")}
    for key, value in fields.items():
        print("%s%s=%s" % (prefix, key, clean(value)))

with open(sys.argv[1], encoding="utf-8") as f:
    backups = json.load(f).get("backups_list") or []
mode, arg = sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else "")
done = [b for b in backups if b.get("status") == "DONE" and b.get("end_time_iso") and b.get("end_xlog")]
done.sort(key=lambda b: (when(b["end_time_iso"]), b["backup_id"]))
print("count=%d" % len(backups))
print("done=%d" % len(done))
if done:
    show("oldest_", done[0])
    show("newest_", done[-1])
if mode == "name":
    same = [b for b in backups if arg in (b.get("backup_name"), b.get("backup_id"))]
    chosen = [b for b in done if b in same][-1:]
    print("others=%s" % clean(",".join("%s:%s" % (b.get("backup_id"), b.get("status")) for b in same if b not in chosen)))
elif mode == "latest":
    chosen = done[-1:]
elif mode == "before-time":
    target = when(arg)
    chosen = [b for b in done if when(b["end_time_iso"]) <= target][-1:]
elif mode == "before-lsn":
    target = lsn(arg)
    chosen = [b for b in done if lsn(b["end_xlog"]) <= target][-1:]
else:
    sys.exit("unknown mode " + mode)
print("found=%d" % len(chosen))
if chosen:
    show("", chosen[0])
'

# backup_catalog JSON_FILE MODE [ARG]: read barman-cloud-backup-list --format json and set the
# associative array SDB_CATALOG: count (backups listed), done (completed ones), oldest_* and newest_*
# (of the completed ones), found (0 or 1) and, for the backup chosen, id, name, status, begin_wal,
# end_wal, begin_lsn, end_lsn, begin_time, end_time (RFC 3339 UTC), timeline, size (barman's
# cluster_size), systemid, version, error, tablespaces (how many), segment_size (bytes). MODE: name NAME (a completed backup whose name or id is
# NAME; "others" lists the rest of that name as id:status), latest, before-time TIME (ISO 8601 with
# an offset: the newest that ended at or before it), before-lsn LSN (ended at or before it).
backup_catalog() {
    local py out key value
    declare -gA SDB_CATALOG=()
    py=$(catalog_python) || {
        printf 'no python3 to read the backup catalog\n' >&2
        return 1
    }
    out=$("$py" -c "$SDB_CATALOG_PY" "$@") || return 1
    while IFS= read -r key; do
        value=${key#*=}
        SDB_CATALOG[${key%%=*}]=$value
    done <<<"$out"
}

# read_result FILE KEY...: set the associative array SDB_RESULT to the members KEY of the result line
# in FILE (another script's RESULT_FILE): strings on one line, numbers and booleans as JSON writes
# them, absent or null members empty. False when FILE holds no JSON object.
read_result() {
    local py out line
    declare -gA SDB_RESULT=()
    py=$(catalog_python) || return 1
    # shellcheck disable=SC2016  # Python text, not shell
    out=$("$py" -c '
import json, sys
try:
    with open(sys.argv[1], encoding="utf-8") as f:
        r = json.loads(f.read().strip().splitlines()[-1])
except Exception:
    sys.exit(1)
for k in sys.argv[2:]:
    v = r.get(k)
    v = "" if v is None else json.dumps(v) if isinstance(v, (bool, list, dict)) else str(v)
    print("%s=%s" % (k, " ".join(v.split())))
' "$@" 2>/dev/null) || return 1
    while IFS= read -r line; do
        SDB_RESULT[${line%%=*}]=${line#*=}
    done <<<"$out"
}

# iso_time TIME: TIME (a timestamp with an offset, as PostgreSQL takes it) in the form Python's
# datetime.fromisoformat reads on every version: "T" between date and time, "Z" as +00:00, the
# offset as +HH:MM, the fraction as 6 digits.
iso_time() {
    local t=$1 frac=
    if [[ ! $t =~ ^([0-9]{4}-[0-9]{2}-[0-9]{2})[T\ ]([0-9]{2}:[0-9]{2})(:[0-9]{2})?(\.[0-9]{1,6})?\ ?(Z|z|UTC|[+-][0-9]{2}(:?[0-9]{2})?)$ ]]; then
        return 1
    fi
    local date=${BASH_REMATCH[1]} hm=${BASH_REMATCH[2]} sec=${BASH_REMATCH[3]:-:00} zone=${BASH_REMATCH[5]}
    if [[ -n ${BASH_REMATCH[4]} ]]; then
        frac=${BASH_REMATCH[4]}000000
        frac=${frac:0:7}
    fi
    case $zone in
    Z | z | UTC) zone=+00:00 ;;
    [+-][0-9][0-9]) zone+=:00 ;;
    [+-][0-9][0-9][0-9][0-9]) zone=${zone:0:3}:${zone:3:2} ;;
    esac
    printf '%sT%s%s%s%s' "$date" "$hm" "$sec" "$frac" "$zone"
}
