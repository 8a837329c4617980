"""One pass of the archive step: continuous WAL archiving and physical base backups, as a plan.

Pure: no I/O. The reconciler (reconcilers/archive.py) gathers `ArchiveFacts`: the archiver's state read with
SQL on the primary (`ArchiverState`: pg_stat_archiver, the segments waiting in pg_wal/archive_status, the last
error archive-wal.sh recorded), this database's base backup Jobs from the cache, and the result lines of the
finished ones the status does not hold yet. `plan_archive` returns the pass:

- status.archive: what the primary said (kept as it was when it did not answer), and the newest base backup;
- ContinuousArchiving: True/Archiving; False/ArchiveFailing (the last failure is newer than the last success:
  the archiver's words, and how much waits on the volume); False/ArchiveLagging (the oldest waiting segment is
  older than `lag_limit`); Unknown/AwaitingFirstArchive; Unknown/PrimaryNotAnswering (never a guess);
- BaseBackupHealthy: True/BaseBackupSucceeded; False/BaseBackupFailed (the newest finished base backup
  failed); False/BaseBackupOverdue (a slot of the schedule passed more than BASE_BACKUP_GRACE ago without
  one); Unknown/AwaitingFirstBaseBackup;
- at most one base backup Job at a time, named after its request (so each request makes one Job, ever):
  "first" as soon as the archiver is not failing (a database is recoverable only from its first base backup
  on; the backup's end waits for its WAL to be archived, so it proves archiving too), each
  slot of spec.backup.objectStore.baseBackupSchedule after the last base backup, and each new value of the
  annotation sampledb.io/base-backup;
- the verifications that the store restores the database (RecoveryVerified and its Job:
  decide/backup/archive_verify.py);
- a Result to look again within ARCHIVE_RECHECK_SECONDS: nothing else tells the operator that archiving fails.

Invariants: a database without spec.backup.objectStore gets no status.archive, no condition and no Job; a
Job is never made while the database is not ready or the primary did not answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sampledb_operator.decide import jobs
from sampledb_operator.decide.backup import archive_verify, schedule
from sampledb_operator.decide.children import archive_config, pgconfig, scheduling
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.effects import Create, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.labels import db_name, namespace_of, selector_labels
from sampledb_operator.decide.status import job_state
from sampledb_operator.model import names
from sampledb_operator.model.archive import (
    ArchiverState,
    ArchiveSpec,
    ArchiveStatus,
    BaseBackupRecord,
    StoredBaseBackup,
)
from sampledb_operator.model.conditions import Condition, ConditionStatus, ConditionType, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB

BASE_BACKUP_COMPONENT = "basebackup"
BASE_BACKUP_ANNOTATION = "sampledb.io/base-backup"  # on the SampleDB: each new value asks for a base backup
REQUEST_ANNOTATION = "sampledb.io/base-backup-request"  # on a base backup Job: the request it answers
SOURCE_ANNOTATION = "sampledb.io/base-backup-source"  # on a base backup Job: the instance (pod) it reads
STANDBY_LAG_LIMIT = 16 * 1024 * 1024  # bytes: a standby further behind is not read (its backup would end later)
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
FIRST_REQUEST = "first"
ARCHIVE_RECHECK_SECONDS = 30.0
BASE_BACKUP_GRACE = timedelta(hours=1)
BASE_BACKUP_DEADLINE_SECONDS = 6 * 3600


@dataclass(frozen=True, slots=True)
class ArchiveFacts:
    """Everything one pass of the archive step reads."""

    db: SampleDB
    now: datetime
    db_ready: bool = False
    primary_claim: str | None = None  # the primary instance's data volume (a base backup reads it)
    server: ArchiverState | None = None  # None: the primary did not answer (or is not ready)
    jobs: tuple[Obj, ...] = ()  # this database's base backup Jobs, from the cache
    results: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # finished Job -> its result line
    verify_jobs: tuple[Obj, ...] = ()  # this database's recovery verification Jobs, from the cache
    verify_results: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # (decide/backup/archive_verify.py)


@dataclass(frozen=True, slots=True)
class ArchivePass:
    """The pass: its plan (the Job to create, when to look again), the status and the conditions."""

    plan: Plan = field(default_factory=Plan)
    status: ArchiveStatus | None = None
    conditions: tuple[Condition, ...] = ()


def lag_limit(spec: ArchiveSpec) -> timedelta:
    """How old the oldest segment waiting may get before ArchiveLagging: 5 archive_timeouts, at least 5 min."""
    return timedelta(seconds=max(5 * spec.archive_timeout_seconds, 300))


def results_needed(db: SampleDB, jobs_: Sequence[Obj]) -> list[str]:
    """The finished base backup Jobs whose result line the pass needs: the succeeded ones newer than the status's
    record, and the newest finished one when it failed (its message says why)."""
    recorded = _recorded(db)
    out = []
    finished = [j for j in _by_creation(jobs_) if (s := job_state(j)) is not None and s.finished]
    for job in finished:
        state = job_state(job)
        newer = recorded is None or _created(job) > recorded
        if state is not None and newer and (state.succeeded or job is finished[-1]):
            out.append(str(job["metadata"]["name"]))
    return out


def plan_archive(facts: ArchiveFacts) -> ArchivePass:
    """The pass (see the module docstring)."""
    db = facts.db
    spec = db.spec.backup.object_store
    if spec is None:
        return ArchivePass()
    old = db.status.archive or ArchiveStatus()
    ns = db.metadata.namespace or "default"
    status = old.model_copy(update={"destination": archive_config.destination(spec, ns, db.metadata.name)})
    if facts.server is not None:
        status = _with_server(status, facts.server)
    status = _with_base_backups(status, facts)
    gen = db.metadata.generation
    archiving = _archiving(db, spec, facts.server, status, gen)
    base, effects = _base_backups(facts, spec, status, archiving, gen)
    verifying = archive_verify.plan_verification(archive_verify.VerifyFacts(
        db=db, now=facts.now, db_ready=facts.db_ready, jobs=facts.verify_jobs, results=facts.verify_results), status)
    conditions = (archiving, base, *((verifying.condition,) if verifying.condition is not None else ()))
    return ArchivePass(Plan((*effects, *verifying.effects), Result(requeue_after=ARCHIVE_RECHECK_SECONDS)),
                       verifying.status, conditions)


# ------------------------------------------------------------------ what the primary says


def _with_server(status: ArchiveStatus, server: ArchiverState) -> ArchiveStatus:
    now = server.now or datetime.now(UTC)
    lag = 0 if server.oldest_pending_at is None else max(0, int((now - server.oldest_pending_at).total_seconds()))
    error = server.error.strip()[:1024] if server.error else None
    failing = _failing(server)
    return status.model_copy(update={
        "last_archived_wal": server.last_archived_wal, "last_archived_at": _second(server.last_archived_at),
        "last_failed_wal": server.last_failed_wal, "last_failed_at": _second(server.last_failed_at),
        "last_error": error if failing else None, "pending_segments": server.pending, "lag_seconds": lag,
    })


def _failing(server: ArchiverState) -> bool:
    return server.last_failed_at is not None and (server.last_archived_at is None
                                                  or server.last_failed_at > server.last_archived_at)


def _archiving(db: SampleDB, spec: ArchiveSpec, server: ArchiverState | None, status: ArchiveStatus,
               gen: int | None) -> Condition:
    dest = status.destination
    if server is None:
        prev = get_condition(db.status.conditions, ConditionType.CONTINUOUS_ARCHIVING)
        if prev is not None:
            return prev.model_copy(update={"observed_generation": gen})
        return _cond(ConditionType.CONTINUOUS_ARCHIVING, "Unknown", "PrimaryNotAnswering",
                     "waiting for the primary to answer: archiving is checked with SQL on it", gen)
    waiting = f"{server.pending} WAL segment{'s' if server.pending != 1 else ''} wait on the primary's volume"
    if _failing(server):
        why = f"; the archiver said: {status.last_error}" if status.last_error else ""
        return _cond(ConditionType.CONTINUOUS_ARCHIVING, "False", "ArchiveFailing",
                     f"WAL {server.last_failed_wal} could not be archived to {dest} ({server.failed_count} failures"
                     f" since the server's statistics were reset); {waiting}{why}", gen)
    limit = lag_limit(spec)
    if status.lag_seconds is not None and status.lag_seconds > limit.total_seconds():
        return _cond(ConditionType.CONTINUOUS_ARCHIVING, "False", "ArchiveLagging",
                     f"the oldest WAL segment waiting to be archived to {dest} was completed {status.lag_seconds} s"
                     f" ago (more than {int(limit.total_seconds())} s); {waiting}", gen)
    if server.archived_count == 0 and server.last_archived_wal is None:
        return _cond(ConditionType.CONTINUOUS_ARCHIVING, "Unknown", "AwaitingFirstArchive",
                     f"no WAL archived to {dest} yet (one is, at the latest, {spec.archive_timeout_seconds} s after"
                     " the first write)", gen)
    return _cond(ConditionType.CONTINUOUS_ARCHIVING, "True", "Archiving",
                 f"WAL {server.last_archived_wal} archived to {dest} at {_text(server.last_archived_at)}; {waiting}",
                 gen)


# ------------------------------------------------------------------ base backups


def _with_base_backups(status: ArchiveStatus, facts: ArchiveFacts) -> ArchiveStatus:
    """The newest succeeded base backup newer than the record, from its Job's result line."""
    newest = status.last_base_backup
    for job in _by_creation(facts.jobs):
        state = job_state(job)
        name = str(job["metadata"]["name"])
        if state is None or not state.succeeded or name not in facts.results:
            continue
        record = _record(name, facts.results[name], job)
        if newest is None or (record.completed_at and newest.completed_at
                              and record.completed_at > newest.completed_at):
            newest = record
    if newest is status.last_base_backup:
        return status
    first = status.first_recoverability_point or (newest.completed_at if newest else None)
    update: dict[str, Any] = {"last_base_backup": newest, "first_recoverability_point": first}
    if newest is not None:
        update.update(_catalog(facts.results.get(newest.name) or {}))
    return status.model_copy(update=update)


def _catalog(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the store held after a base backup (its result's "catalog"): the newest backups, their count and the
    oldest one's end, which is the first point a recovery can target (it moves with the retention)."""
    catalog = result.get("catalog")
    if not isinstance(catalog, Mapping):
        return {}
    entries = [StoredBaseBackup(backup_id=str(b["id"])[:64], name=_str(b.get("name"), 253),
                                completed_at=_parse_time(b.get("end")),
                                size_bytes=b.get("size") if isinstance(b.get("size"), int) else None)
               for b in catalog.get("newest") or [] if isinstance(b, Mapping) and b.get("id")][:8]
    count = catalog.get("count")
    out: dict[str, Any] = {"base_backups": entries, "base_backups_count": count if isinstance(count, int) else None}
    oldest = _parse_time(catalog.get("oldestEnd"))
    if oldest is not None:
        out["first_recoverability_point"] = oldest
    return out


def _record(name: str, result: Mapping[str, Any], job: Obj) -> BaseBackupRecord:
    completed = _parse_time(result.get("endTime")) or _parse_time((job.get("status") or {}).get("completionTime"))
    size = result.get("sizeBytes")
    source = (job["metadata"].get("annotations") or {}).get(SOURCE_ANNOTATION)
    return BaseBackupRecord(name=name, backup_id=_str(result.get("backupId"), 64), completed_at=completed,
                            begin_wal=_str(result.get("beginWal"), 24), end_lsn=_str(result.get("endLsn"), 32),
                            size_bytes=size if isinstance(size, int) else None, source=_str(source, 253))


def _base_backups(facts: ArchiveFacts, spec: ArchiveSpec, status: ArchiveStatus, archiving: Condition,
                  gen: int | None) -> tuple[Condition, tuple[Create, ...]]:
    db = facts.db
    jobs_ = _by_creation(facts.jobs)
    running = [j for j in jobs_ if (s := job_state(j)) is None or not s.finished]
    last = status.last_base_backup
    newest_finished = next((j for j in reversed(jobs_) if (s := job_state(j)) is not None and s.finished), None)
    finished_state = job_state(newest_finished) if newest_finished is not None else None
    failed = newest_finished is not None and finished_state is not None and not finished_state.succeeded and (
        last is None or last.completed_at is None or _created(newest_finished) > last.completed_at)
    request = _request(facts, spec, last, jobs_, archiving)
    effects: tuple[Create, ...] = ()
    if request is not None and not running and facts.db_ready and facts.server is not None \
            and facts.primary_claim is not None:
        standby = backup_standby(db) if spec.base_backup_from == "PreferStandby" else None
        body = base_backup_job(db, request, facts.primary_claim, standby=standby)
        source = f"from the standby {standby[1]}" if standby else "from the primary"
        effects = (Create(body, EventSpec("Normal", "BaseBackupStarted",
                                          f"base backup Job {body['metadata']['name']} started ({_why(request)},"
                                          f" {source})")),)
    if failed and newest_finished is not None and finished_state is not None:
        said = facts.results.get(str(newest_finished["metadata"]["name"]), {}).get("message")
        why = str(said)[:1000] if said else f"{finished_state.reason}: {finished_state.message}"
        return _cond(ConditionType.BASE_BACKUP_HEALTHY, "False", "BaseBackupFailed",
                     f"base backup Job {newest_finished['metadata']['name']} failed: {why}", gen), effects
    if last is None:
        doing = "running" if running or effects else "starts once the archiver is not failing"
        return _cond(ConditionType.BASE_BACKUP_HEALTHY, "Unknown", "AwaitingFirstBaseBackup",
                     f"the first base backup {doing}; until it ends no point in time can be recovered", gen), effects
    slot = _slot(spec, facts.now, db)
    if slot is not None and last.completed_at is not None and last.completed_at < slot \
            and facts.now - slot > BASE_BACKUP_GRACE:
        return _cond(ConditionType.BASE_BACKUP_HEALTHY, "False", "BaseBackupOverdue",
                     f"no base backup since {_text(last.completed_at)}; the schedule's slot {_text(slot)} passed"
                     f" more than {int(BASE_BACKUP_GRACE.total_seconds() // 60)} min ago", gen), effects
    return _cond(ConditionType.BASE_BACKUP_HEALTHY, "True", "BaseBackupSucceeded",
                 f"base backup {last.name} completed at {_text(last.completed_at)}", gen), effects


def _request(facts: ArchiveFacts, spec: ArchiveSpec, last: BaseBackupRecord | None, jobs_: Sequence[Obj],
             archiving: Condition) -> str | None:
    """The request the next base backup answers, or None: the annotation's new value first, then the first
    base backup once WAL archives, then the schedule's latest slot after the newest base backup."""
    asked = {str((j["metadata"].get("annotations") or {}).get(REQUEST_ANNOTATION, "")) for j in jobs_}
    value = facts.db.metadata.annotations.get(BASE_BACKUP_ANNOTATION)
    if value and f"manual:{value}" not in asked:
        return f"manual:{value}"
    # The first base backup starts as soon as the archiver is not failing: on a primary, the backup's end waits
    # for its last segment to be archived, so it also proves archiving on a database that writes nothing.
    works = archiving.reason in ("Archiving", "ArchiveLagging", "AwaitingFirstArchive")
    if last is None:
        return FIRST_REQUEST if works and FIRST_REQUEST not in asked and not jobs_ else None
    slot = _slot(spec, facts.now, facts.db)
    if slot is None or (last.completed_at is not None and last.completed_at >= slot):
        return None
    token = f"slot:{schedule.slot_text(slot)}"
    return token if token not in asked else None


def backup_standby(db: SampleDB) -> tuple[int, str] | None:
    """The instance a base backup reads instead of the primary: the ready hot standby least behind it (index,
    pod name), if one is less than STANDBY_LAG_LIMIT behind; None otherwise (read the primary)."""
    pods = {names.instance_pod_name(db_name(db), i): i for i in range(db.spec.replicas)}
    ready = [(i.lag_bytes, i.name) for i in db.status.instances
             if i.role == "replica" and i.ready and i.name in pods and i.lag_bytes is not None
             and i.lag_bytes < STANDBY_LAG_LIMIT]
    if not ready:
        return None
    _, pod = min(ready)
    return pods[pod], pod


def base_backup_job(db: SampleDB, request: str, claim: str, *, standby: tuple[int, str] | None = None) -> Obj:
    """The Job taking one physical base backup (dataplane/base-backup.sh) with the data volume of the instance it
    reads (the primary's, or `standby`'s: index and pod) mounted read-only where the server has it, on that
    instance's node (a ReadWriteOnce volume is shared by the pods of one node), connected to that instance's
    server, scratch space where the server's configuration files are (base-backup.sh puts the data directory's
    own files there, so the backup does not restore the operator's over them), and the store's settings; its name
    is the backup's name in the store."""
    spec = db.spec.backup.object_store
    assert spec is not None
    name = names.job_name(db_name(db), names.JobKind.BASEBACKUP, f"{db.metadata.uid or ''}/{request}")
    ns = namespace_of(db)
    if standby is not None:
        claim = names.instance_data_pvc_name(db_name(db), standby[0])
    ca_volumes, ca_mounts = archive_config.ca_volumes(db.spec.model_copy(update={"recovery": None}))
    body = jobs.job(
        db, name=name, component=BASE_BACKUP_COMPONENT, script="base-backup.sh",
        env=[{"name": "SAMPLEDB_BACKUP_NAME", "value": name}, {"name": "WAIT_TIMEOUT", "value": "120"},
             *archive_config.archive_env(spec, ns, db_name(db)),
             {"name": "SAMPLEDB_BACKUP_COMPRESSION", "value": spec.base_backup_compression},
             *([{"name": "SAMPLEDB_RETENTION", "value": spec.retention}] if spec.retention else [])],
        extra_volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
                       {"name": "config", "emptyDir": {}}, *ca_volumes],
        extra_mounts=[{"name": "data", "mountPath": d.DATA_MOUNT, "readOnly": True},
                      {"name": "config", "mountPath": pgconfig.CONFIG_DIR}, *ca_mounts],
        annotations={REQUEST_ANNOTATION: request, SOURCE_ANNOTATION: standby[1] if standby else "primary"},
    )
    body["spec"]["activeDeadlineSeconds"] = BASE_BACKUP_DEADLINE_SECONDS
    body["spec"]["backoffLimit"] = 1
    same_node = {**selector_labels(db), names.ROLE_LABEL: "primary"}
    if standby is not None:  # the standby's own server, by its stable name under the headless Service
        same_node = {**selector_labels(db), POD_NAME_LABEL: standby[1]}
        host = f"{standby[1]}.{names.headless_service_name(db_name(db))}.{ns}.svc"
        container = body["spec"]["template"]["spec"]["containers"][0]
        container["env"] = [{"name": "PGHOST", "value": host} if e["name"] == "PGHOST" else e
                            for e in container["env"]]
    return scheduling.run_beside(body, same_node)


# ------------------------------------------------------------------ helpers


def _slot(spec: ArchiveSpec, now: datetime, db: SampleDB) -> datetime | None:
    try:
        return schedule.latest_slot(spec.base_backup_schedule, now, db.metadata.creation_timestamp)
    except (ValueError, KeyError):
        return None


def _why(request: str) -> str:
    if request == FIRST_REQUEST:
        return "the first, once WAL archiving worked"
    kind, _, value = request.partition(":")
    return f"asked by the annotation {BASE_BACKUP_ANNOTATION}={value}" if kind == "manual" else f"scheduled for {value}"


def _recorded(db: SampleDB) -> datetime | None:
    archive = db.status.archive
    last = archive.last_base_backup if archive is not None else None
    return last.completed_at if last is not None else None


def _by_creation(jobs_: Sequence[Obj]) -> list[Obj]:
    return sorted(jobs_, key=lambda j: (str(j["metadata"].get("creationTimestamp") or ""), str(j["metadata"]["name"])))


def _created(job: Obj) -> datetime:
    return _parse_time(job["metadata"].get("creationTimestamp")) or datetime.min.replace(tzinfo=UTC)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _str(value: object, limit: int) -> str | None:
    return str(value)[:limit] if isinstance(value, (str, int)) and str(value) else None


def _second(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC).replace(microsecond=0) if value is not None else None


def _text(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else "an unknown time"


def _cond(type_: ConditionType, status: ConditionStatus, reason: str, message: str, gen: int | None) -> Condition:
    return Condition(type=type_.value, status=status, reason=reason, message=message[:32768],
                     observed_generation=gen)
