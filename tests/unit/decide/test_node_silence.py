"""decide/replicas/node_silence.py: a node is silent once its Lease's renewTime has not changed, on the operator's
own clock, for silent_after seconds; never a node without a Lease, never when more than half are silent; and a
silent node's kubelet is not waited for once its pod is asked to stop (replication.kubelet_silent)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sampledb_operator.decide.replicas.node_silence import Beat, heard, silent
from sampledb_operator.decide.replicas.replication import KUBELET_SILENT_SECONDS, kubelet_silent

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_changed_renew_time_is_a_heartbeat_seen_now_and_an_unchanged_one_keeps_when_it_was_first_seen() -> None:
    beats = heard({}, {"a": "r1", "b": "r1"}, at(0))
    assert beats == {"a": Beat("r1", at(0)), "b": Beat("r1", at(0))}
    beats = heard(beats, {"a": "r2", "b": "r1"}, at(10))
    assert beats == {"a": Beat("r2", at(10)), "b": Beat("r1", at(0))}
    # the renewTime's own value (the kubelet's clock, maybe far off) is never compared with the operator's clock
    beats = heard(beats, {"a": "1999-01-01T00:00:00Z", "b": "r1"}, at(15))
    assert beats["a"] == Beat("1999-01-01T00:00:00Z", at(15))
    assert heard(beats, {"b": "r1"}, at(20)) == {"b": Beat("r1", at(0))}  # a Lease gone: the node is forgotten


def test_a_node_is_silent_from_its_last_heartbeat_plus_silent_after() -> None:
    beats = {"a": Beat("r", at(0)), "b": Beat("r", at(15)), "c": Beat("r", at(18))}
    assert silent(beats, at(19.9), 20) == {}
    assert silent(beats, at(20), 20) == {"a": at(20)}
    assert silent(beats, at(30), 20) == {"a": at(20)}


def test_none_is_silent_when_more_than_half_are_or_the_check_is_off() -> None:
    beats = {"a": Beat("r", at(0)), "b": Beat("r", at(0)), "c": Beat("r", at(25))}
    assert silent(beats, at(30), 20) == {}  # two of three: the operator's own view, not the nodes, is failing
    assert silent({"a": Beat("r", at(0))}, at(60), 20) == {}  # the only node heard of
    assert silent({"a": Beat("r", at(0)), "b": Beat("r", at(25))}, at(30), 20) == {"a": at(20)}  # one of two
    assert silent({"a": Beat("r", at(0)), "b": Beat("r", at(25))}, at(30), 0) == {}
    assert silent({}, at(30), 20) == {}


def test_a_pod_on_a_silent_node_is_its_kubelets_no_longer_once_asked_to_stop() -> None:
    deadline = at(5)
    assert not kubelet_silent(deadline, at(0))
    assert kubelet_silent(deadline, at(0), node_silent=True)
    assert not kubelet_silent(None, at(100), node_silent=True)  # not asked to stop: nothing to wait for
    assert kubelet_silent(deadline, deadline + timedelta(seconds=KUBELET_SILENT_SECONDS))
