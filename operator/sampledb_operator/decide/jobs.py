"""Jobs that run data-plane scripts against a database: init now, backups and upgrades later.

Pure: builds dicts. A Job is never updated: a new piece of work gets a new (deterministic) name,
so creating it twice is harmless (AlreadyExists). Every Job mounts the database's scripts
ConfigMap and connects with libpq variables from its ConfigMap and Secret; the script's JSON
result goes to the pod's termination message.
"""

from __future__ import annotations

from sampledb_operator.decide.children import archive_config, scheduling
from sampledb_operator.decide.children.desired_config import (
    SCRIPTS_MOUNT,
    SECRET_PASSWORD_KEY,
    SECRET_USERNAME_KEY,
    scripts_configmap_name,
)
from sampledb_operator.decide.children.desired_statefulset import container_security, pod_security
from sampledb_operator.decide.labels import INIT_SOURCE_ANNOTATION, db_name, labels, meta, namespace_of
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB, image_for

INIT_SQL_DIR = "/sampledb/init"
INIT_SQL_FILE = f"{INIT_SQL_DIR}/init.sql"
JOB_BACKOFF_LIMIT = 2
JOB_DEADLINE_SECONDS = 3600

TEST_ANNOTATION_PREFIX = "testing.sampledb.io/"
# A Secret's owner opts it in as init SQL with this label: naming a Secret in spec.init is not enough,
# or anyone who may edit a SampleDB could have any Secret of the namespace run (and its errors shown).
INIT_SQL_OPT_IN_LABEL = "sampledb.io/init-sql"


def without_test_annotations(db: SampleDB) -> SampleDB:
    """`db` without its TEST_ANNOTATION_PREFIX annotations (the same object when it has none): what an operator
    started without --test-hooks builds its Jobs from."""
    kept = {k: v for k, v in db.metadata.annotations.items() if not k.startswith(TEST_ANNOTATION_PREFIX)}
    if len(kept) == len(db.metadata.annotations):
        return db
    return db.model_copy(update={"metadata": db.metadata.model_copy(update={"annotations": kept})})


def test_annotations(db: SampleDB) -> dict[str, str]:
    """SampleDB annotations under testing.sampledb.io/, copied onto every Job's pods.

    They let a simulated cluster (kwok stages) select the pods of one database's Jobs, e.g. to make
    them fail. Only an operator started with --test-hooks passes them on: the reconcilers hand decide/ a
    SampleDB without them otherwise (Context.for_jobs, `without_test_annotations`).
    """
    return {k: v for k, v in sorted(db.metadata.annotations.items()) if k.startswith(TEST_ANNOTATION_PREFIX)}


OWNER_ROLE_ENV = "SAMPLEDB_OWNER_ROLE"  # init.sh, migrate.sh, restore.sh: the role the user's SQL and data belong to


def owner_role_env(db: SampleDB) -> Obj:
    """The application's role (from the credentials Secret) as OWNER_ROLE_ENV: init SQL and migrations run as it
    (SET ROLE) and a restore restores as it (pg_restore --role), so what they create is the application's, not the
    superuser's."""
    return {"name": OWNER_ROLE_ENV, "valueFrom": {"secretKeyRef": {"name": names.secret_name(db_name(db)),
                                                                   "key": SECRET_USERNAME_KEY}}}


def connection_env(db: SampleDB) -> list[Obj]:
    """libpq environment for Jobs: host/port/db from the ConfigMap, the superuser and its password from the superuser
    Secret (the scripts that run the user's SQL as the application's role say so: OWNER_ROLE_ENV)."""
    cm, secret = names.configmap_name(db_name(db)), names.superuser_secret_name(db_name(db))

    def from_cm(var: str, key: str) -> Obj:
        return {"name": var, "valueFrom": {"configMapKeyRef": {"name": cm, "key": key}}}

    return [
        from_cm("PGHOST", "host"),
        from_cm("PGPORT", "port"),
        from_cm("PGDATABASE", "database"),
        {"name": "PGUSER", "valueFrom": {"secretKeyRef": {"name": secret, "key": SECRET_USERNAME_KEY}}},
        {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": secret, "key": SECRET_PASSWORD_KEY}}},
        {"name": "PGCONNECT_TIMEOUT", "value": "10"},
    ]


def init_source(db: SampleDB) -> str | None:
    """A stable description of where the init SQL comes from ("configmap/name/key"), or None."""
    init = db.spec.init
    if init is None:
        return None
    if init.config_map_key_ref is not None:
        return f"configmap/{init.config_map_key_ref.name}/{init.config_map_key_ref.key}"
    if init.secret_key_ref is not None:
        return f"secret/{init.secret_key_ref.name}/{init.secret_key_ref.key}"
    return None


def init_source_problem(db: SampleDB, source: Obj | None) -> Problem | None:
    """Why spec.init's source (`source`: the ConfigMap or Secret it names, None if absent) cannot be run.

    A Secret is used only when it carries INIT_SQL_OPT_IN_LABEL="true" (InitSecretNotOptedIn otherwise).
    """
    init = db.spec.init
    ref = None if init is None else init.config_map_key_ref or init.secret_key_ref
    if init is None or ref is None:
        return None
    kind = "ConfigMap" if init.config_map_key_ref is not None else "Secret"
    if source is None:
        return Problem("InitSourceMissing", f"{kind} {ref.name} with the init SQL does not exist", "spec.init")
    if kind == "Secret" and ((source.get("metadata") or {}).get("labels") or {}).get(INIT_SQL_OPT_IN_LABEL) != "true":
        return Problem("InitSecretNotOptedIn", (
            f"Secret {ref.name} is not opted in as init SQL: a Secret is run only when it carries the label"
            f" {INIT_SQL_OPT_IN_LABEL}=\"true\" (kubectl label secret {ref.name} {INIT_SQL_OPT_IN_LABEL}=true)"),
            "spec.init")
    if ref.key not in (source.get("data") or {}) and ref.key not in (source.get("binaryData") or {}):
        return Problem("InitSourceMissing", f"{kind} {ref.name} has no key {ref.key!r}", "spec.init")
    return None


def job(db: SampleDB, *, name: str, component: str, script: str, env: list[Obj] | None = None,
        extra_volumes: list[Obj] | None = None, extra_mounts: list[Obj] | None = None,
        annotations: dict[str, str] | None = None, pod_annotations: dict[str, str] | None = None,
        image: str | None = None, owner: Obj | None = None, connect: bool = True) -> Obj:
    """A Job that runs one data-plane script against the database with the postgres image.

    The script's JSON result line goes to the pod's termination message, which the Job's pod
    status shows and the operator reads. Jobs are never updated: a new piece of work is a new name.
    `owner` replaces the SampleDB as the controller owner (a backup's Job belongs to its
    SampleDBBackup). `connect=False`: a script that never talks to the database (verify.sh) runs
    alone, without wait-ready.sh and without the connection variables and password.
    """
    job_meta = meta(db, name, component)
    if owner is not None:
        job_meta["ownerReferences"] = [owner]
    if annotations:
        job_meta["annotations"] = dict(annotations)
    pod_annotations = {**test_annotations(db), **(pod_annotations or {})}
    container: Obj = {
        "name": component,
        "image": image or image_for(db.spec),
        # wait for the server (up to $WAIT_TIMEOUT), then the script; both report to $RESULT_FILE
        "command": (["bash", "-c", f"bash {SCRIPTS_MOUNT}/wait-ready.sh && exec bash {SCRIPTS_MOUNT}/{script}"]
                    if connect else ["bash", f"{SCRIPTS_MOUNT}/{script}"]),
        "env": [*(connection_env(db) if connect else []), {"name": "RESULT_FILE", "value": "/dev/termination-log"},
                *(env or [])],
        "volumeMounts": [{"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
                         *(extra_mounts or []), {"name": "tmp", "mountPath": "/tmp"}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        # every script writes only under $SDB_TMP (/tmp or $TMPDIR) and its mounted volumes
        "securityContext": container_security(read_only_root=True),
    }
    pod_meta: Obj = {"labels": labels(db, component)}
    if pod_annotations:
        pod_meta["annotations"] = pod_annotations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job_meta,
        "spec": {
            "backoffLimit": JOB_BACKOFF_LIMIT,
            "activeDeadlineSeconds": JOB_DEADLINE_SECONDS,
            "template": {
                "metadata": pod_meta,
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": pod_security(),
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    **scheduling.job_fields(db),
                    "containers": [container],
                    "volumes": [
                        {"name": "scripts", "configMap": {"name": scripts_configmap_name(db),
                                                          "defaultMode": 0o555}},
                        *(extra_volumes or []),
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def init_job_name(db: SampleDB) -> str | None:
    """The name of the one-time init Job (keyed by the SampleDB's uid), or None when there is no init SQL."""
    return names.init_job_name(db_name(db), db.metadata.uid or "") if init_source(db) is not None else None


def init_job(db: SampleDB) -> Obj | None:
    """The one-time init Job running spec.init's SQL, or None when there is no init SQL."""
    init = db.spec.init
    source = init_source(db)
    name = init_job_name(db)
    if init is None or source is None or name is None:
        return None
    if init.config_map_key_ref is not None:
        ref = init.config_map_key_ref
        volume: Obj = {"name": "init-sql", "configMap": {"name": ref.name,
                                                         "items": [{"key": ref.key, "path": "init.sql"}]}}
    else:
        assert init.secret_key_ref is not None
        ref = init.secret_key_ref
        volume = {"name": "init-sql", "secret": {"secretName": ref.name,
                                                 "items": [{"key": ref.key, "path": "init.sql"}]}}
    return job(
        db,
        name=name,
        component="init",
        script="init.sh",
        env=[{"name": "INIT_SQL_FILE", "value": INIT_SQL_FILE}, {"name": "WAIT_TIMEOUT", "value": "300"},
             owner_role_env(db)],
        extra_volumes=[volume],
        extra_mounts=[{"name": "init-sql", "mountPath": INIT_SQL_DIR, "readOnly": True}],
        annotations={INIT_SOURCE_ANNOTATION: source},
    )


BACKUP_MOUNT = "/sampledb/backups"


def backup_job(db: SampleDB, *, backup_name: str, backup_uid: str, claim_name: str, reason: str = "manual") -> Obj:
    """The Job that writes the SampleDBBackup `backup_name` to the volume `claim_name`, and copies it to the
    object store when the database has one that copies backups (archive_config.backup_copy; `reason` names
    the store's folder and its retention).

    Owned by the SampleDBBackup, not the SampleDB: a pre-delete snapshot's Job must outlive the
    deletion of the database's children.
    """
    owner = {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup", "name": backup_name,
             "uid": backup_uid, "controller": True, "blockOwnerDeletion": True}
    copy_env, copy_volumes, copy_mounts = archive_config.backup_copy(db.spec, namespace_of(db), db_name(db), reason)
    return job(
        db,
        name=names.backup_job_name(db_name(db), backup_name),
        component="backup",
        script="backup.sh",
        env=[{"name": "BACKUP_DIR", "value": BACKUP_MOUNT}, {"name": "BACKUP_NAME", "value": backup_name},
             {"name": "WAIT_TIMEOUT", "value": "120"}, *copy_env],
        extra_volumes=[{"name": "backups", "persistentVolumeClaim": {"claimName": claim_name}}, *copy_volumes],
        extra_mounts=[{"name": "backups", "mountPath": BACKUP_MOUNT}, *copy_mounts],
        owner=owner,
    )


MIGRATIONS_DIR = "/sampledb/migrations"
MIGRATION_DIGEST_ANNOTATION = "sampledb.io/migrations-digest"
# migrate.sh's exit codes that a retry cannot fix: config (2), drift (3), sql (6).
MIGRATE_FATAL_EXIT_CODES = (2, 3, 6)


def migration_job(db: SampleDB, *, name: str, snapshot_configmap: str, digest: str) -> Obj:
    """The Job applying the pending migrations with migrate.sh, from an immutable snapshot ConfigMap.

    A retry helps only with a failed connection or a lost pod: the exit codes of a bad file name,
    a changed applied file or a failing SQL file fail the Job at once (podFailurePolicy).
    """
    body = job(
        db,
        name=name,
        component="migrate",
        script="migrate.sh",
        env=[{"name": "MIGRATIONS_DIR", "value": MIGRATIONS_DIR}, owner_role_env(db)],
        extra_volumes=[{"name": "migrations", "configMap": {"name": snapshot_configmap}}],
        extra_mounts=[{"name": "migrations", "mountPath": MIGRATIONS_DIR, "readOnly": True}],
        annotations={MIGRATION_DIGEST_ANNOTATION: digest},
    )
    body["spec"]["podFailurePolicy"] = {"rules": [
        {"action": "FailJob",
         "onExitCodes": {"containerName": "migrate", "operator": "In", "values": list(MIGRATE_FATAL_EXIT_CODES)}},
    ]}
    return body
