"""Which instance switchover promotes and logs reads: the choice, its refusals, the patch, the progress line."""

from __future__ import annotations

from typing import Any

import pytest

from sampledb_operator.plugin.actions import ActionError
from sampledb_operator.plugin.instances import (
    choose_switchover,
    log_pod,
    switchover_patch,
    switchover_progress,
)


def inst(name: str, role: str = "replica", ready: bool = True, lag: int | None = 0,
         lsn: str | None = "0/3000060") -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "role": role, "ready": ready}
    if lsn is not None:
        out["lsn"] = lsn
    if lag is not None:
        out["lagBytes"] = lag
    return out


def ha(*instances: dict[str, Any], replicas: int = 3, primary: str | None = "ha-0", target: str | None = None,
       annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"instances": list(instances)}
    if primary:
        status["primary"] = primary
    if target:
        status["targetPrimary"] = target
    return {"kind": "SampleDB", "metadata": {"name": "ha", "namespace": "shop", "annotations": annotations or {}},
            "spec": {"version": "17.2", "replicas": replicas, **spec}, "status": status}


PRIMARY = inst("ha-0", role="primary", lag=None)


def test_without_to_the_ready_standby_with_the_least_lag_is_chosen() -> None:
    db = ha(PRIMARY, inst("ha-i1-0", lag=4096), inst("ha-i2-0", lag=16))
    choice = choose_switchover(db)
    assert (choice.primary, choice.target) == ("ha-0", "ha-i2-0")
    assert choice.why == "the ready standby with the least lag, 16B"
    assert choice.describe() == "ha-0 -> ha-i2-0 (the ready standby with the least lag, 16B)"
    assert choice.note is None


def test_a_standby_that_is_not_ready_is_never_chosen_and_an_unknown_lag_comes_last() -> None:
    db = ha(PRIMARY, inst("ha-i1-0", lag=0, ready=False), inst("ha-i2-0", lag=None), inst("ha-i3-0", lag=900),
            replicas=4)
    assert choose_switchover(db).target == "ha-i3-0"
    only_unknown = ha(PRIMARY, inst("ha-i2-0", lag=None, lsn=None), inst("ha-i1-0", lag=None, lsn=None))
    choice = choose_switchover(only_unknown)
    assert choice.target == "ha-i1-0"   # ties go to the lowest name
    assert "has no lag" in choice.why
    assert choice.note is not None and "has not read ha-i1-0's WAL position" in choice.note


def test_the_primary_moved_earlier_is_a_standby_like_the_others() -> None:
    db = ha(inst("ha-0", lag=50), inst("ha-i1-0", role="primary", lag=None), primary="ha-i1-0", replicas=2)
    assert choose_switchover(db).describe().startswith("ha-i1-0 -> ha-0")


def test_a_named_target_is_checked() -> None:
    db = ha(PRIMARY, inst("ha-i1-0", lag=4096), inst("ha-i2-0", lag=16))
    choice = choose_switchover(db, "ha-i1-0")
    assert (choice.target, choice.why) == ("ha-i1-0", "named with --to")


@pytest.mark.parametrize(("db", "to", "words"), [
    (ha(PRIMARY, replicas=1), None, "has one instance (spec.replicas 1): there is no standby"),
    (ha(PRIMARY, replicas=1), "ha-i1-0", "has one instance"),
    (ha(PRIMARY, inst("ha-i1-0"), paused=True), None, "is paused"),
    (ha(inst("ha-i1-0"), primary=None), None, "no elected primary yet"),
    (ha(PRIMARY, inst("ha-i1-0"), target="ha-i1-0"), None, "to ha-i1-0 is in progress"),
    (ha(PRIMARY, inst("ha-i1-0")), "ha-0", "ha-0 is already the primary of ha"),
    (ha(PRIMARY, inst("ha-i1-0")), "ha-i7-0", "ha-i7-0 is not an instance of ha; its instances: ha-0 (primary,"
                                              " ready), ha-i1-0 (replica, ready)"),
    (ha(PRIMARY, inst("ha-i1-0", ready=False)), "ha-i1-0", "ha-i1-0 is not ready"),
    (ha(PRIMARY, inst("ha-i1-0", role="fenced")), "ha-i1-0", "ha-i1-0 is fenced, not a standby"),
    (ha(PRIMARY, inst("ha-i1-0", ready=False), inst("ha-i2-0", role="fenced")), None,
     "no standby of ha is ready to take over"),
    (ha(replicas=2), None, "none listed in status.instances yet"),
])
def test_refusals_say_why(db: dict[str, Any], to: str | None, words: str) -> None:
    with pytest.raises(ActionError) as caught:
        choose_switchover(db, to)
    assert words in str(caught.value)


def test_a_pending_request_for_another_standby_is_mentioned() -> None:
    db = ha(PRIMARY, inst("ha-i1-0", lag=10), inst("ha-i2-0", lag=0),
            annotations={"sampledb.io/switchover": "ha-i1-0"})
    assert choose_switchover(db).note == "this replaces the pending request sampledb.io/switchover=ha-i1-0"


def test_the_patch_sets_only_the_annotation_and_guards_it_with_the_resource_version() -> None:
    assert switchover_patch("ha-i1-0") == {"metadata": {"annotations": {"sampledb.io/switchover": "ha-i1-0"}}}
    assert switchover_patch("ha-i1-0", "42") == {"metadata": {"annotations": {"sampledb.io/switchover": "ha-i1-0"},
                                                              "resourceVersion": "42"}}


def test_progress_says_where_the_switchover_stands() -> None:
    asked = {"sampledb.io/switchover": "ha-i1-0"}
    waiting = ha(PRIMARY, annotations=asked)
    waiting["status"]["conditions"] = [{"type": "Degraded", "status": "True", "reason": "SwitchoverPending",
                                        "message": "sampledb.io/switchover=ha-i1-0: that instance is not a ready"
                                                   " standby yet"}]
    p = switchover_progress(waiting, "ha-i1-0")
    assert p.line == ("primary ha-0, SwitchoverPending: sampledb.io/switchover=ha-i1-0: that instance is not a"
                      " ready standby yet")
    assert (p.done, p.withdrawn) == (False, False)
    promoting = switchover_progress(ha(PRIMARY, target="ha-i1-0"), "ha-i1-0")   # the operator cleared nothing yet
    assert (promoting.line, promoting.done, promoting.withdrawn) == ("primary ha-0, promoting ha-i1-0", False,
                                                                     False)
    done = switchover_progress(ha(primary="ha-i1-0"), "ha-i1-0")   # the annotation is removed once done
    assert (done.line, done.done, done.withdrawn) == ("primary ha-i1-0", True, False)
    replaced = switchover_progress(ha(PRIMARY, annotations={"sampledb.io/switchover": "ha-i2-0"}), "ha-i1-0")
    assert replaced.withdrawn and not replaced.done


def test_logs_read_the_primary_unless_an_instance_is_named() -> None:
    db = ha(inst("ha-0"), inst("ha-i1-0", role="primary"), primary="ha-i1-0")
    assert log_pod(db) == "ha-i1-0"
    assert log_pod(db, "ha-0") == "ha-0"
    assert log_pod(ha(primary=None)) == "ha-0"          # before an election: instance 0
    assert log_pod(ha(primary=None), "ha-i2-0") == "ha-i2-0"   # an instance's name, not listed yet
    with pytest.raises(ActionError, match="other-0 is not an instance of ha"):
        log_pod(db, "other-0")
