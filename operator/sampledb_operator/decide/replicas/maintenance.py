"""Node maintenance: the primary leaves a cordoned node by a switchover before a drain would stop it.

`kubectl drain` (and a node upgrade, a cluster autoscaler's scale-down) first marks the node unschedulable
(cordons it), then evicts its pods through the eviction API. The primary's PodDisruptionBudget
(decide/children/desired.primary_disruption_budget) refuses every eviction of the primary, so a drain of its
node waits (kubectl drain retries every 5 s) until the primary is elsewhere. This module says where: when the
primary's pod runs on a cordoned node and nothing else moves the primary, switch over (the switchover
annotation, carried out by decide/replicas/replication.py: the old primary stops cleanly after sending all
its WAL, so no committed transaction is lost) to the ready standby furthest ahead among those on nodes
that are not cordoned. The old primary comes back as a standby on its node, and the standbys' budget lets the
drain evict it like any standby.

No switchover while a failover or switchover already runs, while the primary's pod is not ready (a failover is
then what moves it, after failoverDelaySeconds), or when no ready standby runs on a schedulable node (the
drain waits, and the reason says why, until one does). A cordoned node that is never drained still loses its
primary: the node was marked for maintenance, and a standby there costs nothing to move.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

RECHECK = 10.0  # seconds between looks while the primary waits on a cordoned node for a standby to move to


@dataclass(frozen=True, slots=True)
class Standby:
    """One standby as this pass found it."""

    name: str  # its pod
    ready: bool  # its pod runs and is Ready, not terminating
    node: str | None  # the node its pod runs on (None: not scheduled)
    position: int | None = None  # how far its WAL goes (bytes), when its server answered


@dataclass(frozen=True, slots=True)
class MaintenanceInput:
    primary: str | None  # the primary's pod
    primary_ready: bool
    primary_node: str | None  # the node the primary's pod runs on
    cordoned: Collection[str]  # the unschedulable nodes
    standbys: Sequence[Standby]
    busy: bool  # a failover or switchover runs (or is asked for)


@dataclass(frozen=True, slots=True)
class Maintenance:
    """The switchover to ask for, or why the primary stays on its cordoned node for now (None: it is not on one)."""

    switchover_to: str | None = None
    waiting: str | None = None
    recheck_after: float | None = None


def decide(inp: MaintenanceInput) -> Maintenance:
    if inp.primary is None or inp.primary_node is None or inp.primary_node not in inp.cordoned:
        return Maintenance()
    if inp.busy:
        return Maintenance()  # the primary moves already; the next pass looks again
    node = inp.primary_node
    if not inp.primary_ready:
        return Maintenance(waiting=f"the primary {inp.primary} on cordoned node {node} is not ready: a failover,"
                                   " not a switchover, moves it", recheck_after=RECHECK)
    candidates = [s for s in inp.standbys if s.ready and s.node is not None and s.node not in inp.cordoned]
    if not candidates:
        return Maintenance(waiting=f"the primary {inp.primary} runs on cordoned node {node}, and no ready standby"
                                   " runs on a schedulable node to switch over to: a drain of the node waits",
                           recheck_after=RECHECK)
    best = min(candidates, key=lambda s: (-(s.position if s.position is not None else -1), s.name))
    return Maintenance(switchover_to=best.name)
