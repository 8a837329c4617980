"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's leaderelection semantics.

Invariants: a candidate takes a Lease held by another only when the holder has not changed the
record for leaseDurationSeconds, measured on the candidate's own monotonic clock from the moment
it last saw the record change (wall-clock renewTime is written, never trusted: no clock skew).
Every write is a create or a PUT carrying the resourceVersion read (optimistic concurrency), so
of two simultaneous takeovers exactly one wins. A leader that cannot renew within renew_deadline
(or sees another holder) stops being leader; since lease_duration > renew_deadline it stops
before anyone may take over. release() empties holderIdentity so a standby takes over at once,
re-reading the Lease after a conflict (our last record may be stale) and never overwriting a Lease
that names another holder.
acquire(), hold() and release() are called one at a time by one owner (the manager).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Awaitable
from typing import Any, TypeVar

import structlog

from sampledb_operator.kube.errors import Conflict, KubeError, NotFound
from sampledb_operator.observability import metrics
from sampledb_operator.runtime import lease as lease_records
from sampledb_operator.runtime.clock import Clock, within
from sampledb_operator.runtime.lease import JITTER_FACTOR, LeaseApi

log = structlog.stdlib.get_logger(__name__)
T = TypeVar("T")


class _Attempt(enum.Enum):
    HELD = "held"            # we hold the lease now (acquired or renewed)
    OTHER = "other"          # another holder's lease is still valid
    FAILED = "failed"        # an API error, a conflict or a timeout: try again later


class LeaderElector:
    """One candidate for one Lease."""

    def __init__(
        self,
        api: LeaseApi,
        *,
        name: str,
        namespace: str,
        identity: str,
        clock: Clock,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        rng: random.Random | None = None,
    ) -> None:
        if not lease_duration > renew_deadline > JITTER_FACTOR * retry_period or retry_period < 1:
            raise ValueError("need lease_duration > renew_deadline > 1.2 * retry_period, retry_period >= 1")
        if not identity:
            raise ValueError("identity must not be empty")
        self._api = api
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self._clock = clock
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._rng = rng or random.Random()
        self._leading = False
        self._lease: dict[str, Any] | None = None      # the last Lease object read or written
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0                          # our monotonic time when the spec last changed
        self._log = log.bind(lease=f"{namespace}/{name}", identity=identity)
        metrics.leader_election_master_status.labels(name=name).set(0)

    @property
    def is_leader(self) -> bool:
        """True from a successful acquire() until leadership is lost or released."""
        return self._leading

    @property
    def observed_holder(self) -> str:
        """holderIdentity of the last Lease record seen ("" when none or released)."""
        return str((self._observed_spec or {}).get("holderIdentity") or "")

    async def acquire(self) -> None:
        """Return once this process holds the lease; retry every retry_period (jittered)."""
        self._log.info("waiting for leadership")
        while True:
            if await self._attempt() is _Attempt.HELD:
                self._set_leading(True)
                self._log.info("became leader", transitions=self._spec().get("leaseTransitions", 0))
                return
            await self._clock.sleep(self._retry_period * (1.0 + self._rng.random() * JITTER_FACTOR))

    async def hold(self) -> None:
        """Renew every retry_period; return when leadership is lost.

        Lost means: a renewal cycle did not succeed within renew_deadline, or another holder
        appeared. On return is_leader is False; the caller must stop leading work at once.
        """
        if not self._leading:
            return
        while True:
            await self._clock.sleep(self._retry_period)
            outcome = await self._renew_until(self._clock.monotonic() + self._renew_deadline)
            if outcome is not _Attempt.HELD:
                self._set_leading(False)
                reason = ("lease held by " + self.observed_holder) if outcome is _Attempt.OTHER \
                    else "renew deadline exceeded"
                self._log.error("lost leadership", reason=reason)
                return

    async def release(self) -> None:
        """Give the lease up (holder "", duration 1 s) so a standby takes over at once; best effort.

        The record we hold may be stale: a renewal cancelled in flight (hold() is cancelled on
        shutdown) can have been applied by the server without our seeing the answer. So a conflict
        is not the end: the Lease is read again and released if it still names us.
        """
        if not self._leading or self._lease is None:
            return
        self._set_leading(False)
        try:
            released = await self._within(self._write_release(self._lease), self._renew_deadline)
        except KubeError as err:
            self._log.warning("could not release lease", error=str(err))
            return
        if released is None:
            self._log.warning("could not release lease", error="timed out")
            return
        if not released:
            self._log.info("lease changed before release; nothing to release", holder=self.observed_holder)
            return
        self._log.info("released leadership")

    async def _write_release(self, lease: dict[str, Any]) -> bool:
        """The released record over `lease` (runtime/lease.write_release); False when it names another holder."""
        return await lease_records.write_release(self._api, lease, name=self.name, namespace=self.namespace,
                                                 identity=self.identity, now=self._clock.now, observe=self._observe)

    # -- one attempt -------------------------------------------------------------------------

    async def _renew_until(self, deadline: float) -> _Attempt:
        while True:
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return _Attempt.FAILED
            outcome = await self._attempt(remaining)
            if outcome is not _Attempt.FAILED:
                return outcome
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return _Attempt.FAILED
            await self._clock.sleep(min(self._retry_period, remaining))

    async def _attempt(self, limit: float | None = None) -> _Attempt:
        """One try-acquire-or-renew, bounded by `limit` seconds (default renew_deadline) of our clock."""
        try:
            outcome = await self._within(self._try_acquire_or_renew(), limit or self._renew_deadline)
        except KubeError as err:
            self._log.debug("lease attempt failed", error=str(err))
            return _Attempt.FAILED
        if outcome is None:
            self._log.debug("lease attempt timed out")
            return _Attempt.FAILED
        return outcome

    async def _try_acquire_or_renew(self) -> _Attempt:
        if self._leading and self._lease is not None and self._observed_valid():
            try:   # fast path as client-go: renew from the record we wrote, no read
                self._observe(await self._api.replace(self._next_lease(self._lease)))
                return _Attempt.HELD
            except Conflict:
                pass   # someone else wrote it: read it and decide
        try:
            lease = await self._api.get(self.name, self.namespace)
        except NotFound:
            self._observe(await self._api.create(self._new_lease(), self.namespace))
            return _Attempt.HELD
        self._observe(lease)
        holder = self.observed_holder
        if holder and holder != self.identity and self._observed_valid():
            return _Attempt.OTHER
        try:
            self._observe(await self._api.replace(self._next_lease(lease)))
        except Conflict:
            return _Attempt.FAILED
        return _Attempt.HELD

    # -- records -----------------------------------------------------------------------------

    def _new_lease(self) -> dict[str, Any]:
        return lease_records.new_record(self.name, self.namespace, self.identity, self._lease_duration,
                                        self._clock.now())

    def _next_lease(self, current: dict[str, Any]) -> dict[str, Any]:
        return lease_records.renewed(current, self.identity, self._lease_duration, self._clock.now())

    def _observe(self, lease: dict[str, Any]) -> None:
        """Remember the record; restart our expiry clock when its spec changed."""
        spec = dict(lease.get("spec") or {})
        if spec != self._observed_spec:
            previous = self.observed_holder
            self._observed_spec = spec
            self._observed_at = self._clock.monotonic()
            if self.observed_holder != previous and self.observed_holder not in ("", self.identity):
                self._log.info("new leader observed", holder=self.observed_holder)
        self._lease = lease

    def _observed_valid(self) -> bool:
        duration = (self._observed_spec or {}).get("leaseDurationSeconds") or self._lease_duration
        return self._observed_at + float(duration) > self._clock.monotonic()

    def _spec(self) -> dict[str, Any]:
        return dict((self._lease or {}).get("spec") or {})

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        metrics.leader_election_master_status.labels(name=self.name).set(1 if leading else 0)

    async def _within(self, awaitable: Awaitable[T], seconds: float) -> T | None:
        return await within(self._clock, awaitable, seconds)
