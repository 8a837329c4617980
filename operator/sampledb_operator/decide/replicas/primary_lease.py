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
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

LEASE_SECONDS = 45.0  # past a renewal's arrival: an operator away this long (a leader's handover) stops nothing
TRANSIT_SECONDS = 2.0  # a renewal arriving later than this after it was sent is refused by the server


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
