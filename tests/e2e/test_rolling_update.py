"""Real PostgreSQL, operator installed in the cluster: a minor upgrade of a database of three instances rolls
them one at a time (the standbys first, then a switchover, the old primary last) while a writer inserts through
the database's Service every 0.2 s: every row is there afterwards, every instance runs the new image and
streams, the primary changed exactly once, and the longest time without an accepted write is one switchover's.
Then a parameter that needs a restart (max_connections) rolls the same way, measured the same way.

The new minor is the local PostgreSQL 15 image under a second tag (the node knows no other 15.x): a new image
and version in the pod template, as a real minor upgrade is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from tests.e2e.real_data import (
    NS,
    PG15,
    apply,
    delete,
    seed,
    sql,
    start_writer,
    status,
    table_stats,
    unique,
    wait_accepted,
    wait_ready,
    write_downtime,
)
from tests.support.cluster import Cluster, tag_node_image
from tests.support.kube import kubectl, kubectl_json, wait_until

pytestmark = pytest.mark.cluster

NEXT = f"{PG15.split('.')[0]}.{int(PG15.split('.')[1]) + 1}"
SWITCHOVER_BOUND_S = 30.0  # a clean stop of the primary, a promotion and the Service's endpoints following


def images(name: str) -> dict[str, str]:
    pods = kubectl_json("get", "pods", "-n", NS, "-l", f"sampledb.io/database={name},"
                        "app.kubernetes.io/component=database")["items"]
    return {p["metadata"]["name"]: next(c["image"] for c in p["spec"]["containers"] if c["name"] == "postgres")
            for p in pods}


def reasons(name: str) -> list[str]:
    events = kubectl_json("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}")["items"]
    return [e["reason"] for e in sorted(events, key=lambda e: e.get("firstTimestamp") or e.get("eventTime") or "")
            for _ in range(int(e.get("count") or 1))]


def under_writes(name: str, patch: dict[str, object], done: Callable[[], bool], what: str) -> tuple[float, float]:
    """`patch` applied to the SampleDB while a pod writes through its Service every 0.2 s, until `done`: the
    seconds from the patch to Ready, and the longest time without an accepted write; every accepted write is
    there afterwards."""
    start_writer(name)
    started = time.monotonic()
    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p", json.dumps(patch))
    wait_until(done, timeout=900, what=what)
    wait_ready(name)
    took = time.monotonic() - started
    wait_accepted(name, timeout=120)
    downtime, accepted = write_downtime(name)
    kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--wait=false")
    assert int(sql(name, "SELECT count(*) FROM heartbeat")) >= accepted  # every accepted write is there
    return took, downtime


def test_a_minor_upgrade_of_three_instances_rolls_them_with_one_switchover(installed: str, cluster: Cluster) -> None:
    if cluster.local:
        tag_node_image(f"postgres:{PG15}", f"postgres:{NEXT}")
    name = unique("rolling")
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": name, "namespace": NS},
           "spec": {"version": PG15, "storage": {"size": "256Mi"}, "deletionPolicy": "Delete", "replicas": 3,
                    "upgrade": {"backupBeforeMinor": False}}})
    wait_ready(name)
    wait_until(lambda: status(name).get("readyInstances") == "3/3", timeout=300, what="three instances ready")
    before = seed(name)
    sql(name, "CREATE TABLE heartbeat (id bigserial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp())")
    first_primary = status(name)["primary"]

    def rolled() -> bool:
        st = status(name)
        return (st.get("currentVersion") == NEXT and st.get("readyInstances") == "3/3"
                and set(images(name).values()) == {f"postgres:{NEXT}"} and not st.get("targetPrimary"))

    took, downtime = under_writes(name, {"spec": {"version": NEXT}}, rolled, f"every instance on {NEXT}")
    seen = reasons(name)
    assert seen.count("RollingRestart") == 2 and seen.count("RollingSwitchover") == 1, seen
    assert seen.count("SwitchoverStarted") == 1 and seen.count("FailoverStarted") == 0, seen
    assert status(name)["primary"] != first_primary  # the old primary restarted last, as a standby
    assert {k: v for k, v in table_stats(name).items() if k in before} == before
    wait_until(lambda: sql(name, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
                           superuser=True) == "2",
               timeout=120, what="both standbys streaming from the new primary")
    print(f"\nminor upgrade {PG15} -> {NEXT} of 3 instances: {took:.0f} s from the patch to all ready;"
          f" longest time without an accepted write: {downtime:.1f} s")
    assert downtime < SWITCHOVER_BOUND_S, f"writes stopped for {downtime:.1f} s"

    # a parameter that needs a restart: the same roll, and every instance runs the new value
    second_primary = status(name)["primary"]

    def on_new_setting() -> bool:
        st = status(name)
        if st.get("readyInstances") != "3/3" or st.get("targetPrimary") or st.get("primary") == second_primary:
            return False
        return all(standby_sql(pod, "SHOW max_connections") == "120" for pod in images(name))

    took, downtime = under_writes(name, {"spec": {"parameters": {"max_connections": "120"}}}, on_new_setting,
                                  "every instance restarted with max_connections 120")
    assert reasons(name).count("RollingSwitchover") == 2
    assert {k: v for k, v in table_stats(name).items() if k in before} == before
    print(f"max_connections 100 -> 120 on 3 instances: {took:.0f} s from the patch to all restarted;"
          f" longest time without an accepted write: {downtime:.1f} s")
    assert downtime < SWITCHOVER_BOUND_S, f"writes stopped for {downtime:.1f} s"
    delete(name, wait=False)


def standby_sql(pod: str, statement: str) -> str:
    """psql as the database's superuser in one instance's postgres container (over its socket)."""
    return str(kubectl("exec", "-n", NS, pod, "-c", "postgres", "--", "psql", "-X", "-U", "postgres", "-d", "app",
                       "-qAt", "-c", statement, check=False).stdout).strip()
