"""Shard Lease names and the members Lease's heartbeats: the pure helpers of runtime/shards.py.

"<lease_name>-shard-<i>" is the lock of shard i; "<lease_name>-members" carries one annotation per
member (member_key(identity) -> a counter the member bumps every retry_period). A member is judged
alive only on the observer's own monotonic clock: its counter changed less than lease_duration ago.
No I/O here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

SHARD_LEASE_INFIX = "-shard-"
MEMBERS_LEASE_SUFFIX = "-members"
MEMBER_ANNOTATION_PREFIX = "members.sampledb.io/"
_KEY_NAME_MAX = 63               # the name part of an annotation key
_KEY_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def shard_lease_name(lease_name: str, shard: int) -> str:
    """The Lease that is the lock of one shard: "<lease_name>-shard-<i>"."""
    return f"{lease_name}{SHARD_LEASE_INFIX}{shard}"


def members_lease_name(lease_name: str) -> str:
    """The Lease whose annotations are the members' heartbeats: "<lease_name>-members"."""
    return f"{lease_name}{MEMBERS_LEASE_SUFFIX}"


# -- membership (pure helpers) ---------------------------------------------------------------


def member_key(identity: str) -> str:
    """The annotation key of a member: the prefix + its identity when that is a valid key name, else a
    readable part of it + a hash (annotation key names are at most 63 characters of [-A-Za-z0-9_.])."""
    if len(identity) <= _KEY_NAME_MAX and _KEY_NAME_RE.match(identity):
        return MEMBER_ANNOTATION_PREFIX + identity
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    readable = re.sub(r"[^-A-Za-z0-9_.]+", "-", identity)[: _KEY_NAME_MAX - 17].strip("-_.")
    return MEMBER_ANNOTATION_PREFIX + (f"{readable}-{digest}" if readable else digest)


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


