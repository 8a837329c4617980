"""Schema migrations as pure decisions: a ConfigMap's SQL files + status.appliedMigrations -> the work.

Pure. Files are named like dataplane/migrate.sh wants them (NNNN_description.sql) and ordered by
their numeric version, as the script orders them; a file is matched to its applied record by
version, so a renamed but unchanged file stays applied. The pending set is identified by a digest
of its names and checksums: the same pending files always give the same digest (and so the same
backup, snapshot and Job names), a changed file gives a new one. The snapshot ConfigMap is
content-addressed: its name is a hash of the database uid and every file, so an existing one
always holds exactly the files its name stands for.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL, meta
from sampledb_operator.decide.status import job_state
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.sampledb_status import AppliedMigration

FIELD = "spec.migrations"
# The names dataplane/migrate.sh accepts (4 to 18 digits: its versions are bigints).
NAME_RE = re.compile(r"^([0-9]{4,18})_[A-Za-z0-9][A-Za-z0-9_-]*\.sql$")
SNAPSHOT_COMPONENT = "migrations"
JOB_COMPONENT = "migrate"  # the component label of the migrate Jobs
LISTED = 5  # file names quoted in one message at most


@dataclass(frozen=True, slots=True)
class MigrationFile:
    """One SQL file of the source: its name, numeric version and SHA-256 (hex) of its bytes."""

    name: str
    version: int
    checksum: str


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    """What to do: every file in order, the pending ones, their digest, or the problem that stops it."""

    files: tuple[MigrationFile, ...] = ()
    pending: tuple[MigrationFile, ...] = ()
    digest: str = ""  # of the pending files; "" when nothing is pending
    problem: Problem | None = None


def source_files(configmap: Mapping[str, Any]) -> dict[str, bytes]:
    """A ConfigMap's keys as file contents (data as UTF-8, binaryData decoded), as a volume mounts them."""
    out = {k: str(v).encode() for k, v in (configmap.get("data") or {}).items()}
    for key, value in (configmap.get("binaryData") or {}).items():
        try:
            out[key] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            out[key] = str(value).encode()  # the API server validates binaryData; never expected
    return out


def checksum(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def quote_names(items: Sequence[str]) -> str:
    """The first few of `items`, comma-separated, with how many more there are."""
    shown = ", ".join(items[:LISTED])
    return shown + (f" and {len(items) - LISTED} more" if len(items) > LISTED else "")


def ordered_files(files: Mapping[str, bytes]) -> tuple[tuple[MigrationFile, ...], Problem | None]:
    """The files by ascending version, or the problem with their names (bad name, duplicate version)."""
    bad = sorted(k for k in files if NAME_RE.fullmatch(k) is None)
    if bad:
        return (), Problem(
            "InvalidMigrationName",
            f"ConfigMap keys {quote_names(bad)} are not migration files: want NNNN_description.sql"
            " (4 or more digits, '_', letters, digits, '_' or '-', '.sql')", FIELD)
    parsed = sorted((MigrationFile(k, version_of(k) or 0, checksum(v)) for k, v in files.items()),
                    key=lambda f: (f.version, f.name))
    for prev, cur in itertools.pairwise(parsed):
        if prev.version == cur.version:
            return (), Problem("InvalidMigrationName",
                               f"migrations {prev.name} and {cur.name} have the same version {cur.version}", FIELD)
    return tuple(parsed), None


def version_of(name: str) -> int | None:
    match = NAME_RE.fullmatch(name)
    return int(match.group(1)) if match else None


def pending_digest(pending: Sequence[MigrationFile]) -> str:
    """Identifies a set of files to apply: a hash of their names and checksums, in order."""
    if not pending:
        return ""
    text = "".join(f"{f.name}\x00{f.checksum}\n" for f in pending)
    return hashlib.sha256(text.encode()).hexdigest()


def plan_migrations(files: Mapping[str, bytes], applied: Sequence[AppliedMigration]) -> MigrationPlan:
    """The ordered files, those still to apply and their digest; or why nothing may run.

    An applied file whose checksum changed is refused (MigrationChanged), and so is a new file whose
    version is below the newest applied one (MigrationOutOfOrder): migrate.sh would refuse both.
    """
    ordered, problem = ordered_files(files)
    if problem is not None:
        return MigrationPlan(problem=problem)
    by_version = {v: a for a in applied if (v := version_of(a.name)) is not None}
    changed = [f.name for f in ordered
               if (a := by_version.get(f.version)) is not None and a.checksum is not None and a.checksum != f.checksum]
    if changed:
        return MigrationPlan(files=ordered, problem=Problem(
            "MigrationChanged",
            f"applied migration{'s' if len(changed) > 1 else ''} {quote_names(changed)} changed since"
            " applied; applied files must not change (add a new file instead)", FIELD))
    pending = tuple(f for f in ordered if f.version not in by_version)
    newest = max(by_version, default=0)
    late = [f.name for f in pending if f.version < newest]
    if late:
        return MigrationPlan(files=ordered, problem=Problem(
            "MigrationOutOfOrder",
            f"new migration{'s' if len(late) > 1 else ''} {quote_names(late)} numbered below the newest applied"
            f" version {newest} ({by_version[newest].name}); renumber above it", FIELD))
    return MigrationPlan(files=ordered, pending=pending, digest=pending_digest(pending))


def with_applied(applied: Sequence[AppliedMigration], pending: Sequence[MigrationFile],
                 at: datetime, recorded_before: frozenset[int] = frozenset()) -> tuple[AppliedMigration, ...]:
    """status.appliedMigrations after `pending` ran at `at`: the earlier records, then the new, by version.

    The files whose versions are in `recorded_before` were already recorded in the database's
    sampledb_meta.schema_migrations (migrate.sh's "already"): not run by this Job, so no appliedAt of
    this Job's is claimed for them.
    """
    known = {a.name for a in applied}
    new = [AppliedMigration(name=f.name, checksum=f.checksum,
                            applied_at=None if f.version in recorded_before else at)
           for f in pending if f.name not in known]
    return tuple(sorted([*applied, *new], key=lambda a: (version_of(a.name) or 0, a.name)))


def job_token(uid: str, digest: str) -> str:
    """What names the migration Job: the pending set's digest within one incarnation (uid) of the database."""
    return f"{uid}/{digest}"


def snapshot_name(db: SampleDB, files: Sequence[MigrationFile]) -> str:
    """`<db>-migrations-<hash>`: a hash of the database's uid and every file's name and checksum."""
    parts = [f"{f.name}:{f.checksum}" for f in files]
    return names.fit(db.metadata.name, f"-migrations-{names.short_hash(db.metadata.uid or '', *parts)}",
                     names.SUBDOMAIN_LIMIT)


def snapshot_configmap(db: SampleDB, files: Sequence[MigrationFile], source: Mapping[str, Any]) -> Obj:
    """An immutable copy of the source ConfigMap's files, owned by the SampleDB, for one Job to mount.

    Holds every file (applied ones too), so migrate.sh sees the whole ordered history and its own
    checks against sampledb_meta.schema_migrations work.
    """
    wanted = {f.name for f in files}
    body: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(db, snapshot_name(db, files), SNAPSHOT_COMPONENT),
        "immutable": True,
    }
    data = {k: v for k, v in sorted((source.get("data") or {}).items()) if k in wanted}
    binary = {k: v for k, v in sorted((source.get("binaryData") or {}).items()) if k in wanted}
    if data:
        body["data"] = data
    if binary:
        body["binaryData"] = binary
    return body


def stale_snapshots(snapshots: Sequence[str], in_use: set[str]) -> list[str]:
    """Snapshot ConfigMaps no unfinished Job mounts and no Job is about to: they can go."""
    return sorted(name for name in snapshots if name not in in_use)


# ---------------------------------------------------------------- the database's migrate Jobs (as cached)


def job_selector(db: SampleDB) -> dict[str, str]:
    """The labels of the database's migrate Jobs."""
    return {DATABASE_LABEL: db.metadata.name, COMPONENT_LABEL: JOB_COMPONENT}


def snapshot_selector(db: SampleDB) -> dict[str, str]:
    """The labels of the database's snapshot ConfigMaps."""
    return {DATABASE_LABEL: db.metadata.name, COMPONENT_LABEL: SNAPSHOT_COMPONENT}


def owned(obj: Obj, db: SampleDB) -> bool:
    """`obj` belongs to this incarnation (uid) of the database."""
    return any(ref.get("uid") == db.metadata.uid for ref in obj.get("metadata", {}).get("ownerReferences") or [])


def unfinished_jobs(jobs: Iterable[Obj], db: SampleDB) -> list[str]:
    """The names of the database's migrate Jobs (among `jobs`) that have not finished, sorted."""
    out = []
    for job in jobs:
        state = job_state(job)
        if owned(job, db) and state is not None and not state.finished:
            out.append(str(job["metadata"]["name"]))
    return sorted(out)


def in_progress(jobs: Iterable[Obj], db: SampleDB) -> bool:
    """A migrate Job of this database runs (an upgrade waits for it)."""
    return bool(unfinished_jobs(jobs, db))


def mounted_snapshots(jobs: Iterable[Obj], db: SampleDB) -> set[str]:
    """The snapshot ConfigMaps the database's unfinished migrate Jobs mount."""
    in_use: set[str] = set()
    for job in jobs:
        state = job_state(job)
        if not owned(job, db) or state is None or state.finished:
            continue
        volumes = job.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or []
        in_use |= {str(v["configMap"]["name"]) for v in volumes if v.get("name") == "migrations" and v.get("configMap")}
    return in_use
