"""decide.binding: a new StatefulSet waits for its data volume's claim only while that claim, under a class
that binds at once, is not bound yet; nothing else holds a StatefulSet back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sampledb_operator.decide.children import binding
from sampledb_operator.decide.children import desired as d
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

DB = SampleDB.model_validate({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                              "metadata": {"name": "orders", "namespace": "apps"},
                              "spec": {"version": "16.4", "storage": {"size": "1Gi"}}})
STS = d.statefulset(DB)
STANDBY = d.statefulset(DB, index=1)
CLAIM = names.data_pvc_name("orders")
MODES = {"fast": "Immediate", "local": "WaitForFirstConsumer", "unreadable": None}


def claim(cls: str | None = "fast", phase: str | None = "Pending", *, deleting: bool = False) -> Obj:
    meta: Obj = {"name": CLAIM}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    spec: Obj = {"storageClassName": cls} if cls is not None else {}
    return {"kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": phase} if phase else {}}


def test_the_statefulset_names_each_instance_s_own_claim() -> None:
    assert binding.claim_of(STS) == CLAIM
    assert binding.claim_of(STANDBY) == names.instance_data_pvc_name("orders", 1) != CLAIM
    assert binding.claim_of({"spec": {"template": {"spec": {"volumes": [{"name": "run", "emptyDir": {}}]}}}}) is None


def test_a_class_that_does_not_say_binds_immediately_as_the_api_defaults_it() -> None:
    assert binding.binding_mode({"metadata": {"name": "x"}}) == "Immediate"
    assert binding.binding_mode({"volumeBindingMode": "WaitForFirstConsumer"}) == "WaitForFirstConsumer"


@pytest.mark.parametrize(("pvc", "waits"), [
    (claim(), True),  # created, not bound yet, its class binds at once
    (claim(phase=None), True),  # the answer to the create: no status yet
    (claim(phase="Bound"), False),
    (claim("local"), False),  # binds only once a pod uses it: waiting would be forever
    (claim("unreadable"), False),  # its class could not be read: as before, the scheduler waits
    (claim("unknown"), False),  # not asked about
    (claim(None), False),  # no class name
    (claim(deleting=True), False),  # being deleted: decide/children/volumes.py reports it
    (None, False),  # no claim: a lost volume, reported elsewhere
])
def test_which_claims_a_new_statefulset_waits_for(pvc: Obj | None, waits: bool) -> None:
    assert binding.waits_for_binding(pvc, MODES) is waits
    assert binding.held([STS], {CLAIM: pvc}, MODES) == ({STS["metadata"]["name"]: CLAIM} if waits else {})


def test_only_the_classes_of_unbound_claims_are_read() -> None:
    standby_claim = names.instance_data_pvc_name("orders", 1)
    claims = {CLAIM: claim("fast"), standby_claim: {**claim("slow", "Bound"), "metadata": {"name": standby_claim}}}
    assert binding.classes_to_read([STS, STANDBY], claims) == {"fast"}
    assert binding.classes_to_read([STS], {CLAIM: claim(None)}) == frozenset()
    assert binding.classes_to_read([STS], {}) == frozenset()


def test_each_instance_waits_for_its_own_claim() -> None:
    standby_claim = names.instance_data_pvc_name("orders", 1)
    claims = {CLAIM: claim(phase="Bound"), standby_claim: {**claim(), "metadata": {"name": standby_claim}}}
    assert binding.held([STS, STANDBY], claims, MODES) == {STANDBY["metadata"]["name"]: standby_claim}


NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def made(seconds_ago: float) -> Obj:
    pvc = claim()
    pvc["metadata"]["creationTimestamp"] = (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return pvc


@pytest.mark.parametrize(("claims", "after"), [
    ([made(0)], 300.0),  # a claim just made: the least
    ([made(1200)], 1200.0),  # waited 20 minutes: looks again in 20 more
    ([made(100), made(900)], 900.0),  # the oldest claim counts
    ([made(7 * 3600)], 3600.0),  # never later than the most
    ([claim(), None], 300.0),  # no readable timestamp: the least
])
def test_the_look_again_grows_with_the_wait(claims: list[Obj | None], after: float) -> None:
    assert binding.recheck_after(claims, NOW, least=300.0, most=3600.0) == after


def test_a_long_wait_looks_again_a_few_times_not_once_every_least() -> None:
    looks = [0.0]  # seconds since the claim was made: its first pass, then each look again
    while looks[-1] < 3000:  # a claim that takes 50 minutes to bind, as at 10,000 databases
        looks.append(looks[-1] + binding.recheck_after([made(looks[-1])], NOW, least=300.0, most=3600.0))
    assert looks[1:-1] == [300.0, 600.0, 1200.0, 2400.0]  # 4 idle looks before the binding (a fixed 300 s: 9)
