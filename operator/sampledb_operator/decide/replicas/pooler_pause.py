"""Whether the pooler's pools are paused around a switchover (spec.pooler), so that its clients wait instead of
failing while the primary changes.

Pure: no I/O. A switchover (a planned change of primary: the old one is stopped cleanly, then the target promoted)
pauses PgBouncer's pools before the old primary stops: transactions under way finish, new ones wait in PgBouncer;
once the switchover has ended the pools resume, and PgBouncer's next server connections reach the new primary
through the database's Service. A failover (the primary lost) never pauses: PgBouncer could only wait for server
connections to a server that no longer answers.

The order makes a pause always have a resume, whatever stops the operator: the pass that starts the switchover
only records it (status.poolerPause, its target) and holds the old primary's fence (`hold_fence`); the next pass
sends PAUSE, then fences, and records when; every pass after the switchover ends, while a record exists, sends
RESUME and then clears it (PAUSE and RESUME are idempotent: PgBouncer's "already paused" and "not paused" are
success). A switchover still running PAUSE_LIMIT_SECONDS after the pause resumes anyway (its clients then see the
errors they would have seen without a pause, rather than waiting longer) and is not paused again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sampledb_operator.model.sampledb_status import PoolerPause

PAUSE_LIMIT_SECONDS = 30.0


class PauseAction(StrEnum):
    NONE = "none"
    PAUSE = "pause"
    RESUME = "resume"


@dataclass(frozen=True, slots=True)
class PauseDecision:
    """What to send the pooler's pods, and status.poolerPause to write (None: cleared)."""

    action: PauseAction
    record: PoolerPause | None


def hold_fence(*, pooler: bool, switchover_to: str | None, primary: str | None, record: PoolerPause | None) -> bool:
    """The switchover asked for (`switchover_to`, the annotation) must not stop the old primary in this pass: its
    pause is not recorded yet."""
    return (pooler and switchover_to is not None and switchover_to != primary
            and (record is None or record.target != switchover_to))


def decide(*, pooler: bool, switchover_to: str | None, record: PoolerPause | None, now: datetime) -> PauseDecision:
    """`switchover_to`: the target of the switchover running (None: none runs, or a failover does)."""
    if pooler and switchover_to is not None:
        if record is None or record.target != switchover_to:
            return PauseDecision(PauseAction.NONE, PoolerPause(target=switchover_to))
        if record.resumed:
            return PauseDecision(PauseAction.NONE, record)
        if record.paused_at is None:
            return PauseDecision(PauseAction.PAUSE, record.model_copy(update={"paused_at": now}))
        if (now - record.paused_at).total_seconds() > PAUSE_LIMIT_SECONDS:
            return PauseDecision(PauseAction.RESUME, record.model_copy(update={"resumed": True}))
        return PauseDecision(PauseAction.NONE, record)
    if record is not None and not record.resumed:
        return PauseDecision(PauseAction.RESUME, None)  # a pause may have been sent before its time was recorded
    return PauseDecision(PauseAction.NONE, None)
