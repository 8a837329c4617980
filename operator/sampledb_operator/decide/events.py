"""Which changes of a SampleDB's conditions are announced by an Event, and how.

Pure: the reconciler computes the new status (decide/status.py), writes it, and on a successful write
sends what `transition_events` returns. A condition whose status and reason did not change emits
nothing, so a pass that rewrites the same status announces nothing twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from sampledb_operator.model.conditions import Condition, get_condition
from sampledb_operator.model.sampledb_status import SampleDBStatus

EventType = Literal["Normal", "Warning"]

# Initialized=False reasons that are announced even when the status stays False (the reason changed)
INIT_RENOTIFIED = ("InitSourceMissing", "InitSecretNotOptedIn", "InitChangedNotRerun")
INIT_WARNINGS = ("InitSourceMissing", "InitSecretNotOptedIn", "InitFailed", "RestoreFailed",
                 "RestoreSourceMissing", "RestoreSourceNotReady", "RecoveryFailed")
ARCHIVE_CONDITIONS = ("ContinuousArchiving", "BaseBackupHealthy")  # Warning when False, Normal when True again
RECOVERED_REASONS = MappingProxyType({"ContinuousArchiving": "ArchiveRecovered",
                                      "BaseBackupHealthy": "BaseBackupRecovered"})
UPGRADE_FAILURES = ("UpgradeFailed", "DowngradeRefused")


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One Event about the SampleDB: its type, reason and message."""

    type: EventType
    reason: str
    message: str


def transition_events(old: SampleDBStatus, new: SampleDBStatus) -> list[EventSpec]:
    """The Events that announce the change of conditions from status `old` to `new`, in the order of `new`.

    | condition                      | announced when status or reason changed, and | event             |
    |--------------------------------|----------------------------------------------|-------------------|
    | Ready=True                     | always                                       | Normal DatabaseReady |
    | Degraded=True, SpecValid=False | always                                       | Warning <reason>  |
    | Initialized=True               | status changed, or reason in INIT_RENOTIFIED | Normal <reason>   |
    | Initialized not True           | as above, and reason in INIT_WARNINGS        | Warning <reason>  |
    | Upgrading                      | always                                       | Normal, Warning if failed |
    | Progressing, reason Paused     | always                                       | Normal Paused     |
    | ContinuousArchiving False      | always                                       | Warning <reason>  |
    | BaseBackupHealthy False        | always                                       | Warning <reason>  |
    | either True after False        | always                                       | Normal (1)        |
    | RecoveryVerified False         | always                                       | Warning <reason>  |
    | RecoveryVerified True          | always                                       | Normal RecoveryVerified |

    (1) ArchiveRecovered or BaseBackupRecovered.

    A Normal Initialized=True announcement in the same write as Ready=True is folded into DatabaseReady's
    message (`_fold_initialized`): a new database's last write announces itself once.
    """
    out: list[EventSpec] = []
    initialized: EventSpec | None = None  # a Normal Initialized=True announcement, folded into DatabaseReady
    for cond in new.conditions:
        before = get_condition(old.conditions, cond.type)
        if before is not None and before.status == cond.status and before.reason == cond.reason:
            continue
        event = _event(cond, before)
        if event is not None:
            out.append(event)
            if cond.type == "Initialized" and event.type == "Normal":
                initialized = event
    return _fold_initialized(out, initialized)


def _fold_initialized(out: list[EventSpec], initialized: EventSpec | None) -> list[EventSpec]:
    """One Event for a write that makes the database both initialized and ready: DatabaseReady, its message
    naming the initialization (`... (initialized: InitSucceeded, the init SQL ran successfully)`), in the
    place of the two (a database's creation announces itself with few Events; the status keeps both
    conditions). An initialization announced without Ready turning True in the same write stays an Event."""
    ready = next((e for e in out if e.reason == "DatabaseReady"), None)
    if ready is None or initialized is None:
        return out
    merged = EventSpec("Normal", "DatabaseReady",
                       f"{ready.message} (initialized: {initialized.reason}, {initialized.message})")
    return [merged if e is ready else e for e in out if e is not initialized]


def _event(cond: Condition, before: Condition | None) -> EventSpec | None:
    if cond.type == "Ready" and cond.status == "True":
        return EventSpec("Normal", "DatabaseReady", cond.message)
    if (cond.type, cond.status) in (("Degraded", "True"), ("SpecValid", "False")):
        return EventSpec("Warning", cond.reason, cond.message)
    if cond.type == "Initialized":
        if before is not None and before.status == cond.status and cond.reason not in INIT_RENOTIFIED:
            return None
        if cond.status == "True":
            return EventSpec("Normal", cond.reason, cond.message)
        if cond.reason in INIT_WARNINGS:
            return EventSpec("Warning", cond.reason, cond.message)
        return None
    if cond.type == "Upgrading":
        return EventSpec("Warning" if cond.reason in UPGRADE_FAILURES else "Normal", cond.reason, cond.message)
    if cond.type == "Progressing" and cond.reason == "Paused":
        return EventSpec("Normal", "Paused", cond.message)
    if cond.type in ARCHIVE_CONDITIONS:
        if cond.status == "False":
            return EventSpec("Warning", cond.reason, cond.message)
        if cond.status == "True" and before is not None and before.status == "False":
            return EventSpec("Normal", RECOVERED_REASONS[cond.type], cond.message)
    if cond.type == "RecoveryVerified" and cond.status != "Unknown":
        return EventSpec("Warning" if cond.status == "False" else "Normal", cond.reason, cond.message)
    return None


def created_children_event(created: Sequence[str], waiting: Mapping[str, str], *,
                           provisioning: bool) -> EventSpec | None:
    """The `CreatedChildren` Event of a pass that created `created` ("Kind name"), while the StatefulSets of
    `waiting` (name -> claim) wait for their claim to be bound before they are created; None: nothing to announce.

    A database's provisioning (`provisioning`: it has never run, status.currentVersion is unset) is announced by
    one Event for its first children, which names the StatefulSets still waiting for their claims, and by
    `DatabaseReady` at its end: a later pass that creates only those StatefulSets announces nothing (the Ready
    condition shows it, `DatabaseNotReady`). Once the database has run, every creation is a repair and is
    announced. A pass that created nothing announces nothing, whatever waits."""
    if not created:
        return None
    if provisioning and all(c.startswith("StatefulSet ") for c in created):
        return None
    message = "created " + ", ".join(created)
    if waiting:
        message += "; " + ", ".join(f"StatefulSet {sts} waits for its claim {claim} to be bound"
                                    for sts, claim in waiting.items())
    return EventSpec("Normal", "CreatedChildren", message)
