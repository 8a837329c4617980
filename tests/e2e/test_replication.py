"""Replicas on real PostgreSQL (the real node): streaming, failover, switchover, scaling (issue #13).

One database of three instances with synchronous replication, driven through everything a user does
and everything that fails: write on the primary and read on the standbys; kill the primary's server
(an immediate shutdown, a crash: the kubelet restarts it, the operator fences it and promotes), with
the operator itself SIGKILLed in the middle of that failover and started again; the old primary comes
back as a standby (pg_rewind); a switchover by annotation with no committed row lost; scale 3 -> 1 ->
2; a reloadable parameter edit reaches the standby. Throughout, `pg_is_in_recovery()` is read on
every instance and never two say "no" at once; every committed row is on the new primary
(synchronous mode: a commit is on a standby before it returns).
The failover time is measured (status.primary changed and the new primary accepts writes).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

DB = "ha"
VERSION = "15.20"


def status(ns: str) -> dict[str, Any]:
    return dict(kubectl_json("get", "sampledb", DB, "-n", ns).get("status") or {})


def psql(ns: str, pod: str, sql: str, *, check: bool = True) -> str | None:
    """One statement in database `app` of instance `pod` (through kubectl exec: works on any cluster)."""
    out = kubectl("exec", "-n", ns, pod, "-c", "postgres", "--", "psql", "-U", "app", "-d", "app", "-XAtqc", sql,
                  check=False)
    if out.returncode != 0:
        if check:
            raise AssertionError(f"psql on {pod} failed: {out.stderr.strip()}")
        return None
    return out.stdout.strip()


def pods(ns: str) -> list[str]:
    items = kubectl_json("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=database")["items"]
    return sorted(p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp"))


def writable(ns: str) -> list[str]:
    """The instances whose server says it is not in recovery (accepts writes)."""
    return [p for p in pods(ns) if psql(ns, p, "SELECT pg_is_in_recovery()", check=False) == "f"]


def count(ns: str, pod: str) -> int | None:
    out = psql(ns, pod, "SELECT count(*) FROM t", check=False)
    return int(out) if out is not None and out.isdigit() else None


@pytest.fixture
def operator(kubeconfig: str, real_namespace: str) -> Iterator[OperatorProcess]:
    with OperatorProcess(kubeconfig, "--namespaces", real_namespace, "--no-leader-elect") as op:
        yield op


def test_streaming_failover_switchover_and_scaling(kubeconfig: str, real_namespace: str,
                                                   operator: OperatorProcess) -> None:
    ns = real_namespace
    apply(sampledb(DB, ns, version=VERSION, storage={"size": "256Mi"}, deletionPolicy="Delete", replicas=3,
                   replication={"synchronous": True, "failoverDelaySeconds": 0}))
    first, standbys = streaming(ns)
    new = failover_with_the_operator_killed(ns, operator, first, standbys)
    switchover(ns, first, new)
    scale(ns, first)
    kubectl("delete", "sampledb", DB, "-n", ns, "--wait=false")


def streaming(ns: str) -> tuple[str, list[str]]:
    """Three instances: the first is primary; rows written on it are read on both standbys."""
    wait_ready(DB, ns, timeout=300)
    wait_until(lambda: status(ns).get("readyInstances") == "3/3", timeout=240, what="3 ready instances")
    first = status(ns)["primary"]
    assert first == f"{DB}-0"
    standbys = [p for p in pods(ns) if p != first]
    assert standbys == [f"{DB}-i1-0", f"{DB}-i2-0"]
    roles = {p["metadata"]["name"]: p["metadata"]["labels"].get("sampledb.io/role")
             for p in kubectl_json("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=database")["items"]}
    assert roles == {first: "primary", standbys[0]: "replica", standbys[1]: "replica"}
    psql(ns, first, "CREATE TABLE t (i int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 1000)")
    for pod in standbys:
        wait_until(lambda pod=pod: count(ns, pod) == 1000, timeout=60, what=f"the rows on {pod}")
        assert psql(ns, pod, "SELECT pg_is_in_recovery()") == "t"
        assert psql(ns, pod, "INSERT INTO t VALUES (0)", check=False) is None, "a standby refuses writes"
    lsn = {i["name"]: i for i in status(ns)["instances"]}
    assert set(lsn) == {first, *standbys} and all(i.get("lsn") for i in lsn.values())
    return first, standbys


def failover_with_the_operator_killed(ns: str, operator: OperatorProcess, first: str, standbys: list[str]) -> str:
    """Crash the primary's server; SIGKILL the operator once the failover has started, start it again:
    one new primary, never two writable instances, every committed row; the old primary rejoins."""
    psql(ns, first, "INSERT INTO t SELECT generate_series(1001, 2000)")  # committed: on a standby too
    crashed = time.monotonic()
    kubectl("exec", "-n", ns, first, "-c", "postgres", "--", "bash", "-c", 'pg_ctl -D "$PGDATA" stop -m immediate',
            check=False)
    wait_until(lambda: status(ns).get("targetPrimary") or status(ns).get("primary") != first, timeout=60,
               interval=0.05, what="the failover to start")
    operator.kill()
    assert len(writable(ns)) <= 1
    operator.start()
    seen_two: list[list[str]] = []

    def promoted() -> str | None:
        now = writable(ns)
        if len(now) > 1:
            seen_two.append(now)
        st = status(ns)
        new = st.get("primary")
        return new if new != first and not st.get("targetPrimary") and now == [new] else None

    new = wait_until(promoted, timeout=120, interval=0.2, what="a new primary")
    failover_seconds = time.monotonic() - crashed
    assert not seen_two, f"two writable instances at once: {seen_two}"
    assert new in standbys
    assert count(ns, new) == 2000, "every committed row is on the new primary"
    psql(ns, new, "INSERT INTO t SELECT generate_series(2001, 3000)")
    print(f"failover (operator killed midway): {failover_seconds:.1f}s")
    assert failover_seconds < 90
    wait_until(lambda: count(ns, first) == 3000, timeout=180, what=f"{first} to rejoin and catch up")
    assert psql(ns, first, "SELECT pg_is_in_recovery()") == "t"
    assert writable(ns) == [new]
    return new


def switchover(ns: str, first: str, new: str) -> None:
    """Back to the first instance by annotation: nothing committed is lost; the annotation goes."""
    psql(ns, new, "INSERT INTO t SELECT generate_series(3001, 4000)")
    kubectl("annotate", "sampledb", DB, "-n", ns, f"sampledb.io/switchover={first}")
    wait_until(lambda: status(ns).get("primary") == first and not status(ns).get("targetPrimary")
               and writable(ns) == [first], timeout=120, what="the switchover")
    assert count(ns, first) == 4000
    wait_until(lambda: "sampledb.io/switchover" not in (kubectl_json("get", "sampledb", DB, "-n", ns)["metadata"]
                                                        .get("annotations") or {}), timeout=60,
               what="the switchover annotation to be removed")
    wait_until(lambda: status(ns).get("readyInstances") == "3/3", timeout=180, what="3 ready instances again")


def scale(ns: str, first: str) -> None:
    """3 -> 1: the primary stays, the others go with their volumes and slots; 1 -> 2: a new standby's copy."""
    kubectl("patch", "sampledb", DB, "-n", ns, "--type", "merge", "-p", '{"spec":{"replicas":1}}')
    wait_until(lambda: pods(ns) == [first], timeout=120, what="only the primary")
    wait_until(lambda: psql(ns, first, "SELECT count(*) FROM pg_replication_slots") == "0", timeout=60,
               what="the removed standbys' slots dropped")
    wait_until(lambda: {p["metadata"]["name"] for p in kubectl_json("get", "pvc", "-n", ns)["items"]}
               == {f"data-{DB}-0", f"{DB}-backups"}, timeout=60, what="the removed standbys' volumes deleted")
    # one instance: synchronous replication is off (reloaded), so a commit does not wait for a standby
    wait_until(lambda: psql(ns, first, "SHOW synchronous_standby_names") == "", timeout=120,
               what="synchronous replication off with one instance")
    psql(ns, first, "INSERT INTO t SELECT generate_series(4001, 5000)")
    kubectl("patch", "sampledb", DB, "-n", ns, "--type", "merge", "-p", '{"spec":{"replicas":2}}')
    wait_until(lambda: status(ns).get("readyInstances") == "2/2", timeout=180, what="2 ready instances")
    joined = next(p for p in pods(ns) if p != first)
    wait_until(lambda: count(ns, joined) == 5000, timeout=60, what="the new standby's copy")
    assert writable(ns) == [first]
    # A reloadable parameter reaches the standby too (the operator reloads it once its file is updated).
    kubectl("patch", "sampledb", DB, "-n", ns, "--type", "merge", "-p", '{"spec":{"parameters":{"work_mem":"12MB"}}}')
    for pod in (first, joined):
        wait_until(lambda pod=pod: psql(ns, pod, "SHOW work_mem") == "12MB", timeout=240,
                   what=f"work_mem reloaded on {pod}")
