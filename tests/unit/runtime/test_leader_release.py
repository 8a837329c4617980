"""Releasing the Lease when our last record is stale: a renewal cancelled in flight may have landed."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.leader import LeaderElector

NS = "sampledb-system"


class Leases:
    """One namespace of Leases with resourceVersion checks; a replace may commit and then never answer."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = 0
        self.lose_answers = False   # replace commits, then hangs (the answer is lost to a cancel)
        self.committed = asyncio.Event()
        self.conflicts = 0

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[stored["metadata"]["name"]] = stored
        return copy.deepcopy(stored)

    async def get(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        if name not in self.objects:
            raise NotFound(404, "NotFound", name)
        return copy.deepcopy(self.objects[name])

    async def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self._store(obj)

    async def replace(self, obj: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        current = self.objects[obj["metadata"]["name"]]
        if obj["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            self.conflicts += 1
            raise Conflict(409, "Conflict", "the object has been modified")
        stored = self._store(obj)
        if self.lose_answers:
            self.committed.set()
            await asyncio.Event().wait()
        return stored

    def steal(self, name: str, holder: str) -> None:
        lease = copy.deepcopy(self.objects[name])
        lease["spec"]["holderIdentity"] = holder
        self._store(lease)


def elector(leases: Leases, clock: FakeClock) -> LeaderElector:
    return LeaderElector(leases, name="release-lease", namespace=NS, identity="a", clock=clock,
                         lease_duration=4, renew_deadline=3, retry_period=1)


async def _renewal_lost_in_flight(leases: Leases, clock: FakeClock) -> LeaderElector:
    """Acquire, then let one renewal commit server-side and cancel hold() before it sees the answer."""
    leader = elector(leases, clock)
    await leader.acquire()
    leases.lose_answers = True
    holding = asyncio.create_task(leader.hold())
    for _ in range(50):
        await asyncio.sleep(0)
    clock.advance(1.0)
    await asyncio.wait_for(leases.committed.wait(), timeout=5)
    holding.cancel()
    await asyncio.gather(holding, return_exceptions=True)
    leases.lose_answers = False
    return leader


async def test_release_after_a_renewal_lost_in_flight_still_empties_the_holder() -> None:
    leases, clock = Leases(), FakeClock()
    leader = await _renewal_lost_in_flight(leases, clock)
    assert leases.objects["release-lease"]["spec"]["holderIdentity"] == "a"

    await asyncio.wait_for(leader.release(), timeout=5)

    assert leases.conflicts == 1                       # the stale record was refused ...
    spec = leases.objects["release-lease"]["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1   # ... and then released
    assert not leader.is_leader


async def test_release_never_overwrites_a_lease_that_names_another_holder() -> None:
    leases, clock = Leases(), FakeClock()
    leader = await _renewal_lost_in_flight(leases, clock)
    leases.steal("release-lease", "b")

    await asyncio.wait_for(leader.release(), timeout=5)

    assert leases.objects["release-lease"]["spec"]["holderIdentity"] == "b"
    assert leader.observed_holder == "b"
    assert not leader.is_leader
