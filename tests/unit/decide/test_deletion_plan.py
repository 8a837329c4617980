"""decide/lifecycle/deletion.py: one pass of a SampleDB's deletion as a plan, without any server.

The effects come in the order they are applied: the snapshot's backup before the status, the
retained objects' labels before the deletes, the deletes before their Event, the finalizer last.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sampledb_operator.decide.effects import Create, Delete, Effect, Emit, Patch
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.lifecycle import deletion as dd
from sampledb_operator.decide.lifecycle import lifecycle
from sampledb_operator.decide.lifecycle.lifecycle import Attempt, Step
from sampledb_operator.model import names
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
STS, PVC = "StatefulSet", "PersistentVolumeClaim"
DATA = ((STS, "orders"), (PVC, names.data_pvc_name("orders")))
STANDBY = ((STS, names.instance_statefulset_name("orders", 1)), (PVC, names.instance_data_pvc_name("orders", 1)))
DELETABLE = (*DATA, ("Secret", names.secret_name("orders")), ("Secret", names.superuser_secret_name("orders")),
             ("ConfigMap", names.configmap_name("orders")),
             ("Service", names.client_service_name("orders")))
RUNNING_STATUS: dict[str, Any] = {"phase": "Running", "currentVersion": "16.4"}


def database(*, policy: str = "Snapshot", status: dict[str, Any] | None = None,
             annotations: dict[str, str] | None = None, finalizers: tuple[str, ...] = (lifecycle.FINALIZER,)
             ) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "generation": 3, "resourceVersion": "42",
                     "deletionTimestamp": "2026-11-30T08:59:00Z", "finalizers": [*finalizers, "example.com/other"],
                     "annotations": annotations or {}},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "deletionPolicy": policy},
        "status": RUNNING_STATUS if status is None else status,
    })


def facts(db: SampleDB | None = None, *, attempts: tuple[Attempt, ...] = (), standby: bool = False,
          live: frozenset[tuple[str, str]] | None = None, now: datetime = NOW) -> dd.DeletionFacts:
    instances = STANDBY if standby else ()
    return dd.DeletionFacts(db=db or database(), data_children=DATA, instance_children=instances,
                            deletable_children=DELETABLE,
                            live=frozenset({*DELETABLE, *instances}) if live is None else live,
                            attempts=attempts, namespace_terminating=False, now=now)


def kinds(effects: tuple[Effect, ...]) -> list[str]:
    return [type(e).__name__ for e in effects]


def events(effects: tuple[Effect, ...]) -> list[EventSpec]:
    out = []
    for e in effects:
        if isinstance(e, Emit):
            out.append(e.event)
        elif isinstance(e, Create) and e.announce is not None:
            out.append(e.announce)
    return out


def test_the_first_pass_creates_the_snapshot_then_writes_deleting_and_deletes_nothing() -> None:
    planned = dd.plan_deletion(facts())
    create, status = planned.plan.effects
    name = lifecycle.snapshot_backup_name("orders", "uid-1", 1)
    assert isinstance(create, Create) and create.obj["metadata"]["name"] == name
    assert create.obj["metadata"]["labels"]["sampledb.io/attempt"] == "1"
    assert create.announce == EventSpec("Normal", "SnapshotStarted", f"taking the final snapshot (attempt 1): {name}")
    assert isinstance(status, Patch) and status.subresource == "status"
    assert status.patch["metadata"] == {"resourceVersion": "42"}
    assert status.patch["status"]["phase"] == "Deleting"
    [cond] = status.patch["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("DeletionBlocked", "False", "Snapshotting")
    assert cond["lastTransitionTime"] == "2026-11-30T09:00:00Z" and cond["observedGeneration"] == 3
    assert planned.plan.result is None and not planned.releases


def written_status(planned: dd.DeletionPlan) -> dict[str, Any]:
    patch = next(e for e in planned.plan.effects if isinstance(e, Patch) and e.subresource == "status")
    return dict(patch.patch["status"])


@pytest.mark.parametrize("phase", [None, "Pending", "Running"])
def test_a_snapshot_in_progress_writes_the_status_once_and_nothing_else(phase: str | None) -> None:
    first = dd.plan_deletion(facts(attempts=(Attempt(1, phase),)))
    assert kinds(first.plan.effects) == ["Patch"]
    again = dd.plan_deletion(facts(database(status=written_status(first)), attempts=(Attempt(1, phase),)))
    assert again.plan.effects == () and again.plan.result is None


@pytest.mark.parametrize("phase", [None, "Pending", "Running", "Failed"])
def test_nothing_is_deleted_and_the_finalizer_stays_before_the_snapshot_succeeded(phase: str | None) -> None:
    attempt = Attempt(1, phase, completed_at=NOW, message="boom")
    effects = dd.plan_deletion(facts(attempts=(attempt,), now=NOW + timedelta(seconds=1))).plan.effects
    assert not [e for e in effects if isinstance(e, Delete)]
    assert not [e for e in effects if isinstance(e, Patch) and e.subresource is None]


def test_a_failed_snapshot_blocks_with_a_warning_on_the_transition_only_and_comes_back_after_the_backoff() -> None:
    failed = Attempt(1, "Failed", completed_at=NOW, message="pg_dump: connection refused")
    first = dd.plan_deletion(facts(attempts=(failed,), now=NOW + timedelta(seconds=3)))
    assert first.decision.step is Step.RETRY_LATER
    assert kinds(first.plan.effects) == ["Patch", "Emit"]  # the Event only once the status is written
    message = "snapshot attempt 1 failed: pg_dump: connection refused"
    assert events(first.plan.effects) == [EventSpec("Warning", "DeletionBlocked", message)]
    cond = written_status(first)["conditions"][0]
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "SnapshotFailed", message)
    assert first.plan.result == Result(requeue_after=lifecycle.retry_delay(1) - 3)

    blocked = database(status=written_status(first))
    again = dd.plan_deletion(facts(blocked, attempts=(failed,), now=NOW + timedelta(seconds=5)))
    assert again.plan.effects == ()  # unchanged: no write, no second Event
    assert again.plan.result == Result(requeue_after=lifecycle.retry_delay(1) - 5)

    other = replace(failed, message="disk full")
    changed = dd.plan_deletion(facts(blocked, attempts=(other,), now=NOW + timedelta(seconds=5)))
    assert kinds(changed.plan.effects) == ["Patch"]  # a new message is written, still no Event

    retry = dd.plan_deletion(facts(blocked, attempts=(failed,), now=NOW + timedelta(seconds=10)))
    create, status = retry.plan.effects
    assert isinstance(create, Create) and create.obj["metadata"]["labels"]["sampledb.io/attempt"] == "2"
    cond = next(c for c in status.patch["status"]["conditions"] if c["type"] == "DeletionBlocked")  # type: ignore[union-attr]
    assert (cond["status"], cond["reason"]) == ("False", "Snapshotting")


def test_a_long_failure_message_is_cut_in_the_condition_but_not_in_the_event() -> None:
    failed = Attempt(1, "Failed", completed_at=NOW, message="x" * 2000)
    effects = dd.plan_deletion(facts(attempts=(failed,), now=NOW)).plan.effects
    status, emit = effects
    assert isinstance(status, Patch) and len(status.patch["status"]["conditions"][0]["message"]) == 1000
    assert isinstance(emit, Emit) and len(emit.event.message) > 2000


def test_after_the_snapshot_succeeded_the_live_children_go_then_the_event_then_the_finalizer() -> None:
    terminating = ("ConfigMap", names.configmap_name("orders"))
    planned = dd.plan_deletion(facts(attempts=(Attempt(1, "Succeeded"),), standby=True,
                                     live=frozenset({*DELETABLE, *STANDBY} - {terminating})))
    *deletes, emit, release = planned.plan.effects
    assert [(d.kind, d.name) for d in deletes] == [  # type: ignore[union-attr]
        *STANDBY, *(c for c in DELETABLE if c != terminating)]
    assert isinstance(emit, Emit) and emit.event == EventSpec("Normal", "DataDeleted", "snapshot attempt 1 succeeded")
    assert isinstance(release, Patch) and release.subresource is None
    assert release.patch == {"metadata": {"finalizers": ["example.com/other"], "resourceVersion": "42"}}
    assert planned.releases and planned.plan.result is None


def test_the_skip_annotation_deletes_with_a_warning_first() -> None:
    db = database(annotations={lifecycle.SKIP_SNAPSHOT_ANNOTATION: "true"})
    effects = dd.plan_deletion(facts(db)).plan.effects
    reason = f"the {lifecycle.SKIP_SNAPSHOT_ANNOTATION} annotation skips the snapshot"
    assert effects[0] == Emit(EventSpec("Warning", "SnapshotSkipped", reason))
    assert kinds(effects) == ["Emit", *["Delete"] * len(DELETABLE), "Emit", "Patch"]
    assert not [e for e in effects if isinstance(e, Create)]


def test_retain_labels_every_data_volume_and_the_secret_and_deletes_the_rest() -> None:
    planned = dd.plan_deletion(facts(database(policy="Retain"), standby=True))
    data, secret, superuser = names.data_pvc_name("orders"), names.secret_name("orders"), names.superuser_secret_name(
        "orders")
    standby_pvc = STANDBY[1][1]
    labels = [e for e in planned.plan.effects if isinstance(e, Patch) and e.kind != "SampleDB"]
    assert [(p.kind, p.name) for p in labels] == [*((PVC, v) for v in sorted({data, standby_pvc})), ("Secret", secret),
                                                  ("Secret", superuser)]
    assert labels[0].patch == {"metadata": {"labels": {"sampledb.io/retained-from": "orders"},
                                            "annotations": {"sampledb.io/retained-from-uid": "uid-1"}}}
    deleted = {(e.kind, e.name) for e in planned.plan.effects if isinstance(e, Delete)}
    assert deleted == {STANDBY[0], *(c for c in DELETABLE if c[1] not in (data, secret, superuser))}
    assert [e.reason for e in events(planned.plan.effects)] == ["DataRetained"]
    assert events(planned.plan.effects)[0].message == (
        f"PVC {data} and Secrets {secret}, {superuser} are kept, labelled sampledb.io/retained-from=orders;"
        " a new SampleDB of this name adopts them")
    assert isinstance(planned.plan.effects[-1], Patch) and planned.plan.effects[-1].kind == "SampleDB"


def test_delete_and_a_database_that_never_ran_skip_the_snapshot() -> None:
    for db, reason in ((database(policy="Delete"), "deletionPolicy Delete: no snapshot"),
                       (database(status={}), "the database never ran: there is nothing to snapshot")):
        effects = dd.plan_deletion(facts(db)).plan.effects
        assert [e.reason for e in events(effects)] == ["DataDeleted"] and events(effects)[0].message == reason
        assert isinstance(effects[-1], Patch) and "finalizers" in effects[-1].patch["metadata"]


def test_with_the_data_gone_the_rest_is_removed_quietly_and_the_finalizer_released() -> None:
    rest = frozenset(DELETABLE[2:])
    effects = dd.plan_deletion(facts(live=rest)).plan.effects
    assert {(e.kind, e.name) for e in effects if isinstance(e, Delete)} == rest
    assert events(effects) == [] and kinds(effects)[-1] == "Patch"


def test_the_namespace_matters_only_for_a_snapshot_with_data_left() -> None:
    assert dd.namespace_read_needed(facts())
    assert not dd.namespace_read_needed(facts(database(policy="Retain")))
    assert not dd.namespace_read_needed(facts(live=frozenset(DELETABLE[2:])))
    terminating = replace(facts(), namespace_terminating=True)
    assert dd.plan_deletion(terminating).decision.step is Step.DELETE_DATA
    retain = replace(facts(database(policy="Retain")), namespace_terminating=True)
    assert dd.deletion_input(retain).namespace_terminating is False


def test_without_the_finalizer_there_is_nothing_to_do() -> None:
    db = database(finalizers=())
    assert not dd.finalizing(db)
    assert dd.plan_deletion(facts(db)).plan.effects == ()


def test_an_attempt_is_read_from_its_backup() -> None:
    backup = {"metadata": {"labels": {"sampledb.io/attempt": "3"}},
              "status": {"phase": "Failed", "completedAt": "2026-11-30T09:00:00Z", "message": "boom"}}
    assert dd.attempt_of(backup) == Attempt(3, "Failed", NOW, "boom")
    assert dd.attempt_of({"metadata": {}}) == Attempt(1, None)
