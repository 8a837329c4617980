#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# sampledb data plane: make the server apply an edited postgresql.conf without a restart.
# $CONFIG_FILE is this Job's copy of the file the server reads (both mounted from the same ConfigMap;
# the kubelet refreshes the server's copy within about a minute), $HBA_FILE (optional) its copy of the
# access rules. Waits, up to $RELOAD_TIMEOUT seconds (default 300), until the server reads exactly these
# bytes (pg_read_binary_file of its own config_file and hba_file: a fresh read on every query), refuses a
# file with an unknown setting or a value the server refuses (pg_file_settings, also re-read on every
# query: exit 2; a postmaster-context value is only checked when the server restarts) or an access rule it
# cannot parse (pg_hba_file_rules), then pg_reload_conf(), waits for the
# postmaster to have re-read it (pg_conf_load_time of a new session), and reports the settings that
# still wait for a restart (pg_settings.pending_restart). Needs a superuser (the image's user is one).
# Idempotent: reloading an unchanged file changes nothing.
set -Eeuo pipefail
SDB_SCRIPT=reload
# shellcheck source=lib.sh
. "${SDB_LIB:-$(dirname -- "${BASH_SOURCE[0]}")/lib.sh}"

require_env CONFIG_FILE
if [[ ! -r $CONFIG_FILE ]]; then
    die "$SDB_EXIT_CONFIG" "configuration file $CONFIG_FILE is missing or unreadable"
fi
timeout=${RELOAD_TIMEOUT:-300}
interval=${RELOAD_INTERVAL:-2}
if [[ ! $timeout =~ ^[0-9]+$ || ! $interval =~ ^[0-9]+$ ]]; then
    die "$SDB_EXIT_CONFIG" "invalid RELOAD_TIMEOUT '$timeout' or RELOAD_INTERVAL '$interval': want whole seconds"
fi
want=$(sha256_of "$CONFIG_FILE")
hba_want=""
if [[ -n ${HBA_FILE:-} ]]; then
    if [[ ! -r $HBA_FILE ]]; then
        die "$SDB_EXIT_CONFIG" "access rules file $HBA_FILE is missing or unreadable"
    fi
    hba_want=$(sha256_of "$HBA_FILE")
fi
connect_check
if [[ $(sql_value "SELECT rolsuper FROM pg_roles WHERE rolname = current_user") != t ]]; then
    die "$SDB_EXIT_CONFIG" "reloading the configuration needs a superuser; $(one_line "$(sql_value 'SELECT current_user')") is not one"
fi
server_file=$(sql_value "SELECT current_setting('config_file')")

# 1. Wait until the server's copy of the file is this one.
start=$SECONDS
while :; do
    have=$(sql_value "SELECT encode(sha256(pg_read_binary_file(current_setting('config_file'))), 'hex')")
    hba_have=""
    if [[ -n $hba_want ]]; then
        hba_have=$(sql_value "SELECT encode(sha256(pg_read_binary_file(current_setting('hba_file'))), 'hex')")
    fi
    if [[ $have == "$want" && $hba_have == "$hba_want" ]]; then
        break
    fi
    if ((SECONDS - start >= timeout)); then
        die "$SDB_EXIT_NOT_READY" "the server's $server_file did not become this Job's copy within ${timeout}s" \
            "\"reloaded\":false,\"waited_seconds\":$((SECONDS - start))"
    fi
    if ((SECONDS == start)) || (((SECONDS - start) % 30 < interval)); then
        log "waiting for the server's $server_file to be updated"
    fi
    sleep "$interval"
done
waited=$((SECONDS - start))

# 2. A file with an error is not reloaded: an unknown name, a syntax error, or a value the server refuses
# ("setting could not be applied" on a setting a reload may change; on a postmaster one it means: restart).
errors=$(sql_value "SELECT string_agg(coalesce(f.name, f.sourcefile || ' line ' || f.sourceline) || ': '
                                      || CASE WHEN f.error = 'setting could not be applied'
                                              THEN format('invalid value %L', f.setting) ELSE f.error END,
                                      '; ' ORDER BY f.seqno)
                    FROM pg_file_settings f LEFT JOIN pg_settings s ON s.name = f.name
                    WHERE f.error IS NOT NULL
                      AND NOT (f.error = 'setting could not be applied' AND s.context = 'postmaster')")
if [[ -z $errors && -n $hba_want ]]; then  # pg_hba_file_rules parses the file on disk, as a reload would
    errors=$(sql_value "SELECT string_agg(format('pg_hba.conf line %s: %s', line_number, error), '; '
                                          ORDER BY line_number)
                        FROM pg_hba_file_rules WHERE error IS NOT NULL")
fi
if [[ -n $errors ]]; then
    die "$SDB_EXIT_CONFIG" "the server refuses the configuration: $errors" "\"reloaded\":false,\"waited_seconds\":$waited"
fi

# 3. Reload, and wait until the postmaster has read the file (new sessions inherit its settings).
before=$(sql_value "SELECT pg_conf_load_time()")
sql_value "SELECT pg_reload_conf()" >/dev/null
deadline=$((SECONDS + 30))
until [[ $(sql_value "SELECT pg_conf_load_time() > '$before'::timestamptz") == t ]]; do
    if ((SECONDS >= deadline)); then
        die "$SDB_EXIT_NOT_READY" "the server did not re-read its configuration within 30s of pg_reload_conf()" \
            "\"reloaded\":false,\"waited_seconds\":$waited"
    fi
    sleep 0.2
done
pending=$(sql_value "SELECT coalesce(string_agg(format('\"%s\"', name), ',' ORDER BY name), '')
                     FROM pg_settings WHERE pending_restart")
message="configuration reloaded after ${waited}s"
if [[ -n $pending ]]; then
    message+="; waiting for a restart: ${pending//\"/}"
fi
succeed "$message" "\"reloaded\":true,\"waited_seconds\":$waited,\"sha256\":\"$want\",\"pending_restart\":[$pending]"
