"""When a reconcile wants to come back: the one result type of every pass, step and plan.

Pure data (the controller in runtime/ maps it to queue operations; plans in decide/ carry it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for: nothing (done), a look again after `requeue_after` seconds, or a
    rate-limited requeue (`requeue`, controller-runtime's deprecated Result.Requeue)."""

    requeue_after: float | None = None
    requeue: bool = False


def combine(*results: Result | None) -> Result | None:
    """The Results of several parts of one pass as one: a rate-limited requeue if any part asks for
    one, and the earliest requeue_after (> 0) any part asks for; None when no part asks to come back."""
    requeue = any(r is not None and r.requeue for r in results)
    after = [r.requeue_after for r in results if r is not None and r.requeue_after is not None and r.requeue_after > 0]
    if not requeue and not after:
        return None
    return Result(requeue_after=min(after) if after else None, requeue=requeue)


def after(seconds: float | None) -> Result | None:
    """Come back after `seconds` (None: no need to)."""
    return Result(requeue_after=seconds) if seconds is not None else None
