"""Upgrading the operator to a version whose pod template differs restarts no database by surprise.

Version A (this checkout) makes three databases on kwok's nodes. Version B is a copy of the package whose pod
template carries one more annotation (as a new version's new default would), run in A's place:
- with --operator-rollouts=0 no pod is replaced, every database says OperatorUpdate=True/WaitingForRestart, and
  a restart asked for one database (the annotation kubectl sampledb restart sets) rolls that one only;
- with --operator-rollouts=1 the other two roll one after the other: a database's template changes only once
  the one before it says Applied, and every database ends on B's template, Ready, OperatorUpdate=False/Applied.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, sampledb, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import REPO, OperatorProcess

from sampledb_operator.decide.labels import RESTART_ANNOTATION
from sampledb_operator.model import names

pytestmark = pytest.mark.cluster

MARK = "example.com/operator-b"
DBS = ("one", "two", "three")


def version_b(tmp: Path) -> dict[str, str]:
    """The environment that runs version B: this package with one more pod template annotation."""
    package = tmp / "b" / "sampledb_operator"
    shutil.copytree(REPO / "operator" / "sampledb_operator", package, ignore=shutil.ignore_patterns("__pycache__"))
    source = package / "decide" / "children" / "desired_statefulset.py"
    text = source.read_text()
    anchor = "{pgconfig.RESTART_ANNOTATION: restart_hash,"
    assert text.count(anchor) == 1, "the template annotations moved: update this test's version B"
    source.write_text(text.replace(anchor, f'{{"{MARK}": "b", pgconfig.RESTART_ANNOTATION: restart_hash,'))
    return {"PYTHONPATH": str(tmp / "b")}


def operator(kubeconfig: str, namespace: str, *args: str, env: dict[str, str] | None = None) -> OperatorProcess:
    return OperatorProcess(kubeconfig, "--namespaces", namespace, "--no-leader-elect", "--workers", "2",
                           "--recheck-period", "2", *args, env=env).start()


def on_b(namespace: str, db: str) -> bool:
    sts = kubectl_json("get", "statefulset", "-n", namespace, names.statefulset_name(db))
    return MARK in (sts["spec"]["template"]["metadata"].get("annotations") or {})


def pod_uids(namespace: str) -> dict[str, str]:
    pods = kubectl_json("get", "pods", "-n", namespace, "-l", "app.kubernetes.io/component=database")["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


def reason(namespace: str, db: str) -> str:
    cond: dict[str, Any] = condition(db, namespace, "OperatorUpdate")
    return f"{cond.get('status')}/{cond.get('reason')}"


def test_a_new_operator_template_restarts_nothing_until_allowed_then_one_database_at_a_time(
        kubeconfig: str, namespace: str, tmp_path: Path) -> None:
    a = operator(kubeconfig, namespace)
    try:
        apply([sampledb(db, namespace) for db in DBS])
        for db in DBS:
            wait_ready(db, namespace)
        wait_until(lambda: len(pod_uids(namespace)) == len(DBS), timeout=120, what="a pod per database")
    finally:
        a.stop()
    before = pod_uids(namespace)
    env = version_b(tmp_path)

    b = operator(kubeconfig, namespace, "--operator-rollouts", "0", env=env)
    try:
        wait_until(lambda: all(reason(namespace, db) == "True/WaitingForRestart" for db in DBS), timeout=120,
                   what="every database waiting for a restart")
        assert pod_uids(namespace) == before and not any(on_b(namespace, db) for db in DBS)
        kubectl("annotate", "sampledb", "-n", namespace, "one", f"{RESTART_ANNOTATION}=2026-12-06T00:00:00Z")
        wait_until(lambda: on_b(namespace, "one") and reason(namespace, "one") == "False/Applied", timeout=120,
                   what="the database asked to restart on version B's template")
        wait_ready("one", namespace)
        now = pod_uids(namespace)
        assert now[names.instance_pod_name("one", 0)] != before[names.instance_pod_name("one", 0)]
        assert {k: v for k, v in now.items() if not k.startswith("one-")} == \
            {k: v for k, v in before.items() if not k.startswith("one-")}
    finally:
        b.stop()

    b = operator(kubeconfig, namespace, "--operator-rollouts", "1", env=env)
    changed: dict[str, int] = {}  # database -> the sample in which its template was first B's
    applied: dict[str, int] = {}  # database -> the sample in which it first said Applied
    try:
        deadline = time.monotonic() + 180
        sample = 0
        while len(applied) < len(DBS) - 1:
            assert time.monotonic() < deadline, f"not rolled in 180 s: changed {changed}, applied {applied}"
            for db in DBS[1:]:
                if db not in changed and on_b(namespace, db):
                    changed[db] = sample
                if db not in applied and reason(namespace, db) == "False/Applied":
                    applied[db] = sample
                    changed.setdefault(db, sample)  # Applied implies B's template (read after on_b above)
            rolling = [db for db in DBS if reason(namespace, db) == "True/Rolling"]
            assert len(rolling) <= 1, f"two databases rolling at once: {rolling}"
            sample += 1
            time.sleep(0.2)  # sampling interval of the observation, not a wait for a state
        first, second = sorted(DBS[1:], key=lambda db: changed[db])
        assert changed[second] >= applied[first], (changed, applied)
        for db in DBS:
            wait_ready(db, namespace)
            assert on_b(namespace, db)
        print("\nrolled one database at a time: " + json.dumps({"changed": changed, "applied": applied}))
    finally:
        b.stop()
