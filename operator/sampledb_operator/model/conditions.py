"""Status conditions with metav1.Condition semantics, and pure helpers to read and update them.

Invariants: a list holds at most one condition per type and keeps its order (new types are
appended); `lastTransitionTime` changes only when a condition's status changes; the helpers never
mutate their input.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from sampledb_operator.model.schema import MESSAGE_MAX, StatusModel, Time, to_time

CONDITION_TYPE_RE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
REASON_RE = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
MAX_CONDITIONS = 16

ConditionStatus = Literal["True", "False", "Unknown"]


class ConditionType(StrEnum):
    """The condition types the operator sets on a SampleDB (and, some of them, on a backup)."""

    READY = "Ready"
    INITIALIZED = "Initialized"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    UPGRADING = "Upgrading"
    BACKUP_HEALTHY = "BackupHealthy"
    DELETION_BLOCKED = "DeletionBlocked"
    SPEC_VALID = "SpecValid"
    CONTINUOUS_ARCHIVING = "ContinuousArchiving"
    BASE_BACKUP_HEALTHY = "BaseBackupHealthy"
    RECOVERY_VERIFIED = "RecoveryVerified"
    ENCRYPTED = "Encrypted"
    HIBERNATED = "Hibernated"
    OPERATOR_UPDATE = "OperatorUpdate"
    POOLER_READY = "PoolerReady"


class Condition(StatusModel):
    """One observation of the object's state (metav1.Condition)."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(
        min_length=1, max_length=316, pattern=CONDITION_TYPE_RE,
        description="Type of condition in CamelCase, e.g. Ready.",
    )
    status: ConditionStatus = Field(description="Status of the condition: True, False or Unknown.")
    reason: str = Field(
        min_length=1, max_length=1024, pattern=REASON_RE,
        description="Programmatic identifier of the reason for the last transition, in CamelCase.",
    )
    message: str = Field(
        default="", max_length=MESSAGE_MAX, description="Human-readable details about the transition."
    )
    last_transition_time: Time | None = Field(
        default=None,
        description="When the condition last changed status. set_condition fills it in.",
    )
    observed_generation: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="The .metadata.generation the condition was set for."
    )


def get_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    """The condition of this type, or None."""
    return next((c for c in conditions if c.type == type_), None)


def is_true(conditions: Sequence[Condition], type_: str) -> bool:
    """True when a condition of this type exists with status "True"."""
    cond = get_condition(conditions, type_)
    return cond is not None and cond.status == "True"


def set_condition(conditions: Sequence[Condition], new: Condition, now: datetime) -> list[Condition]:
    """A copy of `conditions` with `new` in place of the condition of the same type.

    lastTransitionTime becomes `now` when the status changes (or the type is new) and is otherwise
    kept from the existing condition, whatever `new` carries.
    """
    old = get_condition(conditions, new.type)
    if old is None or old.status != new.status or old.last_transition_time is None:
        since = now
    else:
        since = old.last_transition_time
    merged = new.model_copy(update={"last_transition_time": to_time(since)})
    if old is None:
        return [*conditions, merged]
    return [merged if c.type == new.type else c for c in conditions]


def remove_condition(conditions: Sequence[Condition], type_: str) -> list[Condition]:
    """A copy of `conditions` without the condition of this type."""
    return [c for c in conditions if c.type != type_]
