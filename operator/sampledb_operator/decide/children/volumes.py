"""The database's two volumes (data, backups): when the operator may write them, and when it must stop.

Pure. A volume that holds something (the data volume of a database that has run, a backups volume
that successful backups were written to) is never replaced by an empty one without an explicit
decision: when it is being deleted (Terminating: the API server keeps it while a pod uses it) or
gone, the volume is reported (a Degraded problem naming it) and not written; only the annotation
`sampledb.io/accept-empty-volume` listing its role ("data", "backups") lets the operator create an
empty one. An acceptance is for the current loss only: once the volume exists again, its role is
dropped from the annotation, so a later loss stops again: `plan_release` is that pass's plan, a merge
patch of the SampleDB's annotation with the resourceVersion the pass's status write left (a stale
pass's patch is refused and changes nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sampledb_operator.decide.effects import Patch, Plan
from sampledb_operator.decide.plan import Key
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB

ACCEPT_EMPTY_ANNOTATION = "sampledb.io/accept-empty-volume"
DATA, BACKUPS = "data", "backups"
PVC = "PersistentVolumeClaim"
ROLES = (DATA, BACKUPS)


@dataclass(frozen=True, slots=True)
class VolumeState:
    """One volume as observed."""

    role: str  # DATA or BACKUPS
    name: str  # the PVC's name
    present: bool
    terminating: bool = False  # present with a deletionTimestamp
    holds_data: bool = False  # the database ran on it / successful backups were written to it


@dataclass(frozen=True, slots=True)
class VolumeVerdict:
    """What the reconciler may do with one volume's desired PVC."""

    write: bool  # apply the desired PVC (create it or keep it in shape)
    problem: Problem | None = None
    creates_empty: bool = False  # the write creates an empty volume in place of a lost one


def accepted(annotations: Mapping[str, str]) -> frozenset[str]:
    """The roles the accept-empty-volume annotation names ("data", "backups", comma-separated)."""
    value = annotations.get(ACCEPT_EMPTY_ANNOTATION) or ""
    return frozenset(part.strip() for part in value.split(",") if part.strip() in ROLES)


def _what(state: VolumeState) -> str:
    return f"the {'data' if state.role == DATA else 'backups'} volume (PVC {state.name})"


def _field(state: VolumeState) -> str:
    return "spec.storage" if state.role == DATA else "spec.backup.storage"


def verdict(state: VolumeState, accept: frozenset[str], db_name: str) -> VolumeVerdict:
    """Whether the desired PVC of `state` may be written, and the problem to report if not."""
    what = _what(state)
    accept_hint = (f"to accept an empty one instead, annotate the SampleDB: kubectl annotate sampledb {db_name}"
                   f" {ACCEPT_EMPTY_ANNOTATION}={state.role}")
    if state.terminating:
        reason = "DataVolumeTerminating" if state.role == DATA else "BackupVolumeTerminating"
        keeps = ("the database pod still uses it" if state.role == DATA else "a pod still uses it")
        return VolumeVerdict(False, Problem(reason, (
            f"{what} is being deleted; it stays while {keeps}, and once it is gone the operator will not"
            f" create an empty one in its place. To keep the data, stop the deletion (recreate the claim on its"
            f" PersistentVolume) or take a backup now; {accept_hint}"), _field(state)))
    if state.present:
        return VolumeVerdict(True)
    if not state.holds_data or state.role in accept:
        return VolumeVerdict(True, creates_empty=state.holds_data)
    if state.role == DATA:
        message = (f"{what} of this database is gone, and the database had run on it: the operator does not"
                   " create an empty one by itself. Restore the volume (a claim of the same name on its"
                   " PersistentVolume), or create a new SampleDB with spec.restore naming a backup;"
                   f" {accept_hint} (the database then starts empty)")
        return VolumeVerdict(False, Problem("DataVolumeLost", message, _field(state)))
    message = (f"{what} is gone, and successful backups had been written to it: the operator does not create"
               f" an empty one by itself. Restore the volume (a claim of the same name on its PersistentVolume);"
               f" {accept_hint} (its SampleDBBackups then point at files that no longer exist)")
    return VolumeVerdict(False, Problem("BackupVolumeLost", message, _field(state)))


def remaining_acceptance(accept: frozenset[str], live: frozenset[str]) -> str | None:
    """The annotation's value once the roles whose volume exists again (`live`) are dropped; None: remove it."""
    left = sorted(accept - live)
    return ",".join(left) if left else None


def backups_written(db: SampleDB, backups: Iterable[Obj], claim: str) -> bool:
    """A Succeeded SampleDBBackup of this database (any incarnation) recorded its files on `claim`."""
    for backup in backups:
        status = backup.get("status") or {}
        if (backup.get("spec") or {}).get("database") == db.metadata.name and status.get("phase") == "Succeeded" \
                and (status.get("location") or {}).get("pvcName") == claim:
            return True
    return False


def volume_states(db: SampleDB, observed: Mapping[Key, Obj], backups: Iterable[Obj]) -> dict[Key, VolumeState]:
    """The two volumes as observed (`observed`: the children by (kind, name); `backups`: the namespace's
    SampleDBBackups), by (kind, name)."""
    backups = tuple(backups)
    out: dict[Key, VolumeState] = {}
    roles = ((DATA, names.data_pvc_name(db.metadata.name)), (BACKUPS, names.backup_pvc_name(db.metadata.name)))
    for role, name in roles:
        pvc = observed.get((PVC, name))
        holds = db.status.has_run if role == DATA else backups_written(db, backups, name)
        out[(PVC, name)] = VolumeState(
            role=role, name=name, present=pvc is not None,
            terminating=bool(pvc is not None and pvc.get("metadata", {}).get("deletionTimestamp")),
            holds_data=holds)
    return out


@dataclass(frozen=True, slots=True)
class AcceptanceFacts:
    """What the acceptance's release reads, after the pass's status write."""

    db: SampleDB  # as the pass read it (its annotations)
    live: frozenset[str]  # the roles whose volume exists (after this pass's writes)
    resource_version: str | None  # the SampleDB's resourceVersion after the status write; None: gone or stale


@dataclass(frozen=True, slots=True)
class AcceptancePlan:
    """The pass's plan, and the roles it drops from the annotation (for the log)."""

    plan: Plan
    released: tuple[str, ...] = ()


def plan_release(facts: AcceptanceFacts) -> AcceptancePlan:
    """Drop from the accept-empty-volume annotation the roles whose volume exists again (nothing when none
    does, or when the SampleDB's version after the status write is unknown)."""
    accept = accepted(facts.db.metadata.annotations)
    if not accept & facts.live or facts.resource_version is None:
        return AcceptancePlan(Plan())
    value = remaining_acceptance(accept, facts.live)
    patch = {"metadata": {"annotations": {ACCEPT_EMPTY_ANNOTATION: value}, "resourceVersion": facts.resource_version}}
    return AcceptancePlan(Plan((Patch("SampleDB", facts.db.metadata.name, patch),)),
                          released=tuple(sorted(accept & facts.live)))


def sizes_kept(db: SampleDB) -> frozenset[tuple[str, str]]:
    """The volumes whose size is set only at creation (for decide.plan.plan's keep_size).

    Without spec.backup.storage.size the backups volume is created with the data volume's size and
    keeps it: it does not follow later growth of the data volume, which would fail (or be refused) on
    a backups class that cannot expand while the data volume's class can. An explicit
    spec.backup.storage.size grows it.
    """
    if db.spec.backup.storage.size is not None:
        return frozenset()
    return frozenset({("PersistentVolumeClaim", names.backup_pvc_name(db.metadata.name))})


def what(db: SampleDB, pvc_name: str) -> tuple[str, str]:
    """How messages name a volume of `db` ("the backups volume orders-backups"), and its spec field."""
    if pvc_name == names.backup_pvc_name(db.metadata.name):
        return f"the backups volume {pvc_name}", "spec.backup.storage.size"
    return f"the data volume {pvc_name}", "spec.storage.size"
