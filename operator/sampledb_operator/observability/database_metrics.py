"""Per-database series, read from the SampleDB cache when Prometheus scrapes (kube-state-metrics style).

One set of series per cached SampleDB, labelled `namespace` and `name`:

- sampledb_database_info{version, current_version} 1: desired (spec) and running (status) version;
- sampledb_database_phase{phase} 1: status.phase ("Pending" before the first status);
- sampledb_database_condition{type, status, reason} 1: one per status condition;
- sampledb_database_last_backup_timestamp_seconds: status.lastBackup.completedAt as Unix time
  (absent until a backup has succeeded);
- sampledb_instance_info{instance, role} 1 and sampledb_instance_ready{instance}: each instance of
  status.instances (role primary, replica or fenced);
- sampledb_replication_lag_bytes{instance}: a standby's replay lag behind the primary (status.instances).

Invariants: computed from the objects at scrape time, never stored, so a deleted database's series
vanish at the next scrape; an object or a timestamp that does not parse is skipped, never raises
(a scrape must not fail because of one odd status). This module imports nothing of the package but
observability.metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sampledb_operator.observability.metrics import REGISTRY

_KEY = ["namespace", "name"]


class DatabaseCollector(Collector):
    """The per-database families, from `source()`: the SampleDB objects (dicts) of the cache."""

    def __init__(self, source: Callable[[], Iterable[Mapping[str, Any]]] = tuple) -> None:
        self.source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily("sampledb_database_info", "A SampleDB's desired (spec) and running version",
                                 labels=[*_KEY, "version", "current_version"])
        phase = GaugeMetricFamily("sampledb_database_phase", "A SampleDB's status.phase (1 for the current one)",
                                  labels=[*_KEY, "phase"])
        condition = GaugeMetricFamily("sampledb_database_condition", "A SampleDB's status conditions (1 each)",
                                      labels=[*_KEY, "type", "status", "reason"])
        backup = GaugeMetricFamily("sampledb_database_last_backup_timestamp_seconds",
                                   "When a SampleDB's latest successful backup completed (Unix time)",
                                   labels=_KEY)
        instance = GaugeMetricFamily("sampledb_instance_info", "A SampleDB instance's role (1 each)",
                                     labels=[*_KEY, "instance", "role"])
        ready = GaugeMetricFamily("sampledb_instance_ready", "1 when a SampleDB instance's pod is Ready",
                                  labels=[*_KEY, "instance"])
        lag = GaugeMetricFamily("sampledb_replication_lag_bytes",
                                "A standby's replay lag behind its primary's current WAL position, in bytes",
                                labels=[*_KEY, "instance"])
        for obj in self.source():
            meta = obj.get("metadata") or {}
            key = [str(meta.get("namespace") or ""), str(meta.get("name") or "")]
            spec = obj.get("spec") or {}
            status = obj.get("status") or {}
            info.add_metric([*key, str(spec.get("version") or ""), str(status.get("currentVersion") or "")], 1)
            phase.add_metric([*key, str(status.get("phase") or "Pending")], 1)
            for cond in status.get("conditions") or []:
                if isinstance(cond, Mapping) and cond.get("type"):
                    condition.add_metric([*key, str(cond["type"]), str(cond.get("status") or ""),
                                          str(cond.get("reason") or "")], 1)
            completed = unix_time((status.get("lastBackup") or {}).get("completedAt"))
            if completed is not None:
                backup.add_metric(key, completed)
            for inst in status.get("instances") or []:
                if not isinstance(inst, Mapping) or not inst.get("name"):
                    continue
                instance.add_metric([*key, str(inst["name"]), str(inst.get("role") or "")], 1)
                ready.add_metric([*key, str(inst["name"])], 1.0 if inst.get("ready") else 0.0)
                if isinstance(inst.get("lagBytes"), int):
                    lag.add_metric([*key, str(inst["name"])], float(inst["lagBytes"]))
        yield from (info, phase, condition, backup, instance, ready, lag)


def unix_time(value: object) -> float | None:
    """An RFC 3339 timestamp ("2026-01-02T03:04:05Z") as Unix time; None when absent or unreadable.
    (model.timestamps.parse's rule; observability is a leaf layer and imports no model.)"""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


_collector = DatabaseCollector()
REGISTRY.register(_collector)


def set_database_source(source: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
    """Where the per-database series come from: every cached SampleDB (shared objects, only read)."""
    _collector.source = source
