"""bench/scale/scale.py's own logic: a restart timed by its log, the control plane's CPU by component."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.support.scale_bench import load_scale_bench


@pytest.fixture
def scale(monkeypatch: pytest.MonkeyPatch) -> Any:
    return load_scale_bench(monkeypatch)


def test_the_scale_bench_times_a_restart_by_the_log_line_of_its_last_shard_enqueued(scale: Any, tmp_path: Any) -> None:
    from datetime import UTC, datetime

    log = tmp_path / "restart-0.log"
    log.write_text('{"timestamp": "2026-12-03T14:47:34.753358Z", "event": "shard\'s objects enqueued", "shard": 3}\n'
                   "a line that is not JSON\n"
                   '{"timestamp": "2026-12-03T14:47:34.744377Z", "event": "shard\'s objects enqueued", "shard": 2}\n')
    start = datetime(2026, 12, 3, 14, 47, 29, 753358, tzinfo=UTC).timestamp()
    assert scale.logged_shards_enqueued(log, start, 2) == pytest.approx(5.0)
    assert scale.logged_shards_enqueued(log, start, 1) == pytest.approx(4.991019)
    assert scale.logged_shards_enqueued(log, start, 3) is None  # not every shard enqueued (or another format)


def test_a_control_plane_component_is_named_by_its_arguments(scale: Any) -> None:
    assert scale.component_of(["/c/testcluster", "kube-apiserver", "--etcd-servers", "x"]) == "kube-apiserver"
    assert scale.component_of(["/c/testcluster", "etcd", "--data-dir", "/tmp/d/etcd-data"]) == "etcd"
    assert scale.component_of(["/c/kwok", "--kubeconfig", "/tmp/d/kubeconfig"]) == "kwok"
    assert scale.component_of(["/c/testcluster", "--help"]) is None
    assert scale.component_of(["/usr/bin/python3", "etcd"]) is None
    assert scale.component_of([]) is None


def test_the_clusters_cpu_counts_its_own_processes_by_component(scale: Any, tmp_path: Path) -> None:
    """A process run as `testcluster etcd --data-dir <cluster>/...` that burns CPU is counted as etcd for that
    cluster, and for no other cluster directory."""
    program = tmp_path / "testcluster"
    program.symlink_to(sys.executable)
    (tmp_path / "etcd").write_text("import sys, time\n"
                                   "end = time.process_time() + 0.3\n"
                                   "while time.process_time() < end: pass\n"
                                   "print('burnt', flush=True)\n"
                                   "sys.stdin.read()\n")
    cluster = str(tmp_path / "cluster")
    proc = subprocess.Popen([str(program), "etcd", "--data-dir", f"{cluster}/etcd-data"], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": ""})
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"burnt\n"
        used = scale.cluster_cpu(cluster)
        assert set(used) == {"etcd"} and used["etcd"] >= 0.25
        assert scale.cluster_cpu(str(tmp_path / "another")) == {}
    finally:
        proc.kill()
        proc.wait()
    assert scale.cluster_cpu(cluster) == {}  # reaped: no longer counted


def test_the_backups_phase_makes_one_manual_backup_per_database(scale: Any) -> None:
    body = scale.backup_for(("scale-003", "db-00312"))
    assert body["kind"] == "SampleDBBackup"
    assert body["metadata"] == {"name": "db-00312-bench", "namespace": "scale-003"}
    assert body["spec"] == {"database": "db-00312", "reason": "manual"}


def test_a_backup_is_done_once_it_succeeded_or_failed(scale: Any) -> None:
    assert scale.backup_done({"status": {"phase": "Succeeded"}}) == "Succeeded"
    assert scale.backup_done({"status": {"phase": "Failed"}}) == "Failed"
    assert scale.backup_done({"status": {"phase": "Running"}}) is None
    assert scale.backup_done({}) is None


def test_the_backups_phase_is_summed_up_from_its_create_and_done_times(scale: Any) -> None:
    created = {("a", "1"): 10.0, ("a", "2"): 11.0, ("b", "3"): 12.0}
    done = {("a", "1"): (14.0, "Succeeded"), ("a", "2"): (21.0, "Failed"), ("b", "3"): (15.0, "Succeeded")}
    assert scale.summarize_backups(created, done) == (2, 1, 11.0, 4.0)
    succeeded, failed, all_done, median = scale.summarize_backups(created, {})
    assert (succeeded, failed) == (0, 0) and math.isnan(all_done) and math.isnan(median)  # nothing finished


def request_line(resource: str, verb: str, value: int, *, subresource: str = "", version: str = "v1") -> str:
    return (f'apiserver_request_total{{code="200",component="apiserver",dry_run="",group="",resource="{resource}",'
            f'scope="resource",subresource="{subresource}",verb="{verb}",version="{version}"}} {value}')


APISERVER_METRICS = "\n".join([
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
    "# TYPE apiserver_request_total counter",
    request_line("events", "POST", 40),
    request_line("events", "POST", 2, version="v1beta1"),
    request_line("pods", "PATCH", 8, subresource="status"),
    request_line("services", "APPLY", 5),
    request_line("pods", "LIST", 3),
    'apiserver_request_current_inflight{request_kind="mutating"} 1',
])


def test_the_api_servers_requests_are_summed_by_verb_and_resource(scale: Any) -> None:
    after = scale.parse_apiserver_requests(APISERVER_METRICS)
    assert after == {"POST events": 42.0, "PATCH pods/status": 8.0, "APPLY services": 5.0, "LIST pods": 3.0}
    before = {"POST events": 2.0, "LIST pods": 3.0}
    requests, writes, by_resource = scale.apiserver_per_db(before, after, 2)
    assert (requests, writes) == (26.5, 26.5)  # the LISTs did not move; every other request is a write
    assert by_resource == {"POST events": 20.0, "PATCH pods/status": 4.0, "APPLY services": 2.5}
    assert list(by_resource) == ["POST events", "PATCH pods/status", "APPLY services"]  # the most first


def test_an_operators_cluster_has_the_finalizer_policy_unless_asked_not_to(scale: Any) -> None:
    assert scale.System.parse("operator:workers=16").admission
    assert not scale.System.parse("operator:workers=16:admission=0").admission
    assert not scale.System.parse("floor").admission  # the floor adds no finalizer: nothing to hold


def test_the_floor_with_the_operators_writes_is_parsed_with_its_admission_policy(scale: Any) -> None:
    same = scale.System.parse("floor:writes=operator")
    assert (same.kind, same.writes, same.label, same.admission) == ("floor", "operator", "floor-operator-writes", True)
    assert scale.System.parse("floor").writes == "children"
    with pytest.raises(ValueError, match="children or operator"):
        scale.System.parse("floor:writes=all")


class _RecordingClient:
    """A KubeClient's request, recorded: (method, path); every answer an empty object."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **_kw: Any) -> dict[str, Any]:
        self.calls.append((method, path))
        return {}


async def _settle(floor: Any) -> None:
    import asyncio

    while floor.tasks:
        await asyncio.gather(*list(floor.tasks))


@pytest.mark.asyncio
async def test_the_floor_with_the_operators_writes_makes_its_16_writes_a_database_in_its_stages(scale: Any) -> None:
    client = _RecordingClient()
    floor = scale.OperatorWritesFloor(client, "", 8)
    db = {**scale.sampledb(0, 100), "metadata": {"name": "db-00000", "namespace": "scale-000", "uid": "u1"}}
    labels = {"sampledb.io/database": "db-00000"}

    def child(name: str, **rest: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "scale-000", "labels": labels}, **rest}

    floor.on_sampledb("ADDED", db)
    await _settle(floor)
    first = [m for m, _p in client.calls]
    # the Secret, the connection and scripts ConfigMaps, two Services, two claims; a status; an Event
    assert sorted(first) == ["PATCH"] * 7 + ["POST"] * 2
    assert client.calls[-1] == ("POST", "/api/v1/namespaces/scale-000/events")
    floor.on_sampledb("MODIFIED", db)  # its status seen again: nothing more
    floor.on_pvc("MODIFIED", child("db-00000-backups", status={"phase": "Bound"}))
    floor.on_pvc("MODIFIED", child("data-db-00000-0", status={"phase": "Pending"}))
    await _settle(floor)
    assert len(client.calls) == 9  # the StatefulSet waits for its pod's data claim, not for the backups'
    floor.on_pvc("MODIFIED", child("data-db-00000-0", status={"phase": "Bound"}))
    await _settle(floor)
    assert client.calls[9:] == [("PATCH", "/apis/apps/v1/namespaces/scale-000/statefulsets/db-00000"),
                                ("PATCH", "/apis/sampledb.io/v1alpha1/namespaces/scale-000/sampledbs/db-00000/status")]
    floor.on_pod("MODIFIED", child("db-00000-0", status={"conditions": [{"type": "Ready", "status": "False"}]}))
    assert not floor.tasks  # not ready yet
    floor.on_pod("MODIFIED", child("db-00000-0", status={"conditions": [{"type": "Ready", "status": "True"}]}))
    await _settle(floor)
    third = client.calls[11:]
    assert ("GET", "/api/v1/namespaces/scale-000/configmaps/init-sql") in third
    assert ("PATCH", "/api/v1/namespaces/scale-000/pods/db-00000-0") in third
    assert sorted(m for m, _p in third) == ["GET", "PATCH", "PATCH", "POST"]
    floor.on_job("MODIFIED", child("db-00000-init-1", status={"succeeded": 1}))
    await _settle(floor)
    assert [m for m, _p in client.calls[15:]] == ["PATCH", "PATCH", "POST"]  # the expiry, Ready, DatabaseReady
    writes = [c for c in client.calls if c[0] != "GET"]
    assert len(writes) == 16 + 1  # the namespace's scripts ConfigMap is the one write shared by its databases


def test_each_system_is_compared_with_each_floor_of_its_round(scale: Any) -> None:
    from types import SimpleNamespace

    def run(label: str, rnd: int, all_ready: float, median: float, cpu: float) -> Any:
        return SimpleNamespace(label=label, round=rnd, all_ready_s=all_ready, median_s=median, cpu_s=cpu)

    results = [run("floor", 1, 100.0, 50.0, 10.0), run("floor-operator-writes", 1, 110.0, 50.0, 20.0),
               run("op", 1, 121.0, 55.0, 36.0), run("op", 2, 130.0, 60.0, 40.0)]
    assert scale.ratios(results, "floor") == ["| floor-operator-writes | 1 | 1.10 | 1.00 | 2.00 |",
                                              "| op | 1 | 1.21 | 1.10 | 3.60 |"]  # round 2 had no floor
    assert scale.ratios(results, "floor-operator-writes")[1] == "| op | 1 | 1.10 | 1.10 | 1.80 |"
    assert scale.ratios(results, "kopf") == []
