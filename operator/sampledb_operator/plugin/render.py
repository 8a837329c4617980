"""The text of `kubectl sampledb status`: one screen about one SampleDB (pure; no I/O).

Invariants: a function of the report and `now` only, so the same input prints the same screen;
absent values print as "-"; ages are kubectl's (5s, 3m20s, 2h, 4d); tables are kubectl-style
(upper-case headers, columns separated by three spaces); nothing here can print a secret value,
because a StatusReport holds none.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sampledb_operator.model import timestamps
from sampledb_operator.model.objects import Obj
from sampledb_operator.plugin.report import StatusReport, event_time

NONE = "-"
MESSAGE_WIDTH = 90
KIND_ORDER = ("StatefulSet", "Pod", "PersistentVolumeClaim", "Service", "Secret", "ConfigMap", "PodDisruptionBudget",
              "Deployment", "Job")




def human_duration(seconds: float) -> str:
    """kubectl's short durations: 45s, 3m20s, 25m, 5h30m, 20h, 3d4h, 40d."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    return f"{d}d"


def age(value: object, now: datetime) -> str:
    """The age of an RFC 3339 timestamp at `now`, or "-"."""
    when = timestamps.parse(value)
    return human_duration((now - when).total_seconds()) if when else NONE


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns, three spaces apart; the last column is not padded."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for row in [headers, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], widths[:-1], strict=True)] + [str(row[-1])]
        lines.append((indent + "   ".join(cells)).rstrip())
    return lines


def short(text: object, width: int = MESSAGE_WIDTH) -> str:
    one_line = " ".join(str(text or "").split())
    return one_line if len(one_line) <= width else one_line[: width - 3] + "..."


def condition(db: Obj, type_: str) -> dict[str, Any]:
    return next((c for c in (db.get("status") or {}).get("conditions") or [] if c.get("type") == type_), {})


def render_status(report: StatusReport, now: datetime) -> str:
    """The whole status screen."""
    out = _summary(report, now)
    instances = _instances(report.db)
    if instances:
        out += ["", "Instances", *instances]
    out += ["", "Conditions", *(_conditions(report.db, now) or ["  (none yet: the operator has not reconciled it)"])]
    out += ["", "Children", *(_children(report, now) or ["  (none)"])]
    out += ["", "Backups", *(_backups(report.backups, now) or ["  (none)"])]
    stored = _stored(report.db, now)
    if stored:
        out += ["", f"Base backups in {(report.db.get('status') or {}).get('archive', {}).get('destination')}", *stored]
    if report.events:
        out += ["", "Events", *_events(report.events, now)]
    if report.problems:
        out += ["", "Not shown", *(f"  {p}" for p in report.problems)]
    return "\n".join(out) + "\n"


def _summary(report: StatusReport, now: datetime) -> list[str]:
    db = report.db
    meta, spec, status = db.get("metadata") or {}, db.get("spec") or {}, db.get("status") or {}
    ready = condition(db, "Ready")
    version = str(spec.get("version") or NONE)
    current = status.get("currentVersion")
    running = f"running {current}" if current else "not running yet"
    upgrading = condition(db, "Upgrading")
    if current and current != spec.get("version"):
        running += f", upgrade: {upgrading.get('reason') or 'pending'}"
    backup, snapshot = status.get("lastBackup") or {}, status.get("lastSnapshot") or {}
    applied = status.get("appliedMigrations") or []
    schedule = (spec.get("backup") or {}).get("schedule")
    rows = [
        ("Phase", str(status.get("phase") or "(none yet)")),
        ("Ready", f"{ready.get('status')} ({ready.get('reason')})" if ready else NONE),
        ("Version", f"{version} ({running})"),
        ("Image", str(spec.get("image") or f"postgres:{version}")),
        ("Endpoint", str(status.get("endpoint") or NONE)),
        ("Instances", _instances_line(spec, status)),
        ("Credentials", _secret_line(report)),
        ("Storage", _storage(spec)),
        ("Paused", "yes: the operator changes nothing" if spec.get("paused") else "no"),
        ("Generation", f"{meta.get('generation', NONE)} (observed {status.get('observedGeneration', NONE)})"),
        ("Last backup", _backup_line(backup, now)),
        ("Last snapshot", _backup_line(snapshot, now)),
        ("Backup schedule", f"{schedule} UTC, keep {(spec.get('backup') or {}).get('retention', 7)}"
         if schedule else "none"),
        ("Migrations", f"{len(applied)} applied, newest {applied[-1].get('name')}" if applied else "none applied"),
        ("Deletion policy", str(spec.get("deletionPolicy") or "Snapshot")),
        ("Age", age(meta.get("creationTimestamp"), now)),
    ]
    if spec.get("restore"):
        res = spec["restore"]
        source = res.get("database") or meta.get("name")
        rows.insert(3, ("Restored from", f"backup {res.get('backupName')} of {source} in its object store"
                        if res.get("objectStore") else f"SampleDBBackup {res.get('backupName')}"))
    if spec.get("recovery"):
        rec = spec["recovery"]
        to = rec.get("targetTime") or rec.get("targetName") or rec.get("targetLSN") or "the end of its archive"
        rows.insert(3, ("Recovered from", f"{rec.get('database')} in its object store, to {to}"))
    archive = status.get("archive") or {}
    if (spec.get("backup") or {}).get("objectStore"):
        rows.insert(-3, ("WAL archive", _archive_line(db, archive, now)))
        base = archive.get("lastBaseBackup") or {}
        rows.insert(-3, ("Base backup", f"{base.get('name')}, {age(base.get('completedAt'), now)} ago"
                         if base else condition(db, "BaseBackupHealthy").get("reason") or NONE))
        verified = condition(db, "RecoveryVerified")
        if verified:
            rows.insert(-3, ("Recovery proven", _verified_line(verified, archive, now)))
    degraded = condition(db, "Degraded")
    if degraded.get("status") == "True":  # what is wrong first, in the operator's and Kubernetes' words
        rows.insert(0, ("Problem", f"{degraded.get('reason')}: {short(degraded.get('message'), 400)}"))
    width = max(len(k) for k, _ in rows) + 2
    return [f"SampleDB {meta.get('namespace')}/{meta.get('name')}", *(f"  {k + ':':<{width}}{v}" for k, v in rows)]


def _verified_line(cond: Obj, archive: Obj, now: datetime) -> str:
    """"yes, 2h ago: RTO 12.3 s, RPO 41 s" or the condition's reason and words."""
    last = archive.get("lastVerification") or {}
    if cond.get("status") == "True" and last.get("verified"):
        return (f"yes, {age(last.get('finishedAt'), now)} ago: RTO {last.get('rtoSeconds', NONE)} s,"
                f" RPO {last.get('rpoSeconds', NONE)} s, {last.get('tables', NONE)} tables compared")
    return f"{cond.get('reason') or NONE}: {short(cond.get('message'), 160)}"


def _archive_line(db: Obj, archive: Obj, now: datetime) -> str:
    """"Archiving to s3://..., last 0000...2A 12s ago, 0 waiting" (or the condition's reason and words)."""
    cond = condition(db, "ContinuousArchiving")
    where = archive.get("destination") or "the object store"
    if cond.get("status") != "True":
        return f"{cond.get('reason') or 'not checked yet'} ({where}): {short(cond.get('message'), 120)}"
    return (f"to {where}, last {archive.get('lastArchivedWal')} {age(archive.get('lastArchivedAt'), now)} ago,"
            f" {archive.get('pendingSegments', 0)} waiting")


def _instances_line(spec: Obj, status: Obj) -> str:
    """"3/3 ready, primary ha-0" (and a failover or switchover in progress)."""
    line = f"{status.get('readyInstances') or NONE} ready (spec.replicas {spec.get('replicas', 1)})"
    if status.get("primary"):
        line += f", primary {status['primary']}"
    if status.get("targetPrimary"):
        line += f", promoting {status['targetPrimary']}"
    sync = (spec.get("replication") or {}).get("synchronous")
    return line + (", synchronous" if sync and int(spec.get("replicas", 1)) > 1 else "")


def _instances(db: Obj) -> list[str]:
    """Each instance's role, readiness, WAL position and lag (status.instances), when there are standbys."""
    items = [i for i in (db.get("status") or {}).get("instances") or [] if isinstance(i, dict)]
    if len(items) < 2:
        return []
    rows = [(str(i.get("name") or NONE), str(i.get("role") or NONE), "yes" if i.get("ready") else "no",
             str(i.get("lsn") or NONE), _bytes(i["lagBytes"]) if isinstance(i.get("lagBytes"), int) else NONE)
            for i in items]
    return table(("NAME", "ROLE", "READY", "LSN", "LAG"), rows)


def _secret_line(report: StatusReport) -> str:
    if report.secret is None:
        return "Secret missing"
    keys = f" (keys: {', '.join(report.secret.keys)})" if report.secret.keys else ""
    return f"Secret {report.secret.name}{keys}"


def _storage(spec: Obj) -> str:
    storage = spec.get("storage") or {}
    cls = storage.get("storageClassName")
    return f"{storage.get('size', NONE)}" + (f", class {cls}" if cls else "")


def _backup_line(record: Obj, now: datetime) -> str:
    if not record.get("name"):
        return NONE
    done = record.get("completedAt")
    return f"{record['name']}, {age(done, now)} ago ({done})" if done else str(record["name"])


def _conditions(db: Obj, now: datetime) -> list[str]:
    rows = [(str(c.get("type")), str(c.get("status")), str(c.get("reason") or NONE),
             age(c.get("lastTransitionTime"), now), short(c.get("message")) or NONE)
            for c in (db.get("status") or {}).get("conditions") or []]
    return table(("TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"), rows) if rows else []


def _children(report: StatusReport, now: datetime) -> list[str]:
    objs = list(report.children)
    rows = [(str(o.get("kind")), str((o.get("metadata") or {}).get("name")), child_state(o),
             age((o.get("metadata") or {}).get("creationTimestamp"), now)) for o in objs]
    if report.secret is not None:
        rows.append(("Secret", report.secret.name, f"{len(report.secret.keys)} keys", age(report.secret.created, now)))
    rows.sort(key=lambda r: (KIND_ORDER.index(r[0]) if r[0] in KIND_ORDER else len(KIND_ORDER), r[1]))
    return table(("KIND", "NAME", "STATE", "AGE"), rows) if rows else []


def child_state(obj: Obj) -> str:
    """One line about a child's state, by kind."""
    kind, spec, status = obj.get("kind"), obj.get("spec") or {}, obj.get("status") or {}
    if kind == "StatefulSet":
        ready, want = status.get("readyReplicas") or 0, spec.get("replicas", 1)
        rolling = status.get("currentRevision") != status.get("updateRevision") and status.get("updateRevision")
        image = ((spec.get("template") or {}).get("spec") or {}).get("containers", [{}])[0].get("image", NONE)
        return f"{ready}/{want} ready{', rolling out' if rolling else ''}, {image}"
    if kind == "Pod":
        cstatus = status.get("containerStatuses") or []
        ready = all(c.get("ready") for c in cstatus) and bool(cstatus)
        restarts = sum(int(c.get("restartCount") or 0) for c in cstatus)
        node = spec.get("nodeName") or "unscheduled"
        return f"{status.get('phase', NONE)}, {'ready' if ready else 'not ready'}, {restarts} restarts, node {node}"
    if kind == "PersistentVolumeClaim":
        size = (status.get("capacity") or {}).get("storage") or ((spec.get("resources") or {}).get("requests")
                                                                  or {}).get("storage", NONE)
        cls = spec.get("storageClassName")
        return f"{status.get('phase', NONE)}, {size}" + (f", class {cls}" if cls else "")
    if kind == "Service":
        ports = ",".join(str(p.get("port")) for p in spec.get("ports") or [])
        ip = spec.get("clusterIP")
        return f"headless, port {ports}" if ip == "None" else f"{spec.get('type', 'ClusterIP')} {ip or NONE}:{ports}"
    if kind == "ConfigMap":
        return f"{len(obj.get('data') or {})} keys"
    if kind == "PodDisruptionBudget":
        bound = (f"min available {spec['minAvailable']}" if "minAvailable" in spec
                 else f"max unavailable {spec.get('maxUnavailable', NONE)}")
        return (f"{bound}, {status.get('disruptionsAllowed', 0)} evictions allowed,"
                f" {status.get('currentHealthy', 0)}/{status.get('expectedPods', 0)} healthy")
    if kind == "Deployment":  # the pooler (spec.pooler)
        return (f"{status.get('readyReplicas', 0)}/{spec.get('replicas', NONE)} ready,"
                f" {status.get('updatedReplicas', 0)} updated")
    if kind == "Job":
        return job_state(obj)
    return NONE


def job_state(job: Obj) -> str:
    status = job.get("status") or {}
    component = ((job.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component", "job")
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in {"Complete", "SuccessCriteriaMet"}:
            return f"{component}: Succeeded"
        if cond.get("status") == "True" and cond.get("type") in {"Failed", "FailureTarget"}:
            return f"{component}: Failed ({cond.get('reason') or 'failed'})"
    if status.get("active"):
        return f"{component}: Running"
    return f"{component}: Pending"


def _backups(backups: list[Obj], now: datetime, limit: int = 5) -> list[str]:
    """The newest backups; a column IN STORE when any of them has a copy in the object store."""
    rows: list[tuple[str, ...]] = []
    stored = any((b.get("status") or {}).get("storeLocation") for b in backups[:limit])
    for b in backups[:limit]:
        status = b.get("status") or {}
        size = status.get("sizeBytes")
        row = (str((b.get("metadata") or {}).get("name")), str((b.get("spec") or {}).get("reason", "manual")),
               str(status.get("phase") or "Pending"), _bytes(size) if size is not None else NONE,
               age(status.get("completedAt"), now) + (" ago" if status.get("completedAt") else ""))
        rows.append((*row, "yes" if status.get("storeLocation") else "no") if stored else row)
    header = ("NAME", "REASON", "PHASE", "SIZE", "COMPLETED", *(("IN STORE",) if stored else ()))
    lines = table(header, rows) if rows else []
    if len(backups) > limit:
        lines.append(f"  ... {len(backups) - limit} older (kubectl get sdbb)")
    return lines


def _stored(db: Obj, now: datetime) -> list[str]:
    """The object store's base backups as the newest base backup Job listed them (status.archive.baseBackups)."""
    archive = (db.get("status") or {}).get("archive") or {}
    listed = archive.get("baseBackups") or []
    rows = [(str(b.get("backupId")), str(b.get("name") or NONE),
             _bytes(b["sizeBytes"]) if isinstance(b.get("sizeBytes"), int) else NONE,
             age(b.get("completedAt"), now) + (" ago" if b.get("completedAt") else ""))
            for b in listed if isinstance(b, dict)]
    if not rows:
        return []
    lines = table(("BACKUP ID", "NAME", "SIZE", "COMPLETED"), rows)
    count = archive.get("baseBackupsCount")
    if isinstance(count, int) and count > len(rows):
        lines.append(f"  ... {count - len(rows)} older")
    first = archive.get("firstRecoverabilityPoint")
    if first:
        lines.append(f"  recoverable from {first} (the oldest one's end) to the last archived WAL")
    return lines


def _bytes(n: int | float) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{size:.1f}TiB"  # pragma: no cover - the loop returns at GiB


def _events(events: list[Obj], now: datetime) -> list[str]:
    rows = [(age(event_time(e), now), str(e.get("type") or NONE), str(e.get("reason") or NONE),
             short(e.get("message"))) for e in events]
    return table(("AGE", "TYPE", "REASON", "MESSAGE"), rows)
