#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it: lint, then every pytest suite in one session
# (so the local control plane starts once). pytest's exit code 5 ("no tests collected") is a failure
# here: a suite that runs nothing must not look green.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
.venv/bin/ruff check operator tests bench hack || exit 1
.venv/bin/mypy || exit 1
.venv/bin/python -m pytest tests -q -p no:cacheprovider --durations=15 "$@"
rc=$?
echo "test: pytest exit code $rc after $(( $(date +%s) - start ))s" >&2
if [[ $rc -eq 5 ]]; then
  echo "test: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit $rc
