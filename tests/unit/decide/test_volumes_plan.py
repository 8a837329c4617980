"""decide/children/volumes.py: the volumes as observed, and the plan that consumes the accept-empty-volume
annotation."""

from __future__ import annotations

from typing import Any

import pytest

from sampledb_operator.decide.children import volumes as vol
from sampledb_operator.decide.effects import Patch, Plan
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB

PVC = "PersistentVolumeClaim"
DATA, BACKUPS = names.data_pvc_name("orders"), names.backup_pvc_name("orders")


def database(annotations: dict[str, str] | None = None, current: str | None = "16.4") -> SampleDB:
    return SampleDB.model_validate({
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "resourceVersion": "7",
                     "annotations": annotations or {}},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
        "status": {"currentVersion": current} if current else {}})


def backup(database: str = "orders", phase: str = "Succeeded", pvc: str = BACKUPS) -> dict[str, Any]:
    return {"metadata": {"name": "b"}, "spec": {"database": database},
            "status": {"phase": phase, "location": {"pvcName": pvc}}}


def test_the_volume_states_say_what_each_volume_holds() -> None:
    observed = {(PVC, DATA): {"metadata": {"name": DATA, "deletionTimestamp": "2026-11-30T09:00:00Z"}}}
    states = vol.volume_states(database(), observed, [backup()])
    assert states == {
        (PVC, DATA): vol.VolumeState(vol.DATA, DATA, present=True, terminating=True, holds_data=True),
        (PVC, BACKUPS): vol.VolumeState(vol.BACKUPS, BACKUPS, present=False, holds_data=True)}
    fresh = vol.volume_states(database(current=None), {}, [])
    assert not any(s.holds_data or s.present for s in fresh.values())


@pytest.mark.parametrize("other", [backup(database="billing"), backup(phase="Failed"), backup(pvc="elsewhere")])
def test_only_a_succeeded_backup_of_this_database_on_the_volume_counts(other: dict[str, Any]) -> None:
    assert not vol.backups_written(database(), [other], BACKUPS)
    assert vol.backups_written(database(), [other, backup()], BACKUPS)


def test_the_roles_whose_volume_exists_again_are_dropped_with_the_written_version() -> None:
    db = database({vol.ACCEPT_EMPTY_ANNOTATION: "data,backups"})
    planned = vol.plan_release(vol.AcceptanceFacts(db=db, live=frozenset({vol.DATA}), resource_version="9"))
    assert planned.plan == Plan((Patch("SampleDB", "orders", {"metadata": {
        "annotations": {vol.ACCEPT_EMPTY_ANNOTATION: "backups"}, "resourceVersion": "9"}}),))
    assert planned.released == (vol.DATA,)
    both = vol.plan_release(vol.AcceptanceFacts(db=db, live=frozenset(vol.ROLES), resource_version="9"))
    assert both.plan == Plan((Patch("SampleDB", "orders", {"metadata": {
        "annotations": {vol.ACCEPT_EMPTY_ANNOTATION: None}, "resourceVersion": "9"}}),))  # removed
    assert both.released == (vol.BACKUPS, vol.DATA)


@pytest.mark.parametrize(("annotations", "live", "version"), [
    ({}, frozenset(vol.ROLES), "9"),  # nothing accepted
    ({vol.ACCEPT_EMPTY_ANNOTATION: "backups"}, frozenset({vol.DATA}), "9"),  # its volume is still lost
    ({vol.ACCEPT_EMPTY_ANNOTATION: "data"}, frozenset({vol.DATA}), None),  # gone, or the status write was stale
])
def test_nothing_to_release_is_an_empty_plan(annotations: dict[str, str], live: frozenset[str],
                                             version: str | None) -> None:
    facts = vol.AcceptanceFacts(db=database(annotations), live=live, resource_version=version)
    assert vol.plan_release(facts) == vol.AcceptancePlan(Plan())
