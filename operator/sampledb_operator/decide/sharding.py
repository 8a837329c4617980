"""Sharding of SampleDBs across operator replicas: the shard of a key, membership, and the rebalancing decision.

Pure (no I/O, no clock: times are passed in as seconds of the observer's monotonic clock).

Invariants:
- shard_of is stable across processes, Python versions and hash seeds: sha256 of "namespace/name", the
  first 8 bytes big-endian, mod shards (never Python's hash(), which is salted per process).
- A member is live while its heartbeat counter (an annotation of the members Lease) has changed within
  lease_duration of the observer's own clock (first sight counts as a change); a dead member's
  annotation is dropped by the next heartbeat written.
- plan_shards, for one member's view: every held shard is in exactly one of renew, release or drop; take
  is disjoint from held; renew + take never exceed the fair share ceil(shards / members); a shard is
  taken only when its record is known and free (no holder, or released), names us, or has not changed
  for its leaseDurationSeconds (expired): a valid lease of another holder is never taken. A held shard
  whose record names another valid holder is dropped (lost). Exclusivity between members comes from
  the Lease writes (PUT with resourceVersion); this function only never asks for a valid foreign lease.
- Which shards a member keeps, releases or takes is decided by a per-member rendezvous ranking (sha256
  of "identity/shard"), so concurrent members mostly want different shards and the choice is stable.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SHARD_LEASE_INFIX = "-shard-"
MEMBERS_LEASE_SUFFIX = "-members"
MEMBER_ANNOTATION_PREFIX = "members.sampledb.io/"
_NAME_MAX = 63                       # the name part of an annotation key
_KEY_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def shard_of(namespace: str, name: str, shards: int) -> int:
    """The shard (0 .. shards-1) of the object namespace/name."""
    if shards < 1:
        raise ValueError("shards must be >= 1")
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def shard_lease_name(lease_name: str, shard: int) -> str:
    """The Lease that is the lock of one shard: "<lease_name>-shard-<i>"."""
    return f"{lease_name}{SHARD_LEASE_INFIX}{shard}"


def members_lease_name(lease_name: str) -> str:
    """The Lease whose annotations are the members' heartbeats: "<lease_name>-members"."""
    return f"{lease_name}{MEMBERS_LEASE_SUFFIX}"


def fair_share(shards: int, members: int) -> int:
    """The most shards one member may hold: ceil(shards / members) (members counted at least 1)."""
    return math.ceil(shards / max(1, members))


def member_key(identity: str) -> str:
    """The annotation key of a member: the prefix + its identity when that is a valid key name, else a
    readable part of it + a hash (annotation key names are at most 63 characters of [-A-Za-z0-9_.])."""
    if len(identity) <= _NAME_MAX and _KEY_NAME_RE.match(identity):
        return MEMBER_ANNOTATION_PREFIX + identity
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    readable = re.sub(r"[^-A-Za-z0-9_.]+", "-", identity)[: _NAME_MAX - 17].strip("-_.")
    return MEMBER_ANNOTATION_PREFIX + (f"{readable}-{digest}" if readable else digest)


# -- membership ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemberSeen:
    """What an observer last saw of one member's heartbeat."""

    counter: str     # the annotation's value
    since: float     # observer's monotonic time when the value last changed (or was first seen)


def observe_members(seen: Mapping[str, MemberSeen], annotations: Mapping[str, str],
                    now: float) -> dict[str, MemberSeen]:
    """The members' heartbeats as of `annotations` (read at `now`): a changed or new counter restarts its
    clock; members no longer annotated are forgotten; other annotations are ignored."""
    out: dict[str, MemberSeen] = {}
    for key, value in annotations.items():
        if not key.startswith(MEMBER_ANNOTATION_PREFIX):
            continue
        before = seen.get(key)
        out[key] = before if before is not None and before.counter == value else MemberSeen(value, now)
    return out


def live_members(seen: Mapping[str, MemberSeen], now: float, lease_duration: float) -> frozenset[str]:
    """The member keys whose counter changed less than lease_duration ago."""
    return frozenset(key for key, m in seen.items() if now - m.since < lease_duration)


def heartbeat_annotations(annotations: Mapping[str, str], me: str, counter: int, seen: Mapping[str, MemberSeen],
                          *, now: float, lease_duration: float) -> dict[str, str]:
    """The members Lease's annotations to write: ours set to `counter`, dead members removed, the rest kept.

    A member annotated but not in `seen` (not observed yet) is kept: it is not known to be dead.
    """
    live = live_members(seen, now, lease_duration)
    out = {key: value for key, value in annotations.items()
           if not key.startswith(MEMBER_ANNOTATION_PREFIX) or key in live or key not in seen}
    out[me] = str(counter)
    return out


def without_member(annotations: Mapping[str, str], me: str) -> dict[str, str]:
    """The annotations with our heartbeat removed (a clean shutdown: the others rebalance at once)."""
    return {key: value for key, value in annotations.items() if key != me}


# -- shards ----------------------------------------------------------------------------------


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
    records: Mapping[int, ShardRecord]      # a shard absent here is unknown (could not be read): not taken
    held: frozenset[int]                    # shards we hold (admitted, or still renewed while releasing)


@dataclass(frozen=True)
class ShardPlan:
    """What to do with the shard Leases in one period."""

    share: int                      # fair share: the most shards to hold
    take: tuple[int, ...] = ()      # free or expired shards to acquire
    renew: tuple[int, ...] = ()     # held shards to keep
    release: tuple[int, ...] = ()   # held shards to give up (above the share)
    drop: tuple[int, ...] = ()      # held shards whose record names another valid holder: lost


def rank(identity: str, shard: int) -> bytes:
    """The rendezvous rank of a shard for a member: lower is preferred."""
    return hashlib.sha256(f"{identity}/{shard}".encode()).digest()


def _by_rank(identity: str, shards: Iterable[int]) -> list[int]:
    return sorted(shards, key=lambda s: rank(identity, s))


def available(record: ShardRecord, me: str) -> bool:
    """A shard we may try to acquire: free, released, ours, or expired."""
    return record.holder in ("", me) or record.expired


def plan_shards(view: ShardView) -> ShardPlan:
    """Which shards to take, renew, release or drop, keeping at most the fair share."""
    share = fair_share(view.shards, view.members)
    held = {s for s in view.held if 0 <= s < view.shards}
    drop = sorted(s for s in held if (r := view.records.get(s)) is not None and not available(r, view.me))
    keep = _by_rank(view.me, held - set(drop))
    renew, release = keep[:share], keep[share:]
    room = share - len(renew)
    candidates = [s for s in range(view.shards)
                  if s not in held and (r := view.records.get(s)) is not None and available(r, view.me)]
    # our own records first (a restart with the same identity), then by our ranking
    candidates.sort(key=lambda s: (view.records[s].holder != view.me, rank(view.me, s)))
    take = candidates[:max(0, room)]
    return ShardPlan(share=share, take=tuple(sorted(take)), renew=tuple(sorted(renew)),
                     release=tuple(sorted(release)), drop=tuple(drop))
