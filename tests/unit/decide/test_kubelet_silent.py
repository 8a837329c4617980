"""decide/replicas/replication.kubelet_silent: a pod asked to stop is its kubelet's to stop until
KUBELET_SILENT_SECONDS past its deletion's deadline; a pod not being deleted never is silent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sampledb_operator.decide.replicas.replication import KUBELET_SILENT_SECONDS, kubelet_silent

DEADLINE = datetime(2026, 12, 7, 5, 0, tzinfo=UTC)


def test_silent_only_from_the_deadline_plus_the_margin() -> None:
    assert not kubelet_silent(DEADLINE, DEADLINE)
    assert not kubelet_silent(DEADLINE, DEADLINE + timedelta(seconds=KUBELET_SILENT_SECONDS - 0.5))
    assert kubelet_silent(DEADLINE, DEADLINE + timedelta(seconds=KUBELET_SILENT_SECONDS))
    assert kubelet_silent(DEADLINE, DEADLINE + timedelta(hours=1))


def test_a_pod_not_being_deleted_or_before_its_deadline_is_not_silent() -> None:
    assert not kubelet_silent(None, DEADLINE + timedelta(hours=1))
    assert not kubelet_silent(DEADLINE, DEADLINE - timedelta(seconds=30))
