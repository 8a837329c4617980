"""Which nodes have stopped sending heartbeats: the early word that a primary's node is gone, as pure functions.

Every kubelet renews its node's Lease (namespace kube-node-lease) every quarter of the lease's duration (10 s by
default). The node controller marks a node NotReady, and then its pods not ready, only after
`--node-monitor-grace-period` (40 to 50 s by default) without one; a failover that waits for that waits that long
before it starts. The operator reads the same heartbeats (reconcilers/node_heartbeats.py) and calls a node
silent once its Lease has not changed for `silent_after` seconds (20 s by default: two missed renewals).

Invariants:
- Time is the operator's own: a heartbeat is the moment the operator first saw a Lease's renewTime change, never the
  renewTime itself (written with the kubelet's clock, which may be skewed). A restarted operator sees every node as
  renewed at its start, so its first silence is `silent_after` seconds later at the earliest.
- A node without a Lease (kwok's fake nodes; a kubelet that never registered one) is never silent: only a
  heartbeat that stopped is evidence.
- When no node is heard, or more than half of the nodes heard of are silent, none is called silent: that is the
  operator's own view failing (its reads lagging, the control plane overloaded), not nodes failing, and the node
  controller's slower word is left to decide.
- Silence is only a reason to start a failover sooner. It never confirms a fence: the old primary's server is still
  stopped over SQL and proven stopped before a standby is promoted (decide/replicas/replication.py), so a
  heartbeat that is merely late costs an unneeded failover, never two primaries.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

POLL = 5.0  # seconds between reads of the nodes' Leases


@dataclass(frozen=True, slots=True)
class Beat:
    """A node's last heartbeat as the operator saw it."""

    renewed: str  # the Lease's spec.renewTime as written (only compared for equality)
    seen: datetime  # when the operator first saw that value (its own clock)


def heard(previous: Mapping[str, Beat], leases: Mapping[str, str], now: datetime) -> dict[str, Beat]:
    """The beats after a read of every node's Lease (`leases`: node -> renewTime). A changed renewTime is a
    heartbeat seen now; an unchanged one keeps when it was first seen; a node whose Lease is gone is forgotten."""
    out: dict[str, Beat] = {}
    for node, renewed in leases.items():
        before = previous.get(node)
        out[node] = before if before is not None and before.renewed == renewed else Beat(renewed, now)
    return out


def silent(beats: Mapping[str, Beat], now: datetime, silent_after: float) -> dict[str, datetime]:
    """The silent nodes, each with when it became so (its last heartbeat seen plus `silent_after`); none when
    `silent_after` is 0 (the check is off), when no node is heard, or when more than half are silent."""
    if silent_after <= 0 or not beats:
        return {}
    limit = timedelta(seconds=silent_after)
    out = {node: beat.seen + limit for node, beat in beats.items() if now - beat.seen >= limit}
    if 2 * len(out) > len(beats):
        return {}
    return out
