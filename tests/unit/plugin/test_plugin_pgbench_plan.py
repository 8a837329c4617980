"""`kubectl sampledb pgbench`: the `kubectl exec` commands it builds and runs, without a cluster."""

from __future__ import annotations

import sys
from pathlib import Path

from sampledb_operator.plugin.pgbench import PgbenchPlan, describe, plan, run
from sampledb_operator.plugin.session import Target

EXEC = ["kubectl", "exec", "--namespace", "shop", "--kubeconfig", "/k", "--context", "c", "orders-1",
        "--container", "postgres", "--", "pgbench", "--host", "/var/run/postgresql", "--username", "app"]


def test_initialize_then_run_in_the_primarys_container_over_its_socket() -> None:
    p = plan(["kubectl"], Target(kubeconfig="/k", context="c"), "shop", "orders-1", user="app", database="app",
             scale=10, extra=["--client", "4", "--time", "30"])
    assert p.commands == ((*EXEC, "--initialize", "--scale", "10", "app"), (*EXEC, "--client", "4", "--time", "30",
                                                                             "app"))
    assert describe(p).splitlines()[0].endswith("--username app --initialize --scale 10 app")


def test_only_initialize_or_only_run() -> None:
    only_init = plan(["kubectl"], Target(kubeconfig="/k", context="c"), "shop", "orders-1", user="app",
                     database="app", scale=1)
    assert len(only_init.commands) == 1 and "--initialize" in only_init.commands[0]
    plain = plan(["kubectl"], Target(kubeconfig="/k", context="c"), "shop", "orders-1", user="app", database="app")
    assert plain.commands == ((*EXEC, "app"),)


def test_run_stops_at_the_first_failure_and_returns_its_code(tmp_path: Path) -> None:
    marker = tmp_path / "second-ran"
    failing = (sys.executable, "-c", "raise SystemExit(3)")
    second = (sys.executable, "-c", f"open({str(marker)!r}, 'w').close()")
    assert run(PgbenchPlan((failing, second))) == 3 and not marker.exists()
    assert run(PgbenchPlan((second,))) == 0 and marker.exists()

