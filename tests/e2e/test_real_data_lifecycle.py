"""Real PostgreSQL, operator installed in the cluster: init SQL, clients, parameters, storage, crashes.

See tests/e2e/real_data.py: every check reads the data through psql in the database's pod.
"""

from __future__ import annotations

import pytest
from tests.e2e.real_data import (
    NS,
    apply,
    condition,
    delete,
    pod_of,
    sampledb,
    seed,
    sql,
    table_stats,
    unique,
    wait_ready,
)
from tests.support import images
from tests.support.install import leader
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.pod_security import POSTGRES_UID, restricted

pytestmark = pytest.mark.cluster

INIT_SQL = """
CREATE TABLE seeded (id int PRIMARY KEY, source text NOT NULL);
INSERT INTO seeded SELECT g, '{source}' FROM generate_series(1, 100) g;
"""


def test_init_sql_from_a_configmap_and_from_a_secret_has_run(installed: str) -> None:
    cm_db, secret_db = unique("init-cm"), unique("init-secret")
    apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{cm_db}-sql"},
         "data": {"init.sql": INIT_SQL.format(source="configmap")}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{secret_db}-sql",
                                                              "labels": {"sampledb.io/init-sql": "true"}},
         "stringData": {"init.sql": INIT_SQL.format(source="secret")}},
        sampledb(cm_db, init={"configMapKeyRef": {"name": f"{cm_db}-sql", "key": "init.sql"}}),
        sampledb(secret_db, init={"secretKeyRef": {"name": f"{secret_db}-sql", "key": "init.sql"}}),
    )
    for name, source in ((cm_db, "configmap"), (secret_db, "secret")):
        wait_ready(name)
        wait_until(lambda n=name: condition(n, "Initialized").get("status") == "True", timeout=120,
                   what=f"{name} Initialized")
        assert sql(name, "SELECT count(*), min(source), max(source) FROM seeded") == f"100|{source}|{source}"
    for name in (cm_db, secret_db):
        delete(name, wait=False)


def test_a_client_pod_connects_through_the_service_with_the_credentials_secret(installed: str) -> None:
    name = unique("client")
    apply(sampledb(name, parameters={"work_mem": "8MB"}))
    wait_ready(name)
    seed(name)
    secret = f"{name}-credentials"
    assert get_or_none("secret", secret, NS), "the credentials Secret the docs name"
    client = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-client"},
        "spec": restricted({"restartPolicy": "Never",
                 "containers": [{
                     "name": "psql", "image": images.POSTGRES_15,
                     "command": ["sh", "-c", 'psql "$DATABASE_URL" -X -qAt -c "SELECT current_user, '
                                 '(SELECT count(*) FROM accounts)" -c "SHOW work_mem"'],
                     "env": [{"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": secret, "key": "uri"}}},
                             {"name": "PGCONNECT_TIMEOUT", "value": "10"}]}]}, POSTGRES_UID)}
    apply(client)

    def finished() -> str | None:
        pod = kubectl_json("get", "pod", f"{name}-client", "-n", NS)
        phase = pod.get("status", {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    assert wait_until(finished, timeout=120, what="the client pod") == "Succeeded", \
        kubectl("logs", f"{name}-client", "-n", NS, check=False).stdout
    assert kubectl("logs", f"{name}-client", "-n", NS).stdout.split() == ["app|500", "8MB"]
    kubectl("delete", "pod", f"{name}-client", "-n", NS, "--wait=false")
    delete(name, wait=False)


def _pod_identity(name: str) -> tuple[str, int, str]:
    """The database pod's uid, its container's restart count and the server's start time."""
    pod = kubectl_json("get", "pod", pod_of(name), "-n", NS)
    restarts = sum(int(c.get("restartCount", 0)) for c in pod.get("status", {}).get("containerStatuses") or [])
    return pod["metadata"]["uid"], restarts, sql(name, "SELECT pg_postmaster_start_time()")


def _shows(name: str, **want: str) -> bool:
    try:
        return all(sql(name, f"SHOW {key}", check=False) == value for key, value in want.items())
    except AssertionError:
        return False


def test_a_parameters_edit_is_visible_in_show(installed: str) -> None:
    """A reloadable setting (work_mem) is applied by a reload: same pod, same container, same server
    process. A postmaster-context setting (max_connections) rolls the pod, and shows too."""
    name = unique("params")
    apply(sampledb(name, parameters={"work_mem": "8MB", "max_connections": "50"}))
    wait_ready(name)
    assert sql(name, "SHOW work_mem") == "8MB"
    assert sql(name, "SHOW max_connections") == "50"
    assert sql(name, "SHOW config_file", superuser=True) == "/etc/sampledb/postgresql.conf"
    assert sql(name, "SHOW data_directory", superuser=True) == "/var/lib/postgresql/data/pgdata"
    wait_until(lambda: kubectl_json("get", "sampledb", name, "-n", NS).get("status", {}).get("appliedParameters"),
               timeout=180, what="status.appliedParameters")
    before = _pod_identity(name)

    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p", '{"spec": {"parameters": {"work_mem": "16MB"}}}')
    wait_until(lambda: _shows(name, work_mem="16MB"), timeout=240, what="work_mem 16MB in SHOW, by a reload")
    assert _pod_identity(name) == before, "a reloadable setting must not restart the pod or the server"
    assert sql(name, "SHOW max_connections") == "50"

    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p",
            '{"spec": {"parameters": {"max_connections": "60"}}}')
    wait_until(lambda: _shows(name, work_mem="16MB", max_connections="60"), timeout=300,
               what="max_connections 60 in SHOW, after a restart")
    wait_ready(name)
    assert _pod_identity(name)[0] != before[0], "a postmaster-context setting rolls the pod"
    delete(name, wait=False)


def test_a_database_container_killed_in_the_middle_of_writes_keeps_every_committed_row(installed: str) -> None:
    name = unique("crash")
    apply(sampledb(name))
    wait_ready(name)
    sql(name, "CREATE TABLE w (id int PRIMARY KEY)")
    secret = f"{name}-credentials"
    # The writer commits one row per statement and prints the id only after the commit returned.
    writer_script = (
        'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); '
        'if psql "$DATABASE_URL" -X -qAt -c "INSERT INTO w VALUES ($i)" >/dev/null 2>&1; '
        'then echo "committed $i"; else sleep 0.2; fi; done')
    apply({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-writer"},
        "spec": restricted({"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "writer", "image": images.POSTGRES_15,
                                 "command": ["bash", "-c", writer_script],
                                 "env": [{"name": "DATABASE_URL",
                                          "valueFrom": {"secretKeyRef": {"name": secret, "key": "uri"}}},
                                         {"name": "PGCONNECT_TIMEOUT", "value": "3"}]}]}, POSTGRES_UID)})

    def committed() -> list[int]:
        out = kubectl("logs", f"{name}-writer", "-n", NS, check=False).stdout
        return [int(line.split()[1]) for line in out.splitlines() if line.startswith("committed ")]

    wait_until(lambda: len(committed()) >= 50, timeout=120, what="the writer to commit 50 rows")
    pod = pod_of(name)
    restarts_before = sum(s["restartCount"] for s in kubectl_json("get", "pod", pod, "-n", NS)["status"]
                          ["containerStatuses"])
    # An immediate shutdown: the postmaster and every backend quit at once, no checkpoint, no
    # flush beyond what the commits already made durable; the container exits and kubelet
    # restarts it; PostgreSQL recovers from its WAL.
    kubectl("exec", "-n", NS, pod, "-c", "postgres", "--", "bash", "-c",
            'pg_ctl stop -D "$PGDATA" -m immediate', check=False)
    wait_until(lambda: sum(s["restartCount"] for s in kubectl_json("get", "pod", pod, "-n", NS)["status"]
                           ["containerStatuses"]) > restarts_before, timeout=60, what="the container to restart")
    wait_ready(name)
    seen = len(committed())
    wait_until(lambda: len(committed()) >= seen + 20, timeout=120, what="writes to go on after the restart")
    kubectl("delete", "pod", f"{name}-writer", "-n", NS, "--grace-period=0", "--force", check=False)
    ids = set(committed())
    stored = {int(x) for x in sql(name, "SELECT id FROM w ORDER BY id").split()}
    lost = sorted(ids - stored)
    assert not lost, f"{len(lost)} committed rows lost after the crash, e.g. {lost[:10]}"
    delete(name, wait=False)


def test_storage_growth_keeps_the_data(installed: str) -> None:
    name = unique("grow")
    apply(sampledb(name, storage={"size": "256Mi", "storageClassName": "expandable"}))
    wait_ready(name)
    before = seed(name)
    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p", '{"spec": {"storage": {"size": "512Mi"}}}')
    pvcs = kubectl_json("get", "pvc", "-n", NS, "-l", f"sampledb.io/database={name}")["items"]
    data = next(p["metadata"]["name"] for p in pvcs if p["metadata"]["labels"].get("app.kubernetes.io/component")
                == "storage")
    wait_until(lambda: kubectl_json("get", "pvc", data, "-n", NS).get("status", {}).get("capacity", {})
               .get("storage") == "512Mi", timeout=120, what="the data volume to grow")
    wait_until(lambda: condition(name, "Degraded").get("status") == "False", timeout=120,
               what="no Degraded condition after the growth")
    wait_ready(name)
    assert table_stats(name) == before
    delete(name, wait=False)


def test_the_operator_runs_two_replicas_and_one_leads(installed: str) -> None:
    pods = kubectl_json("get", "pods", "-n", "sampledb-system", "-l", "app.kubernetes.io/name=sampledb-operator")
    running = [p for p in pods["items"] if p["status"].get("phase") == "Running"]
    assert len(running) == 2
    holder = wait_until(leader, timeout=60, what="a leader")
    assert holder in {p["metadata"]["name"] for p in running}
