"""coordination.k8s.io/v1 Lease records as client-go's leaderelection writes them, for every lock the
operator holds (runtime/leader.py: the leader Lease; runtime/shards.py: one Lease per shard).

A record names its holder, leaseDurationSeconds, acquireTime, renewTime (metav1.MicroTime) and
leaseTransitions; acquireTime and leaseTransitions carry over while the holder stays the same. A released
record has an empty holder and a 1 s duration, so a waiting candidate takes it at once. Writers PUT
with the resourceVersion they read (optimistic concurrency); wall-clock times are written, never trusted.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from sampledb_operator.kube.errors import Conflict

JITTER_FACTOR = 1.2   # client-go: acquire retries wait retry_period * [1, 2.2)
RELEASE_ATTEMPTS = 3


class LeaseApi(Protocol):
    """The verbs of kube.api.ResourceApi (for LEASE) that the lock holders use."""

    async def get(self, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]: ...

    async def replace(self, obj: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]: ...


def micro_time(moment: datetime) -> str:
    """metav1.MicroTime text: "2026-01-02T03:04:05.123456Z"."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def duration_seconds(lease_duration: float) -> int:
    """leaseDurationSeconds for a duration in seconds (a whole number, at least 1)."""
    return max(1, math.ceil(lease_duration))


def new_record(name: str, namespace: str, identity: str, lease_duration: float, now: datetime) -> dict[str, Any]:
    """A new Lease held by `identity`."""
    at = micro_time(now)
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": identity, "leaseDurationSeconds": duration_seconds(lease_duration),
                 "acquireTime": at, "renewTime": at, "leaseTransitions": 0},
    }


def renewed(current: dict[str, Any], identity: str, lease_duration: float, now: datetime) -> dict[str, Any]:
    """`current` (its resourceVersion kept) with `identity` as holder and a fresh renewTime."""
    old = current.get("spec") or {}
    at = micro_time(now)
    ours = old.get("holderIdentity") == identity
    lease = copy.deepcopy(current)
    lease["spec"] = {
        "holderIdentity": identity,
        "leaseDurationSeconds": duration_seconds(lease_duration),
        "acquireTime": (old.get("acquireTime") or at) if ours else at,
        "renewTime": at,
        "leaseTransitions": int(old.get("leaseTransitions") or 0) + (0 if ours else 1),
    }
    return lease


async def write_release(api: LeaseApi, lease: dict[str, Any], *, name: str, namespace: str, identity: str,
                        now: Callable[[], datetime], observe: Callable[[dict[str, Any]], None]) -> bool:
    """Write the released record over `lease`; on a conflict re-read and retry while it names `identity`.

    False when the Lease names another holder (or none): it is left alone. Every record read or written
    is passed to `observe`. Conflict after RELEASE_ATTEMPTS attempts."""
    for _ in range(RELEASE_ATTEMPTS):
        at = micro_time(now())
        released = copy.deepcopy(lease)
        released["spec"] = {"holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": at, "renewTime": at,
                            "leaseTransitions": (lease.get("spec") or {}).get("leaseTransitions", 0)}
        try:
            written = await api.replace(released)
        except Conflict:
            lease = await api.get(name, namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != identity:
                observe(lease)
                return False
            continue
        observe(written)
        return True
    raise Conflict(409, "Conflict", f"lease kept changing during {RELEASE_ATTEMPTS} release attempts")
