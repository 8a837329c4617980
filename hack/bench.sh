#!/usr/bin/env bash
# hack/bench.sh [--record] — run every bench/*.py with the project's virtualenv (`make bench`).
#
# Prints, per script, its command and the markdown table it writes on stdout. With --record, and
# only if every script succeeded, also appends a dated section (machine, Python, results) to
# docs/benchmarks.md. Scripts run one after another, never in parallel (they measure the machine).
# SAMPLEDB_BENCH_MACHINE names the machine in the record (default: hostname).
# bench/bench_archive.py needs root, PostgreSQL 15, versitygw and barman-cloud, and takes ~10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

record=false
case "${1:-}" in
  --record) record=true ;;
  "") ;;
  *) echo "usage: hack/bench.sh [--record]" >&2; exit 2 ;;
esac

PY=.venv/bin/python
[[ -x $PY ]] || { echo "bench: $PY missing; run make bootstrap" >&2; exit 1; }

shopt -s nullglob
scripts=(bench/*.py)
if (( ${#scripts[@]} == 0 )); then
  echo "bench: no bench/*.py scripts found" >&2
  exit 1
fi

mem_gib=$(awk '/^MemTotal:/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)
python_version=$($PY -c 'import platform; print(platform.python_version())')
machine="${SAMPLEDB_BENCH_MACHINE:-$(hostname)} ($(nproc) cores, ${mem_gib} GiB), Python ${python_version}"

section=$(mktemp)
trap 'rm -f "$section"' EXIT
printf '\n## %s — %s\n' "$(date -u +%F)" "$machine" >> "$section"

failed=0
for script in "${scripts[@]}"; do
  echo "### $script"
  echo
  echo "\`$PY $script\`"
  echo
  if out=$(PYTHONDONTWRITEBYTECODE=1 $PY "$script"); then
    echo "$out"
    # shellcheck disable=SC2016  # the backticks are markdown, not a command substitution
    printf '\n### %s\n\n`%s %s`\n\n%s\n' "$script" "$PY" "$script" "$out" >> "$section"
  else
    echo "bench: $script failed" >&2
    failed=1
  fi
  echo
done

if (( failed )); then
  $record && echo "bench: not recorded (a script failed)" >&2
  exit 1
fi
if $record; then
  [[ -f docs/benchmarks.md ]] || printf '# Benchmarks\n' > docs/benchmarks.md
  cat "$section" >> docs/benchmarks.md
  echo "bench: appended to docs/benchmarks.md" >&2
fi
