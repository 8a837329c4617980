"""Series read from the SampleDB cache when Prometheus scrapes (kube-state-metrics style).

sampledb_databases{phase}: how many cached SampleDBs are in each phase (every phase of
metrics.PHASES is exported, 0 when none). Then one set of series per cached SampleDB, labelled
`namespace` and `name`:

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
(a scrape must not fail because of one odd status). The cache belongs to the event loop: `taken()`
reads it there into plain rows for the scrape made in its context (the /metrics handler encodes in a
worker thread, which sees those rows and never the cache); a collect() outside `taken()` reads the
source itself, on the caller's thread. This module imports nothing of the package but
observability.metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, NamedTuple

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sampledb_operator.observability.metrics import PHASES, REGISTRY

_KEY = ("namespace", "name")


class _Row(NamedTuple):
    """What the families read of one SampleDB: strings it already holds, a few tuples (~0.3 KiB)."""

    key: tuple[str, str]
    version: str
    current: str
    phase: str
    conditions: tuple[tuple[str, str, str], ...]
    completed: float | None
    instances: tuple[tuple[str, str, float, float | None], ...]  # name, role, ready, lag bytes


def _row(obj: Mapping[str, Any]) -> _Row:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conditions = tuple((str(c["type"]), str(c.get("status") or ""), str(c.get("reason") or ""))
                       for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type"))
    instances = tuple((str(i["name"]), str(i.get("role") or ""), 1.0 if i.get("ready") else 0.0,
                       float(i["lagBytes"]) if isinstance(i.get("lagBytes"), int) else None)
                      for i in status.get("instances") or [] if isinstance(i, Mapping) and i.get("name"))
    return _Row((str(meta.get("namespace") or ""), str(meta.get("name") or "")), str(spec.get("version") or ""),
                str(status.get("currentVersion") or ""), str(status.get("phase") or "Pending"), conditions,
                unix_time((status.get("lastBackup") or {}).get("completedAt")), instances)


class DatabaseCollector(Collector):
    """The cache-derived families, from `source()`: the SampleDB objects (dicts) of the cache.

    One walk over `source()` keeps a small row per database (the objects are decoded one at a time when the
    source is StoreSet.each); the phase counts and the families are then built from the rows and handed to
    the encoder one at a time, so a scrape holds one family's samples, not all of them
    (bench/bench_metrics_scrape.py)."""

    def __init__(self, source: Callable[[], Iterable[Mapping[str, Any]]] = tuple) -> None:
        self.source = source

    def take(self) -> list[_Row]:
        """The rows of every database `source()` yields now (on the thread that owns the source)."""
        return [_row(obj) for obj in self.source()]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        taken = _TAKEN.get()
        if taken is None or taken[0] is not self:
            yield from self._families(self.take())
            return
        try:
            yield from self._families(taken[1])
        finally:
            taken[1].clear()  # one scrape's rows: gone before the encoder joins its answer (its peak)

    def _families(self, rows: list[_Row]) -> Iterator[GaugeMetricFamily]:
        counts = dict.fromkeys(PHASES, 0)
        for r in rows:
            counts[r.phase] = counts.get(r.phase, 0) + 1
        yield _family("sampledb_databases", "SampleDB objects by phase", ["phase"],
                      (([p], n) for p, n in counts.items()), key=())
        yield _family("sampledb_database_info", "A SampleDB's desired (spec) and running version",
                      ["version", "current_version"], (([*r.key, r.version, r.current], 1.0) for r in rows))
        yield _family("sampledb_database_phase", "A SampleDB's status.phase (1 for the current one)", ["phase"],
                      (([*r.key, r.phase], 1.0) for r in rows))
        yield _family("sampledb_database_condition", "A SampleDB's status conditions (1 each)",
                      ["type", "status", "reason"], (([*r.key, *c], 1.0) for r in rows for c in r.conditions))
        yield _family("sampledb_database_last_backup_timestamp_seconds",
                      "When a SampleDB's latest successful backup completed (Unix time)", [],
                      ((list(r.key), r.completed) for r in rows if r.completed is not None))
        yield _family("sampledb_instance_info", "A SampleDB instance's role (1 each)", ["instance", "role"],
                      (([*r.key, i[0], i[1]], 1.0) for r in rows for i in r.instances))
        yield _family("sampledb_instance_ready", "1 when a SampleDB instance's pod is Ready", ["instance"],
                      (([*r.key, i[0]], i[2]) for r in rows for i in r.instances))
        yield _family("sampledb_replication_lag_bytes",
                      "A standby's replay lag behind its primary's current WAL position, in bytes", ["instance"],
                      (([*r.key, i[0]], i[3]) for r in rows for i in r.instances if i[3] is not None))


# the rows taken for the scrape of this context (asyncio.to_thread copies the context into the worker thread)
_TAKEN: ContextVar[tuple[DatabaseCollector, list[_Row]] | None] = ContextVar("sampledb_taken_rows", default=None)


def _family(name: str, documentation: str, labels: list[str], samples: Iterable[tuple[list[str], float]],
            key: tuple[str, ...] = _KEY) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=[*key, *labels])
    for values, value in samples:
        family.add_metric(values, value)
    return family


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
    """Where the phase counts and the per-database series come from: every cached SampleDB (shared objects,
    only read)."""
    _collector.source = source


@contextmanager
def taken() -> Iterator[None]:
    """Called on the event loop: read the cache now, once, into the rows that the one scrape made in this
    context encodes (also in a worker thread started from it); its collect releases them when done."""
    token = _TAKEN.set((_collector, _collector.take()))
    try:
        yield
    finally:
        _TAKEN.reset(token)
