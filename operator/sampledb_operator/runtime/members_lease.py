"""The members Lease's I/O for runtime/shards.py: our heartbeat, our leaving, who is alive.

"<lease_name>-members" carries one annotation per member (shard_members.member_key(identity) -> a
counter the member bumps on every heartbeat). The pure rules (the key, what a heartbeat writes, who is
alive) are in runtime/shard_members.py; this module only reads and writes the Lease.

Invariants:
- Every write is a GET then a PUT with the resourceVersion read (or a create when there is no Lease), so
  two members' heartbeats never overwrite each other's annotation: a conflict is re-read and retried
  (HEARTBEAT_ATTEMPTS tries), each try bounded by a time limit.
- A failure is reported (logged) and returned as False, never raised: the owner tries again later.
- A member's liveness is judged on our own monotonic clock from when we saw its counter change (as
  leader.py judges a record), never by wall-clock times written by others.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from sampledb_operator.kube.errors import Conflict, KubeError, NotFound
from sampledb_operator.runtime.clock import Clock, within
from sampledb_operator.runtime.lease import LeaseApi
from sampledb_operator.runtime.shard_members import (
    MemberSeen,
    heartbeat_annotations,
    live_members,
    member_key,
    observe_members,
    without_member,
)

HEARTBEAT_ATTEMPTS = 3           # a write that conflicts is re-read and retried this often


class MembersLease:
    """Our member annotation on the members Lease, and what we saw of the others'."""

    def __init__(self, api: LeaseApi, *, name: str, namespace: str, identity: str, clock: Clock,
                 lease_duration: float, log: structlog.stdlib.BoundLogger) -> None:
        self._api = api
        self.name = name
        self.namespace = namespace
        self.me = member_key(identity)
        self._clock = clock
        self._lease_duration = lease_duration
        self._log = log
        self._counter = 0
        self._seen: dict[str, MemberSeen] = {}

    @property
    def members(self) -> int:
        """Live members we see, us included."""
        return len(live_members(self._seen, self._clock.monotonic(), self._lease_duration) | {self.me})

    async def heartbeat(self, limit: float) -> bool:
        """Bump our counter (and drop dead members), each try bounded by `limit`; whether it was written."""
        self._counter += 1
        return await self._write(self._write_heartbeat, limit, "heartbeat failed", self._log.debug)

    async def leave(self, limit: float) -> None:
        """Remove our annotation (best effort, bounded), so the others rebalance at once."""
        await self._write(self._write_leave, limit, "could not leave the members lease", self._log.warning)

    async def _write(self, write: Callable[[], Awaitable[bool]], limit: float, failed: str,
                     report: Callable[..., Any]) -> bool:
        for _ in range(HEARTBEAT_ATTEMPTS):
            try:
                done = await within(self._clock, write(), limit)
            except Conflict:
                continue
            except KubeError as err:
                report(failed, error=str(err))
                return False
            if done is None:
                report(failed, error="timed out")
                return False
            return True
        report(failed, error=f"conflicts on {HEARTBEAT_ATTEMPTS} attempts")
        return False

    async def _write_heartbeat(self) -> bool:
        try:
            lease = await self._api.get(self.name, self.namespace)
        except NotFound:
            self._observe(await self._api.create(self._new_lease(), self.namespace))
            return True
        self._observe(lease)
        updated = copy.deepcopy(lease)
        metadata = updated.setdefault("metadata", {})
        metadata["annotations"] = heartbeat_annotations(
            metadata.get("annotations") or {}, self.me, self._counter, self._seen,
            now=self._clock.monotonic(), lease_duration=self._lease_duration)
        self._observe(await self._api.replace(updated))
        return True

    async def _write_leave(self) -> bool:
        try:
            lease = await self._api.get(self.name, self.namespace)
        except NotFound:
            return True
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        if self.me not in annotations:
            return True
        updated = copy.deepcopy(lease)
        updated["metadata"]["annotations"] = without_member(annotations, self.me)
        await self._api.replace(updated)
        return True

    def _observe(self, lease: dict[str, Any]) -> None:
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        self._seen = observe_members(self._seen, annotations, self._clock.monotonic())

    def _new_lease(self) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "annotations": {self.me: str(self._counter)}},
            "spec": {},
        }
