"""plugin/lifecycle.py's pure parts: the restart and hibernation patches, when each is done, the reload commands."""

from __future__ import annotations

from datetime import UTC, datetime

from sampledb_operator.decide.labels import RESTART_ANNOTATION, RESTARTED_FOR_ANNOTATION
from sampledb_operator.plugin import lifecycle as lc
from sampledb_operator.plugin.session import Target

TOKEN = "2026-12-06T00:15:00Z"


def pod(name: str, token: str | None, ready: bool = True, terminating: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "annotations": {RESTARTED_FOR_ANNOTATION: token} if token else {}}
    if terminating:
        meta["deletionTimestamp"] = TOKEN
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


def db(phase: str = "Running", ready: bool = True, replicas: int = 2) -> dict[str, object]:
    return {"spec": {"replicas": replicas}, "status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def test_restart_patch_and_when_it_is_done() -> None:
    patch = lc.restart_patch(datetime(2026, 12, 6, 0, 15, tzinfo=UTC))
    assert patch == {"metadata": {"annotations": {RESTART_ANNOTATION: TOKEN}}}
    both = [pod("orders-0", TOKEN), pod("orders-i1-0", TOKEN)]
    assert lc.restarted(db(), both, TOKEN)
    assert not lc.restarted(db(), [pod("orders-0", TOKEN), pod("orders-i1-0", None)], TOKEN)  # one not yet
    assert not lc.restarted(db(), [pod("orders-0", TOKEN), pod("orders-i1-0", TOKEN, ready=False)], TOKEN)
    assert not lc.restarted(db(), [*both, pod("orders-i1-0", "old", terminating=True)], TOKEN)
    assert not lc.restarted(db(ready=False), both, TOKEN)
    assert not lc.restarted(db(), [pod("orders-0", TOKEN)], TOKEN)  # two instances asked for


def test_hibernation_patches_and_states() -> None:
    assert lc.hibernation_patch(True) == {"metadata": {"annotations": {"sampledb.io/hibernation": "on"}}}
    assert lc.hibernation_patch(False) == {"metadata": {"annotations": {"sampledb.io/hibernation": None}}}
    assert lc.hibernated(db("Hibernated", ready=False), [])
    assert not lc.hibernated(db("Hibernated", ready=False), [pod("orders-0", None, terminating=True)])
    assert not lc.hibernated(db("Running"), [])
    assert lc.awake(db()) and not lc.awake(db("Hibernated", ready=False))


def test_reload_runs_psql_over_the_socket_in_each_pod_with_no_secret() -> None:
    plan = lc.reload_plan(["kubectl"], Target(kubeconfig="/k", context="c"), "shop", ["orders-i1-0", "orders-0"],
                          user="app", database="app")
    assert [p for p, _ in plan.commands] == ["orders-0", "orders-i1-0"]
    _, first = plan.commands[0]
    assert first[:9] == ("kubectl", "exec", "--namespace", "shop", "--kubeconfig", "/k", "--context", "c",
                         "orders-0")
    assert first[first.index("--host"):first.index("--host") + 2] == ("--host", "/var/run/postgresql")
    assert "pg_reload_conf()" in first[-1] and "pending_restart" in first[-1]
    assert "PGPASSWORD" not in lc.describe(plan)
    assert lc.reload_line("orders-0", "t|\n") == "orders-0: reloaded"
    assert lc.reload_line("orders-0", "t|max_connections,shared_buffers") == \
        "orders-0: reloaded; waiting for a restart: max_connections, shared_buffers"
    assert "did not take" in lc.reload_line("orders-0", "f|")
