"""The shard Leases' records and their reads and writes, for runtime/shards.ShardOwner.

`Shard` is what one member knows of one shard: its state for us and the record last read or written.
`ShardLeases` reads, takes or renews, and releases them: every call bounded (reads by retry_period, writes by
renew_deadline), never raising for an API error (a failed try is tried again next period).

Invariants (as runtime/leader.py):
- a record is judged only on our own monotonic clock from the moment we saw its spec change (observed_at),
  never by its wall-clock times;
- every write is a create or a PUT with the resourceVersion read, so of two members taking one shard exactly
  one wins; after a conflict the record is read again and another holder's still valid record wins (OTHER);
- renewed_at is when our last successful write was sent (not answered): the owner's renew deadline counts
  from it, so a slow answer can only make it stop admitting sooner.
"""

from __future__ import annotations

import asyncio
import enum
import math
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from sampledb_operator.kube.errors import Conflict, KubeError, NotFound
from sampledb_operator.observability import metrics
from sampledb_operator.runtime import lease as lease_records
from sampledb_operator.runtime.clock import Clock, within
from sampledb_operator.runtime.lease import LeaseApi

T = TypeVar("T")


class State(enum.Enum):
    FREE = "free"             # not ours (as far as we act)
    HELD = "held"             # ours and admitted while renewed in time
    RELEASING = "releasing"   # ours, no longer admitted, renewed until its in-flight keys are done


class Attempt(enum.Enum):
    HELD = "held"
    OTHER = "other"           # another holder's record is still valid
    FAILED = "failed"         # an API error, a conflict or a timeout: try again next period


@dataclass
class Shard:
    """One shard as this member knows it."""

    index: int
    name: str
    state: State = State.FREE
    lease: dict[str, Any] | None = None        # the last record read or written (None: no Lease)
    known: bool = False                         # lease is this period's read (or our own write)
    observed_spec: dict[str, Any] | None = None
    observed_at: float = 0.0                    # our monotonic time when the spec last changed
    renewed_at: float = -math.inf               # when our last successful write of it was sent
    read_at: float = -math.inf                  # when we last read it while not holding it
    releasing_since: float = 0.0
    missed: bool = False                        # a key was refused while we still held it

    @property
    def holder(self) -> str:
        return str((self.observed_spec or {}).get("holderIdentity") or "")


class ShardLeases:
    """Reads and writes of the shard Leases in one namespace, as `identity`."""

    def __init__(self, api: LeaseApi, *, namespace: str, identity: str, clock: Clock, lease_duration: float,
                 renew_deadline: float, retry_period: float, log: structlog.stdlib.BoundLogger) -> None:
        self._api = api
        self._namespace = namespace
        self._identity = identity
        self._clock = clock
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._log = log

    async def names_us(self, s: Shard) -> bool:
        """The shard's Lease names us now (a read bounded by retry_period; a failed one: no)."""
        try:
            lease = await self._within(self._api.get(s.name, self._namespace), self._retry_period)
        except KubeError:
            return False
        return lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self._identity

    async def read(self, s: Shard) -> None:
        """Read the record into `s` (known, read_at); a failed read leaves `s` as it was."""
        sent = self._clock.monotonic()
        try:
            lease = await self._within(self._api.get(s.name, self._namespace), self._retry_period)
        except NotFound:
            s.lease, s.known, s.read_at = None, True, sent
            self.observe(s, {})
            return
        except KubeError as err:
            self._log.debug("shard lease read failed", shard=s.index, error=str(err))
            return
        if lease is not None:
            self.observe(s, lease)
            s.known, s.read_at = True, sent

    async def hold(self, s: Shard) -> Attempt:
        """Take or renew `s` (bounded by renew_deadline)."""
        try:
            outcome = await self._within(self._hold(s), self._renew_deadline)
        except KubeError as err:
            self._log.debug("shard lease write failed", shard=s.index, error=str(err))
            return Attempt.FAILED
        return Attempt.FAILED if outcome is None else outcome

    async def _hold(self, s: Shard) -> Attempt:
        """Acquire or renew from the record we have; after a conflict read it again and decide."""
        if s.lease is None:
            sent = self._clock.monotonic()
            try:
                written = await self._api.create(self._new_lease(s), self._namespace)
            except Conflict:
                return Attempt.FAILED       # another member created it first: read it next period
            return self._held(s, written, sent)
        sent = self._clock.monotonic()
        try:
            return self._held(s, await self._api.replace(self._next_lease(s.lease)), sent)
        except (Conflict, NotFound):
            pass
        try:
            lease = await self._api.get(s.name, self._namespace)
        except NotFound:
            s.lease = None
            return Attempt.FAILED
        self.observe(s, lease)
        if s.holder not in ("", self._identity) and not self._expired(s):
            return Attempt.OTHER
        sent = self._clock.monotonic()
        try:
            return self._held(s, await self._api.replace(self._next_lease(lease)), sent)
        except (Conflict, NotFound):
            return Attempt.FAILED

    def _held(self, s: Shard, written: dict[str, Any], sent: float) -> Attempt:
        self.observe(s, written)
        s.renewed_at = sent
        return Attempt.HELD

    async def release(self, s: Shard) -> None:
        """Empty holderIdentity (duration 1 s) so another member takes the shard at once; best effort."""
        if s.lease is None:
            return
        try:
            released = await self._within(self._write_release(s), self._renew_deadline)
        except KubeError as err:
            self._log.warning("could not release shard", shard=s.index, error=str(err))
            return
        if released is None:
            self._log.warning("could not release shard", shard=s.index, error="timed out")
        elif released:
            metrics.shard_transitions_total.labels(event="released").inc()
            self._log.info("released shard", shard=s.index, lease=s.name)

    async def _write_release(self, s: Shard) -> bool:
        """As leader.py's release (runtime/lease.write_release): retried while the Lease names us."""
        assert s.lease is not None
        return await lease_records.write_release(self._api, s.lease, name=s.name, namespace=self._namespace,
                                                 identity=self._identity, now=self._clock.now,
                                                 observe=lambda lease: self.observe(s, lease))

    def observe(self, s: Shard, lease: dict[str, Any]) -> None:
        """Remember the record; restart its expiry clock when its spec changed."""
        spec = dict(lease.get("spec") or {})
        if spec != s.observed_spec:
            s.observed_spec = spec
            s.observed_at = self._clock.monotonic()
        s.lease = lease or None

    def _expired(self, s: Shard) -> bool:
        duration = (s.observed_spec or {}).get("leaseDurationSeconds") or self._lease_duration
        return self._clock.monotonic() - s.observed_at >= float(duration)

    def _new_lease(self, s: Shard) -> dict[str, Any]:
        return lease_records.new_record(s.name, self._namespace, self._identity, self._lease_duration,
                                        self._clock.now())

    def _next_lease(self, current: dict[str, Any]) -> dict[str, Any]:
        return lease_records.renewed(current, self._identity, self._lease_duration, self._clock.now())

    async def _within(self, awaitable: Awaitable[T], seconds: float) -> T | None:
        return await within(self._clock, awaitable, seconds)


async def all_naming_us(leases: ShardLeases, shards: list[Shard]) -> frozenset[int]:
    """The indexes of `shards` whose Lease names us now (read together)."""
    found = await asyncio.gather(*(leases.names_us(s) for s in shards))
    return frozenset(s.index for s, ours in zip(shards, found, strict=True) if ours)
