"""The finalizer and the deletion policies as pure steps.

Pure: no I/O, no clock (the caller passes `now`). The reconciler asks `deletion_step` what to do
next for a SampleDB being deleted and does exactly that one thing; the next event asks again. So
a restart at any point resumes at the right step, and a snapshot is never taken twice for one
deletion: attempts are SampleDBBackup objects with deterministic names (`snapshot_backup_name`).

Data-bearing children (the StatefulSet and the data PVC) carry no ownerReference, so the garbage
collector never removes them, not even on a foreground deletion: only these steps delete them,
after the policy's work is done.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sampledb_operator.decide.sharding import BUCKET_LABEL, bucket_of
from sampledb_operator.model.names import fit, short_hash

FINALIZER = "sampledb.io/finalizer"
SKIP_SNAPSHOT_ANNOTATION = "sampledb.io/skip-snapshot"
RETAINED_FROM_LABEL = "sampledb.io/retained-from"
SNAPSHOT_RETRY_BASE = 10.0  # seconds before the second attempt; doubles per failed attempt
SNAPSHOT_RETRY_MAX = 600.0


class Step(StrEnum):
    """What the reconciler does next for a SampleDB that is being deleted."""

    RELEASE = "release"  # remove the finalizer: nothing (more) to do
    START_SNAPSHOT = "start-snapshot"  # create the SampleDBBackup of the next attempt
    WAIT_SNAPSHOT = "wait-snapshot"  # a snapshot is pending or running
    RETRY_LATER = "retry-later"  # the last attempt failed; the next one waits for the backoff
    DELETE_DATA = "delete-data"  # delete the StatefulSet and the data PVC, then release
    RETAIN_DATA = "retain-data"  # delete the StatefulSet, keep and label the data PVC, then release


def own_metadata(namespace: str, name: str, finalizers: list[str], labels: dict[str, str], *,
                 paused: bool, bucket: bool) -> dict[str, object]:
    """What a live SampleDB's metadata lacks of the operator's own, as a merge patch's `metadata` (empty:
    nothing): the finalizer (not on a paused database: pausing promises no new hold on it; there already
    when the install's admission policy, manifests/admission on Kubernetes 1.36+, added it at creation) and,
    when `bucket` (sharded replicas), its bucket label (decide.sharding: a sharded replica's filtered caches
    select it by that label; a wrong value, set by hand or copied from another database's manifest, is put
    right). Both in one write, on the first pass. One operator (not sharded) leaves the label alone: it reads
    no bucket label, and replicas sharded later cache the unlabelled SampleDBs until their first passes label
    them."""
    patch: dict[str, object] = {}
    if FINALIZER not in finalizers and not paused:
        patch["finalizers"] = [*finalizers, FINALIZER]
    if bucket:  # the hash (sha256) only where the label is kept: one operator's passes never compute it
        own_bucket = str(bucket_of(namespace, name))
        if labels.get(BUCKET_LABEL) != own_bucket:
            patch["labels"] = {BUCKET_LABEL: own_bucket}
    return patch


@dataclass(frozen=True, slots=True)
class Attempt:
    """One pre-delete snapshot attempt, as its SampleDBBackup says."""

    number: int
    phase: str | None  # Pending, Running, Succeeded, Failed or None (just created)
    completed_at: datetime | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class DeletionInput:
    """Everything the deletion decision depends on."""

    policy: str  # Snapshot, Retain or Delete
    skip_requested: bool  # the skip-snapshot annotation is "true"
    namespace_terminating: bool  # nothing can be created there any more
    ever_ran: bool  # the database reached Running at least once (there is data to keep)
    data_present: bool  # the StatefulSet or the data PVC still exists
    latest: Attempt | None  # the newest snapshot attempt, if any


@dataclass(frozen=True, slots=True)
class Decision:
    step: Step
    reason: str
    attempt: int = 0  # the attempt to start (START_SNAPSHOT)
    wait_seconds: float = 0.0  # RETRY_LATER: how long until the next attempt


def retry_delay(failed_attempts: int) -> float:
    """Backoff before attempt n+1 after n failed attempts: 10 s, 20 s, 40 s ... capped at 10 min."""
    return float(min(SNAPSHOT_RETRY_BASE * 2.0 ** max(failed_attempts - 1, 0), SNAPSHOT_RETRY_MAX))


def deletion_step(inp: DeletionInput, now: datetime) -> Decision:
    """The next step of the deletion of one SampleDB."""
    if not inp.data_present:
        return Decision(Step.RELEASE, "the data is gone (or was never created)")
    if inp.policy == "Retain":
        return Decision(Step.RETAIN_DATA, "deletionPolicy Retain: the data volume is kept")
    if inp.policy == "Delete":
        return Decision(Step.DELETE_DATA, "deletionPolicy Delete: no snapshot")
    if inp.namespace_terminating:
        return Decision(Step.DELETE_DATA, "the namespace is being deleted: no snapshot can be taken there")
    if inp.skip_requested:
        return Decision(Step.DELETE_DATA, f"the {SKIP_SNAPSHOT_ANNOTATION} annotation skips the snapshot")
    if not inp.ever_ran:
        return Decision(Step.DELETE_DATA, "the database never ran: there is nothing to snapshot")
    latest = inp.latest
    if latest is None:
        return Decision(Step.START_SNAPSHOT, "taking the final snapshot", attempt=1)
    if latest.phase == "Succeeded":
        return Decision(Step.DELETE_DATA, f"snapshot attempt {latest.number} succeeded")
    if latest.phase != "Failed":
        return Decision(Step.WAIT_SNAPSHOT, f"snapshot attempt {latest.number} is {latest.phase or 'Pending'}")
    delay = retry_delay(latest.number)
    waited = (now - latest.completed_at).total_seconds() if latest.completed_at else delay
    if waited < delay:
        return Decision(Step.RETRY_LATER, f"snapshot attempt {latest.number} failed: {latest.message}",
                        wait_seconds=delay - waited)
    return Decision(Step.START_SNAPSHOT, f"retrying after attempt {latest.number} failed: {latest.message}",
                    attempt=latest.number + 1)


def snapshot_backup_name(db: str, uid: str, attempt: int) -> str:
    """The SampleDBBackup of one pre-delete snapshot attempt (deterministic: no duplicate on restart)."""
    return fit(db, f"-pre-delete-{short_hash(uid)}-{attempt}", 253)
