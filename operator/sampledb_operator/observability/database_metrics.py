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
- sampledb_replication_lag_bytes{instance}: a standby's replay lag behind the primary (status.instances);
- sampledb_inactive_slot_retained_bytes{instance, slot}: the WAL the primary's oldest inactive replication
  slot holds (status.instances; databases with standbys, whose servers the operator asks every 10 s);
- with WAL archiving (status.archive): sampledb_archive_lag_seconds (since the oldest segment still waiting
  was completed), sampledb_archive_pending_segments, sampledb_archive_last_archived_timestamp_seconds and
  sampledb_archive_last_base_backup_timestamp_seconds (Unix time; absent until there is one); with verified
  recoveries, sampledb_archive_last_verified_timestamp_seconds and, from the newest verification when it
  succeeded, sampledb_archive_recovery_rto_seconds and sampledb_archive_recovery_rpo_seconds.

Invariants: computed from the objects at scrape time, so a deleted database's series vanish at the
next scrape; an object or a timestamp that does not parse is skipped, never raises (a scrape must not
fail because of one odd status). The cache belongs to the event loop: `taken()` reads it there, for the
one scrape made in its context, into each database's kept lines, or its row when its object changed
since they were written. That scrape (the /metrics handler, in a worker thread) gets these families as
exposition text from the renderer `taken()` yields, and collect() yields none of them meanwhile;
elsewhere collect() reads the source itself, on the caller's thread, and builds prometheus-client
families as any collector does.

The renderer keeps each database's lines from one scrape to the next, with the resourceVersion of the
object they were written from, and writes them again only for an object that changed (kube-state-metrics
keeps its lines the same way): at rest a scrape of 5,000 databases joins kept bytes instead of
formatting 50,000 samples, and makes no row of an unchanged object (bench/bench_metrics_scrape.py).
Its text is what prometheus-client's encoders write for the same families, in either format (labels
sorted by name, values as floatToGoString; tests/unit/observability/test_database_metrics.py). This
module imports nothing of the package but observability.metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, NamedTuple, TypeVar, cast

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from sampledb_operator.observability.metrics import PHASES, REGISTRY

_KEY = ("namespace", "name")
_T = TypeVar("_T")
_value_text = cast(Callable[[float], str], floatToGoString)  # how prometheus-client writes a sample's value


class _Row(NamedTuple):
    """What the families read of one SampleDB: its key, resourceVersion and instances' names, and values shared
    with other rows (`_shared`): ~0.5 KiB."""

    key: tuple[str, str]
    version: str
    current: str
    phase: str
    conditions: tuple[tuple[str, str, str], ...]
    completed: float | None
    # name, role, ready, lag bytes, inactive slot and the WAL it holds
    instances: tuple[tuple[str, str, float, float | None, str | None, float | None], ...]
    resource_version: str  # "" when the object has none (then its lines are not kept)
    archive: tuple[float | None, ...] | None = None  # lag, pending, times, verified time, RTO, RPO


class _Kept(NamedTuple):
    """One database's exposition lines (one bytes per per-database family) and the object they are from."""

    key: tuple[str, str]
    resource_version: str
    phase: str
    lines: tuple[bytes, ...]


def _key(meta: Mapping[str, Any]) -> tuple[str, str]:
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


_SHARED: dict[Any, Any] = {}
_SHARED_MOST = 4096  # distinct values shared; beyond it a value is kept as it is (the rows are right either way)


def _shared(value: _T) -> _T:
    """One object for equal values that many databases' rows hold (a condition's type, status and reason, a
    version, a phase): a scrape during a creation takes a row for most of its databases at once, and a row of its
    own strings was ~1.7 KiB, one of shared ones ~0.5 KiB."""
    kept = _SHARED.get(value)
    if kept is not None:
        return cast(_T, kept)
    if len(_SHARED) < _SHARED_MOST:
        _SHARED[value] = value
    return value


def _row(obj: Mapping[str, Any]) -> _Row:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conditions = tuple(_shared((str(c["type"]), str(c.get("status") or ""), str(c.get("reason") or "")))
                       for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type"))
    instances = tuple((str(i["name"]), _shared(str(i.get("role") or "")), 1.0 if i.get("ready") else 0.0,
                       float(i["lagBytes"]) if isinstance(i.get("lagBytes"), int) else None,
                       str(i["inactiveSlot"]) if i.get("inactiveSlot") else None,
                       float(i["inactiveSlotRetainedBytes"]) if isinstance(i.get("inactiveSlotRetainedBytes"), int)
                       else None)
                      for i in status.get("instances") or [] if isinstance(i, Mapping) and i.get("name"))
    return _Row(_key(meta), _shared(str(spec.get("version") or "")),
                _shared(str(status.get("currentVersion") or "")), _shared(str(status.get("phase") or "Pending")),
                _shared(conditions), unix_time((status.get("lastBackup") or {}).get("completedAt")), instances,
                str(meta.get("resourceVersion") or ""), _archive(status.get("archive")))


def _archive(archive: object) -> tuple[float | None, ...] | None:
    if not isinstance(archive, Mapping):
        return None
    lag, pending = archive.get("lagSeconds"), archive.get("pendingSegments")
    base = archive.get("lastBaseBackup")
    verification = archive.get("lastVerification")
    verified = verification if isinstance(verification, Mapping) and verification.get("verified") is True else {}
    return (_number(lag), _number(pending), unix_time(archive.get("lastArchivedAt")),
            unix_time(base.get("completedAt")) if isinstance(base, Mapping) else None,
            unix_time(archive.get("lastVerifiedAt")), _number(verified.get("rtoSeconds")),
            _number(verified.get("rpoSeconds")))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


Samples = Iterable[tuple[tuple[str, ...], float]]  # a row's samples: label values after namespace and name


class _Family(NamedTuple):
    """One per-database family: its name, help, labels after namespace and name, and a row's samples."""

    name: str
    documentation: str
    labels: tuple[str, ...]
    samples: Callable[[_Row], Samples]


def _info(r: _Row) -> Samples:
    return (((r.version, r.current), 1.0),)


def _phase(r: _Row) -> Samples:
    return (((r.phase,), 1.0),)


def _conditions(r: _Row) -> Samples:
    return ((c, 1.0) for c in r.conditions)


def _last_backup(r: _Row) -> Samples:
    return (((), r.completed),) if r.completed is not None else ()


def _instance_info(r: _Row) -> Samples:
    return (((i[0], i[1]), 1.0) for i in r.instances)


def _instance_ready(r: _Row) -> Samples:
    return (((i[0],), i[2]) for i in r.instances)


def _lag(r: _Row) -> Samples:
    return (((i[0],), i[3]) for i in r.instances if i[3] is not None)


def _slot(r: _Row) -> Samples:
    return (((i[0], i[4]), i[5]) for i in r.instances if i[4] is not None and i[5] is not None)


def _archive_value(index: int) -> Callable[[_Row], Samples]:
    def samples(r: _Row) -> Samples:
        value = r.archive[index] if r.archive is not None else None
        return (((), value),) if value is not None else ()
    return samples


_COUNTS = ("sampledb_databases", "SampleDB objects by phase")
_PER_DATABASE = (
    _Family("sampledb_database_info", "A SampleDB's desired (spec) and running version", ("version", "current_version"),
            _info),
    _Family("sampledb_database_phase", "A SampleDB's status.phase (1 for the current one)", ("phase",), _phase),
    _Family("sampledb_database_condition", "A SampleDB's status conditions (1 each)", ("type", "status", "reason"),
            _conditions),
    _Family("sampledb_database_last_backup_timestamp_seconds",
            "When a SampleDB's latest successful backup completed (Unix time)", (), _last_backup),
    _Family("sampledb_instance_info", "A SampleDB instance's role (1 each)", ("instance", "role"), _instance_info),
    _Family("sampledb_instance_ready", "1 when a SampleDB instance's pod is Ready", ("instance",), _instance_ready),
    _Family("sampledb_replication_lag_bytes",
            "A standby's replay lag behind its primary's current WAL position, in bytes", ("instance",), _lag),
    _Family("sampledb_inactive_slot_retained_bytes",
            "The WAL an inactive replication slot keeps on a primary's volume, in bytes (the oldest such slot)",
            ("instance", "slot"), _slot),
    _Family("sampledb_archive_lag_seconds",
            "Seconds since the oldest WAL segment still waiting to be archived was completed (0: none waits)", (),
            _archive_value(0)),
    _Family("sampledb_archive_pending_segments", "WAL segments waiting on the primary's volume to be archived", (),
            _archive_value(1)),
    _Family("sampledb_archive_last_archived_timestamp_seconds", "When the last WAL segment was archived (Unix time)",
            (), _archive_value(2)),
    _Family("sampledb_archive_last_base_backup_timestamp_seconds",
            "When the newest physical base backup in the object store ended (Unix time)", (), _archive_value(3)),
    _Family("sampledb_archive_last_verified_timestamp_seconds",
            "When the newest successful verification of a recovery from the object store ended (Unix time)", (),
            _archive_value(4)),
    _Family("sampledb_archive_recovery_rto_seconds",
            "The newest verification's recovery time: from the restore's start until the recovered copy answered", (),
            _archive_value(5)),
    _Family("sampledb_archive_recovery_rpo_seconds",
            "The newest verification's data-loss window: from its restore point until that WAL was in the store", (),
            _archive_value(6)),
)


def _label_order(names: tuple[str, ...]) -> tuple[int, ...]:
    """Where each label goes in a sample line: prometheus-client writes them sorted by name."""
    return tuple(sorted(range(len(names)), key=names.__getitem__))


_COUNTS_LABELS = (("phase",), (0,))
_FAMILY_LABELS = tuple(((*_KEY, *f.labels), _label_order((*_KEY, *f.labels))) for f in _PER_DATABASE)


def _phase_counts(rows: Iterable[_Row | _Kept]) -> dict[str, int]:
    counts = dict.fromkeys(PHASES, 0)
    for r in rows:
        counts[r.phase] = counts.get(r.phase, 0) + 1
    return counts


class DatabaseCollector(Collector):
    """The cache-derived families, from `source()`: the SampleDB objects (dicts) of the cache.

    One walk over `source()` keeps a small row per database (the objects are decoded one at a time when the
    source is StoreSet.each); collect() then builds the families from the rows and hands them to the encoder
    one at a time, so a scrape holds one family's samples, not all of them; a scrape in `taken()`'s context
    gets text from its renderer instead (bench/bench_metrics_scrape.py)."""

    def __init__(self, source: Callable[[], Iterable[Mapping[str, Any]]] = tuple) -> None:
        self.source = source
        self.text = _TextCache()

    def rows(self) -> list[_Row]:
        """The rows of every database `source()` yields now (on the thread that owns the source)."""
        return [_row(obj) for obj in self.source()]

    def take(self) -> list[_Row | _Kept]:
        """For the renderer: every database `source()` yields now, as the lines kept for its object's
        resourceVersion or, without them, its row (on the thread that owns the source)."""
        return self.text.take(self.source())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if _TAKEN.get() is self:
            return  # the scrape of this context gets them as text from taken()'s renderer
        rows = self.rows()
        yield _family(*_COUNTS, ["phase"], (([p], n) for p, n in _phase_counts(rows).items()), key=())
        for f in _PER_DATABASE:
            yield _family(f.name, f.documentation, list(f.labels),
                          (([*r.key, *values], value) for r in rows for values, value in f.samples(r)))


class _TextCache:
    """Each database's exposition lines, one bytes per per-database family, kept with the resourceVersion of
    the object they were written from. Safe from any thread (one lock); holds what the last scrape wrote only
    (a database gone since is forgotten by the next one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], _Kept] = {}

    def take(self, objs: Iterable[Mapping[str, Any]]) -> list[_Row | _Kept]:
        """Each object's kept lines when they were written from its resourceVersion, else its row."""
        with self._lock:
            kept = self._kept
        out: list[_Row | _Kept] = []
        for obj in objs:
            meta = obj.get("metadata") or {}
            hit = kept.get(_key(meta))
            version = meta.get("resourceVersion")
            out.append(hit if hit is not None and version and hit.resource_version == version else _row(obj))
        return out

    def render(self, taken: list[_Row | _Kept], *, openmetrics: bool) -> list[bytes]:
        """These families' text in parts, to be joined (prometheus-client's text format, or OpenMetrics without
        its # EOF); each row's lines are written, and kept for the next scrape with the others.

        A database's old lines are let go before its new ones are written, so a scrape in which most databases
        changed (during a creation) never holds two sets of lines for them (~1.8 KB a database); a scrape that
        runs meanwhile finds nothing kept and writes its lines afresh."""
        with self._lock:
            previous, self._kept = self._kept, {}
        items: list[_Kept] = []
        for item in taken:
            if isinstance(item, _Kept):
                items.append(item)
                continue
            previous.pop(item.key, None)
            items.append(_Kept(item.key, item.resource_version, item.phase, _lines(item)))
        del previous
        with self._lock:
            self._kept = {item.key: item for item in items if item.resource_version}
        parts = [_header(*_COUNTS, openmetrics)]
        parts += [_sample(_COUNTS[0], _COUNTS_LABELS, (p,), n) for p, n in _phase_counts(items).items()]
        for i, f in enumerate(_PER_DATABASE):
            parts.append(_header(f.name, f.documentation, openmetrics))
            parts += [item.lines[i] for item in items]
        return parts


def _lines(r: _Row) -> tuple[bytes, ...]:
    return tuple(b"".join(_sample(f.name, labels, (*r.key, *values), value) for values, value in f.samples(r))
                 for f, labels in zip(_PER_DATABASE, _FAMILY_LABELS, strict=True))


def _sample(name: str, labels: tuple[tuple[str, ...], tuple[int, ...]], values: tuple[str, ...],
            value: float) -> bytes:
    names, order = labels
    pairs = ",".join(f'{names[i]}="{_escaped(values[i])}"' for i in order)
    return f"{name}{{{pairs}}} {_value_text(value)}\n".encode()


def _escaped(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _header(name: str, documentation: str, openmetrics: bool) -> bytes:
    doc = _escaped(documentation) if openmetrics else documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} gauge\n".encode()


# the collector whose families the scrape of this context gets as text (asyncio.to_thread copies the context)
_TAKEN: ContextVar[DatabaseCollector | None] = ContextVar("sampledb_taken", default=None)


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


Render = Callable[[bool], list[bytes]]  # openmetrics? -> the families' text, in parts, for one scrape


@contextmanager
def taken() -> Iterator[Render]:
    """Called on the event loop: read the cache now, once (each database's kept lines, or its row); yields the
    renderer of these families for the one scrape made in this context (also in a worker thread started from
    it), during which collect() leaves them to it."""
    items = _collector.take()
    token = _TAKEN.set(_collector)
    try:
        yield lambda openmetrics: _collector.text.render(items, openmetrics=openmetrics)
    finally:
        _TAKEN.reset(token)
