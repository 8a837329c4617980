"""The data of shard ownership: one shard Lease as a member sees it, a member's view, and the plan.

Pure data shared by decide/sharding.py (the rebalancing decision) and runtime/shards.py (which reads
and writes the Leases and is given the decision as a function: runtime may not import decide).
Times are seconds of the observing member's monotonic clock; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ShardRecord:
    """One shard's Lease as the observer sees it."""

    holder: str              # spec.holderIdentity; "" when the shard is free or released (or has no Lease)
    unchanged_for: float     # seconds of the observer's clock since the record last changed
    duration: float          # the record's leaseDurationSeconds

    @property
    def expired(self) -> bool:
        """The holder has not renewed for its lease duration (as measured by the observer)."""
        return self.unchanged_for >= self.duration


@dataclass(frozen=True)
class ShardView:
    """One member's view of the shards, at one moment."""

    shards: int
    me: str                                 # our holder identity
    members: int                            # live members, us included
    records: Mapping[int, ShardRecord]      # a shard absent here is unknown (could not be read)
    held: frozenset[int]                    # shards we hold (admitted, or still renewed while releasing)


@dataclass(frozen=True)
class ShardPlan:
    """What to do with the shard Leases in one period."""

    share: int                      # fair share: the most shards to hold
    take: tuple[int, ...] = ()      # free or expired shards to acquire
    renew: tuple[int, ...] = ()     # held shards to keep
    release: tuple[int, ...] = ()   # held shards to give up (above the share)
    drop: tuple[int, ...] = ()      # held shards whose record names another valid holder: lost
