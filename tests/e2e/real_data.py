"""Shared helpers of the real-data end-to-end tests (tests/e2e/test_real_data_*.py).

Those tests run the operator as users install it (tests/support/install.py: in the cluster, the
shipped RBAC, two replicas with leader election, the locally built image) against databases that
really run (the real node). They judge by the data itself: per-table row counts and checksums read
with psql inside the database's pod, never by Job status alone.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from typing import Any

import yaml
from tests.support import images
from tests.support.cluster import Cluster, refresh_local_images
from tests.support.install import REAL_DATA_NAMESPACE, forbidden_lines, install_operator, operator_logs
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until

from sampledb_operator.model import names

NS = REAL_DATA_NAMESPACE
PG15 = "15.20"
PG18 = "18.6"


def installed_operator(cluster: Cluster) -> Iterator[str]:
    """The operator installed in the cluster, serving NS; afterwards, its logs hold no 403 (the
    `installed` fixture of tests/e2e/conftest.py). On the local cluster, `hack/cluster up` first
    builds and imports the image of the current sources (nothing when it is up to date)."""
    if cluster.local:
        refresh_local_images()
    install_operator(images.operator_image(), [NS], "--recheck-period", "5")
    yield NS
    bad = forbidden_lines(operator_logs())
    assert not bad, "the operator was refused requests (RBAC too small):\n" + "\n".join(bad[:20])


def unique(base: str) -> str:
    return f"{base}-{secrets.token_hex(2)}"


def sampledb(name: str, version: str = PG15, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"version": version, "storage": {"size": "256Mi"}, "deletionPolicy": "Delete"}
    body.update(spec)
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": name, "namespace": NS},
            "spec": body}


def apply(*objs: dict[str, Any]) -> None:
    kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump_all(objs))


def wait_ready(name: str, timeout: float = 300, ns: str = NS) -> None:
    kubectl("wait", "-n", ns, f"sampledb/{name}", "--for=condition=Ready", f"--timeout={int(timeout)}s",
            timeout=timeout + 10)


def status(name: str, ns: str = NS) -> dict[str, Any]:
    return (get_or_none("sampledb", name, ns) or {}).get("status") or {}


def condition(name: str, type_: str, ns: str = NS) -> dict[str, Any]:
    return next((c for c in status(name, ns).get("conditions", []) if c["type"] == type_), {})


def delete(name: str, *, wait: bool = True, timeout: float = 300) -> None:
    kubectl("delete", "sampledb", name, "-n", NS, "--wait=false", "--ignore-not-found")
    if wait:
        wait_until(lambda: get_or_none("sampledb", name, NS) is None, timeout=timeout, what=f"{name} to be deleted")


def pod_of(name: str, ns: str = NS) -> str:
    """The database's primary pod: status.primary with standbys, else the pod of its one StatefulSet."""
    sts = kubectl_json("get", "statefulsets", "-n", ns, "-l", f"sampledb.io/database={name}")["items"]
    if len(sts) > 1:
        primary = status(name, ns).get("primary")
        assert primary, f"{name} has {len(sts)} instances and no status.primary"
        return str(primary)
    assert len(sts) == 1, f"expected one StatefulSet of {name}, found {len(sts)}"
    return f"{sts[0]['metadata']['name']}-0"


def sql(name: str, statement: str, *, check: bool = True, timeout: float = 60, ns: str = NS,
        superuser: bool = False) -> str:
    """Run SQL as the application's role `app` (what it makes, the application may use), or as the superuser
    `postgres` for what only it may do, over the pod's local socket; stdout (unaligned, tuples only)."""
    out = kubectl("exec", "-n", ns, pod_of(name, ns), "-c", "postgres", "--", "psql", "-X", "-v", "ON_ERROR_STOP=1",
                  "-U", "postgres" if superuser else "app", "-d", "app", "-qAt", "-c", statement, check=check,
                  timeout=timeout)
    return out.stdout.strip()


STATS_SQL = """
SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables ORDER BY 1
"""


def table_stats(name: str, ns: str = NS) -> dict[str, tuple[int, str]]:
    """Every user table: (row count, checksum of its rows independent of their order), read by the superuser (the
    operator's own tables, sampledb_meta, are not the application's to read)."""
    tables = [t for t in sql(name, STATS_SQL, ns=ns, superuser=True).splitlines() if t]
    out: dict[str, tuple[int, str]] = {}
    for table in tables:
        line = sql(name, f"SELECT count(*) || '|' || coalesce(md5(string_agg(h, '' ORDER BY h)), '') "
                         f"FROM (SELECT md5(t::text) AS h FROM {table} t) s", ns=ns, superuser=True)
        count, _, digest = line.partition("|")
        out[table] = (int(count), digest)
    return out


SEED_SQL = """
CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric(12,2));
INSERT INTO accounts SELECT g, 'owner ' || g || ' ünïcødé ✓', g * 1.5 FROM generate_series(1, 500) g;
CREATE TABLE IF NOT EXISTS events (id bigserial PRIMARY KEY, account int REFERENCES accounts, payload jsonb,
                                   at timestamptz DEFAULT '2026-01-01 00:00:00+00');
INSERT INTO events (account, payload) SELECT 1 + g % 500, jsonb_build_object('n', g, 'tag', md5(g::text))
  FROM generate_series(1, 2000) g;
"""


def seed(name: str, ns: str = NS) -> dict[str, tuple[int, str]]:
    sql(name, SEED_SQL, ns=ns)
    stats = table_stats(name, ns)
    assert stats["public.accounts"][0] == 500 and stats["public.events"][0] == 2000
    return stats


def backups_of(name: str) -> list[dict[str, Any]]:
    return [b for b in kubectl_json("get", "sampledbbackups", "-n", NS)["items"] if b["spec"]["database"] == name]


def wait_backup(backup: str, timeout: float = 180) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        b = get_or_none("sampledbbackup", backup, NS) or {}
        phase = b.get("status", {}).get("phase")
        if phase == "Failed":
            raise AssertionError(f"backup {backup} failed: {b['status']}")
        return b if phase == "Succeeded" else None

    return wait_until(done, timeout=timeout, what=f"backup {backup} to succeed")


HEARTBEAT = "public.heartbeat"  # the writer's table: CREATE TABLE heartbeat (id bigserial PRIMARY KEY, at timestamptz)

WRITER_SCRIPT = """
while true; do
  if psql -X -w -q -c "INSERT INTO heartbeat DEFAULT VALUES" >/dev/null 2>&1; then echo "ok $(date +%s.%N)";
  else echo "fail $(date +%s.%N)"; fi
  sleep 0.2
done
"""


def writer(name: str) -> dict[str, object]:
    """A pod that writes through the database's Service every 0.2 s and logs each attempt's outcome."""
    secret = names.secret_name(name)

    def key(var: str, k: str) -> dict[str, object]:
        return {"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": k}}}

    env = [key("PGHOST", "host"), key("PGPORT", "port"), key("PGDATABASE", "database"), key("PGUSER", "username"),
           key("PGPASSWORD", "password"), {"name": "PGCONNECT_TIMEOUT", "value": "2"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-writer"},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "writer", "image": f"postgres:{PG15}", "command": ["bash", "-c",
                                                                                                WRITER_SCRIPT],
                                     "env": env, "securityContext": {
                                         "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}


def start_writer(name: str, *, avoid: str | None = None) -> None:
    """writer(name) started (a previous one deleted first), on any node but `avoid`, and writes accepted through it
    (the table heartbeat must exist)."""
    kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--ignore-not-found", "--wait=true", timeout=120)
    client = writer(name)
    if avoid is not None:
        client["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {  # type: ignore[index]
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [avoid]}]}]}}}
    apply(client)
    wait_until(lambda: kubectl_json("get", "pod", "-n", NS, f"{name}-writer")["status"].get("phase") == "Running",
               timeout=120, what="the writer pod to run")
    wait_accepted(name)


def wait_accepted(name: str, timeout: float = 60) -> None:
    """Five more rows in heartbeat: the writer's writes are accepted."""
    written = int(sql(name, "SELECT count(*) FROM heartbeat"))
    wait_until(lambda: int(sql(name, "SELECT count(*) FROM heartbeat")) >= written + 5, timeout=timeout,
               what="writes accepted")


def write_downtime(name: str) -> tuple[float, int]:
    """The longest time between two accepted writes in the writer's log (s), and the number accepted."""
    log = kubectl("logs", "-n", NS, f"{name}-writer", timeout=60).stdout.split()
    accepted = [float(log[i + 1]) for i in range(0, len(log) - 1, 2) if log[i] == "ok"]
    assert len(accepted) > 10, log[-20:]
    return max(b - a for a, b in itertools.pairwise(accepted)), len(accepted)
