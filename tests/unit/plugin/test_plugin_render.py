"""The status screen: ages as kubectl prints them, kubectl-style tables, each child's state in one line."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sampledb_operator.plugin.render import age, child_state, human_duration, render_status, table
from sampledb_operator.plugin.report import SecretInfo, StatusReport, strip_secret

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (59, "59s"), (119, "119s"), (120, "2m"), (200, "3m20s"), (600, "10m"), (179 * 60, "179m"),
    (3 * 3600, "3h"), (5 * 3600 + 30 * 60, "5h30m"), (20 * 3600, "20h"), (3 * 86400 + 4 * 3600, "3d4h"),
    (40 * 86400, "40d"), (-5, "0s"),
])
def test_human_duration_is_kubectls(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_age_of_timestamps_and_of_nothing() -> None:
    assert age("2026-01-02T11:59:00Z", NOW) == "60s"
    assert age(None, NOW) == "-"
    assert age("not a time", NOW) == "-"


def test_table_aligns_columns_three_spaces_apart_and_does_not_pad_the_last() -> None:
    assert table(("NAME", "PHASE"), [("a", "Running"), ("longer", "Failed")]) == [
        "  NAME     PHASE", "  a        Running", "  longer   Failed"]


def db(**status: Any) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
            "metadata": {"name": "orders", "namespace": "shop", "generation": 3,
                         "creationTimestamp": "2026-01-02T10:00:00Z"},
            "spec": {"version": "17.2", "storage": {"size": "5Gi"}}, "status": status}


def test_status_screen_shows_phase_versions_endpoint_conditions_children_and_backups() -> None:
    report = StatusReport(
        db=db(phase="Upgrading", currentVersion="16.4", observedGeneration=3, endpoint="orders.shop.svc:5432",
              lastBackup={"name": "orders-pre-upgrade-1", "completedAt": "2026-01-02T11:55:00Z"},
              conditions=[{"type": "Ready", "status": "True", "reason": "DatabaseReady",
                           "lastTransitionTime": "2026-01-02T10:01:00Z", "message": "ok"},
                          {"type": "Upgrading", "status": "True", "reason": "UpgradeJobRunning",
                           "lastTransitionTime": "2026-01-02T11:56:00Z", "message": "Job orders-upgrade-x runs"}]),
        children=[{"kind": "StatefulSet", "metadata": {"name": "orders", "creationTimestamp": "2026-01-02T10:00:00Z"},
                   "spec": {"replicas": 1, "template": {"spec": {"containers": [{"image": "postgres:16.4"}]}}},
                   "status": {"readyReplicas": 1, "currentRevision": "a", "updateRevision": "a"}},
                  {"kind": "Job", "metadata": {"name": "orders-upgrade-x",
                                               "labels": {"app.kubernetes.io/component": "upgrade"}},
                   "status": {"active": 1}}],
        secret=SecretInfo("orders-credentials", ("password", "username"), "2026-01-02T10:00:00Z"),
        backups=[{"metadata": {"name": "orders-pre-upgrade-1"}, "spec": {"reason": "pre-upgrade"},
                  "status": {"phase": "Succeeded", "sizeBytes": 2048, "completedAt": "2026-01-02T11:55:00Z"}}],
    )
    text = render_status(report, NOW)
    assert text.startswith("SampleDB shop/orders\n")
    assert "  Phase:           Upgrading\n" in text
    assert "  Version:         17.2 (running 16.4, upgrade: UpgradeJobRunning)\n" in text
    assert "  Endpoint:        orders.shop.svc:5432\n" in text
    assert "  Generation:      3 (observed 3)\n" in text
    assert "  Last backup:     orders-pre-upgrade-1, 5m ago (2026-01-02T11:55:00Z)\n" in text
    assert "Upgrading   True     UpgradeJobRunning   4m      Job orders-upgrade-x runs" in text
    children = text.split("\nChildren\n")[1].split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in children] == ["KIND", "StatefulSet", "Secret", "Job"]
    assert "1/1 ready, postgres:16.4" in children[1]
    assert "upgrade: Running" in children[3]
    assert "orders-pre-upgrade-1   pre-upgrade   Succeeded   2.0KiB   5m ago" in text


def test_a_database_not_reconciled_yet_says_so() -> None:
    text = render_status(StatusReport(db=db()), NOW)
    assert "  Phase:           (none yet)\n" in text
    assert "not running yet" in text
    assert "(none yet: the operator has not reconciled it)" in text
    assert "Credentials:     Secret missing" in text


def test_problems_reading_some_kinds_are_listed_not_fatal() -> None:
    text = render_status(StatusReport(db=db(), problems=["cannot list pods: Forbidden"]), NOW)
    assert text.endswith("Not shown\n  cannot list pods: Forbidden\n")


@pytest.mark.parametrize(("obj", "state"), [
    ({"kind": "Pod", "spec": {"nodeName": "n1"},
      "status": {"phase": "Running", "containerStatuses": [{"ready": True, "restartCount": 2}]}},
     "Running, ready, 2 restarts, node n1"),
    ({"kind": "Pod", "spec": {}, "status": {"phase": "Pending"}}, "Pending, not ready, 0 restarts, node unscheduled"),
    ({"kind": "PersistentVolumeClaim",
      "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}},
      "status": {"phase": "Bound", "capacity": {"storage": "2Gi"}}}, "Bound, 2Gi, class fast"),
    ({"kind": "PersistentVolumeClaim", "spec": {"resources": {"requests": {"storage": "1Gi"}}},
      "status": {"phase": "Pending"}}, "Pending, 1Gi"),
    ({"kind": "Service", "spec": {"clusterIP": "None", "ports": [{"port": 5432}]}}, "headless, port 5432"),
    ({"kind": "Service", "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.1", "ports": [{"port": 5432}]}},
     "ClusterIP 10.0.0.1:5432"),
    ({"kind": "StatefulSet", "spec": {"replicas": 1, "template": {"spec": {"containers": [{"image": "p:17"}]}}},
      "status": {"readyReplicas": 0, "currentRevision": "a", "updateRevision": "b"}}, "0/1 ready, rolling out, p:17"),
    ({"kind": "ConfigMap", "data": {"a": "1", "b": "2"}}, "2 keys"),
    ({"kind": "PodDisruptionBudget", "spec": {"minAvailable": 2},
      "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "expectedPods": 3}},
     "min available 2, 1 evictions allowed, 3/3 healthy"),
    ({"kind": "PodDisruptionBudget", "spec": {"maxUnavailable": 1}, "status": {}},
     "max unavailable 1, 0 evictions allowed, 0/0 healthy"),
    ({"kind": "Deployment", "spec": {"replicas": 2}, "status": {"readyReplicas": 1, "updatedReplicas": 2}},
     "1/2 ready, 2 updated"),
    ({"kind": "Job", "metadata": {"labels": {"app.kubernetes.io/component": "backup"}},
      "status": {"conditions": [{"type": "Complete", "status": "True"}]}}, "backup: Succeeded"),
    ({"kind": "Job", "metadata": {}, "status": {"conditions": [{"type": "Failed", "status": "True",
                                                                "reason": "BackoffLimitExceeded"}]}},
     "job: Failed (BackoffLimitExceeded)"),
])
def test_child_state_in_one_line(obj: dict[str, Any], state: str) -> None:
    assert child_state(obj) == state


def test_a_secret_is_reduced_to_its_name_and_key_names() -> None:
    info = strip_secret({"metadata": {"name": "orders-credentials", "creationTimestamp": "2026-01-02T10:00:00Z"},
                         "data": {"password": "c2VjcmV0", "username": "YXBw"}})
    assert info == SecretInfo("orders-credentials", ("password", "username"), "2026-01-02T10:00:00Z")
    assert "c2VjcmV0" not in repr(info)


def test_status_screen_shows_the_instances_with_roles_positions_and_lag() -> None:
    status = {"phase": "Running", "readyInstances": "2/3", "primary": "orders-i1-0", "targetPrimary": None,
              "instances": [{"name": "orders-0", "role": "replica", "ready": False, "lsn": "0/5000060",
                             "lagBytes": 2048},
                            {"name": "orders-i1-0", "role": "primary", "ready": True, "lsn": "0/5000860"},
                            {"name": "orders-i2-0", "role": "replica", "ready": True, "lsn": "0/5000860",
                             "lagBytes": 0}]}
    report = StatusReport(db=db(**status), children=[], secret=None, backups=[])
    report.db["spec"].update(replicas=3, replication={"synchronous": True})
    text = render_status(report, NOW)
    assert "  Instances:       2/3 ready (spec.replicas 3), primary orders-i1-0, synchronous\n" in text
    block = text.split("\nInstances\n")[1].split("\n\n")[0].splitlines()
    assert [line.split() for line in block] == [
        ["NAME", "ROLE", "READY", "LSN", "LAG"], ["orders-0", "replica", "no", "0/5000060", "2.0KiB"],
        ["orders-i1-0", "primary", "yes", "0/5000860", "-"], ["orders-i2-0", "replica", "yes", "0/5000860", "0B"]]


def test_one_instance_has_no_instances_table() -> None:
    report = StatusReport(db=db(phase="Running", readyInstances="1/1", primary="orders-0",
                                instances=[{"name": "orders-0", "role": "primary", "ready": True}]),
                          children=[], secret=None, backups=[])
    text = render_status(report, NOW)
    assert "\nInstances\n" not in text and "  Instances:       1/1 ready (spec.replicas 1), primary orders-0\n" in text


def test_status_screen_shows_the_proven_recovery_or_why_not() -> None:
    archived = db(archive={"destination": "s3://b/shop/orders",
                           "lastVerification": {"jobName": "v", "verified": True, "reason": "Verified",
                                                "finishedAt": "2026-01-02T10:00:00Z", "rtoSeconds": 12.3,
                                                "rpoSeconds": 41.0, "tables": 3}},
                  conditions=[{"type": "RecoveryVerified", "status": "True", "reason": "Verified", "message": "ok",
                               "lastTransitionTime": "2026-01-02T10:00:00Z"}])
    archived["spec"]["backup"] = {"objectStore": {"bucket": "b", "credentials": {"secretName": "k"}}}
    text = render_status(StatusReport(db=archived, children=[], secret=None, backups=[]), NOW)
    assert "  Recovery proven: yes, 120m ago: RTO 12.3 s, RPO 41.0 s, 3 tables compared\n" in text
    archived["status"]["conditions"] = [{"type": "RecoveryVerified", "status": "False", "reason": "RestoreFailed",
                                         "message": "WAL file 000000010000000000000004 is missing",
                                         "lastTransitionTime": "2026-01-02T10:00:00Z"}]
    text = render_status(StatusReport(db=archived, children=[], secret=None, backups=[]), NOW)
    assert "RestoreFailed: WAL file 000000010000000000000004 is missing" in text
    archived["status"]["conditions"] = []
    assert "Recovery proven" not in render_status(StatusReport(db=archived, children=[], secret=None, backups=[]), NOW)


def test_status_screen_lists_the_base_backups_in_the_store() -> None:
    archived = db(archive={"destination": "s3://b/shop/orders", "baseBackupsCount": 3,
                           "firstRecoverabilityPoint": "2025-12-29T00:10:00Z",
                           "baseBackups": [{"backupId": "20260102T000012", "name": "orders-basebackup-2",
                                            "completedAt": "2026-01-02T10:00:00Z", "sizeBytes": 8388608},
                                           {"backupId": "20260101T000011", "completedAt": "2026-01-01T12:00:00Z"}]})
    archived["spec"]["backup"] = {"objectStore": {"bucket": "b", "credentials": {"secretName": "k"}}}
    text = render_status(StatusReport(db=archived, children=[], secret=None, backups=[]), NOW)
    section = text.split("\nBase backups in s3://b/shop/orders\n")[1].split("\n\n")[0].splitlines()
    assert section[0].split() == ["BACKUP", "ID", "NAME", "SIZE", "COMPLETED"]
    assert section[1].split()[:4] == ["20260102T000012", "orders-basebackup-2", "8.0MiB", "120m"]
    assert section[2].split()[:3] == ["20260101T000011", "-", "-"]
    assert section[3] == "  ... 1 older"
    assert "recoverable from 2025-12-29T00:10:00Z" in section[4]
    assert "Base backups in" not in render_status(StatusReport(db=db(), children=[], secret=None, backups=[]), NOW)


def test_a_degraded_database_shows_its_problem_first() -> None:
    stuck = db(phase="Degraded", conditions=[{"type": "Degraded", "status": "True", "reason": "Unschedulable",
                                              "message": "pod orders-0 cannot be scheduled: 0/3 nodes are available",
                                              "lastTransitionTime": "2026-01-02T11:59:00Z"}])
    lines = render_status(StatusReport(db=stuck, children=[], secret=None, backups=[]), NOW).splitlines()
    assert lines[1] == "  Problem:         Unschedulable: pod orders-0 cannot be scheduled: 0/3 nodes are available"
    assert "Problem:" not in render_status(StatusReport(db=db(), children=[], secret=None, backups=[]), NOW)


def test_backups_with_copies_in_the_store_say_which_and_a_restore_from_a_store_names_it() -> None:
    copied = {"metadata": {"name": "orders-manual-2"}, "spec": {"reason": "manual"},
              "status": {"phase": "Succeeded", "sizeBytes": 2048, "completedAt": "2026-01-02T11:55:00Z",
                         "storeLocation": "s3://b/shop/orders/logical/manual/orders-manual-2.dump"}}
    local = {"metadata": {"name": "orders-manual-1"}, "spec": {"reason": "manual"}, "status": {"phase": "Failed"}}
    restored = db()
    restored["spec"]["restore"] = {"backupName": "orders-manual-2", "database": "orders-old",
                                   "objectStore": {"bucket": "b", "credentials": {"secretName": "k"}}}
    text = render_status(StatusReport(db=restored, children=[], secret=None, backups=[copied, local]), NOW)
    section = text.split("\nBackups\n")[1].split("\n\n")[0].splitlines()
    assert section[0].split() == ["NAME", "REASON", "PHASE", "SIZE", "COMPLETED", "IN", "STORE"]
    assert section[1].split()[-1] == "yes" and section[2].split()[-1] == "no"
    assert "Restored from:   backup orders-manual-2 of orders-old in its object store" in text
    plain = render_status(StatusReport(db=db(), children=[], secret=None, backups=[local]), NOW)
    assert "IN STORE" not in plain
