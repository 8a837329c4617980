#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it:
#   1. ruff and mypy;
#   2. every test not marked `disruptive`, in parallel (pytest-xdist): unit, data plane (real
#      PostgreSQL), integration and end to end (real control plane; each test has its own namespace
#      and its own operator process, so they do not see each other);
#   3. the `disruptive` tests (they restart kube-apiserver), alone.
# The cluster: $KUBECONFIG's if set and SAMPLEDB_TEST_USE_KUBECONFIG=1 (never stopped; without the opt-in a
# $KUBECONFIG is ignored, with a note), else the local control plane, started here
# once for both phases and stopped at the end unless it was already running or
# SAMPLEDB_KEEP_CLUSTER=1. pytest's exit code 5 ("no tests collected") is a failure: a suite that
# runs nothing must not look green. SAMPLEDB_TEST_WORKERS sets the parallelism (default 4: most tests wait on the cluster, not on a core).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
start=$(date +%s)
.venv/bin/ruff check operator tests bench hack || exit 1
.venv/bin/mypy || exit 1

stop_cluster=0
local_kubeconfig=${SAMPLEDB_CLUSTER_DIR:-$(pwd)/.cluster}/kubeconfig
if [[ -n ${KUBECONFIG:-} && ${SAMPLEDB_TEST_USE_KUBECONFIG:-} != 1 && $KUBECONFIG != "$local_kubeconfig" ]]; then
  # the tests create namespaces and apply CRDs: a cluster the user chose only when they say so
  echo "test: not using \$KUBECONFIG ($KUBECONFIG): set SAMPLEDB_TEST_USE_KUBECONFIG=1 to run the tests against" \
    "that cluster; using the local control plane" >&2
  unset KUBECONFIG
fi
if [[ -z ${KUBECONFIG:-} ]]; then
  # (read whole: `| grep -q` would end the pipe early, and pipefail then calls a running cluster stopped)
  [[ $(hack/cluster status 2>/dev/null) == *"apiserver: ready"* ]] || stop_cluster=1
  [[ ${SAMPLEDB_KEEP_CLUSTER:-} == 1 ]] && stop_cluster=0
  env_lines=$(hack/cluster up) || { echo "test: the local control plane did not start" >&2; exit 1; }
  eval "$env_lines"
  export KUBECONFIG SAMPLEDB_TESTCLUSTER_BIN
fi
cleanup() { if [[ $stop_cluster == 1 ]]; then hack/cluster down; fi; }
trap cleanup EXIT

run_pytest() {  # run_pytest ALLOW_EMPTY ARGS...
  local allow_empty=$1; shift
  .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
  local rc=$?
  if [[ $rc -eq 5 && $allow_empty == 1 ]]; then
    return 0
  fi
  if [[ $rc -eq 5 ]]; then
    echo "test: pytest collected no tests; that is a failure" >&2
    return 1
  fi
  return $rc
}

paths=("$@")
[[ ${#paths[@]} -eq 0 ]] && paths=(tests)
run_pytest 0 -m "not disruptive" -n "${SAMPLEDB_TEST_WORKERS:-4}" --dist loadfile --durations=40 "${paths[@]}"
rc1=$?
# Only this phase may be empty (when the arguments select no disruptive test).
run_pytest 1 -m disruptive "${paths[@]}"
rc2=$?
echo "test: parallel phase exit $rc1, disruptive phase exit $rc2, $(( $(date +%s) - start ))s in all" >&2
[[ $rc1 -eq 0 && $rc2 -eq 0 ]]
