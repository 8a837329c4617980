"""Leader election with two real operator processes on one Lease of the real control plane.

Exactly one process reconciles while the standby keeps its caches warm and reports ready; a killed
leader is replaced within the lease duration (plus the retry jitter) and the pending work gets
done; a SIGTERMed leader releases the Lease so the standby takes over within 3 s; a leader that
finds the Lease taken stops at once and never writes it back (no split brain).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

LEASE = "sdb-test-lease"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 4.0, 3.0, 1.0
# A standby polls every retry_period * [1, 2.2) (client-go's jitter). After the holder's last renewal
# it may see that renewal up to one poll late, then the lease expires lease_duration after it saw
# it, then the next poll takes it: lease_duration + 2 polls, plus a second for API calls. Takeover
# times are measured on the machine's wall clock: the new holder's acquireTime in the Lease minus
# the moment of the kill (or the old leader's "operator stopped" log line).
TAKEOVER_BOUND = LEASE_DURATION + 2 * 2.2 * RETRY_PERIOD + 1.0


def candidate(kubeconfig: str, ns: str, identity: str) -> OperatorProcess:
    return OperatorProcess(
        kubeconfig, "--namespaces", ns, "--workers", "2", "--leader-elect", "--lease-namespace", ns,
        "--lease-name", LEASE, "--identity", identity, "--lease-duration", f"{LEASE_DURATION:g}",
        "--renew-deadline", f"{RENEW_DEADLINE:g}", "--retry-period", f"{RETRY_PERIOD:g}",
    )


@contextlib.contextmanager
def candidates(kubeconfig: str, ns: str, *identities: str) -> Iterator[list[OperatorProcess]]:
    """Processes created (not started); killed on the way out, their logs printed if the test failed."""
    ops = [candidate(kubeconfig, ns, identity) for identity in identities]
    try:
        yield ops
    except BaseException:
        for op in ops:
            print(f"---- log of {op.args[op.args.index('--identity') + 1]} ----\n{op.log_text()[-5000:]}")
        raise
    finally:
        for op in ops:
            if op.running:
                op.kill()


def wall(stamp: str) -> datetime:
    """A Lease MicroTime or a log timestamp ("...Z") as an aware datetime."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def steal(ns: str) -> bool | None:
    """Write the Lease as held by "intruder" for an hour: True once written, None when the holder renewed it
    between our read and our write (a Conflict: read it again)."""
    stolen = kubectl_json("get", "lease", LEASE, "-n", ns)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    stolen["spec"].update(holderIdentity="intruder", leaseDurationSeconds=3600, renewTime=now, acquireTime=now)
    done = kubectl("replace", "-f", "-", input=json.dumps(stolen), check=False)
    if done.returncode == 0:
        return True
    if "Conflict" in done.stderr:
        return None
    raise AssertionError(f"kubectl replace failed ({done.returncode}): {done.stderr}")


def lease(ns: str) -> dict[str, Any]:
    spec: dict[str, Any] = kubectl_json("get", "lease", LEASE, "-n", ns)["spec"]
    return spec


def holder(ns: str) -> str:
    out = kubectl("get", "lease", LEASE, "-n", ns, "--ignore-not-found", "-o",
                  "jsonpath={.spec.holderIdentity}").stdout
    return out.strip()


def master(op: OperatorProcess) -> float | None:
    """leader_election_master_status{name=LEASE} of `op` (None when absent)."""
    for family in text_string_to_metric_families(op.metrics_text()):
        for sample in family.samples:
            if sample.name == "leader_election_master_status" and sample.labels.get("name") == LEASE:
                return sample.value
    return None


def reconciles(op: OperatorProcess) -> float:
    return op.metric("controller_runtime_reconcile_total", controller="sampledb")




def start_leader_then_standby(a: OperatorProcess, b: OperatorProcess, ns: str) -> None:
    a.start()
    wait_until(lambda: holder(ns) == "a", timeout=30, what="a to hold the lease")
    wait_until(lambda: master(a) == 1, timeout=10, what="a's leader_election_master_status 1")
    b.start()   # returns once b's /readyz is 200: its caches are synced although it does not lead
    assert holder(ns) == "a"
    assert master(b) == 0


def test_only_the_leader_reconciles_while_the_standby_stays_ready_and_warm(kubeconfig: str,
                                                                           namespace: str) -> None:
    ns = namespace
    with candidates(kubeconfig, ns, "a", "b") as (a, b):
        start_leader_then_standby(a, b, ns)
        apply(sampledb("solo", ns))
        wait_ready("solo", ns)

        assert reconciles(a) >= 1
        assert reconciles(b) == 0
        assert b.writes() == 0          # not one create, update, patch or delete from the standby
        assert b.http_status("/readyz") == 200
        assert b.http_status("/healthz") == 200
        # the standby's caches hold the database and its children: a takeover needs no relist
        for resource in ("sampledbs", "statefulsets", "services", "secrets"):
            assert b.metric("sampledb_cache_objects", resource=resource) >= 1, resource
        assert (master(a), master(b)) == (1, 0)
        assert holder(ns) == "a"
        assert not any(ln.get("event") == "became leader" for ln in b.log_lines())

        assert b.stop(timeout=30) == 0      # a standby stops cleanly and leaves the lease alone
        assert holder(ns) == "a"


def test_killed_leader_is_replaced_within_the_lease_duration_and_pending_work_is_done(kubeconfig: str,
                                                                                     namespace: str) -> None:
    ns = namespace
    with candidates(kubeconfig, ns, "a", "b") as (a, b):
        start_leader_then_standby(a, b, ns)
        transitions = int(lease(ns).get("leaseTransitions") or 0)
        killed = datetime.now(UTC)
        assert a.kill() == -9
        apply(sampledb("pending", ns))    # work that arrives while nobody leads

        wait_until(lambda: holder(ns) == "b", timeout=TAKEOVER_BOUND + 10, what="b to take over")
        taken = lease(ns)
        took = (wall(taken["acquireTime"]) - killed).total_seconds()
        assert took <= TAKEOVER_BOUND, f"takeover {took:.2f}s after the kill (bound {TAKEOVER_BOUND:g}s)"
        # and not before a's last renewal could have expired: b never takes a valid lease
        assert took >= LEASE_DURATION - RETRY_PERIOD - 0.5, f"b took an unexpired lease ({took:.2f}s)"
        assert int(taken["leaseTransitions"]) == transitions + 1

        wait_ready("pending", ns)
        assert master(b) == 1
        assert reconciles(b) >= 1


def test_sigterm_releases_the_lease_and_the_standby_takes_over_within_3s(kubeconfig: str, namespace: str) -> None:
    ns = namespace
    with candidates(kubeconfig, ns, "a", "b") as (a, b):
        start_leader_then_standby(a, b, ns)
        assert a.stop(timeout=30) == 0
        assert holder(ns) in ("", "b")          # released before the process exited
        events = {ln.get("event"): ln for ln in a.log_lines()}
        assert "released leadership" in events
        exited = wall(events["operator stopped"]["timestamp"])

        wait_until(lambda: holder(ns) == "b", timeout=10, interval=0.1, what="b to take over")
        took = (wall(lease(ns)["acquireTime"]) - exited).total_seconds()
        assert took <= 3.0, f"takeover {took:.2f}s after the leader exited"
        wait_until(lambda: master(b) == 1, timeout=5, what="b's leader_election_master_status 1")

        apply(sampledb("after", ns))
        wait_ready("after", ns)
        assert reconciles(b) >= 1

        assert b.stop(timeout=30) == 0      # the new leader releases the lease on SIGTERM too
        assert holder(ns) == ""


def test_leader_that_finds_the_lease_taken_stops_at_once_and_leaves_it_alone(kubeconfig: str,
                                                                            namespace: str) -> None:
    ns = namespace
    with candidates(kubeconfig, ns, "a") as (a,):
        a.start()
        wait_until(lambda: holder(ns) == "a", timeout=30, what="a to hold the lease")
        wait_until(lambda: steal(ns), timeout=30, interval=0.1, what="the Lease replaced by an intruder")
        taken = time.monotonic()

        assert a.proc is not None
        rc = a.proc.wait(timeout=RENEW_DEADLINE + 10)
        took = time.monotonic() - taken
        assert rc == 1      # lost leadership: exit non-zero so the Deployment restarts it as a standby
        assert took <= RETRY_PERIOD + RENEW_DEADLINE, f"a kept running {took:.1f}s after losing the lease"
        events = [ln.get("event") for ln in a.log_lines()]
        assert "lost leadership" in events
        assert "leadership lost, stopping controllers at once" in events
        assert "released leadership" not in events
        assert holder(ns) == "intruder"     # a never wrote the lease back
