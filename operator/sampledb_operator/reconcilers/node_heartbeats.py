"""The nodes' heartbeats: which nodes have gone silent, read every POLL seconds (decide/replicas/node_silence.py).

A Manager runnable. While some database has standbys (nothing else can fail over), it lists the Leases of
namespace kube-node-lease (one request, whatever the number of databases), keeps when each node's renewTime was
last seen to change, and publishes the silent nodes in `Context.silent_nodes`, which the replication step reads
(reconcilers/replication.py: a pod on a silent node is unready from then, and its kubelet is not waited for once it
is asked to stop). A node that turns silent enqueues the databases whose primary runs there (`on_silent`), so
their failover starts without waiting for a resync.

A read that fails (the operator may not list those Leases, the API server does not answer in time) changes
nothing that was heard, is counted (sampledb_node_heartbeat_read_errors_total, alert
SampleDBNodeHeartbeatsUnread) and logged when the failures start and when they end; failovers then start when the
node controller marks the pods not ready, as without this. Nothing here raises: the operator never stops for it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from sampledb_operator.decide.replicas import node_silence
from sampledb_operator.kube.api import ListResult
from sampledb_operator.observability import metrics
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context

log = get_logger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"


class LeaseLister(Protocol):
    async def list(self, namespace: str | None = None, *, limit: int = 500) -> ListResult: ...


def renew_times(items: list[dict[str, Any]]) -> dict[str, str]:
    """node -> its Lease's renewTime (a Lease without one has not beaten yet and is left out)."""
    out: dict[str, str] = {}
    for lease in items:
        name = (lease.get("metadata") or {}).get("name")
        renewed = (lease.get("spec") or {}).get("renewTime")
        if name and renewed:
            out[str(name)] = str(renewed)
    return out


class NodeHeartbeats:
    """Reads the nodes' Leases every `poll` seconds while a database has standbys; see the module docstring."""

    def __init__(self, ctx: Context, leases: LeaseLister, *, silent_after: float,
                 on_silent: Callable[[str], None], poll: float = node_silence.POLL) -> None:
        self._ctx = ctx
        self._leases = leases
        self._silent_after = silent_after
        self._on_silent = on_silent
        self._poll = poll
        self._beats: dict[str, node_silence.Beat] = {}
        self._failing = False

    def _wanted(self) -> bool:
        return self._silent_after > 0 and any(
            int((obj.get("spec") or {}).get("replicas") or 1) > 1 for obj in self._ctx.caches.sampledbs.list())

    async def read_once(self) -> None:
        """One read and what follows from it (the loop's body; tests call it with a fake clock)."""
        now = self._ctx.clock.now()
        if not self._wanted():
            self._beats = {}
            self._publish({}, now)
            return
        try:
            result = await self._leases.list(NODE_LEASE_NAMESPACE, limit=0)
        except Exception as exc:  # counted, logged once, and the next poll tries again
            metrics.node_heartbeat_read_errors_total.inc()
            if not self._failing:
                log.warning("cannot read the nodes' heartbeats; failovers wait for the node controller",
                            namespace=NODE_LEASE_NAMESPACE, error=str(exc) or type(exc).__name__)
            self._failing = True
            return
        if self._failing:
            log.info("the nodes' heartbeats are read again", namespace=NODE_LEASE_NAMESPACE)
            self._failing = False
        self._beats = node_silence.heard(self._beats, renew_times(result.items), now)
        self._publish(node_silence.silent(self._beats, now, self._silent_after), now)

    def _publish(self, silent: dict[str, datetime], now: datetime) -> None:
        before = self._ctx.silent_nodes
        newly = sorted(silent.keys() - before.keys())
        for node in newly:
            log.warning("node sends no heartbeat: its primaries fail over", node=node,
                        silent_for=round((now - silent[node]).total_seconds() + self._silent_after, 1))
        for node in sorted(before.keys() - silent.keys()):
            log.info("node sends heartbeats again", node=node)
        self._ctx.silent_nodes = silent
        metrics.silent_nodes.set(len(silent))
        for node in newly:
            self._on_silent(node)

    async def run(self) -> None:
        while True:
            started = self._ctx.clock.monotonic()
            await self.read_once()
            await self._ctx.clock.sleep(max(0.0, self._poll - (self._ctx.clock.monotonic() - started)))

    async def stop(self) -> None:
        """Nothing is held."""
