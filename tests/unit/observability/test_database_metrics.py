"""Per-database series: one set per cached SampleDB, computed at scrape time, robust to odd statuses."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
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
    assert families["sampledb_inactive_slot_retained_bytes"].samples == []


def test_the_primarys_inactive_slot_and_the_wal_it_holds() -> None:
    obj = {"metadata": {"namespace": "shop", "name": "orders"}, "spec": {"version": "15.20"},
           "status": {"instances": [{"name": "orders-0", "role": "primary", "ready": True, "inactiveSlot": "cdc",
                                     "inactiveSlotRetainedBytes": 3 * 2**20},
                                    {"name": "orders-i1-0", "role": "replica", "ready": True, "lagBytes": 0}]}}
    families = {f.name: f for f in DatabaseCollector(lambda: [obj]).collect()}
    held = {(s.labels["instance"], s.labels["slot"]): s.value
            for s in families["sampledb_inactive_slot_retained_bytes"].samples}
    assert held == {("orders-0", "cdc"): 3.0 * 2**20}


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
                    "sampledb_instance_ready": 0, "sampledb_replication_lag_bytes": 0,
                    "sampledb_inactive_slot_retained_bytes": 0, "sampledb_archive_lag_seconds": 0,
                    "sampledb_archive_pending_segments": 0,
                    "sampledb_archive_last_archived_timestamp_seconds": 0,
                    "sampledb_archive_last_base_backup_timestamp_seconds": 0,
                    "sampledb_archive_last_verified_timestamp_seconds": 0, "sampledb_archive_recovery_rto_seconds": 0,
                    "sampledb_archive_recovery_rpo_seconds": 0}


def test_archiving_series_come_from_status_archive_and_are_absent_without_it() -> None:
    obj = _db("orders", phase="Running")
    obj["status"]["archive"] = {"lagSeconds": 42, "pendingSegments": 3, "lastArchivedAt": "2026-12-05T07:00:00Z",
                                "lastBaseBackup": {"name": "orders-basebackup-x",
                                                   "completedAt": "2026-12-05T03:00:00Z"},
                                "lastVerifiedAt": "2026-12-05T07:00:00Z",
                                "lastVerification": {"jobName": "v", "verified": True, "reason": "Verified",
                                                     "rtoSeconds": 12.5, "rpoSeconds": 41}}
    failed = _db("failed", phase="Running")
    failed["status"]["archive"] = {"lastVerification": {"jobName": "v", "verified": False, "reason": "RestoreFailed",
                                                        "rtoSeconds": 3.0}}
    families = {f.name: f for f in DatabaseCollector(lambda: [obj, _db("plain", phase="Running"), failed]).collect()}

    def values(name: str) -> dict[str, float]:
        return {s.labels["name"]: s.value for s in families[name].samples}

    assert values("sampledb_archive_lag_seconds") == {"orders": 42.0}
    assert values("sampledb_archive_pending_segments") == {"orders": 3.0}
    assert values("sampledb_archive_last_archived_timestamp_seconds") == {"orders": 1796454000.0}
    assert values("sampledb_archive_last_base_backup_timestamp_seconds") == {"orders": 1796439600.0}
    assert values("sampledb_archive_last_verified_timestamp_seconds") == {"orders": 1796454000.0}
    assert values("sampledb_archive_recovery_rto_seconds") == {"orders": 12.5}  # a failed one measures nothing
    assert values("sampledb_archive_recovery_rpo_seconds") == {"orders": 41.0}


async def test_a_scrape_in_a_worker_thread_renders_the_rows_taken_on_the_loop() -> None:
    """/metrics encodes in a worker thread (asyncio.to_thread, which copies the context): the cache is read
    once, by taken() on the loop's thread, whose renderer writes the families there while collect() leaves
    them to it; the thread never calls the source; outside taken() a collect reads the source again."""
    objs = [_db("orders", phase="Running")]
    walked_on: list[int] = []

    def source() -> Any:
        walked_on.append(threading.get_ident())
        return list(objs)

    def encode(render: database_metrics.Render) -> tuple[int, list[str], str]:
        names = [f.name for f in database_metrics._collector.collect()]
        return threading.get_ident(), names, b"".join(render(False)).decode()

    before = database_metrics._collector.source
    database_metrics.set_database_source(source)
    try:
        with database_metrics.taken() as render:
            objs.append(_db("later", phase="Failed"))  # not in this scrape: its rows were taken
            thread, collected, text = await asyncio.to_thread(encode, render)
        assert thread != threading.get_ident() and walked_on == [threading.get_ident()]
        assert collected == []  # the renderer writes them, once
        info = [s.labels["name"] for f in text_string_to_metric_families(text) for s in f.samples
                if s.name == "sampledb_database_info"]
        assert info == ["orders"]
        assert next(database_metrics._collector.collect()).name == "sampledb_databases"
        assert len(walked_on) == 2  # outside taken(): walked again
    finally:
        database_metrics.set_database_source(before)


ODD = [
    _db("orders", phase="Upgrading", currentVersion="16.4",
        conditions=[{"type": "Upgrading", "status": "True", "reason": "UpgradeJobRunning"},
                    {"type": "Ready", "status": "False", "reason": 'a "quoted" \\ back\nslash'}],
        lastBackup={"completedAt": "2026-01-02T03:04:05Z"},
        instances=[{"name": "orders-0", "role": "primary", "ready": True},
                   {"name": "orders-i1-0", "role": "replica", "ready": False, "lagBytes": 123456789012}]),
    {"metadata": {"namespace": "shop", "name": "fresh"}, "spec": {"version": "16.4"}},
    _db("martian", phase="Martian", conditions=["not a condition", {"status": "True"}]),
]


@pytest.mark.parametrize("openmetrics", [False, True])
@pytest.mark.parametrize("objs", [[], ODD], ids=["none", "odd"])
def test_rendered_text_is_what_prometheus_client_writes_for_the_same_families(
        objs: list[dict[str, Any]], openmetrics: bool) -> None:
    """The text a scrape carries for these families is byte for byte prometheus-client's own encoding of the
    collector's families (labels sorted by name, escaping, value format), in both exposition formats."""
    registry = CollectorRegistry()
    collector = DatabaseCollector(lambda: objs)
    registry.register(collector)
    encoder = openmetrics_latest if openmetrics else generate_latest
    expected = encoder(registry)
    if openmetrics:
        expected = expected.removesuffix(b"# EOF\n")
    assert b"".join(collector.text.render(collector.take(), openmetrics=openmetrics)) == expected


def test_a_database_s_lines_are_written_again_only_when_its_object_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """At rest a scrape reuses every database's lines (kept with the resourceVersion they were written from);
    a newer object rewrites that database's only; a deleted database's lines are gone from the next scrape; an
    object without a resourceVersion is written every time."""
    written: list[str] = []
    lines = database_metrics._lines

    def counting(row: Any) -> tuple[bytes, ...]:
        written.append(row.key[1])
        return lines(row)

    def versioned(obj: dict[str, Any], version: str) -> dict[str, Any]:
        obj["metadata"]["resourceVersion"] = version
        return obj

    def scrape() -> str:
        return b"".join(collector.text.render(collector.take(), openmetrics=False)).decode()

    monkeypatch.setattr(database_metrics, "_lines", counting)
    objs = [versioned(_db(f"db{i}", phase="Running", conditions=[{"type": "Ready", "status": "True"}]), "7")
            for i in range(3)] + [_db("unversioned", phase="Running")]
    collector = DatabaseCollector(lambda: objs)
    first = scrape()
    assert written == ["db0", "db1", "db2", "unversioned"]
    assert scrape() == first
    assert written == ["db0", "db1", "db2", "unversioned", "unversioned"]  # the others kept
    objs[1] = versioned(_db("db1", phase="Failed", conditions=[{"type": "Ready", "status": "False",
                                                                "reason": "Crashed"}]), "8")
    del objs[2]
    text = scrape()
    assert written[5:] == ["db1", "unversioned"]
    phases = {s.labels["name"]: s.labels["phase"] for f in text_string_to_metric_families(text) for s in f.samples
              if s.name == "sampledb_database_phase"}
    assert phases == {"db0": "Running", "db1": "Failed", "unversioned": "Running"}
    registry = CollectorRegistry()
    registry.register(collector)
    assert text.encode() == generate_latest(registry)
