"""Real PostgreSQL on three real nodes, operator installed in the cluster: `kubectl drain` of the primary's node.

The database's three instances run on three nodes (instanceSpread Required). A pod on another node writes through
the database's Service every 0.2 s. `kubectl drain` cordons the primary's node and evicts the database's pods
there: the primary's PodDisruptionBudget refuses the primary's eviction (kubectl drain retries), the operator
sees the cordon and switches over to a standby on another node, and the drain then evicts the old primary as a
standby. Afterwards every accepted write is there, the primary changed once by a switchover (no failover), and the
longest time without an accepted write is one switchover's. Uncordoned, the drained instance comes back and
streams from the new primary.

The drain evicts only the database's pods (--pod-selector): the operator's own pods may share the node, and
their move is not what is tested. Disruptive: it cordons a node every real-data test may use.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from tests.e2e.real_data import (
    NS,
    PG15,
    apply,
    delete,
    sql,
    start_writer,
    status,
    unique,
    wait_accepted,
    wait_ready,
    write_downtime,
)
from tests.support.kube import kubectl, kubectl_json, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.disruptive, pytest.mark.local_only]

SWITCHOVER_BOUND_S = 30.0  # a clean stop of the primary, a promotion and the Service's endpoints following


def pods(name: str) -> dict[str, dict[str, Any]]:
    items = kubectl_json("get", "pods", "-n", NS, "-l",
                         f"sampledb.io/database={name},app.kubernetes.io/component=database")["items"]
    return {p["metadata"]["name"]: p for p in items}


def node_of(name: str, pod: str) -> str | None:
    found = pods(name).get(pod)
    return None if found is None else found["spec"].get("nodeName")


def reasons(name: str) -> list[str]:
    events = kubectl_json("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}")["items"]
    return [e["reason"] for e in events for _ in range(int(e.get("count") or 1))]


def real_nodes() -> list[str]:
    return sorted(n["metadata"]["name"] for n in kubectl_json("get", "nodes", "-l", "type=real")["items"])


def one_per_node(name: str, **spec: Any) -> None:
    """A database of three instances on three real nodes (instanceSpread Required), `spec` added, all three ready."""
    nodes = real_nodes()
    assert len(nodes) >= 3, f"three real nodes needed (hack/real-node, SAMPLEDB_REAL_NODES): {nodes}"
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": name, "namespace": NS},
           "spec": {"version": PG15, "storage": {"size": "256Mi"}, "deletionPolicy": "Delete", "replicas": 3,
                    "scheduling": {"instanceSpread": "Required"}, **spec}})
    wait_ready(name)
    wait_until(lambda: status(name).get("readyInstances") == "3/3", timeout=300, what="three instances ready")


def whole_again(name: str, primary: str) -> None:
    """Three instances ready again, `primary` the primary, both standbys streaming from it."""
    wait_until(lambda: status(name).get("readyInstances") == "3/3", timeout=300, what="three instances ready again")
    wait_until(lambda: sql(name, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
                           superuser=True) == "2", timeout=180, what="both standbys streaming")
    assert status(name)["primary"] == primary


def test_a_drain_of_the_primarys_node_switches_over_first_and_loses_no_write(installed: str) -> None:
    name = unique("drain")
    drained: str | None = None
    try:
        one_per_node(name)
        placed = {pod: node_of(name, pod) for pod in pods(name)}
        assert len(set(placed.values())) == 3, placed  # one instance per node
        primary = status(name)["primary"]
        drained = placed[primary]
        assert drained is not None
        sql(name, "CREATE TABLE heartbeat (id bigserial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp())")

        # the writer runs elsewhere (a bare pod would stop the drain, and its writes must go on through it)
        start_writer(name, avoid=drained)

        started = time.monotonic()
        out = kubectl("drain", drained, "--pod-selector", f"sampledb.io/database={name}", "--ignore-daemonsets",
                      "--delete-emptydir-data", "--timeout=300s", timeout=330)
        took = time.monotonic() - started
        assert "evicting pod" in out.stdout + out.stderr
        # the primary's eviction was refused until the switchover: it moved, and by a switchover only
        new_primary = status(name)["primary"]
        assert new_primary != primary
        assert node_of(name, new_primary) not in (None, drained)
        assert node_of(name, primary) != drained  # evicted: made again, and no node takes it while cordoned
        seen = reasons(name)
        assert seen.count("NodeMaintenanceSwitchover") == 1, seen
        assert seen.count("SwitchoverStarted") == 1 and seen.count("FailoverStarted") == 0, seen

        wait_accepted(name, timeout=120)
        downtime, accepted = write_downtime(name)
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--wait=false")
        assert int(sql(name, "SELECT count(*) FROM heartbeat")) >= accepted  # every accepted write is there
        print(f"\ndrain of the primary's node {drained}: {took:.1f} s from cordon to drained; longest time without"
              f" an accepted write: {downtime:.1f} s")
        assert downtime < SWITCHOVER_BOUND_S, f"writes stopped for {downtime:.1f} s"

        # uncordoned, the evicted instance comes back on its node and streams from the new primary
        kubectl("uncordon", drained)
        drained = None
        whole_again(name, new_primary)
    finally:
        if drained is not None:
            kubectl("uncordon", drained, check=False)
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--ignore-not-found", "--wait=false", check=False)
        delete(name)

