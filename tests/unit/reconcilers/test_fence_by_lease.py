"""A failover whose old primary cannot be reached at all (its node cut off, frozen or powered off), on the fake
cluster: the fence is confirmed by the primary's own stop (dataplane/self-fence.sh), known without reaching it once
its lease from this operator has ended and no other instance has received WAL for longer than its
wal_sender_timeout (decide/replicas/primary_lease.stopped_by). Not before that bound; not while a standby still
streams; not for a primary whose renewals never found its self-fence watching (a pod started before it existed).
The proof is annotated on the pod (later passes, or another operator, read it), with the Warning FencedBySelfFence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from tests.support.fake_cluster import FakeCluster
from tests.unit.reconcilers.test_fence_without_kubelet import kubelet_gone
from tests.unit.reconcilers.test_replication_reconciler import (
    DB,
    DELAY,
    POD,
    FakeServers,
    ip,
    pod_name,
    status,
    three_instances,
)

from sampledb_operator.decide.replicas import primary_lease
from sampledb_operator.decide.replicas.primary_lease import LeaseBook, PodLease, others_clear, stopped_by
from sampledb_operator.model.instances import LeaseRenewal, ServerState
from sampledb_operator.pg import client as pg
from sampledb_operator.reconcilers.replication import SELF_FENCED_ANNOTATION

STEP = 2.0  # seconds between passes during a failover (FAILOVER_POLL)


async def cut_off(cluster: FakeCluster, servers: FakeServers, *, standbys_receiving: bool = False) -> None:
    """A running database of three; then its primary's node cut off: no answer from its server, its kubelet gone,
    the standbys' WAL receivers (after their timeout) streaming from nobody unless `standbys_receiving`."""
    await three_instances(cluster, servers)
    kubelet_gone(cluster)
    servers.unreachable.add(ip(0))
    servers.standby(1, 90, receiving=standbys_receiving)
    servers.standby(2, 80, receiving=standbys_receiving)


async def run_for(cluster: FakeCluster, seconds: float) -> None:
    for _ in range(int(seconds / STEP)):
        cluster.clock.advance(STEP)
        await cluster.reconcile(DB)


async def test_a_primary_beyond_reach_is_fenced_by_its_own_stop_once_the_bound_has_passed(
        servers: FakeServers) -> None:
    cluster = FakeCluster()
    await cut_off(cluster, servers)
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    assert status(cluster)["targetPrimary"] == pod_name(1)
    # wal_sender_timeout (60 s) past the first pass that saw no standby receiving, plus the slack: not yet
    await run_for(cluster, 60)
    assert servers.promoted == [] and "FencedBySelfFence" not in cluster.recorder.reasons()
    await run_for(cluster, 30)
    assert servers.promoted == [ip(1)]
    assert "FencedBySelfFence" in cluster.recorder.reasons()
    pod = cluster.get(POD, pod_name(0))
    assert pod is not None and SELF_FENCED_ANNOTATION in pod["metadata"]["annotations"]
    await cluster.reconcile(DB)
    assert status(cluster)["primary"] == pod_name(1)


async def test_a_standby_still_streaming_keeps_the_failover_waiting(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await cut_off(cluster, servers, standbys_receiving=True)  # the operator cut off from the primary, not they
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    await run_for(cluster, 300)
    assert servers.promoted == [] and "FencedBySelfFence" not in cluster.recorder.reasons()


async def test_a_primary_whose_self_fence_never_watched_is_never_counted_on(
        servers: FakeServers, monkeypatch: pytest.MonkeyPatch) -> None:
    async def unwatched(target: pg.Target, ttl: float, transit: float, sending: Callable[[], None],
                        within: float = 5.0) -> LeaseRenewal | None:
        renewal = await FakeServers.renew_lease(servers, target, ttl, transit, sending, within)
        return None if renewal is None else replace(renewal, watched=False)
    monkeypatch.setattr(pg, "renew_lease", unwatched)
    cluster = FakeCluster()
    await cut_off(cluster, servers)
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    await run_for(cluster, 300)
    assert servers.promoted == []


def lease(**kw: object) -> PodLease:
    return replace(PodLease(first_seen=0.0, last_attempt=100.0, watched=True, sender_timeout=60.0), **kw)  # type: ignore[arg-type]


def test_the_bound_is_the_later_of_the_lease_and_the_wal_senders_plus_the_slack() -> None:
    rate = 1 + primary_lease.RATE_MARGIN
    lease_end = 100.0 + (primary_lease.TRANSIT_SECONDS + primary_lease.LEASE_SECONDS) * rate
    assert stopped_by(lease(), clear_since=0.0) == pytest.approx(lease_end + primary_lease.SLACK_SECONDS)
    assert stopped_by(lease(), clear_since=120.0) == pytest.approx(120.0 + 60.0 * rate + primary_lease.SLACK_SECONDS)
    # a pod this process first saw at 100: an earlier owner may have renewed until HANDOVER_SECONDS later
    assert stopped_by(lease(first_seen=100.0), clear_since=0.0) == pytest.approx(
        100.0 + primary_lease.HANDOVER_SECONDS + (lease_end - 100.0) + primary_lease.SLACK_SECONDS)


@pytest.mark.parametrize("known", [
    {"watched": False}, {"sender_timeout": 0.0}, {"sender_timeout": None},
])
def test_nothing_is_known_without_a_watched_renewal_or_with_wal_senders_that_never_time_out(
        known: dict[str, object]) -> None:
    assert stopped_by(lease(**known), clear_since=0.0) is None
    assert stopped_by(lease(), clear_since=None) is None
    assert stopped_by(None, clear_since=0.0) is None


def test_others_are_clear_only_as_standbys_receiving_nothing() -> None:
    idle = ServerState(in_recovery=True)
    assert others_clear([idle, idle]) and others_clear([])
    assert not others_clear([idle, None])
    assert not others_clear([idle, ServerState(in_recovery=True, receiving=True)])
    assert not others_clear([ServerState(in_recovery=False)])


def test_the_book_starts_clear_once_and_resets_and_forgets_old_pods() -> None:
    book = LeaseBook()
    book.seen_clear("db", 10.0, True)
    book.seen_clear("db", 12.0, True)
    assert book.clear_since["db"] == 10.0
    book.seen_clear("db", 14.0, False)
    assert "db" not in book.clear_since
    book.sending("a", 0.0)
    book.sending("b", primary_lease.FORGET_SECONDS + 1.0)
    assert set(book.pods) == {"b"}
    book.answered("b", watched=True, sender_timeout=60.0)
    assert book.pods["b"].watched and book.pods["b"].sender_timeout == 60.0


async def test_a_new_leader_counts_on_what_the_renewals_recorded_on_the_pod(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await cut_off(cluster, servers)
    pod = cluster.get(POD, pod_name(0))
    assert pod is not None
    assert pod["metadata"]["annotations"][primary_lease.FACTS_ANNOTATION] == "watched wal_sender_timeout=60000ms"
    cluster.ctx.leases = LeaseBook()  # another process takes over: it never renewed this primary itself
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    await run_for(cluster, 300)
    assert servers.promoted == [ip(1)]
    assert "FencedBySelfFence" in cluster.recorder.reasons()


def test_the_facts_annotation_reads_back_what_it_says() -> None:
    value = primary_lease.facts_value(True, 60.0)
    assert primary_lease.parse_facts(value) == (True, 60.0)
    assert primary_lease.parse_facts(primary_lease.facts_value(False, 0.5)) == (False, 0.5)
    assert primary_lease.parse_facts(None) is None
    assert primary_lease.parse_facts("watched wal_sender_timeout=sixty") is None
