"""The /metrics exposition: every documented family, pre-initialised zero series, valid text format.

The exposition is produced in a fresh interpreter so other tests' metric updates cannot leak in.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from sampledb_operator.observability.metrics import PHASES, RECONCILE_RESULTS

CONTROLLER = "sampledb"
QUEUE = "sampledb"
WORKERS = 4

# (name as exposed, type, label names) -- the families ARCHITECTURE.md and docs/metrics.md list
FAMILIES: list[tuple[str, str, set[str]]] = [
    ("controller_runtime_reconcile_total", "counter", {"controller", "result"}),
    ("controller_runtime_reconcile_errors_total", "counter", {"controller"}),
    ("controller_runtime_terminal_reconcile_errors_total", "counter", {"controller"}),
    ("controller_runtime_reconcile_time_seconds", "histogram", {"controller"}),
    ("controller_runtime_max_concurrent_reconciles", "gauge", {"controller"}),
    ("controller_runtime_active_workers", "gauge", {"controller"}),
    ("workqueue_depth", "gauge", {"name", "controller"}),
    ("workqueue_adds_total", "counter", {"name", "controller"}),
    ("workqueue_retries_total", "counter", {"name", "controller"}),
    ("workqueue_queue_duration_seconds", "histogram", {"name", "controller"}),
    ("workqueue_work_duration_seconds", "histogram", {"name", "controller"}),
    ("workqueue_unfinished_work_seconds", "gauge", {"name", "controller"}),
    ("workqueue_longest_running_processor_seconds", "gauge", {"name", "controller"}),
    ("leader_election_master_status", "gauge", {"name"}),
    ("rest_client_requests_total", "counter", {"code", "method"}),
    ("rest_client_request_duration_seconds", "histogram", {"verb"}),
    ("sampledb_api_requests_total", "counter", {"verb", "group", "resource", "subresource", "code"}),
    ("sampledb_watch_restarts_total", "counter", {"resource", "cause"}),
    ("sampledb_watch_relists_total", "counter", {"resource"}),
    ("sampledb_watch_events_total", "counter", {"resource", "type"}),
    ("sampledb_cache_objects", "gauge", {"resource"}),
    ("sampledb_databases", "gauge", {"phase"}),
    ("sampledb_database_info", "gauge", {"namespace", "name", "version", "current_version"}),
    ("sampledb_database_phase", "gauge", {"namespace", "name", "phase"}),
    ("sampledb_database_condition", "gauge", {"namespace", "name", "type", "status", "reason"}),
    ("sampledb_database_last_backup_timestamp_seconds", "gauge", {"namespace", "name"}),
    ("sampledb_elections_total", "counter", {"reason"}),
    ("sampledb_backups_total", "counter", {"reason", "result"}),
    ("sampledb_snapshot_duration_seconds", "histogram", set()),
    ("sampledb_upgrade_duration_seconds", "histogram", {"kind"}),
    ("sampledb_event_loop_lag_seconds", "gauge", set()),
    ("process_resident_memory_bytes", "gauge", set()),
    ("process_cpu_seconds_total", "counter", set()),
    ("process_start_time_seconds", "gauge", set()),
    ("python_info", "gauge", {"implementation", "major", "minor", "patchlevel", "version"}),
]

_SCRIPT = f"""
from prometheus_client import generate_latest
from sampledb_operator.observability import database_metrics, metrics
metrics.init_controller({CONTROLLER!r}, {WORKERS})
metrics.init_queue({QUEUE!r}, {CONTROLLER!r})
metrics.init_operator()
print(generate_latest(metrics.REGISTRY).decode(), end="")
"""


@pytest.fixture(scope="module")
def exposition() -> str:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True,
                          timeout=60)
    return done.stdout


def _family_name(exposed: str, type_: str) -> str:
    return exposed.removesuffix("_total") if type_ == "counter" else exposed


def _samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _value(samples: Iterable[Sample], metric: str, /, **labels: str) -> float:
    found = [s.value for s in samples if s.name == metric and s.labels == labels]
    assert len(found) == 1, f"expected one series {metric}{labels}, found {len(found)}"
    return found[0]


def test_every_documented_family_is_exposed_with_its_type(exposition: str) -> None:
    families = {f.name: f for f in text_string_to_metric_families(exposition)}
    for exposed, type_, _ in FAMILIES:
        family = families.get(_family_name(exposed, type_))
        assert family is not None, f"{exposed} missing"
        assert family.type == type_, exposed
        assert family.documentation, f"{exposed} has no HELP"
        assert f"# TYPE {exposed} {type_}\n" in exposition   # the text format keeps the _total suffix


def test_label_names_match_controller_runtime(exposition: str) -> None:
    families = {f.name: f for f in text_string_to_metric_families(exposition)}
    for exposed, type_, labels in FAMILIES:
        for sample in families[_family_name(exposed, type_)].samples:
            if sample.name.endswith("_created"):
                continue
            assert set(sample.labels) - {"le"} == labels, (exposed, sample.labels)


def test_controller_series_exist_at_zero_before_any_reconcile(exposition: str) -> None:
    samples = _samples(exposition)
    for result in RECONCILE_RESULTS:
        labels = {"controller": CONTROLLER, "result": result}
        assert _value(samples, "controller_runtime_reconcile_total", **labels) == 0
    assert _value(samples, "controller_runtime_reconcile_errors_total", controller=CONTROLLER) == 0
    assert _value(samples, "controller_runtime_terminal_reconcile_errors_total", controller=CONTROLLER) == 0
    assert _value(samples, "controller_runtime_reconcile_time_seconds_count", controller=CONTROLLER) == 0
    assert _value(samples, "controller_runtime_max_concurrent_reconciles", controller=CONTROLLER) == WORKERS
    assert _value(samples, "controller_runtime_active_workers", controller=CONTROLLER) == 0


def test_workqueue_series_exist_at_zero(exposition: str) -> None:
    samples = _samples(exposition)
    labels = {"name": QUEUE, "controller": CONTROLLER}
    for name in ("workqueue_depth", "workqueue_adds_total", "workqueue_retries_total",
                 "workqueue_queue_duration_seconds_count", "workqueue_work_duration_seconds_count",
                 "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"):
        assert _value(samples, name, **labels) == 0, name


def test_operator_series_exist_at_zero(exposition: str) -> None:
    samples = _samples(exposition)
    for phase in PHASES:
        assert _value(samples, "sampledb_databases", phase=phase) == 0
    for reason in ("scheduled", "manual", "pre-delete", "pre-upgrade", "pre-migration"):
        for result in ("succeeded", "failed"):
            assert _value(samples, "sampledb_backups_total", reason=reason, result=result) == 0
    for kind in ("minor", "major"):
        assert _value(samples, "sampledb_upgrade_duration_seconds_count", kind=kind) == 0
    assert _value(samples, "sampledb_snapshot_duration_seconds_count") == 0


def test_exposition_passes_promtool_when_installed(exposition: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:   # Debian package `prometheus`; the parser tests above still ran
        return
    done = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "" and done.stderr.strip() == "", done.stdout + done.stderr
