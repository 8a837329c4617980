"""The primary's lease: when the operator renews it, and the bound on a renewal's arrival, as pure functions.

A primary that hears nothing from the operator and sends WAL to no standby stops itself (dataplane/self-fence.sh):
it is cut off from both, so a failover may be under way, and its commits would be lost (asynchronous) or never
acknowledged (synchronous). The operator renews its lease once per pass (every STATUS_POLL, 10 s) on the primary of a
database with standbys, to LEASE_SECONDS past the renewal's arrival, timed on the host's uptime (a clock that never
steps).

Invariants:
- A renewal is accepted only if it arrives within TRANSIT_SECONDS of being sent (pg/client.renew_lease): the
  operator first reads the server's uptime U (answered at its own monotonic time `answered`), and sends at `sending`
  the deadline U + (sending - answered) + TRANSIT, which the server checks against its uptime on arrival. U was read
  before `answered`, so that deadline is at most the server's uptime at the moment of sending plus TRANSIT, and a
  renewal delayed in the network (a connection the operator gave up on) never extends the lease later. Hence the
  lease renewed by an attempt sent at time `a` ends by a + TRANSIT + LEASE, in real time, whatever became of it.
- Only the designated primary of a database with standbys is renewed, while no failover or switchover runs; the
  standby about to be promoted is renewed just before pg_promote(), so that a lease left in its run directory (an
  earlier term as primary in the same pod) never stops it the moment it is promoted.
- The lease holds no secret and the renewal is never required for the database to work: a primary whose standbys
  stream from it never stops itself, whatever became of the operator.
- The operator counts on a primary having stopped itself (`stopped_by`) only when all of these hold: a renewal by
  this process found the self-fence watching and read its wal_sender_timeout (not 0); its lease has ended, timed
  from the later of this process's last renewal attempt and its first sight of the pod plus HANDOVER_SECONDS (an
  earlier owner's renewals stop before this one starts); and every other instance has answered, continuously since
  `clear_since`, that it is a standby receiving no WAL, for longer than that wal_sender_timeout (the primary's WAL
  senders to them have ended). Durations get RATE_MARGIN for clock rates, and SLACK_SECONDS covers the self-fence's
  look, its question and the immediate shutdown. Otherwise: unknown, and the failover waits.
- The LeaseBook is this process's memory; what a renewal found (watched, wal_sender_timeout) is also recorded on the
  pod (FACTS_ANNOTATION), so that another process (a new leader, after a handover during the very partition) can
  count on the bound too, timed from its own first sight of the pod plus HANDOVER_SECONDS.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sampledb_operator.model.instances import ServerState

LEASE_SECONDS = 45.0  # past a renewal's arrival: an operator away this long (a leader's handover) stops nothing
TRANSIT_SECONDS = 2.0  # a renewal arriving later than this after it was sent is refused by the server
HANDOVER_SECONDS = 15.0  # an earlier leader's (or shard owner's) renewals stop by this long after this one starts
SLACK_SECONDS = 1.0 + 5.0 + 1.0 + 3.0  # self-fence.sh's look, its question, the immediate shutdown, a margin
RATE_MARGIN = 0.01  # clocks' rates may differ by this much
FORGET_SECONDS = 3600.0  # a pod's lease unrenewed this long is dropped from the book
ENDPOINTS_SECONDS = 10.0  # after the old primary's pod is deleted, no standby reconnects to it through the Service


def disarm(*, replicas: int, instances: int, target: str | None, in_recovery: bool | None) -> bool:
    """Whether to turn the primary's lease off in this pass: the database has no standby any more (a scale-down to
    one instance), no failover runs, and the primary answered as a primary. Its self-fence would stop nothing without
    standby slots either (self-fence.sh); this is the second guard."""
    return replicas <= 1 and instances <= 1 and target is None and in_recovery is False


def renew(*, replicas: int, instances: int, primary: str | None, target: str | None, in_recovery: bool | None) -> bool:
    """Whether to renew the designated primary's lease in this pass: the database has (or is to have) standbys,
    no failover or switchover runs, and the primary answered as a primary (`in_recovery` False)."""
    return (replicas > 1 or instances > 1) and bool(primary) and target is None and in_recovery is False


SELF_FENCED_MESSAGE = "sampledb: self-fenced:"  # how the container's termination message starts (self-fence.sh)


def self_fenced(container_statuses: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a database pod's server stopped itself: a container's current or last termination message says so
    (self-fence.sh writes it before stopping the server; instance.sh again while it waits with the marker, so a
    restart of the waiting container keeps it in the last termination)."""
    for container in container_statuses:
        for state in (container.get("state") or {}, container.get("lastState") or {}):
            message = str((state.get("terminated") or {}).get("message") or "")
            if message.startswith(SELF_FENCED_MESSAGE):
                return True
    return False


@dataclass
class PodLease:
    """What this process knows of one pod's lease (monotonic seconds of its own clock)."""

    first_seen: float  # when this process first considered renewing it
    last_attempt: float | None = None  # its last renewal sent (answered or not; one never sent does not count)
    watched: bool = False  # a renewal found its self-fence watching
    sender_timeout: float | None = None  # its wal_sender_timeout as that renewal read it (seconds)


@dataclass
class LeaseBook:
    """The leases this process renews, by pod uid, and, by database uid, since when no other instance receives WAL
    during a failover. Kept by the replication step (reconcilers/replication.py) on the process's Context."""

    pods: dict[str, PodLease] = field(default_factory=dict)
    clear_since: dict[str, float] = field(default_factory=dict)

    def sending(self, pod_uid: str, now: float) -> None:
        """A renewal is about to be sent to `pod_uid`. Pods renewed by nobody for FORGET_SECONDS are forgotten (gone,
        or no longer primaries: a failover that needs them comes within minutes of their last renewal)."""
        if pod_uid not in self.pods:
            for uid in [u for u, p in self.pods.items() if (p.last_attempt or p.first_seen) < now - FORGET_SECONDS]:
                del self.pods[uid]
        self.pods.setdefault(pod_uid, PodLease(first_seen=now)).last_attempt = now

    def answered(self, pod_uid: str, *, watched: bool, sender_timeout: float) -> None:
        lease = self.pods.get(pod_uid)
        if lease is not None:
            lease.watched, lease.sender_timeout = watched, sender_timeout

    def recall(self, pod_uid: str, now: float, facts: tuple[bool, float] | None) -> PodLease | None:
        """This process's record of `pod_uid`, or, first seen now, one from what an earlier renewal recorded on the
        pod (`facts`: watched, wal_sender_timeout; FACTS_ANNOTATION), timed from now (HANDOVER_SECONDS covers the
        renewals of the process that recorded them)."""
        lease = self.pods.get(pod_uid)
        if lease is None and facts is not None:
            lease = self.pods[pod_uid] = PodLease(first_seen=now, watched=facts[0], sender_timeout=facts[1])
        return lease

    def seen_clear(self, db_uid: str, now: float, clear: bool) -> None:
        """During a failover, this pass's answer: every other instance a standby receiving no WAL (`clear`) or not."""
        if clear:
            self.clear_since.setdefault(db_uid, now)
        else:
            self.clear_since.pop(db_uid, None)


FACTS_ANNOTATION = "sampledb.io/self-fence"  # on a primary's pod: what its renewals found, for another process
_FACTS = re.compile(r"^(watched|unwatched) wal_sender_timeout=([0-9]{1,12})ms$")


def facts_value(watched: bool, sender_timeout: float) -> str:
    """FACTS_ANNOTATION's value: whether the self-fence watches, and the wal_sender_timeout, as a renewal read them."""
    return f"{'watched' if watched else 'unwatched'} wal_sender_timeout={round(sender_timeout * 1000)}ms"


def parse_facts(value: str | None) -> tuple[bool, float] | None:
    """FACTS_ANNOTATION's value read back (watched, seconds), or None when absent or not ours."""
    match = _FACTS.match(value or "")
    return (match.group(1) == "watched", int(match.group(2)) / 1000) if match else None


def stopped_by(lease: PodLease | None, clear_since: float | None) -> float | None:
    """The time (this process's monotonic clock) by which the primary of `lease` has stopped itself, or None when
    that cannot be known (see the module's invariants)."""
    if lease is None or not lease.watched or not lease.sender_timeout or clear_since is None:
        return None
    sent = max(lease.last_attempt if lease.last_attempt is not None else lease.first_seen,
               lease.first_seen + HANDOVER_SECONDS)
    lease_end = sent + (TRANSIT_SECONDS + LEASE_SECONDS) * (1 + RATE_MARGIN)
    senders_end = clear_since + lease.sender_timeout * (1 + RATE_MARGIN)
    return max(lease_end, senders_end) + SLACK_SECONDS


def others_clear(servers: Sequence[ServerState | None]) -> bool:
    """The answers of the instances other than the old primary that have a pod: every one a standby whose WAL
    receiver streams from nobody (None: a server that did not answer, which clears nothing)."""
    return all(s is not None and s.in_recovery and not s.receiving for s in servers)
