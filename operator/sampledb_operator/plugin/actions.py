"""What backup, restore, upgrade, pause and resume send to the API server (pure; no I/O).

Invariants: a backup is a new SampleDBBackup with reason `manual` (the operator's own backups use
the other reasons), named `<db>-manual-<UTC yyyymmddhhmmss>` like the operator's names unless the
user names it; a restore is a new SampleDB with `spec.restore.backupName`, the only way the CRD
allows a restore (`spec.restore` is set at creation and never changed), copying from the source
database only what cannot break a restore (storage, resources, parameters, upgrade settings and,
for the same version, the image): never `init` (not run for a restored database), `migrations`
(already in the dump; the new database would apply them again), a backup schedule or `paused`;
a recovery is a new SampleDB with `spec.recovery`, the source's store (its `backup.objectStore` without the
archiving settings, its path defaulting to the source's namespace) and at most one target;
upgrade, pause and resume are merge patches of `spec.version` and `spec.paused`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sampledb_operator.model.archive import VERIFY_RECOVERY_ANNOTATION
from sampledb_operator.model.backup import backup_name_error
from sampledb_operator.model.names import backup_name
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.schema import API_VERSION, DNS1123_SUBDOMAIN_RE
from sampledb_operator.model.spec_rules import VERSION_RE

BACKUP_KIND, DB_KIND = "SampleDBBackup", "SampleDB"
COPIED_SPEC_FIELDS = ("resources", "parameters", "upgrade")


class ActionError(Exception):
    """The command cannot be carried out as asked; the message says why and what to do."""


def backup_object(db: str, namespace: str, now: datetime, name: str | None = None) -> Obj:
    """A manual SampleDBBackup of `db`."""
    chosen = name or backup_name(db, "manual", now)
    if not re.fullmatch(DNS1123_SUBDOMAIN_RE, chosen):
        raise ActionError(f"backup name {chosen!r}: must be lowercase letters, digits, '-' and '.', starting and"
                          " ending with a letter or digit (a Kubernetes object name)")
    problem = backup_name_error(chosen)
    if problem:
        raise ActionError(f"backup name {chosen!r}: {problem}")
    return {"apiVersion": API_VERSION, "kind": BACKUP_KIND,
            "metadata": {"name": chosen, "namespace": namespace},
            "spec": {"database": db, "reason": "manual"}}


def restore_object(backup: Obj, source: Obj | None, new_name: str, namespace: str, *,
                   version: str | None = None, storage_size: str | None = None) -> Obj:
    """A new SampleDB `new_name` restoring `backup`; `source` is the backed-up SampleDB if it still exists."""
    b_meta, b_spec, b_status = backup.get("metadata") or {}, backup.get("spec") or {}, backup.get("status") or {}
    phase = b_status.get("phase")
    if phase == "Failed":
        raise ActionError(f"SampleDBBackup {b_meta.get('name')} failed ({b_status.get('message') or 'no message'});"
                          " choose a Succeeded backup")
    src_spec: Obj = (source or {}).get("spec") or {}
    chosen_version = version or b_status.get("version") or src_spec.get("version")
    if not chosen_version:
        raise ActionError("the backup records no PostgreSQL version and its database is gone: give --version")
    check_version(str(chosen_version))
    storage: Obj = dict(src_spec.get("storage") or {})
    if storage_size:
        storage["size"] = storage_size
    if not storage.get("size"):
        raise ActionError(f"SampleDB {b_spec.get('database')} no longer exists to copy its storage from:"
                          " give --storage-size")
    spec: Obj = {"version": str(chosen_version), "storage": storage,
                 "restore": {"backupName": str(b_meta.get("name"))}}
    for key in COPIED_SPEC_FIELDS:
        if src_spec.get(key):
            spec[key] = src_spec[key]
    if src_spec.get("image") and src_spec.get("version") == chosen_version:
        spec["image"] = src_spec["image"]
    return {"apiVersion": API_VERSION, "kind": DB_KIND, "metadata": {"name": new_name, "namespace": namespace},
            "spec": spec}


STORE_FIELDS = ("endpoint", "bucket", "path", "region", "credentials", "ca")


def recovery_object(source_name: str, store_db: Obj, new_name: str, namespace: str, *, time: str | None = None,
                    restore_point: str | None = None, lsn: str | None = None, version: str | None = None,
                    storage_size: str | None = None, path: str | None = None) -> Obj:
    """A new SampleDB `new_name` recovered from `source_name`'s archive, at most one target; `store_db` is a
    SampleDB whose spec.backup.objectStore names the store (the source itself while it exists)."""
    targets = {k: v for k, v in (("targetTime", time), ("targetName", restore_point), ("targetLSN", lsn)) if v}
    if len(targets) > 1:
        raise ActionError("give at most one of --time, --restore-point and --lsn")
    s_meta, s_spec = store_db.get("metadata") or {}, store_db.get("spec") or {}
    archive = (s_spec.get("backup") or {}).get("objectStore")
    if not archive:
        raise ActionError(f"SampleDB {s_meta.get('name')} has no spec.backup.objectStore to recover from")
    store = {k: archive[k] for k in STORE_FIELDS if archive.get(k)}
    store["path"] = path or store.get("path") or s_meta.get("namespace") or namespace
    chosen_version = version or s_spec.get("version")
    if not chosen_version:
        raise ActionError("give --version (the source's PostgreSQL MAJOR.MINOR)")
    check_version(str(chosen_version))
    storage: Obj = dict(s_spec.get("storage") or {})
    if storage_size:
        storage["size"] = storage_size
    if not storage.get("size"):
        raise ActionError("give --storage-size")
    spec: Obj = {"version": str(chosen_version), "storage": storage,
                 "recovery": {"objectStore": store, "database": source_name, **targets}}
    for key in COPIED_SPEC_FIELDS:
        if s_spec.get(key):
            spec[key] = s_spec[key]
    return {"apiVersion": API_VERSION, "kind": DB_KIND, "metadata": {"name": new_name, "namespace": namespace},
            "spec": spec}


def check_version(version: str) -> None:
    if not re.fullmatch(VERSION_RE, version):
        raise ActionError(f"version {version!r} is not MAJOR.MINOR, e.g. \"17.2\"")


def upgrade_patch(db: Obj, version: str, *, image: str | None = None, default_image: bool = False) -> Obj | None:
    """The patch that asks for `version` (and `image`, or the default postgres:<version> image);
    None when the SampleDB already asks for exactly that. A SampleDB whose spec.image pins an image
    needs one of the two: the operator refuses an image of another major (ImageVersionMismatch)."""
    check_version(version)
    spec = db.get("spec") or {}
    pinned = spec.get("image")
    if image and default_image:
        raise ActionError("give --image or --default-image, not both")
    if pinned and not image and not default_image and spec.get("version") != version:
        raise ActionError(f"spec.image pins {pinned}: give --image with an image of PostgreSQL {version},"
                          f" or --default-image to run postgres:{version}")
    patch: Obj = {}
    if spec.get("version") != version:
        patch["version"] = version
    if image and image != pinned:
        patch["image"] = image
    if default_image and pinned:
        patch["image"] = None   # a merge patch's null removes the field
    return {"spec": patch} if patch else None


def upgrade_kind(current: str | None, wanted: str) -> str:
    """"major" or "minor" (what the operator will do), "unknown" before the database first ran."""
    if not current:
        return "unknown"
    return "major" if current.partition(".")[0] != wanted.partition(".")[0] else "minor"


def paused_patch(db: Obj, paused: bool) -> Obj | None:
    """The patch that sets spec.paused; None when it already has that value."""
    if bool((db.get("spec") or {}).get("paused")) == paused:
        return None
    return {"spec": {"paused": paused}}


def verify_recovery_patch(db: Obj, now: datetime) -> tuple[Obj, str]:
    """The patch asking for a verification of a recovery from `db`'s object store (a new value of the annotation
    sampledb.io/verify-recovery), and the request the verification will answer."""
    if not ((db.get("spec") or {}).get("backup") or {}).get("objectStore"):
        name = (db.get("metadata") or {}).get("name")
        raise ActionError(f"SampleDB {name} has no spec.backup.objectStore: there is no recovery to verify")
    value = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return {"metadata": {"annotations": {VERIFY_RECOVERY_ANNOTATION: value}}}, f"manual:{value}"
