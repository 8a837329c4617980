"""spec.backup.objectStore, spec.recovery and spec.restore.objectStore -> the server settings and the container
and Job environment they need.

Pure. Archiving is PostgreSQL's own: archive_mode on, archive_command running dataplane/archive-wal.sh (which
pushes each completed segment with Barman Cloud), archive_timeout from the spec. The store's settings reach the
scripts as environment variables (the contract of dataplane/archive-wal.sh, base-backup.sh and recover.sh);
the access keys only by reference to the user's Secret (valueFrom), never as values.

Invariants: a database without spec.backup.objectStore and spec.recovery gets exactly the settings,
environment and volumes it had before these features existed (no hash and no pod template changes, so no
restart); the recovery's store settings are apart (SAMPLEDB_RECOVERY_*), so a database can recover from one
store and archive to another.
"""

from __future__ import annotations

from collections.abc import Mapping

from sampledb_operator.model.archive import CREDENTIALS_OPT_IN_LABEL, ArchiveSpec, ObjectStore, RecoverySpec
from sampledb_operator.model.backup import BackupReason
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDBSpec

SCRIPTS_MOUNT = "/sampledb/scripts"
ARCHIVE_COMMAND = f"bash {SCRIPTS_MOUNT}/archive-wal.sh %p"
CA_MOUNT = "/etc/sampledb/object-store-ca"
RECOVERY_CA_MOUNT = "/etc/sampledb/recovery-ca"
CA_VOLUME = "object-store-ca"
RECOVERY_CA_VOLUME = "recovery-ca"
RECOVERY_STARTUP_PROBES = 8640  # x 5 s: 12 hours for a recovery's restore and replay
# The backups whose copies in the store follow spec.backup.retention (each kind apart), as their SampleDBBackups do.
RETAINED_REASONS = frozenset({BackupReason.SCHEDULED, BackupReason.PRE_UPGRADE, BackupReason.PRE_MIGRATION})


def server_parameters(spec: SampleDBSpec) -> Mapping[str, str] | None:
    """spec.parameters plus the settings continuous archiving needs (spec.parameters itself, the very object,
    when there is no archiving: every hash of it stays what it was)."""
    archive = spec.backup.object_store
    if archive is None:
        return spec.parameters
    return {**(spec.parameters or {}), "archive_mode": "on", "archive_command": ARCHIVE_COMMAND,
            "archive_timeout": f"{archive.archive_timeout_seconds}s"}


def prefix(store: ObjectStore, namespace: str) -> str:
    """`s3://<bucket>/<path>`: Barman Cloud's destination URL; the path defaults to the namespace."""
    return f"s3://{store.bucket}/{store.path or namespace}"


def destination(store: ObjectStore, namespace: str, database: str) -> str:
    """Where one database's WAL and base backups live: `s3://<bucket>/<path>/<database>`."""
    return f"{prefix(store, namespace)}/{database}"


def _secret_env(name: str, store: ObjectStore, key: str) -> Obj:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": store.credentials.secret_name, "key": key}}}


def store_env(store: ObjectStore, namespace: str, server: str, *, prefix_: str = "SAMPLEDB_S3_",
              keys: tuple[str, str, str, str] = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                 "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE"),
              ca_mount: str = CA_MOUNT) -> list[Obj]:
    """The environment naming one store and a database in it, in a fixed order (the pod template's hash
    depends on it)."""
    key_id, secret_key, region, ca_bundle = keys
    env: list[Obj] = [
        {"name": f"{prefix_}DESTINATION", "value": prefix(store, namespace)},
        {"name": f"{prefix_}SERVER", "value": server},
    ]
    if store.endpoint:
        env.append({"name": f"{prefix_}ENDPOINT", "value": store.endpoint.rstrip("/")})
    env += [_secret_env(key_id, store, store.credentials.access_key_id_key),
            _secret_env(secret_key, store, store.credentials.secret_access_key_key)]
    if store.region:
        env.append({"name": region, "value": store.region})
    if store.ca is not None:
        env.append({"name": ca_bundle, "value": f"{ca_mount}/{store.ca.key}"})
    return env


def archive_env(archive: ArchiveSpec, namespace: str, database: str) -> list[Obj]:
    """The archiving database's container environment (archive-wal.sh, base-backup.sh)."""
    return store_env(archive, namespace, database)


def recovery_env(recovery: RecoverySpec, namespace: str) -> list[Obj]:
    """The recovering database's container environment (recover.sh, through instance.sh): the source store
    under SAMPLEDB_RECOVERY_*, and the target."""
    env = store_env(recovery.object_store, namespace, recovery.database, prefix_="SAMPLEDB_RECOVERY_",
                    keys=("SAMPLEDB_RECOVERY_ACCESS_KEY_ID", "SAMPLEDB_RECOVERY_SECRET_ACCESS_KEY",
                          "SAMPLEDB_RECOVERY_REGION", "SAMPLEDB_RECOVERY_CA_BUNDLE"),
                    ca_mount=RECOVERY_CA_MOUNT)
    if recovery.target_time is not None:
        env.append({"name": "SAMPLEDB_RECOVERY_TARGET_TIME",
                    "value": recovery.target_time.strftime("%Y-%m-%d %H:%M:%S.%f+00")})
    if recovery.target_name is not None:
        env.append({"name": "SAMPLEDB_RECOVERY_TARGET_NAME", "value": recovery.target_name})
    if recovery.target_lsn is not None:
        env.append({"name": "SAMPLEDB_RECOVERY_TARGET_LSN", "value": recovery.target_lsn})
    return env


def store_ca_volume(store: ObjectStore | None, volume: str = CA_VOLUME, mount: str = CA_MOUNT
                    ) -> tuple[list[Obj], list[Obj]]:
    """The volume and mount of one store's CA bundle (a ConfigMap key) at `mount` ([] and [] without one)."""
    if store is None or store.ca is None:
        return [], []
    items = [{"key": store.ca.key, "path": store.ca.key}]
    return ([{"name": volume, "configMap": {"name": store.ca.name, "items": items}}],
            [{"name": volume, "mountPath": mount, "readOnly": True}])


def ca_volumes(spec: SampleDBSpec) -> tuple[list[Obj], list[Obj]]:
    """The volumes and mounts of the stores' CA bundles (ConfigMap keys), for the database container."""
    archive_volumes, archive_mounts = store_ca_volume(spec.backup.object_store)
    recovery_volumes, recovery_mounts = store_ca_volume(spec.recovery.object_store if spec.recovery else None,
                                                        RECOVERY_CA_VOLUME, RECOVERY_CA_MOUNT)
    return [*archive_volumes, *recovery_volumes], [*archive_mounts, *recovery_mounts]


def backup_copy(spec: SampleDBSpec, namespace: str, database: str, reason: str
                ) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """What a backup Job needs to copy its files to the store (dataplane/backup.sh): the environment, the CA
    volumes and mounts; ([], [], []) when the database has no store or does not copy its backups."""
    archive = spec.backup.object_store
    if archive is None or not archive.copy_backups:
        return [], [], []
    keep = spec.backup.retention if reason in RETAINED_REASONS else 0
    env = [*archive_env(archive, namespace, database), {"name": "BACKUP_REASON", "value": reason},
           {"name": "BACKUP_STORE_KEEP", "value": str(keep)}]
    return env, *store_ca_volume(archive)


def restore_source(spec: SampleDBSpec, namespace: str, database: str) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """What a restore Job from a backup's copy in a store (spec.restore.objectStore) needs: the environment
    naming the source (dataplane/restore.sh), the CA volumes and mounts; ([], [], []) for a SampleDBBackup's."""
    restore = spec.restore
    if restore is None or restore.object_store is None:
        return [], [], []
    env = [*store_env(restore.object_store, namespace, restore.database or database),
           {"name": "RESTORE_FROM_STORE", "value": "1"}]
    return env, *store_ca_volume(restore.object_store)


def container_env(spec: SampleDBSpec, namespace: str, database: str) -> list[Obj]:
    """Everything archiving and recovery add to the database container's environment ([] without them)."""
    env: list[Obj] = []
    if spec.backup.object_store is not None:
        env += archive_env(spec.backup.object_store, namespace, database)
    if spec.recovery is not None:
        env += recovery_env(spec.recovery, namespace)
    return env


def _stores(spec: SampleDBSpec, restoring: bool) -> list[tuple[str, ObjectStore]]:
    out: list[tuple[str, ObjectStore]] = []
    if spec.backup.object_store is not None:
        out.append(("spec.backup.objectStore.credentials", spec.backup.object_store))
    if spec.recovery is not None:
        out.append(("spec.recovery.objectStore.credentials", spec.recovery.object_store))
    if restoring and spec.restore is not None and spec.restore.object_store is not None:
        out.append(("spec.restore.objectStore.credentials", spec.restore.object_store))
    return out


def credential_secrets(spec: SampleDBSpec, *, restoring: bool = True) -> list[str]:
    """The Secrets the stores' access keys come from (read live by the reconciler: the operator watches only
    its own Secrets), in order, without repeats. `restoring`: the restore (spec.restore) has not finished, so
    its store's Secret is still needed (afterwards it may go)."""
    return list(dict.fromkeys(store.credentials.secret_name for _, store in _stores(spec, restoring)))


def credentials_problems(spec: SampleDBSpec, secrets: Mapping[str, Obj | None], *,
                         restoring: bool = True) -> list[Problem]:
    """Why the stores' access keys cannot be used (`secrets`: each of credential_secrets, None when absent).

    A Secret is used only when its owner opted it in with CREDENTIALS_OPT_IN_LABEL="true": its values go into
    the database container's environment and to the endpoint the spec names, so without the opt-in anyone
    who may edit a SampleDB could send any Secret of the namespace to a server of their choosing."""
    problems: list[Problem] = []
    for field, store in _stores(spec, restoring):
        name = store.credentials.secret_name
        secret = secrets.get(name)
        if secret is None:
            problems.append(Problem("ObjectStoreCredentialsMissing", f"Secret {name} does not exist", field))
            continue
        labels = (secret.get("metadata") or {}).get("labels") or {}
        if labels.get(CREDENTIALS_OPT_IN_LABEL) != "true":
            problems.append(Problem("ObjectStoreCredentialsNotOptedIn", (
                f"Secret {name} is not opted in as object store credentials: its keys are used only when it carries"
                f" the label {CREDENTIALS_OPT_IN_LABEL}=\"true\" (kubectl label secret {name}"
                f" {CREDENTIALS_OPT_IN_LABEL}=true)"), field))
            continue
        data = {**(secret.get("data") or {}), **(secret.get("stringData") or {})}
        missing = [k for k in (store.credentials.access_key_id_key, store.credentials.secret_access_key_key)
                   if k not in data]
        if missing:
            problems.append(Problem("ObjectStoreCredentialsMissing",
                                    f"Secret {name} has no key {', '.join(repr(k) for k in missing)}", field))
    return problems

