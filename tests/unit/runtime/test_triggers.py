"""Triggers: object -> keys to reconcile."""

from __future__ import annotations

from typing import Any

from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.runtime.triggers import enqueue_controller_owner, enqueue_mapped, enqueue_self, unless_own_write


def owned(*owners: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "db1-0", "namespace": "ns", "ownerReferences": list(owners)}}


def owner(kind: str = "SampleDB", api_version: str = "sampledb.io/v1alpha1", name: str = "db1",
          controller: bool | None = True) -> dict[str, Any]:
    ref: dict[str, Any] = {"kind": kind, "apiVersion": api_version, "name": name, "uid": "u"}
    if controller is not None:
        ref["controller"] = controller
    return ref


def test_enqueue_self_enqueues_the_objects_ref_for_any_event_type() -> None:
    got: list[ObjectRef] = []
    handler = enqueue_self(got.append)
    handler("DELETED", {"metadata": {"name": "a", "namespace": "ns"}})
    handler("ADDED", {"metadata": {"name": "cluster-wide"}})
    assert got == [ObjectRef("ns", "a"), ObjectRef("", "cluster-wide")]


def test_controller_owner_of_matching_kind_and_group_is_enqueued_in_the_objects_namespace() -> None:
    got: list[ObjectRef] = []
    handler = enqueue_controller_owner(got.append, owner_kind="SampleDB", owner_api_version="sampledb.io/v1")
    handler("MODIFIED", owned(owner(kind="ReplicaSet", api_version="apps/v1", name="rs"),
                              owner(name="db1")))
    assert got == [ObjectRef("ns", "db1")]


def test_non_controller_owner_other_group_or_kind_are_ignored() -> None:
    got: list[ObjectRef] = []
    handler = enqueue_controller_owner(got.append, owner_kind="SampleDB",
                                       owner_api_version="sampledb.io/v1alpha1")
    handler("ADDED", owned(owner(controller=False)))
    handler("ADDED", owned(owner(controller=None)))
    handler("ADDED", owned(owner(api_version="other.io/v1alpha1")))
    handler("ADDED", owned(owner(kind="SampleDBBackup")))
    handler("ADDED", {"metadata": {"name": "orphan", "namespace": "ns"}})
    assert got == []


def test_enqueue_mapped_enqueues_every_mapped_ref() -> None:
    got: list[ObjectRef] = []
    handler = enqueue_mapped(got.append, lambda o: [ObjectRef("ns", n) for n in o["spec"]["targets"]])
    handler("MODIFIED", {"metadata": {"name": "x"}, "spec": {"targets": ["a", "b"]}})
    assert got == [ObjectRef("ns", "a"), ObjectRef("ns", "b")]


def test_unless_own_write_drops_only_the_event_of_an_own_write_and_never_a_deletion() -> None:
    got: list[ObjectRef] = []
    mine = {"metadata": {"name": "mine", "namespace": "ns", "resourceVersion": "7"}}
    theirs = {"metadata": {"name": "theirs", "namespace": "ns", "resourceVersion": "8"}}
    handler = unless_own_write(enqueue_self(got.append), lambda o: o is mine)
    handler("MODIFIED", mine)
    handler("ADDED", theirs)
    handler("DELETED", mine)
    assert got == [ObjectRef("ns", "theirs"), ObjectRef("ns", "mine")]
