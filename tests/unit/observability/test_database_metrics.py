"""Per-database series: one set per cached SampleDB, computed at scrape time, robust to odd statuses."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sampledb_operator.observability import database_metrics
from sampledb_operator.observability.database_metrics import DatabaseCollector, unix_time
from sampledb_operator.observability.metrics import PHASES


def _db(name: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": name}, "spec": {"version": "17.2"}, "status": status}


def _series(objs: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(lambda: objs))
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_each_database_exports_info_phase_conditions_and_last_backup_time() -> None:
    series = _series([_db(
        "orders", phase="Upgrading", currentVersion="16.4",
        conditions=[{"type": "Upgrading", "status": "True", "reason": "UpgradeJobRunning"},
                    {"type": "Ready", "status": "True", "reason": "DatabaseReady"}],
        lastBackup={"name": "orders-manual-1", "completedAt": "2026-01-02T03:04:05Z"},
    )])
    key = {"namespace": "shop", "name": "orders"}
    assert series["sampledb_database_info"] == [({**key, "version": "17.2", "current_version": "16.4"}, 1.0)]
    assert series["sampledb_database_phase"] == [({**key, "phase": "Upgrading"}, 1.0)]
    assert ({**key, "type": "Upgrading", "status": "True", "reason": "UpgradeJobRunning"}, 1.0) in \
        series["sampledb_database_condition"]
    assert len(series["sampledb_database_condition"]) == 2
    assert series["sampledb_database_last_backup_timestamp_seconds"] == [(key, 1767323045.0)]


def test_a_database_without_status_is_pending_and_has_no_backup_time() -> None:
    series = _series([{"metadata": {"namespace": "shop", "name": "fresh"}, "spec": {"version": "16.4"}}])
    assert series["sampledb_database_phase"] == [({"namespace": "shop", "name": "fresh", "phase": "Pending"}, 1.0)]
    assert "sampledb_database_last_backup_timestamp_seconds" not in series
    assert "sampledb_database_condition" not in series


def test_unreadable_status_values_are_skipped_not_raised() -> None:
    series = _series([_db("odd", conditions=["not a condition", {"status": "True"}],
                          lastBackup={"completedAt": "yesterday"})])
    assert "sampledb_database_condition" not in series
    assert "sampledb_database_last_backup_timestamp_seconds" not in series
    assert unix_time("2026-01-02T03:04:05") is None      # no zone: not a Kubernetes timestamp
    assert unix_time(None) is None


def test_no_databases_no_per_database_series_and_every_phase_counted_zero() -> None:
    series = _series([])
    assert series == {"sampledb_databases": [({"phase": p}, 0.0) for p in PHASES]}


def test_databases_are_counted_by_phase_pending_before_the_first_status_and_unknown_phases_kept() -> None:
    counts = {labels["phase"]: value for labels, value in _series(
        [_db("a", phase="Running"), _db("b", phase="Running"), _db("c", phase="Failed"),
         {"metadata": {"namespace": "shop", "name": "new"}}, _db("d", phase="Martian")])["sampledb_databases"]}
    assert counts == {**dict.fromkeys(PHASES, 0.0), "Running": 2.0, "Failed": 1.0, "Pending": 1.0, "Martian": 1.0}


def test_each_instance_has_its_role_readiness_and_replication_lag() -> None:
    obj = {"metadata": {"namespace": "shop", "name": "orders"}, "spec": {"version": "15.20"},
           "status": {"instances": [{"name": "orders-0", "role": "primary", "ready": True, "lsn": "0/5000060"},
                                    {"name": "orders-i1-0", "role": "replica", "ready": False, "lagBytes": 4096},
                                    {"role": "replica"}]}}
    families = {f.name: f for f in DatabaseCollector(lambda: [obj]).collect()}
    info = {tuple(s.labels.values()): s.value for s in families["sampledb_instance_info"].samples}
    assert info == {("shop", "orders", "orders-0", "primary"): 1, ("shop", "orders", "orders-i1-0", "replica"): 1}
    ready = {s.labels["instance"]: s.value for s in families["sampledb_instance_ready"].samples}
    assert ready == {"orders-0": 1.0, "orders-i1-0": 0.0}
    lag = {s.labels["instance"]: s.value for s in families["sampledb_replication_lag_bytes"].samples}
    assert lag == {"orders-i1-0": 4096.0}  # the primary has no lag series


def test_one_walk_feeds_the_phase_counts_and_each_family_is_built_when_the_encoder_asks_for_it() -> None:
    walks: list[int] = []

    def source() -> Any:
        walks.append(1)
        yield from (_db(f"db{i}", phase="Running", conditions=[{"type": "Ready", "status": "True"}])
                    for i in range(3))

    families = DatabaseCollector(source).collect()
    phases = next(families)
    assert walks == [1] and {s.labels["phase"]: s.value for s in phases.samples}["Running"] == 3
    rest = {f.name: len(f.samples) for f in families}
    assert walks == [1]  # the later families come from the rows of the one walk
    assert rest == {"sampledb_database_info": 3, "sampledb_database_phase": 3, "sampledb_database_condition": 3,
                    "sampledb_database_last_backup_timestamp_seconds": 0, "sampledb_instance_info": 0,
                    "sampledb_instance_ready": 0, "sampledb_replication_lag_bytes": 0}


async def test_a_scrape_in_a_worker_thread_encodes_the_rows_taken_on_the_loop() -> None:
    """/metrics encodes in a worker thread (asyncio.to_thread, which copies the context): the cache is read
    once, by taken() on the loop's thread, and the thread never calls the source; outside taken() a collect
    reads the source again."""
    objs = [_db("orders", phase="Running")]
    walked_on: list[int] = []

    def source() -> Any:
        walked_on.append(threading.get_ident())
        return list(objs)

    def encode() -> tuple[int, dict[str, Any]]:
        return threading.get_ident(), {f.name: f for f in database_metrics._collector.collect()}

    before = database_metrics._collector.source
    database_metrics.set_database_source(source)
    try:
        with database_metrics.taken():
            objs.append(_db("later", phase="Failed"))  # not in this scrape: its rows were taken
            thread, families = await asyncio.to_thread(encode)
        assert thread != threading.get_ident() and walked_on == [threading.get_ident()]
        assert [s.labels["name"] for s in families["sampledb_database_info"].samples] == ["orders"]
        assert next(database_metrics._collector.collect()).name == "sampledb_databases"
        assert len(walked_on) == 2  # outside taken(): walked again
    finally:
        database_metrics.set_database_source(before)
