"""Shard ownership on coordination.k8s.io/v1 Leases: several replicas each reconcile a fair share of the keys.

The Leases, all in the lease namespace (RBAC: leases get, create, update; no list):
- "<lease_name>-shard-<i>", i in 0 .. shards-1: the lock of shard i, a record as leader.py writes it
  (holderIdentity, leaseDurationSeconds, acquireTime, renewTime, leaseTransitions).
- "<lease_name>-members": its annotations map each member (member_key(identity)) to a counter the
  member bumps on every heartbeat; who is alive, hence the fair share, is read from it. Its reads and
  writes are runtime/members_lease.py's, its pure rules runtime/shard_members.py's; the shard Leases'
  reads and writes runtime/shard_lease.py's (this module decides when each is made).

Invariants:
- As leader.py: a record (a shard's, or a member's counter) is judged only on our own monotonic clock
  from the moment we saw it change, never by its wall-clock times; every write is a create or a PUT
  with the resourceVersion read, so of two members taking one shard exactly one wins.
- owns(shard) is true only while the shard is held (not being released) and our last successful write
  of its Lease was sent less than renew_deadline ago. A shard whose renewal is late stops being
  admitted at once, by time, even while the loop still waits on the API; since renew_deadline <
  lease_duration it stops before another member may take it. A member is dead (removed from the
  members Lease by the next heartbeat) once its counter has not changed for lease_duration.
- Every period (retry_period): heartbeat and read the shard Leases we do not hold, when due (below;
  together, each bounded by retry_period, so a hanging read cannot delay the renewals much); ask the
  planner (decide.sharding.plan_shards) which shards to take, renew, release or drop; drop lost shards;
  stop admitting a shard to release, keep renewing it until none of its keys is in flight (`busy`) or
  release_wait has passed, then empty its holderIdentity; renew the held ones when due; take free or
  expired ones, except in the very first period (the others' heartbeats are seen first, so a starting
  member does not grab every shard only to give most back), which takes only the shards whose record
  already names us (a restart with the same identity: no other member takes them before they expire,
  so a restarted replica has its shards back a period sooner; the plan still bounds them by the share).
- Due: at rest a held shard is renewed, the heartbeat sent and an unheld shard read only once its last
  success is quiet_interval() old (4 s with the default timings; a period is 2 s), so a failed try is
  repeated every period. A member below its fair share heartbeats and reads every unheld shard every
  period (its count of members is fresh before it takes); takes and releases are never deferred.
  quiet_interval leaves at least three periods' tries before renew_deadline and is at most a third of
  lease_duration, so what the others judge (our counter, our shards' records) changes several times per
  lease_duration; a record read up to quiet_interval late is judged expired later, never sooner.
- on_acquired(shard) is called whenever a shard becomes admitted (acquired, kept after all while being
  released, or renewed again after a key was refused during a late renewal), so its keys are enqueued.
- on_held(shards) is called at the end of every period (and by stop()) with the shards held, admitted
  or being released: what a replica's shard-filtered caches must hold (runtime/shard_caches.py).
- stop() (after the controllers stopped) admits nothing more, releases every shard Lease naming us
  (best effort, as leader.py's release) and removes our member annotation, so the others rebalance
  at once. run() and stop() are called one at a time by one owner (the manager).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import structlog

from sampledb_operator.model.sharding import ShardPlan, ShardRecord, ShardView
from sampledb_operator.observability import metrics
from sampledb_operator.runtime.clock import Clock, sleep_until
from sampledb_operator.runtime.lease import JITTER_FACTOR, LeaseApi
from sampledb_operator.runtime.members_lease import MembersLease
from sampledb_operator.runtime.shard_lease import Attempt, Shard, ShardLeases, State, all_naming_us
from sampledb_operator.runtime.shard_members import members_lease_name, shard_lease_name

log = structlog.stdlib.get_logger(__name__)

Planner = Callable[[ShardView], ShardPlan]
RELEASE_WAIT = 10.0              # seconds a shard being released waits for its in-flight keys


# -- the owner -------------------------------------------------------------------------------


def quiet_interval(lease_duration: float, renew_deadline: float, retry_period: float) -> float:
    """Seconds between two renewals of a held shard (and two heartbeats, two reads of the unheld shards)
    at rest: at most half of renew_deadline and early enough for three more periods' tries before it,
    never less than one period. 4 s for the defaults 15 / 10 / 2."""
    return max(retry_period, min(renew_deadline / 2, renew_deadline - 3 * retry_period, lease_duration / 3))


class ShardOwner:
    """One member of a sharded operator: holds a fair share of the shard Leases."""

    def __init__(
        self,
        api: LeaseApi,
        *,
        lease_name: str,
        namespace: str,
        identity: str,
        shards: int,
        clock: Clock,
        planner: Planner,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_wait: float = RELEASE_WAIT,
        on_acquired: Callable[[int], None] | None = None,
        busy: Callable[[int], bool] | None = None,
        on_held: Callable[[frozenset[int]], None] | None = None,
    ) -> None:
        if not lease_duration > renew_deadline > JITTER_FACTOR * retry_period or retry_period < 1:
            raise ValueError("need lease_duration > renew_deadline > 1.2 * retry_period, retry_period >= 1")
        if not identity:
            raise ValueError("identity must not be empty")
        if shards < 1:
            raise ValueError("shards must be >= 1")
        self.namespace = namespace
        self.identity = identity
        self.shards = shards
        self._clock = clock
        self._planner = planner
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._release_wait = release_wait
        self._on_acquired = on_acquired
        self._busy = busy
        self._on_held = on_held
        self._shards = [Shard(i, shard_lease_name(lease_name, i)) for i in range(shards)]
        self._log = log.bind(lease_namespace=namespace, identity=identity)
        self._leases = ShardLeases(api, namespace=namespace, identity=identity, clock=clock,
                                   lease_duration=lease_duration, renew_deadline=renew_deadline,
                                   retry_period=retry_period, log=self._log)
        self._members = MembersLease(api, name=members_lease_name(lease_name), namespace=namespace,
                                     identity=identity, clock=clock, lease_duration=lease_duration, log=self._log)
        self.members_lease = self._members.name
        self._share = shards
        self._quiet = quiet_interval(lease_duration, renew_deadline, retry_period)
        self._heartbeat_at = -math.inf      # when our last successful heartbeat was sent
        metrics.init_shards(shards)

    # -- what the controllers and the metrics ask ---------------------------------------------

    def owns(self, shard: int) -> bool:
        """Keys of `shard` may be reconciled now (see the module's invariants)."""
        s = self._shards[shard]
        return s.state is State.HELD and self._clock.monotonic() - s.renewed_at < self._renew_deadline

    def admits(self, shard: int) -> bool:
        """owns(shard), for a key about to be reconciled: a key refused while the shard is still ours
        (a late renewal) is remembered, and the shard's keys are enqueued again once it is renewed."""
        if self.owns(shard):
            return True
        s = self._shards[shard]
        if s.state is State.HELD:
            s.missed = True
        return False

    def holds(self, shard: int) -> bool:
        """`shard` is held here (admitted, late in its renewal, or being released): its keys may be queued, and
        admits() decides as each comes up. A shard not held has its keys enqueued when it is taken."""
        return self._shards[shard].state is not State.FREE

    @property
    def owned(self) -> frozenset[int]:
        return frozenset(s.index for s in self._shards if self.owns(s.index))

    @property
    def held(self) -> frozenset[int]:
        """The shards we hold: admitted, late in their renewal, or being released."""
        return frozenset(s.index for s in self._shards if s.state is not State.FREE)

    @property
    def members(self) -> int:
        """Live members we see, us included."""
        return self._members.members

    @property
    def share(self) -> int:
        """The fair share computed in the last period."""
        return self._share

    async def named(self) -> frozenset[int]:
        """The shards whose Lease names us now (reads only, each bounded by retry_period; one that fails
        counts as not naming us): what a restart with the same identity takes back in its first period
        (sharded.py's filtered caches start listing them at once)."""

        return await all_naming_us(self._leases, self._shards)

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Heartbeat and rebalance every retry_period until cancelled."""
        self._log.info("shard owner starting", shards=self.shards, members_lease=self.members_lease)
        first = True
        while True:
            started = self._clock.monotonic()
            await self.period(take=not first)
            first = False
            await sleep_until(self._clock, started + self._retry_period)

    async def period(self, *, take: bool = True) -> ShardPlan:
        """One heartbeat-and-rebalance pass (public for tests); the plan it followed. With take=False (the
        first period) only the planned shards whose record names us are taken."""
        self._expire()
        for s in self._shards:
            if s.state is State.FREE:
                s.known = False
        wanted = self._planner(self._view())        # before any read: do we hold less than our share?
        short = len(wanted.renew) < wanted.share
        steps = [self._read_unheld(every=short)]
        if short or self._due(self._heartbeat_at):
            steps.append(self._heartbeat())
        await asyncio.gather(*steps)
        plan = self._planner(self._view())
        self._share = plan.share
        for index in plan.drop:
            self._lose(self._shards[index], f"lease held by {self._shards[index].holder}")
        now = self._clock.monotonic()
        for index in plan.release:
            s = self._shards[index]
            if s.state is State.HELD:
                s.state, s.releasing_since = State.RELEASING, now
                self._log.info("releasing shard", shard=index, share=plan.share, members=self.members)
        to_release = [self._shards[i] for i in plan.release
                      if self._shards[i].state is State.RELEASING and self._may_release(self._shards[i], now)]
        kept = [self._shards[i] for i in plan.renew] + [
            self._shards[i] for i in plan.release if self._shards[i].state is State.RELEASING
            and self._shards[i] not in to_release]
        to_renew = [s for s in kept if s.missed or self._due(s.renewed_at)]
        to_take = [self._shards[i] for i in plan.take if take or self._shards[i].holder == self.identity]
        for s in to_release:
            s.state = State.FREE
        _, outcomes = await asyncio.gather(asyncio.gather(*(self._leases.release(s) for s in to_release)),
                                           asyncio.gather(*(self._leases.hold(s) for s in to_renew + to_take)))
        keep = set(plan.renew) | set(plan.take)
        for s, outcome in zip(to_renew + to_take, outcomes, strict=True):
            self._after_hold(s, outcome, keep=s.index in keep, share=plan.share)
        self._expire()
        self._publish()
        return plan

    async def stop(self) -> None:
        """Admit nothing more; release every shard Lease naming us and leave the members Lease."""
        ours = [s for s in self._shards if s.state is not State.FREE or (s.lease is not None and s.holder ==
                                                                           self.identity)]
        for s in ours:
            s.state = State.FREE
        self._publish()
        await asyncio.gather(*(self._leases.release(s) for s in ours), self._members.leave(self._renew_deadline))

    # -- steps ------------------------------------------------------------------------------------

    def _due(self, last: float) -> bool:
        """A quiet_interval has passed since `last` (within half a period: periods start on time only
        roughly)."""
        return self._clock.monotonic() - last >= self._quiet - self._retry_period / 2

    def _view(self) -> ShardView:
        now = self._clock.monotonic()
        records: dict[int, ShardRecord] = {}
        for s in self._shards:
            if s.state is not State.FREE or s.known:
                duration = float((s.observed_spec or {}).get("leaseDurationSeconds") or self._lease_duration)
                records[s.index] = ShardRecord(s.holder, now - s.observed_at, duration)
        return ShardView(shards=self.shards, me=self.identity, members=self.members, records=records,
                         held=self.held)

    def _may_release(self, s: Shard, now: float) -> bool:
        if now - s.releasing_since >= self._release_wait:
            return True
        if self._busy is None:
            return True
        try:
            return not self._busy(s.index)
        except Exception as err:
            self._log.error("busy check failed; waiting for the release timeout", shard=s.index, error=repr(err))
            return False

    def _after_hold(self, s: Shard, outcome: Attempt, *, keep: bool, share: int) -> None:
        """State after a write that renews or takes `s`; keep is False for a shard renewed only so that it
        stays ours while its in-flight keys finish before its release."""
        if outcome is Attempt.OTHER:
            self._lose(s, f"lease held by {s.holder}")
            return
        if outcome is not Attempt.HELD or not keep:
            return
        previous, s.state = s.state, State.HELD
        if previous is State.FREE:
            metrics.shard_transitions_total.labels(event="acquired").inc()
            self._log.info("acquired shard", shard=s.index, lease=s.name, share=share, members=self.members,
                           transitions=(s.observed_spec or {}).get("leaseTransitions", 0))
            self._acquired(s)
        elif previous is State.RELEASING:
            self._log.info("keeping shard after all", shard=s.index, share=share)
            self._acquired(s)
        elif s.missed:
            self._acquired(s)

    def _acquired(self, s: Shard) -> None:
        s.missed = False
        if self._on_acquired is None:
            return
        try:
            self._on_acquired(s.index)
        except Exception as err:
            self._log.error("on_acquired hook failed", shard=s.index, error=repr(err), exc_info=err)

    def _lose(self, s: Shard, reason: str) -> None:
        if s.state is State.FREE:
            return
        s.state = State.FREE
        metrics.shard_transitions_total.labels(event="lost").inc()
        self._log.error("lost shard", shard=s.index, lease=s.name, reason=reason)

    def _expire(self) -> None:
        """Held shards not renewed within renew_deadline are lost (they stopped being admitted already)."""
        now = self._clock.monotonic()
        for s in self._shards:
            if s.state is not State.FREE and now - s.renewed_at >= self._renew_deadline:
                self._lose(s, "renew deadline exceeded")

    def _publish(self) -> None:
        owned = self.owned
        metrics.shards_owned.set(len(owned))
        for s in self._shards:
            metrics.shard_owned.labels(shard=str(s.index)).set(1 if s.index in owned else 0)
        metrics.shard_members.set(self.members)
        if self._on_held is not None:
            try:
                self._on_held(self.held)
            except Exception as err:
                self._log.error("on_held hook failed", error=repr(err), exc_info=err)

    # -- the members Lease ------------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        sent = self._clock.monotonic()
        if await self._members.heartbeat(self._retry_period):
            self._heartbeat_at = sent

    # -- the shard Leases ---------------------------------------------------------------------------

    async def _read_unheld(self, *, every: bool) -> None:
        """Read the shards we do not hold: all of them when `every` (we want more), else those whose last
        read is quiet_interval old."""
        await asyncio.gather(*(self._leases.read(s) for s in self._shards
                               if s.state is State.FREE and (every or self._due(s.read_at))))
