"""A switchover under writers on the real node: clients of the pooler (transaction mode) wait while the primary
changes and see no error, because the operator pauses PgBouncer's pools before the old primary stops and resumes
them on the new one; clients connected straight to the primary see their connection end (the baseline). Every
acknowledged row is on the new primary. The writers' longest waits are printed for docs/benchmarks.md.
"""

from __future__ import annotations

import base64
import threading
import time
from typing import Any

import psycopg
import pytest
from tests.e2e.conftest import apply, status, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

from sampledb_operator.decide.replicas.replication import SWITCHOVER_ANNOTATION
from sampledb_operator.model import names

pytestmark = pytest.mark.cluster
NAME = "paused"


def pod_ip(ns: str, pod: str) -> str:
    return str(kubectl_json("get", "pod", pod, "-n", ns)["status"]["podIP"])


class Writer(threading.Thread):
    """Inserts numbered rows, one transaction each, through `address()`; records the acknowledged ids, the errors
    and the longest time between two acknowledgements. Reconnects after an error."""

    def __init__(self, address: Any, password: str, table: str) -> None:
        super().__init__(daemon=True)
        self.address, self.password, self.table = address, password, table
        self.acked: list[int] = []
        self.errors: list[str] = []
        self.longest = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        n, last, conn = 0, time.monotonic(), None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = psycopg.connect(host=self.address(), port=5432, dbname="app", user="app",
                                           password=self.password, connect_timeout=5, autocommit=True,
                                           tcp_user_timeout=5000)  # a peer gone without a reset: error in 5 s
                n += 1
                conn.execute(f"INSERT INTO {self.table} VALUES (%s)", (n,))
                self.acked.append(n)
                now = time.monotonic()
                self.longest, last = max(self.longest, now - last), now
            except (psycopg.Error, AssertionError) as exc:  # AssertionError: address() found no pod (recreated)
                self.errors.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.1)
            time.sleep(0.02)
        if conn is not None:
            conn.close()


def test_pooled_clients_wait_through_a_switchover_without_an_error(real_namespace: str,
                                                                   real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": NAME, "namespace": ns},
           "spec": {"version": "15.20", "storage": {"size": "512Mi"}, "replicas": 2,
                    "pooler": {"instances": 1, "mode": "transaction"}}})
    wait_ready(NAME, ns, timeout=420)
    wait_until(lambda: status(NAME, ns).get("readyInstances") == "2/2", timeout=300, what="both instances ready")
    wait_until(lambda: any(c.get("type") == "PoolerReady" and c.get("status") == "True"
                           for c in status(NAME, ns).get("conditions") or []), timeout=300, what="the pooler ready")
    password = base64.b64decode(kubectl_json("get", "secret", names.secret_name(NAME), "-n", ns)["data"][
        "password"]).decode()
    [pooler_pod] = [p for p in kubectl_json("get", "pods", "-n", ns, "-l", f"sampledb.io/pooler={NAME}")["items"]
                    if not p["metadata"].get("deletionTimestamp")]
    pooler_ip = pooler_pod["status"]["podIP"]
    old, new = names.instance_pod_name(NAME, 0), names.instance_pod_name(NAME, 1)
    assert status(NAME, ns)["primary"] == old
    with psycopg.connect(host=pooler_ip, port=5432, dbname="app", user="app", password=password,
                         autocommit=True) as conn:
        conn.execute("CREATE TABLE pooled (id int PRIMARY KEY); CREATE TABLE direct (id int PRIMARY KEY)")

    pooled = Writer(lambda: pooler_ip, password, "pooled")
    direct = Writer(lambda: pod_ip(ns, status(NAME, ns)["primary"]), password, "direct")
    for writer in (pooled, direct):
        writer.start()
    wait_until(lambda: len(pooled.acked) > 50 and len(direct.acked) > 50, timeout=60, what="both writers writing")
    kubectl("annotate", "sampledb", NAME, "-n", ns, f"{SWITCHOVER_ANNOTATION}={new}")
    wait_until(lambda: status(NAME, ns).get("primary") == new and not status(NAME, ns).get("targetPrimary")
               and not status(NAME, ns).get("poolerPause"), timeout=180, what="the switchover done and resumed")
    seen = (len(pooled.acked), len(direct.acked))
    wait_until(lambda: len(pooled.acked) > seen[0] + 50 and len(direct.acked) > seen[1] + 50, timeout=60,
               what="both writers writing to the new primary")
    for writer in (pooled, direct):
        writer.stop.set()
        writer.join(timeout=30)
    print(f"switchover: pooled writer {len(pooled.acked)} rows, {len(pooled.errors)} errors, longest wait"
          f" {pooled.longest:.1f} s; direct writer {len(direct.acked)} rows, {len(direct.errors)} errors, longest"
          f" gap {direct.longest:.1f} s")
    assert pooled.errors == [], pooled.errors[:5]
    assert direct.errors, "the baseline: a client of the old primary loses its connection"
    reasons = [e["reason"] for e in kubectl_json("get", "events", "-n", ns, "--field-selector",
                                                 f"involvedObject.name={NAME}")["items"]]
    assert "PoolerPaused" in reasons and "PoolerResumed" in reasons, reasons
    with psycopg.connect(host=pod_ip(ns, new), port=5432, dbname="app", user="app", password=password,
                         autocommit=True) as conn:
        for writer in (pooled, direct):
            rows = {r[0] for r in conn.execute(f"SELECT id FROM {writer.table}").fetchall()}
            assert set(writer.acked) <= rows, sorted(set(writer.acked) - rows)[:5]  # every acknowledged row
    wait_ready(NAME, ns, timeout=120)
