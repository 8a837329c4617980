# shellcheck shell=bash
# Sourced by the build scripts: `progress WHAT CMD...` runs CMD (a command or a function) and, while it runs, says on
# stderr every SAMPLEDB_PROGRESS_SECONDS (default 30) that WHAT is still going and for how long; then, if it took
# that long or failed, how long it took. Returns CMD's exit status. A long cold build is never a silent terminal,
# and a warm (cached) step stays quiet and is not slowed: the reminders come from a background loop that is killed
# as soon as CMD ends (its last sleep, holding none of the caller's files, ends by itself), and write only to stderr
# (CMD's stdout may be captured). CMD runs in a subshell: it cannot set the caller's variables.
progress() {
  local what=$1 start=$SECONDS interval=${SAMPLEDB_PROGRESS_SECONDS:-30} ticker rc=0
  shift
  {
    while :; do
      sleep "$interval" >/dev/null 2>&1  # holds no pipe of the caller's: a capture never waits for it
      echo "  ... $what: $((SECONDS - start))s so far"
    done
  } >&2 &
  ticker=$!
  # CMD in the background, waited for: it keeps the caller's errexit (a function run as `CMD || ...` would not)
  "$@" &
  wait "$!" || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if ((rc != 0)); then
    echo "  ... $what: failed after $((SECONDS - start))s (exit $rc)" >&2
  elif ((SECONDS - start >= interval)); then
    echo "  ... $what: done in $((SECONDS - start))s" >&2
  fi
  return "$rc"
}
