"""decide/backup/archive.py and decide/children/archive_config.py: continuous archiving and base backups as a plan,
without a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sampledb_operator.decide import status as st
from sampledb_operator.decide.backup import archive as arc
from sampledb_operator.decide.children import archive_config as cfg
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.effects import Create
from sampledb_operator.decide.labels import COMPONENT_LABEL
from sampledb_operator.model.archive import ArchiverState
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.validation import validate_spec

NOW = datetime(2026, 12, 5, 12, 0, 30, tzinfo=UTC)
STORE = {"endpoint": "https://s3.example:9000", "bucket": "backups", "credentials": {"secretName": "s3-keys"},
         "ca": {"name": "s3-ca", "key": "ca.crt"}}


def database(status: dict[str, Any] | None = None, annotations: dict[str, str] | None = None,
             **spec: Any) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "resourceVersion": "7", "generation": 2,
                     "creationTimestamp": "2026-12-01T00:00:00Z", "annotations": annotations or {}},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, **spec}, "status": status or {}})


def archiving(**store: Any) -> SampleDB:
    return database(backup={"objectStore": {**STORE, **store}})


def server(**kw: Any) -> ArchiverState:
    base: dict[str, Any] = {"archived_count": 5, "last_archived_wal": "000000010000000000000005",
                            "last_archived_at": NOW - timedelta(seconds=20), "now": NOW}
    return ArchiverState(**{**base, **kw})


def facts(db: SampleDB, **kw: Any) -> arc.ArchiveFacts:
    base: dict[str, Any] = {"db": db, "now": NOW, "db_ready": True, "primary_claim": "data-orders-0",
                            "server": server()}
    return arc.ArchiveFacts(**{**base, **kw})


def job(name: str, request: str, *, created: str = "2026-12-05T11:00:00Z", state: str | None = None) -> dict[str, Any]:
    conditions = [{"type": state, "status": "True", "reason": "BackoffLimitExceeded" if state == "Failed" else "",
                   "message": "Job has reached the specified backoff limit" if state == "Failed" else ""}] \
        if state else []
    return {"metadata": {"name": name, "creationTimestamp": created,
                         "annotations": {arc.REQUEST_ANNOTATION: request},
                         "labels": {COMPONENT_LABEL: arc.BASE_BACKUP_COMPONENT}},
            "status": {"conditions": conditions, **({"completionTime": "2026-12-05T11:10:00Z"}
                                                    if state == "Complete" else {})}}


def condition(passed: arc.ArchivePass, type_: str) -> tuple[str, str, str]:
    cond = next(c for c in passed.conditions if c.type == type_)
    return cond.status, cond.reason, cond.message


def creates(passed: arc.ArchivePass) -> list[dict[str, Any]]:
    return [e.obj for e in passed.plan.effects if isinstance(e, Create)]


# ------------------------------------------------------------------ the server's settings and environment


def test_a_database_without_an_object_store_keeps_its_parameters_object_and_gets_nothing() -> None:
    db = database(parameters={"work_mem": "8MB"})
    assert cfg.server_parameters(db.spec) is db.spec.parameters
    assert cfg.container_env(db.spec, "shop", "orders") == []
    assert cfg.ca_volumes(db.spec) == ([], [])
    assert arc.plan_archive(facts(db)) == arc.ArchivePass()
    env = d.statefulset(db)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert not [e for e in env if e["name"].startswith(("SAMPLEDB_S3", "AWS_", "SAMPLEDB_RECOVERY"))]


def test_archiving_turns_on_archive_mode_with_the_script_and_the_timeout_and_restarts_once() -> None:
    db = archiving(archiveTimeoutSeconds=30)
    params = cfg.server_parameters(db.spec)
    assert params == {"archive_mode": "on", "archive_command": "bash /sampledb/scripts/archive-wal.sh %p",
                      "archive_timeout": "30s"}
    conf = d.configmap(db)["data"]["postgresql.conf"]
    assert "archive_command = 'bash /sampledb/scripts/archive-wal.sh %p'" in conf
    plain = d.statefulset(database())["spec"]["template"]["metadata"]["annotations"]
    with_archive = d.statefulset(db)["spec"]["template"]["metadata"]["annotations"]
    assert plain != with_archive  # archive_mode needs a restart: the template's hash says so


def test_the_store_reaches_the_container_by_reference_never_by_value() -> None:
    db = archiving(path="prod/eu", region="eu-west-1")
    env = {e["name"]: e for e in cfg.container_env(db.spec, "shop", "orders")}
    assert env["SAMPLEDB_S3_DESTINATION"]["value"] == "s3://backups/prod/eu"
    assert env["SAMPLEDB_S3_SERVER"]["value"] == "orders"
    assert env["SAMPLEDB_S3_ENDPOINT"]["value"] == "https://s3.example:9000"
    assert env["AWS_ACCESS_KEY_ID"] == {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {
        "secretKeyRef": {"name": "s3-keys", "key": "accessKeyId"}}}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "s3-keys", "key": "secretAccessKey"}
    assert env["AWS_DEFAULT_REGION"]["value"] == "eu-west-1"
    assert env["AWS_CA_BUNDLE"]["value"] == f"{cfg.CA_MOUNT}/ca.crt"
    pod = d.statefulset(db)["spec"]["template"]["spec"]
    assert {"name": cfg.CA_VOLUME, "configMap": {"name": "s3-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}} \
        in pod["volumes"]


def test_the_default_path_is_the_namespace() -> None:
    assert cfg.destination(archiving().spec.backup.object_store, "shop", "orders") == "s3://backups/shop/orders"  # type: ignore[arg-type]


def test_recovery_names_its_own_store_and_target_apart_from_the_archive() -> None:
    db = database(backup={"objectStore": STORE}, recovery={
        "objectStore": {"bucket": "old", "path": "gone-ns", "credentials": {"secretName": "old-keys"}},
        "database": "orders", "targetTime": "2026-12-05T07:30:00Z"})
    env = {e["name"]: e for e in cfg.container_env(db.spec, "shop", "copy")}
    assert env["SAMPLEDB_RECOVERY_DESTINATION"]["value"] == "s3://old/gone-ns"
    assert env["SAMPLEDB_RECOVERY_SERVER"]["value"] == "orders"
    assert env["SAMPLEDB_RECOVERY_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"]["name"] == "old-keys"
    assert env["SAMPLEDB_RECOVERY_TARGET_TIME"]["value"] == "2026-12-05 07:30:00.000000+00"
    assert env["SAMPLEDB_S3_SERVER"]["value"] == "copy"  # it archives under its own name
    container = d.statefulset(db)["spec"]["template"]["spec"]["containers"][0]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["startupProbe"]["failureThreshold"] == cfg.RECOVERY_STARTUP_PROBES


def test_archiving_parameters_and_a_bad_schedule_are_refused_with_a_reason() -> None:
    db = database(backup={"objectStore": {**STORE, "baseBackupSchedule": "0 0 30 2 *x"}},
                  parameters={"archive_timeout": "5min"})
    reasons = {p.reason for p in validate_spec(db.spec)}
    assert {"InvalidBaseBackupSchedule", "ParameterManaged"} <= reasons
    assert not validate_spec(database(parameters={"archive_timeout": "5min"}).spec)


# ------------------------------------------------------------------ archiving's condition and status


def test_an_archiving_primary_is_reported_true_with_where_and_what() -> None:
    passed = arc.plan_archive(facts(archiving()))
    status, reason, message = condition(passed, "ContinuousArchiving")
    assert (status, reason) == ("True", "Archiving")
    assert "000000010000000000000005" in message and "s3://backups/shop/orders" in message
    assert passed.status is not None and passed.status.lag_seconds == 0 and passed.status.pending_segments == 0
    assert passed.plan.result == Result(requeue_after=arc.ARCHIVE_RECHECK_SECONDS)


def test_a_failure_newer_than_the_last_success_is_archive_failing_with_the_archivers_words() -> None:
    err = "2026-12-05T12:00:10Z 000000010000000000000006 upload failed: SignatureDoesNotMatch"
    passed = arc.plan_archive(facts(archiving(), server=server(
        failed_count=3, last_failed_wal="000000010000000000000006", last_failed_at=NOW - timedelta(seconds=5),
        pending=2, oldest_pending_at=NOW - timedelta(seconds=90), error=err)))
    status, reason, message = condition(passed, "ContinuousArchiving")
    assert (status, reason) == ("False", "ArchiveFailing")
    assert "SignatureDoesNotMatch" in message and "2 WAL segments wait" in message
    assert passed.status is not None and passed.status.last_error == err and passed.status.lag_seconds == 90


def test_an_old_failure_followed_by_success_is_not_failing_and_the_error_is_cleared() -> None:
    passed = arc.plan_archive(facts(archiving(), server=server(
        failed_count=3, last_failed_wal="000000010000000000000004", last_failed_at=NOW - timedelta(hours=1),
        error="stale")))
    assert condition(passed, "ContinuousArchiving")[:2] == ("True", "Archiving")
    assert passed.status is not None and passed.status.last_error is None


def test_a_segment_waiting_longer_than_the_limit_is_archive_lagging() -> None:
    db = archiving(archiveTimeoutSeconds=60)
    passed = arc.plan_archive(facts(db, server=server(pending=40, oldest_pending_at=NOW - timedelta(seconds=301))))
    assert condition(passed, "ContinuousArchiving")[:2] == ("False", "ArchiveLagging")
    passed = arc.plan_archive(facts(db, server=server(pending=40, oldest_pending_at=NOW - timedelta(seconds=299))))
    assert condition(passed, "ContinuousArchiving")[:2] == ("True", "Archiving")


def test_nothing_archived_yet_is_unknown_and_the_first_base_backup_starts_anyway() -> None:
    """An idle new database archives nothing until it writes; its first base backup forces a segment switch
    and waits for that segment's archive, so it starts at once (and proves archiving)."""
    passed = arc.plan_archive(facts(archiving(), server=ArchiverState(now=NOW)))
    assert condition(passed, "ContinuousArchiving")[:2] == ("Unknown", "AwaitingFirstArchive")
    [body] = creates(passed)
    assert body["metadata"]["annotations"][arc.REQUEST_ANNOTATION] == arc.FIRST_REQUEST


def test_no_first_base_backup_while_archiving_fails() -> None:
    passed = arc.plan_archive(facts(archiving(), server=ArchiverState(
        now=NOW, failed_count=1, last_failed_wal="000000010000000000000001", last_failed_at=NOW)))
    assert creates(passed) == []


def test_a_primary_that_does_not_answer_keeps_the_last_word_and_starts_nothing() -> None:
    before = arc.plan_archive(facts(archiving()))
    db = archiving().model_copy(update={"status": archiving().status.model_copy(update={
        "conditions": list(before.conditions), "archive": before.status})})
    passed = arc.plan_archive(facts(db, server=None))
    assert condition(passed, "ContinuousArchiving")[:2] == ("True", "Archiving")
    assert passed.status == before.status
    assert creates(passed) == []


# ------------------------------------------------------------------ base backups


def test_the_first_base_backup_starts_once_wal_archives_on_the_primarys_node_with_its_volume_read_only() -> None:
    passed = arc.plan_archive(facts(archiving()))
    [body] = creates(passed)
    pod = body["spec"]["template"]["spec"]
    assert body["metadata"]["annotations"][arc.REQUEST_ANNOTATION] == arc.FIRST_REQUEST
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-orders-0", "readOnly": True}} in pod["volumes"]
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "data", "mountPath": d.DATA_MOUNT, "readOnly": True} in mounts
    # scratch where the server's outside config files are: base-backup.sh puts PGDATA's own there
    assert {"name": "config", "mountPath": "/etc/sampledb"} in mounts and {"name": "config", "emptyDir": {}} \
        in pod["volumes"]
    term = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"]["sampledb.io/role"] == "primary"
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["SAMPLEDB_BACKUP_NAME"]["value"] == body["metadata"]["name"]
    assert "value" not in env["AWS_SECRET_ACCESS_KEY"]
    assert "s3-keys" not in json.dumps([e.get("value") for e in env.values()])
    assert condition(passed, "BaseBackupHealthy")[:2] == ("Unknown", "AwaitingFirstBaseBackup")


def test_no_base_backup_while_one_runs_or_the_database_is_not_ready() -> None:
    running = job("orders-basebackup-1", arc.FIRST_REQUEST)
    assert creates(arc.plan_archive(facts(archiving(), jobs=(running,)))) == []
    assert creates(arc.plan_archive(facts(archiving(), db_ready=False))) == []


def test_a_succeeded_base_backup_is_recorded_from_its_result_and_marks_the_first_recoverable_point() -> None:
    done = job("orders-basebackup-1", arc.FIRST_REQUEST, state="Complete")
    result = {"ok": True, "backupId": "20261205T111000", "endTime": "2026-12-05T11:10:00Z",
              "beginWal": "000000010000000000000003", "endLsn": "0/3000100", "sizeBytes": 31337}
    passed = arc.plan_archive(facts(archiving(), jobs=(done,), results={"orders-basebackup-1": result}))
    assert passed.status is not None and passed.status.last_base_backup is not None
    assert passed.status.last_base_backup.backup_id == "20261205T111000"
    assert passed.status.last_base_backup.size_bytes == 31337
    assert passed.status.first_recoverability_point == datetime(2026, 12, 5, 11, 10, tzinfo=UTC)
    assert condition(passed, "BaseBackupHealthy")[:2] == ("True", "BaseBackupSucceeded")
    assert creates(passed) == []  # today's @daily slot (00:00) is before it


def test_the_stores_catalog_after_a_base_backup_lists_its_backups_and_moves_the_first_point_with_retention() -> None:
    done = job("orders-basebackup-2", "slot:2026-12-05T00:00:00Z", state="Complete")
    old_first = {"lastBaseBackup": {"name": "orders-basebackup-1", "completedAt": "2026-11-01T00:10:00Z"},
                 "firstRecoverabilityPoint": "2026-11-01T00:10:00Z"}
    db = database({"archive": old_first}, backup={"objectStore": {**STORE, "retention": "7d"}})
    catalog = {"count": 3, "oldestEnd": "2026-11-28T00:10:00Z", "newest": [
        {"id": "20261205T000012", "name": "orders-basebackup-2", "end": "2026-12-05T00:10:00Z", "size": 4096},
        {"id": "20261204T000011", "name": "orders-basebackup-x", "end": "2026-12-04T00:10:00Z", "size": 4000},
        {"no": "id"}]}
    result = {"backupId": "20261205T000012", "endTime": "2026-12-05T00:10:00Z", "catalog": catalog,
              "retention": "RECOVERY WINDOW OF 7 DAYS", "deletedBackups": ["20261101T000010"]}
    passed = arc.plan_archive(facts(db, jobs=(done,), results={"orders-basebackup-2": result}))
    assert passed.status is not None
    assert [b.backup_id for b in passed.status.base_backups or []] == ["20261205T000012", "20261204T000011"]
    assert passed.status.base_backups_count == 3
    assert passed.status.first_recoverability_point == datetime(2026, 11, 28, 0, 10, tzinfo=UTC)
    # a result without a catalog (an older script) keeps what the status said
    bare = {"backupId": "x", "endTime": "2026-12-05T00:10:00Z"}
    plain = arc.plan_archive(facts(db, jobs=(done,), results={"orders-basebackup-2": bare}))
    assert plain.status is not None and plain.status.base_backups is None
    assert plain.status.first_recoverability_point == datetime(2026, 11, 1, 0, 10, tzinfo=UTC)


def test_a_failed_newest_base_backup_says_why_from_its_result() -> None:
    failed = job("orders-basebackup-1", arc.FIRST_REQUEST, state="Failed")
    passed = arc.plan_archive(facts(archiving(), jobs=(failed,), results={
        "orders-basebackup-1": {"ok": False, "message": "barman-cloud-backup: bucket does not exist"}}))
    status, reason, message = condition(passed, "BaseBackupHealthy")
    assert (status, reason) == ("False", "BaseBackupFailed") and "bucket does not exist" in message
    assert creates(passed) == []  # the first request is answered: not retried by itself


def test_each_new_annotation_value_asks_for_one_base_backup() -> None:
    db = database(backup={"objectStore": STORE}, annotations={arc.BASE_BACKUP_ANNOTATION: "now-1"})
    [body] = creates(arc.plan_archive(facts(db)))
    assert body["metadata"]["annotations"][arc.REQUEST_ANNOTATION] == "manual:now-1"
    answered = job(body["metadata"]["name"], "manual:now-1", state="Complete")
    assert not [c for c in creates(arc.plan_archive(facts(db, jobs=(answered,))))
                if c["metadata"]["annotations"][arc.REQUEST_ANNOTATION] == "manual:now-1"]


def recorded(completed: str) -> dict[str, Any]:
    return {"archive": {"lastBaseBackup": {"name": "orders-basebackup-0", "completedAt": completed}}}


def test_a_schedule_slot_after_the_last_base_backup_starts_one_and_is_overdue_an_hour_later() -> None:
    db = database(status=recorded("2026-12-04T00:05:00Z"), backup={"objectStore": STORE})
    passed = arc.plan_archive(facts(db))
    [body] = creates(passed)
    assert body["metadata"]["annotations"][arc.REQUEST_ANNOTATION] == "slot:2026-12-05T00:00:00Z"
    assert condition(passed, "BaseBackupHealthy")[:2] == ("False", "BaseBackupOverdue")  # 12 h past the slot
    early = arc.plan_archive(facts(db, now=datetime(2026, 12, 5, 0, 30, tzinfo=UTC)))
    assert condition(early, "BaseBackupHealthy")[:2] == ("True", "BaseBackupSucceeded")


def test_base_backup_jobs_expire_once_a_newer_or_their_own_record_is_in_status() -> None:
    from sampledb_operator.decide.job_ttl import outcome_recorded

    db = database(status=recorded("2026-12-05T11:10:00Z"), backup={"objectStore": STORE})
    assert outcome_recorded(db, job("orders-basebackup-0", "first", state="Complete"))
    assert outcome_recorded(db, job("orders-basebackup-old", "first", created="2026-12-04T00:00:00Z",
                                    state="Failed"))
    assert not outcome_recorded(db, job("orders-basebackup-new", "manual:x", created="2026-12-05T11:30:00Z",
                                        state="Failed"))


# ------------------------------------------------------------------ recovery's Initialized


def recovering() -> SampleDB:
    return database(recovery={"objectStore": {"bucket": "old", "credentials": {"secretName": "k"}},
                              "database": "orders", "targetName": "before-migration"})


def test_recovery_is_initialized_by_the_first_readiness_and_failures_are_the_containers_words() -> None:
    db = recovering()
    ok, reason, message = st.recovery_state(db, None, db_ready=False)
    assert (ok, reason) == (False, "Recovering") and "restore point before-migration" in message
    assert st.recovery_state(db, None, db_ready=True)[:2] == (True, "Recovered")
    line = json.dumps({"script": "recover", "ok": False, "code": 1,
                       "message": "WAL 000000010000000000000007 is missing from s3://old/shop/orders"})
    pod = {"status": {"containerStatuses": [{"name": "postgres", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                             "lastState": {"terminated": {"exitCode": 1,
                                                                          "message": f"log line\n{line}\n"}}}]}}
    ok, reason, message = st.recovery_state(db, pod, db_ready=False)
    assert (ok, reason) == (False, "RecoveryFailed") and "000000010000000000000007 is missing" in message


def test_store_credentials_are_used_only_from_an_opted_in_secret_with_both_keys() -> None:
    from sampledb_operator.model.archive import CREDENTIALS_OPT_IN_LABEL

    db = database(backup={"objectStore": STORE}, recovery={
        "objectStore": {"bucket": "old", "credentials": {"secretName": "old-keys", "accessKeyIdKey": "id"}},
        "database": "orders"})
    assert cfg.credential_secrets(db.spec) == ["s3-keys", "old-keys"]
    opted = {"metadata": {"labels": {CREDENTIALS_OPT_IN_LABEL: "true"}},
             "data": {"accessKeyId": "eA==", "secretAccessKey": "eQ==", "id": "eA=="}}
    assert cfg.credentials_problems(db.spec, {"s3-keys": opted, "old-keys": opted}) == []
    problems = cfg.credentials_problems(db.spec, {"s3-keys": {"data": opted["data"]}, "old-keys": None})
    assert [(p.reason, p.field) for p in problems] == [
        ("ObjectStoreCredentialsNotOptedIn", "spec.backup.objectStore.credentials"),
        ("ObjectStoreCredentialsMissing", "spec.recovery.objectStore.credentials")]
    assert "kubectl label secret s3-keys sampledb.io/object-store-credentials=true" in problems[0].message
    [missing] = cfg.credentials_problems(db.spec, {"s3-keys": opted, "old-keys": {
        "metadata": opted["metadata"], "data": {"secretAccessKey": "eQ=="}}})
    assert missing.reason == "ObjectStoreCredentialsMissing" and "'id'" in missing.message
    assert cfg.credential_secrets(database().spec) == []


def test_a_base_backup_reads_the_least_lagging_ready_standby_and_the_primary_otherwise() -> None:
    instances = [{"name": "orders-0", "role": "primary", "ready": True},
                 {"name": "orders-i1-0", "role": "replica", "ready": True, "lagBytes": 4096},
                 {"name": "orders-i2-0", "role": "replica", "ready": True, "lagBytes": 0},
                 {"name": "orders-i3-0", "role": "replica", "ready": False, "lagBytes": 0}]
    db = database({"instances": instances}, replicas=4, backup={"objectStore": STORE})
    assert arc.backup_standby(db) == (2, "orders-i2-0")
    passed = arc.plan_archive(facts(db, server=server(last_archived_wal=None, archived_count=0)))
    [body] = creates(passed)
    pod = body["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert [e["name"] for e in pod["containers"][0]["env"]].count("PGHOST") == 1
    assert env["PGHOST"]["value"] == "orders-i2-0.orders-headless.shop.svc"
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-orders-i2-0", "readOnly": True}} \
        in pod["volumes"]
    term = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"]["matchLabels"][arc.POD_NAME_LABEL] == "orders-i2-0"
    assert body["metadata"]["annotations"][arc.SOURCE_ANNOTATION] == "orders-i2-0"
    assert "from the standby orders-i2-0" in passed.plan.effects[0].announce.message  # type: ignore[union-attr]
    # too far behind, not ready, or Primary asked: the primary
    far = [{**i, "lagBytes": arc.STANDBY_LAG_LIMIT} if i["role"] == "replica" else i for i in instances]
    assert arc.backup_standby(database({"instances": far}, replicas=4, backup={"objectStore": STORE})) is None
    primary_only = database({"instances": instances}, replicas=4,
                            backup={"objectStore": {**STORE, "baseBackupFrom": "Primary"}})
    [body] = creates(arc.plan_archive(facts(primary_only, server=server(last_archived_wal=None, archived_count=0))))
    env = {e["name"]: e for e in body["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PGHOST"]["valueFrom"]["configMapKeyRef"]["key"] == "host"
    assert body["metadata"]["annotations"][arc.SOURCE_ANNOTATION] == "primary"
