#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: major upgrade into a new data directory NEW_PGDATA on the same volume.
#
# Sources of the old cluster, in order of preference:
#   pg_upgrade  OLD_BINDIR and OLD_PGDATA present, old server stopped, UPGRADE_METHOD auto|pg_upgrade
#   local       OLD_BINDIR and OLD_PGDATA present, old server stopped, UPGRADE_METHOD=logical:
#               the old server is started read-only on a private socket and dumped
#   network     otherwise (the Kubernetes flow: this image has only the new major): the running old
#               server named by the PG* variables is dumped with the new pg_dumpall; with
#               UPGRADE_FREEZE=1 (default) it is first made read-only (ALTER SYSTEM) and its other
#               sessions ended, and this is undone if the upgrade fails.
# The new cluster is built in "$NEW_PGDATA.sampledb-staging" with NEW_BINDIR (default: the
# binaries on PATH) and the old cluster's encoding, locale and checksum setting; a temporary server
# on a private unix socket restores and is verified (per-table row counts, large objects, roles,
# databases equal to the old cluster's), stopped and synced; the marker SAMPLEDB_UPGRADE_COMPLETE
# is written and the staging directory renamed to NEW_PGDATA. OLD_PGDATA is never written, except
# by starting its own server; rollback is to keep using it. A completed NEW_PGDATA is a no-op success.
#
# UPGRADE_METHOD=link: pg_upgrade --link (after pg_upgrade --check) instead of copy mode: the new
# cluster's files are hard links to the old ones. OLD_PGDATA stays usable until pg_upgrade renames
# its global/pg_control to pg_control.old, just before it links the files (the point of no return);
# a failure before that leaves it as it was. Every failure result carries "old_usable" (whether
# OLD_PGDATA still has its pg_control), and a refused check "check_failed": true.
#
# Three more stages, named by the first argument (default "upgrade", the above):
#   copy-binaries DEST  run in the OLD image (an init container): copies its PostgreSQL installation
#                       (the bin directory's parent and /usr/share/postgresql/<major>, at the same
#                       paths under DEST/root), the shared libraries its programs need (DEST/lib,
#                       the C library's own excepted) and writes DEST/bin: one wrapper per program
#                       that runs it with DEST/lib first on LD_LIBRARY_PATH. OLD_BINDIR=DEST/bin.
#   analyze             vacuumdb --all --analyze-in-stages on the server the PG* variables name
#                       (after a link upgrade: pg_upgrade carries no optimizer statistics over).
#   pg-restore-filtered BINDIR ARGS...
#                       pg_upgrade's pg_restore when the old cluster's columns carry pg_attver options
#                       (see ATTVER_LINE): BINDIR/pg_restore writes the archive as SQL, the lines
#                       matching ATTVER_LINE are dropped and BINDIR/psql runs the rest on the database
#                       and connection pg_upgrade named (--exit-on-error: ON_ERROR_STOP).
set -Eeuo pipefail

# A line `ALTER TABLE ONLY ... ALTER COLUMN ... SET (pg_attver=N);`: PostgreSQL 15 servers of the
# local cluster's image (Debian 15.20) store that column option on every column, every pg_dump
# writes it back, and a newer server refuses it ("unrecognized parameter"). Upstream PostgreSQL has
# no such option: dropping exactly these lines changes nothing for other servers.
ATTVER_LINE='^ALTER TABLE ONLY .* ALTER COLUMN .* SET \(pg_attver=[0-9]+\);$'

if [[ ${1:-} == pg-restore-filtered ]]; then
    real=${2:?pg-restore-filtered needs the real bindir}
    shift 2
    conn=() restore=() archive='' dbname=postgres
    while (($#)); do
        case $1 in
            -V | --version | -\? | --help) exec "$real/pg_restore" "$1" ;;
            -h | -p | -U | --host | --port | --username) conn+=("$1" "${2:-}") && shift ;;
            --host=* | --port=* | --username=* | -w | --no-password) conn+=("$1") ;;
            -d | --dbname) dbname=${2:-} && shift ;;
            --dbname=*) dbname=${1#*=} ;;
            -j | --jobs) shift ;;         # script output is written by one process
            --jobs=* | -j*) ;;
            -f | --file | -L | --use-list | -F | --format) restore+=("$1" "${2:-}") && shift ;;
            -*) restore+=("$1") ;;
            *) archive=$1 ;;
        esac
        shift
    done
    "$real/pg_restore" "${restore[@]}" -f - -- "$archive" |
        RE=$ATTVER_LINE LC_ALL=C awk '$0 !~ ENVIRON["RE"]' |
        "$real/psql" -X -q -v ON_ERROR_STOP=1 "${conn[@]}" -d "$dbname" -f - >/dev/null
    exit
fi

SDB_SCRIPT=upgrade
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

MARKER=SAMPLEDB_UPGRADE_COMPLETE
TEMP_PORT=50432
# The C library's own objects: the new image's are used (copying them would mix two C libraries).
LIBC_OBJECTS='^(ld-linux.*|libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl)\.so'

# copy_binaries DEST: this image's PostgreSQL installation, its libraries and wrappers into DEST.
copy_binaries() {
    local dest=${1%/} postgres bindir prefix version major lib tool count
    if [[ -z $dest || ! -d $dest || ! -w $dest ]]; then
        die "$SDB_EXIT_CONFIG" "copy-binaries needs a writable directory (got '${1:-}')"
    fi
    postgres=$(command -v postgres || true)
    [[ -n $postgres ]] || die "$SDB_EXIT_CONFIG" "no postgres on PATH in this image"
    bindir=$(dirname -- "$(realpath -- "$postgres")")
    prefix=$(dirname -- "$bindir")
    version=$("$bindir/postgres" --version)
    major=$(sed -E 's/[^0-9]*([0-9]+).*/\1/' <<<"$version")
    mkdir -p -- "$dest/lib" "$dest/bin"
    for tool in "$prefix" "/usr/share/postgresql/$major"; do # the same paths under DEST/root
        if [[ -d $tool ]]; then
            mkdir -p -- "$dest/root$(dirname -- "$tool")"
            cp -a -- "$tool" "$dest/root$tool"
        fi
    done
    count=0
    while IFS= read -r lib; do
        if [[ ! ${lib##*/} =~ $LIBC_OBJECTS ]]; then
            cp -L -- "$lib" "$dest/lib/"
            count=$((count + 1))
        fi
    done < <(for tool in "$bindir"/* "$prefix"/lib/*.so; do
        # llvmjit.so needs LLVM (100 MB); without it the old server runs without JIT
        if [[ -f $tool && ${tool##*/} != llvmjit.so ]]; then ldd -- "$tool" 2>/dev/null || true; fi
    done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | LC_ALL=C sort -u)
    for tool in "$bindir"/*; do
        if [[ -f $tool && -x $tool ]]; then
            # shellcheck disable=SC2016  # the wrapper expands them when it runs
            printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexport LD_LIBRARY_PATH\nexec %s "$@"\n' \
                "'$dest/lib'" "'$dest/root$tool'" >"$dest/bin/${tool##*/}"
            chmod 0755 -- "$dest/bin/${tool##*/}"
        fi
    done
    "$dest/bin/postgres" --version >/dev/null ||
        die "$SDB_EXIT_INTERNAL" "the copied $version does not run from $dest/bin"
    succeed "copied $version from $prefix and $count libraries into $dest" \
        "\"old_bindir\":$(json_str "$dest/bin"),\"old_version\":$(json_str "$version")"
}

# analyze_all: optimizer statistics for every database, the cheap stages first.
analyze_all() {
    make_temp_dir
    connect_check
    log "vacuumdb --all --analyze-in-stages on $SDB_SERVER_VERSION"
    if ! vacuumdb -w --all --analyze-in-stages >/dev/null 2>"$SDB_TMP/analyze.err"; then
        die "$SDB_EXIT_SQL" "vacuumdb --analyze-in-stages failed: $(first_error "$SDB_TMP/analyze.err")"
    fi
    succeed "analyzed every database of $SDB_SERVER_VERSION" "\"outcome\":\"analyzed\""
}

case ${1:-upgrade} in
    copy-binaries) copy_binaries "${2:-}" ;;
    analyze) analyze_all ;;
    upgrade) ;;
    *) die "$SDB_EXIT_CONFIG" "unknown stage '$1' (upgrade, copy-binaries or analyze)" ;;
esac

require_env NEW_PGDATA
new_dir=${NEW_PGDATA%/}
staging="$new_dir.sampledb-staging"
method=${UPGRADE_METHOD:-auto}
case $method in auto | logical | pg_upgrade | link) ;; *) die "$SDB_EXIT_CONFIG" "invalid UPGRADE_METHOD '$method'" ;; esac

if [[ -f $new_dir/$MARKER ]]; then
    succeed "upgrade already complete in $new_dir" "\"outcome\":\"exists\",\"new_dir\":$(json_str "$new_dir")"
fi
if [[ -e $new_dir && -n $(ls -A -- "$new_dir" 2>/dev/null || echo x) ]]; then
    die "$SDB_EXIT_CONFIG" "$new_dir exists, is not empty and has no $MARKER; refusing to touch it"
fi
parent=$(dirname -- "$new_dir")
if [[ ! -d $parent || ! -w $parent ]]; then
    die "$SDB_EXIT_CONFIG" "parent directory $parent of NEW_PGDATA is missing or not writable"
fi
if [[ -n ${OLD_PGDATA:-} && $(realpath -m -- "$OLD_PGDATA") == $(realpath -m -- "$new_dir") ]]; then
    die "$SDB_EXIT_CONFIG" "OLD_PGDATA and NEW_PGDATA are the same directory"
fi

new_bindir=${NEW_BINDIR:-}
if [[ -z $new_bindir ]]; then
    initdb_path=$(command -v initdb || true)
    new_bindir=${initdb_path%/initdb}
fi
for tool in initdb pg_ctl postgres pg_dumpall psql vacuumdb; do
    if [[ ! -x $new_bindir/$tool ]]; then
        die "$SDB_EXIT_CONFIG" "new binaries incomplete: $new_bindir/$tool is missing (set NEW_BINDIR)"
    fi
done
new_version=$("$new_bindir/postgres" --version)
new_major=$(sed -E 's/[^0-9]*([0-9]+).*/\1/' <<<"$new_version")

old_local=0
if [[ -n ${OLD_BINDIR:-} && -x ${OLD_BINDIR:-}/postgres && -f ${OLD_PGDATA:-}/PG_VERSION ]]; then
    if "$OLD_BINDIR/pg_ctl" status -D "$OLD_PGDATA" >/dev/null 2>&1; then
        [[ $method != pg_upgrade ]] || die "$SDB_EXIT_CONFIG" "pg_upgrade needs the old server stopped; it is running"
    else
        old_local=1
    fi
fi
if [[ $method == auto ]]; then
    method=$([[ $old_local == 1 ]] && echo pg_upgrade || echo logical)
fi
if [[ ($method == pg_upgrade || $method == link) && $old_local != 1 ]]; then
    die "$SDB_EXIT_CONFIG" "pg_upgrade needs OLD_BINDIR and OLD_PGDATA of a stopped old cluster"
fi
if [[ $method == link ]]; then
    # Every failure says whether OLD_PGDATA is still usable: pg_upgrade --link renames its pg_control
    # to pg_control.old just before it links the files; from then on the old cluster must not start.
    eval "_sdb_emit_result() $(declare -f emit_result | tail -n +2)"
    emit_result() {
        if [[ $1 == false ]]; then
            local usable=false
            if [[ -f $OLD_PGDATA/global/pg_control ]]; then usable=true; fi
            _sdb_emit_result "$1" "$2" "$3" "${4:+$4,}\"old_usable\":$usable"
        else
            _sdb_emit_result "$@"
        fi
    }
fi
make_temp_dir
mkdir -m 0700 "$SDB_TMP/sock"
printf 'local all all trust\n' >"$SDB_TMP/hba.conf"

# ---- connection contexts: the old cluster (network or local socket) and the new temporary server
declare -A saved_env=()
for var in PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE PGHOSTADDR PGSERVICE PGSSLMODE; do
    if [[ -n ${!var+set} ]]; then saved_env[$var]=${!var}; fi
done
use_env() { # NAME=VALUE...: set exactly these connection variables
    unset PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE PGHOSTADDR PGSERVICE PGSSLMODE
    local kv
    for kv in "$@"; do export "${kv?}"; done
}
old_user=${saved_env[PGUSER]:-$(id -un)}
ctx_old() {
    if [[ $old_local == 1 ]]; then
        use_env PGHOST="$SDB_TMP/sock" PGPORT=$((TEMP_PORT + 1)) PGUSER="$old_user" PGDATABASE=postgres
    else
        local kv=() var
        for var in "${!saved_env[@]}"; do kv+=("$var=${saved_env[$var]}"); done
        use_env "${kv[@]}"
        export PGDATABASE=postgres
    fi
}
ctx_new() {
    use_env PGHOST="$SDB_TMP/sock" PGPORT=$TEMP_PORT PGUSER="${bootstrap:-$old_user}" PGDATABASE=postgres
}

# temp_start BINDIR DATADIR PORT EXTRA_OPTIONS: start a server on the private socket only.
temp_start() {
    local options="-c listen_addresses='' -c unix_socket_directories='$SDB_TMP/sock' -c port=$3"
    options+=" -c hba_file='$SDB_TMP/hba.conf' $4"
    on_cleanup "'$1/pg_ctl' -D '$2' -m fast -w stop"
    if ! "$1/pg_ctl" -D "$2" -l "$SDB_TMP/server-$3.log" -w -t "${UPGRADE_START_TIMEOUT:-300}" \
        -o "$options" start >/dev/null 2>&1; then
        die "$SDB_EXIT_INTERNAL" "temporary server for $2 did not start: $(tail -n 3 "$SDB_TMP/server-$3.log" 2>/dev/null)"
    fi
}
temp_stop() {
    "$1/pg_ctl" -D "$2" -m fast -w stop >/dev/null
}

# collect_counts: sorted "database<TAB>what<TAB>count" lines for the current context's cluster;
# fails (its errors in $SDB_TMP/counts.err) when a query fails, rather than leave a database out.
collect_counts() {
    local -a dbs=()
    mapfile -d '' -t dbs < <(sql -At -0 -c "SELECT datname FROM pg_database WHERE datallowconn AND datname <> 'template0'" 2>>"$SDB_TMP/counts.err")
    ((${#dbs[@]} > 0)) || return 1
    {
        sql -At -F $'\t' -c "SELECT '-', 'roles', count(*) FROM pg_roles WHERE rolname !~ '^pg_'" || exit 1
        local db lines line
        for db in "${dbs[@]}"; do
            lines=$(PGDATABASE=$db sql -At -F $'\t' <<'SQL'
SELECT format('SELECT %L, count(*) FROM %I.%I', n.nspname || '.' || c.relname, n.nspname, c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'
ORDER BY 1 \gexec
SELECT 'large objects', count(*) FROM pg_largeobject_metadata;
SQL
            ) || exit 1
            while IFS= read -r line; do
                printf '%s\t%s\n' "$db" "$line"
            done <<<"$lines"
        done
    } 2>>"$SDB_TMP/counts.err" | LC_ALL=C sort
}
# counts_failed WHICH: end the script after collect_counts failed.
counts_failed() {
    die "$SDB_EXIT_SQL" "counting the rows of the $1 cluster failed: $(first_error "$SDB_TMP/counts.err")"
}

# ---- old cluster facts
if [[ $old_local == 1 ]]; then
    log "starting the old cluster read-only on a private socket"
    # jit off: a copied installation lacks LLVM (copy-binaries leaves it out), and a query costly
    # enough for JIT (a count of a large table) would fail loading llvmjit.so
    temp_start "$OLD_BINDIR" "$OLD_PGDATA" $((TEMP_PORT + 1)) "-c default_transaction_read_only=on -c jit=off"
fi
ctx_old
connect_check
old_version=$SDB_SERVER_VERSION
old_num=$(sql_value "SHOW server_version_num")
if [[ $(sql_value "SELECT rolsuper FROM pg_roles WHERE rolname = current_user") != t ]]; then
    die "$SDB_EXIT_CONFIG" "the upgrade needs a superuser connection to the old server"
fi
if ((old_num / 10000 > new_major)); then
    die "$SDB_EXIT_CONFIG" "refusing to downgrade from $old_version to $new_version"
fi
bootstrap=$(sql_value "SELECT rolname FROM pg_roles WHERE oid = 10")
locale_query="SELECT pg_encoding_to_char(encoding), datcollate, datctype"
if ((old_num >= 150000)); then locale_query+=", datlocprovider, coalesce(daticulocale, '')"; fi
IFS='|' read -r encoding collate ctype provider icu_locale < <(sql_value "$locale_query FROM pg_database WHERE datname = 'template1'")
initdb_args=(-D "$staging" -U "$bootstrap" "--encoding=$encoding" "--lc-collate=$collate" "--lc-ctype=$ctype" --no-sync)
if [[ ${provider:-c} == i ]]; then initdb_args+=(--locale-provider=icu "--icu-locale=$icu_locale"); fi
if [[ $(sql_value "SHOW data_checksums") == on ]]; then
    initdb_args+=(--data-checksums)
elif ((new_major >= 18)); then
    initdb_args+=(--no-data-checksums) # on by default since 18; pg_upgrade needs the old setting
fi

frozen=0
# shellcheck disable=SC2317  # called from the exit cleanups
unfreeze_on_failure() {
    if [[ $frozen == 1 && $SDB_SUCCEEDED != 1 ]]; then
        ctx_old
        sql -c "ALTER SYSTEM RESET default_transaction_read_only" -c "SELECT pg_reload_conf()"
        log "old server made writable again"
    fi
}
SDB_SUCCEEDED=0
if [[ $old_local != 1 && ${UPGRADE_FREEZE:-1} == 1 ]]; then
    log "making the old server read-only and ending its other sessions"
    on_cleanup unfreeze_on_failure
    frozen=1
    sql -c "ALTER SYSTEM SET default_transaction_read_only = on" -c "SELECT pg_reload_conf()" >/dev/null
    sql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'" >/dev/null
fi

# ---- build the new cluster
rm -rf -- "$staging"
on_cleanup "[ \"\$SDB_SUCCEEDED\" = 1 ] || rm -rf -- '$staging'"
log "initdb $staging ($new_version, $encoding, $collate)"
if ! "$new_bindir/initdb" "${initdb_args[@]}" >"$SDB_TMP/initdb.log" 2>&1; then
    die "$SDB_EXIT_INTERNAL" "initdb failed: $(first_error "$SDB_TMP/initdb.log")"
fi
fast="-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c autovacuum=off"

# run_pg_upgrade ARGS...: the new pg_upgrade from the old to the staging cluster, its output kept.
run_pg_upgrade() {
    (cd "$SDB_TMP/pg_upgrade" && use_env && "$new_bindir/pg_upgrade" "$@" -b "$OLD_BINDIR" -B "$upgrade_bindir" \
        -d "$OLD_PGDATA" -D "$staging" -U "$bootstrap" -s "$SDB_TMP/sock" -p $((TEMP_PORT + 1)) -P $TEMP_PORT \
        -o "-c hba_file='$SDB_TMP/hba.conf' -c jit=off" -O "-c hba_file='$SDB_TMP/hba.conf'") >"$SDB_TMP/pg_upgrade.out" 2>&1
}
# pg_upgrade_problems: the end of pg_upgrade's output and the start of the problem lists it wrote.
pg_upgrade_problems() {
    local file
    grep -v -E '^[[:space:]]*$' "$SDB_TMP/pg_upgrade.out" | tail -n 4 || true
    # the log it names ("Consult the last few lines of ..."): its errors
    file=$(sed -n -E 's/.*Consult the last few lines of "([^"]+)".*/\1/p' "$SDB_TMP/pg_upgrade.out" | head -n 1)
    if [[ -n $file && -r $file ]]; then
        printf '%s: ' "${file##*/}"
        grep -E 'ERROR|FATAL|error:' -- "$file" | head -n 3 | tr '\n' ' ' || true
        printf '\n'
    fi
    while IFS= read -r -d '' file; do
        printf '%s: ' "${file##*/}"
        head -n 5 -- "$file" | tr '\n' ' '
        printf '\n'
    done < <(find "$staging/pg_upgrade_output.d" -name '*.txt' -print0 2>/dev/null || true)
}

# attver_columns: how many columns of the current context's cluster carry a pg_attver option.
attver_columns() {
    local db total=0
    while IFS= read -r -d '' db; do
        total=$((total + $(PGDATABASE=$db sql_value "SELECT count(*) FROM pg_attribute
            WHERE array_to_string(attoptions, ',') ~ '(^|,)pg_attver='")))
    done < <(sql -At -0 -c "SELECT datname FROM pg_database WHERE datallowconn AND datname <> 'template0'")
    echo "$total"
}

upgrade_bindir=$new_bindir
if [[ $method == pg_upgrade || $method == link ]]; then
    old_counts=$(collect_counts) || counts_failed old
    attver=$(attver_columns)
    if ((attver > 0)); then
        # pg_upgrade restores the schema with pg_restore, which would replay those options: it gets
        # the new binaries with pg_restore replaced by this script's pg-restore-filtered stage.
        log "$attver columns carry a pg_attver option: pg_upgrade restores without those lines"
        upgrade_bindir=$SDB_TMP/new-bin
        mkdir "$upgrade_bindir"
        ln -s -- "$new_bindir"/* "$upgrade_bindir/"
        rm -- "$upgrade_bindir/pg_restore"
        printf '#!/bin/sh\nexec bash %s pg-restore-filtered %s "$@"\n' \
            "'$(realpath -s -- "${BASH_SOURCE[0]}")'" "'$new_bindir'" >"$upgrade_bindir/pg_restore"
        chmod 0755 -- "$upgrade_bindir/pg_restore"
    fi
    temp_stop "$OLD_BINDIR" "$OLD_PGDATA"
    mkdir "$SDB_TMP/pg_upgrade"
    mode=() # copy mode: pg_upgrade's default
    if [[ $method == link ]]; then
        mode=(--link)
        log "checking with pg_upgrade --check --link"
        if ! run_pg_upgrade --check --link; then
            die "$SDB_EXIT_SQL" "pg_upgrade --check refused the upgrade: $(pg_upgrade_problems)" '"check_failed":true'
        fi
    fi
    log "running pg_upgrade (${mode[0]:---copy} mode)"
    if ! run_pg_upgrade "${mode[@]}"; then
        die "$SDB_EXIT_SQL" "pg_upgrade failed: $(pg_upgrade_problems)"
    fi
    temp_start "$new_bindir" "$staging" $TEMP_PORT "$fast"
    ctx_new
else
    temp_start "$new_bindir" "$staging" $TEMP_PORT "$fast"
    log "dumping the old cluster with $new_bindir/pg_dumpall and restoring into the new one"
    create_self="CREATE ROLE $(sql_value "SELECT quote_ident(rolname) FROM pg_roles WHERE oid = 10");"
    set +e
    # The awk filter drops the dump's CREATE ROLE of the new cluster's own bootstrap user, and the
    # lines matching ATTVER_LINE (a column option the new server refuses).
    (ctx_old && "$new_bindir/pg_dumpall" -w) 2>"$SDB_TMP/dump.err" |
        SKIP=$create_self RE=$ATTVER_LINE awk '/^\\connect /{seen=1}
            $0 ~ ENVIRON["RE"] {next}
            seen || $0 != ENVIRON["SKIP"]' |
        (ctx_new && sql -d postgres -f - >/dev/null) 2>"$SDB_TMP/restore.err"
    status=("${PIPESTATUS[@]}")
    set -e
    # The restore side first: when it stops (ON_ERROR_STOP), pg_dump dies of the broken pipe and
    # pg_dumpall only says that pg_dump failed, which hides the cause.
    if [[ ${status[2]} -ne 0 ]]; then
        die "$SDB_EXIT_SQL" "restoring into the new cluster failed: $(first_error "$SDB_TMP/restore.err")"
    fi
    if [[ ${status[0]} -ne 0 ]]; then
        die "$SDB_EXIT_DUMP" "pg_dumpall of the old server failed: $(first_error "$SDB_TMP/dump.err")"
    fi
    ctx_new
fi
if [[ ${UPGRADE_ANALYZE:-1} == 1 ]]; then
    log "analyzing the new cluster"
    "$new_bindir/vacuumdb" -w --all --analyze-only --quiet >/dev/null 2>"$SDB_TMP/analyze.err" ||
        log "warning: analyze failed: $(first_error "$SDB_TMP/analyze.err")"
fi

# ---- verify, stop, publish
log "verifying row counts"
new_counts=$(collect_counts) || counts_failed new
if [[ $method != pg_upgrade && $method != link ]]; then
    ctx_old
    old_counts=$(collect_counts) || counts_failed old
fi
if [[ $old_counts != "$new_counts" ]]; then
    difference=$(diff <(printf '%s\n' "$old_counts") <(printf '%s\n' "$new_counts") | grep '^[<>]' | head -n 5 || true)
    die "$SDB_EXIT_VERIFY" "verification failed: old and new clusters differ (< old, > new): $difference"
fi
rows=$(awk -F '\t' '$2 != "large objects" && $1 != "-" {n += $3} END {print n + 0}' <<<"$new_counts")
databases=$(cut -f1 <<<"$new_counts" | grep -v -x -- - | sort -u | wc -l)
temp_stop "$new_bindir" "$staging"
if [[ $old_local == 1 && $method == logical ]]; then
    temp_stop "$OLD_BINDIR" "$OLD_PGDATA"
fi
"$new_bindir/initdb" --sync-only -D "$staging" >/dev/null
for conf in pg_hba.conf pg_ident.conf; do
    if [[ -n ${OLD_PGDATA:-} && -r $OLD_PGDATA/$conf ]]; then
        cp -- "$OLD_PGDATA/$conf" "$staging/$conf"
    elif [[ $conf == pg_hba.conf ]]; then
        printf '\n# added by sampledb upgrade (as the postgres image does)\nhost all all all scram-sha-256\n' >>"$staging/$conf"
    fi
done
printf '{"method":"%s","old_version":%s,"new_version":%s,"completed":"%s","databases":%s,"rows":%s}\n' \
    "$method" "$(json_str "$old_version")" "$(json_str "$new_version")" "$(now_utc)" "$databases" "$rows" \
    >"$staging/$MARKER"
sync -- "$staging/$MARKER" "$staging"
if [[ -d $new_dir ]]; then rmdir -- "$new_dir"; fi
mv -T -- "$staging" "$new_dir"
sync -- "$parent" || true
SDB_SUCCEEDED=1
succeed "upgraded $old_version to $new_version in $new_dir ($method, $databases databases, $rows rows verified)" \
    "\"outcome\":\"upgraded\",\"method\":\"$method\",\"old_version\":$(json_str "$old_version"),\"new_version\":$(json_str "$new_version"),\"new_dir\":$(json_str "$new_dir"),\"databases\":$databases,\"rows\":$rows"
