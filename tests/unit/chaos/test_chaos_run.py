"""A whole chaos run on the fake cluster: the scope is respected over many faults, a dry run writes
nothing, recovery is timed and reported, the fill is removed at the end, and the command line
refuses a run without a scope."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support.chaos_world import (
    AutoClock,
    FakeExec,
    backup_job,
    chaos_apis,
    databases,
    operator_and_kubelet,
    unique_uids,
)
from tests.support.fake_cluster import NS, FakeCluster

from sampledb_operator import cli
from sampledb_operator.chaos.faults import DEFAULT_FAULTS, Fault
from sampledb_operator.chaos.inject import FILL_PATH
from sampledb_operator.chaos.plan import Scope
from sampledb_operator.chaos.report import INJECTED, PLANNED, render_text
from sampledb_operator.chaos.run import Options, execute, summary_exit_code

SELECTED = {"tier": "chaos"}


async def _world() -> tuple[FakeCluster, list[Any], dict[str, Any], FakeExec]:
    cluster = FakeCluster()
    unique_uids(cluster)
    await databases(cluster, "orders", "billing", labels=SELECTED)
    await databases(cluster, "audit")  # not labelled: out of scope
    backup_job(cluster, "audit", "audit-backup-1")
    deletes: list[Any] = []
    return cluster, deletes, chaos_apis(cluster, deletes), FakeExec(cluster)


def _operated(cluster: FakeCluster) -> AutoClock:
    """A clock whose every sleep lets the operator and kubelet take a step on the two selected databases."""
    return AutoClock(lambda: operator_and_kubelet(cluster, ["orders", "billing"]))


def _options(**changes: Any) -> Options:
    base: dict[str, Any] = {"scope": Scope(NS, "tier=chaos"), "seed": 42, "duration": 600.0, "rate": 3.0,
                            "faults": DEFAULT_FAULTS, "recovery_timeout": 120.0}
    return Options(**{**base, **changes})


async def test_many_faults_touch_only_the_selected_databases_and_all_recover() -> None:
    cluster, deletes, apis, executor = await _world()
    writes_before = len(cluster.writes)
    clock = _operated(cluster)
    report = await execute(_options(), apis, executor, clock)

    assert len(report.records) == 30 and report.databases == [f"{NS}/billing", f"{NS}/orders"]
    assert {r.database for r in report.records} == {"orders", "billing"}
    injected = report.injected
    assert {r.fault for r in injected} >= {"delete-pod", "kill-postgres", "delete-service", "fill-volume"}
    assert all(r.recovered for r in injected), [r for r in injected if not r.recovered]
    assert all(r.recovery_seconds is not None and r.recovery_seconds <= 120 for r in injected)
    touched = [name for _k, _ns, name, _o in deletes] + [pod for _ns, pod, _c, _a in executor.calls]
    assert touched and not [n for n in touched if "audit" in n], "never an object of an unselected database"
    assert not [w for w in cluster.writes[writes_before:] if "audit" in w[2]]
    assert report.cleanup and all("removed" in line for line in report.cleanup) and executor.files == {}
    assert summary_exit_code(report) == 0
    assert json.loads(json.dumps(report.to_json()))["summary"]["injected"] == len(injected)


async def test_the_same_seed_injects_the_same_faults() -> None:
    runs = []
    for _ in range(2):
        cluster, _deletes, apis, executor = await _world()
        report = await execute(_options(duration=120), apis, executor, _operated(cluster))
        runs.append([(r.fault, r.database, r.outcome, r.target) for r in report.records])
    assert runs[0] == runs[1] and len(runs[0]) == 6


async def test_faults_are_spaced_by_the_rate_and_each_waits_for_the_previous_recovery() -> None:
    cluster, _deletes, apis, executor = await _world()
    clock = _operated(cluster)
    starts: list[float] = []
    report = await execute(_options(duration=60, rate=4, faults=(Fault.DELETE_POD,)), apis, executor, clock,
                           progress=lambda _r: starts.append(clock.now))
    assert [r.at for r in report.records] == [0, 15, 30, 45]
    assert all(r.outcome == INJECTED and r.recovered for r in report.records)
    assert starts == sorted(starts) and starts[-1] >= 45


async def test_a_dry_run_lists_the_plan_and_writes_nothing() -> None:
    cluster, deletes, apis, executor = await _world()
    writes_before = len(cluster.writes)
    report = await execute(_options(dry_run=True), apis, executor, AutoClock())
    assert len(report.records) == 30 and all(r.outcome == PLANNED for r in report.records)
    assert not deletes and not executor.calls and len(cluster.writes) == writes_before
    text = render_text(report)
    assert "dry run: nothing touched" in text and "30 faults planned" in text
    assert all(r.detail for r in report.records)


async def test_a_database_that_does_not_recover_is_reported_and_fails_the_run() -> None:
    _cluster, _deletes, apis, executor = await _world()
    report = await execute(_options(duration=60, rate=1, faults=(Fault.DELETE_SERVICE,), recovery_timeout=30),
                           apis, executor, AutoClock())  # no operator: nothing comes back
    record = report.records[0]
    assert record.outcome == INJECTED and record.recovered is False and record.recovery_seconds is None
    assert summary_exit_code(report) == 1
    assert "NOT RECOVERED" in render_text(report)


async def test_no_database_in_scope_injects_nothing() -> None:
    _cluster, deletes, apis, executor = await _world()
    report = await execute(_options(scope=Scope(NS, "tier=none")), apis, executor, AutoClock())
    assert report.records == [] and not deletes and summary_exit_code(report) == 1


async def test_the_fill_is_removed_even_when_the_run_is_interrupted() -> None:
    _cluster, _deletes, apis, executor = await _world()

    def interrupt() -> None:
        if executor.files:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await execute(_options(faults=(Fault.FILL_VOLUME,)), apis, executor, AutoClock(interrupt))
    assert executor.files == {} and executor.calls[-1][3] == ["rm", "-f", FILL_PATH]


@pytest.mark.parametrize(("argv", "says"), [
    (["chaos", "--all", "--dry-run"], "--namespace"),
    (["chaos", "-n", "shop"], "selector"),
    (["chaos", "-A", "--all"], "--all needs --namespace"),
    (["chaos", "-n", "shop", "--all", "--faults", "kill-primary"], "unknown fault"),
    (["chaos", "-n", "shop", "--all", "--duration", "soon"], "not a duration"),
    (["chaos", "-n", "shop", "--all", "--rate", "0"], "--rate"),
])
def test_the_command_refuses_a_run_without_a_scope_with_exit_code_2(argv: list[str], says: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
