"""decide/chaos.py: the chaos annotation's removal, refusal and report as plans, without any server."""

from __future__ import annotations

import pytest

from sampledb_operator.chaos import faults, report
from sampledb_operator.config import OPTIONS_BY_NAME
from sampledb_operator.decide import chaos as dc
from sampledb_operator.decide.effects import Emit, Patch, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.model.sampledb import SampleDB

DB = SampleDB.model_validate({
    "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "resourceVersion": "42",
                 "annotations": {dc.ANNOTATION: "delete-pod"}},
    "spec": {"version": "16.4", "storage": {"size": "1Gi"}}})
REMOVAL = Patch("SampleDB", "orders", {"metadata": {"resourceVersion": "42", "annotations": {dc.ANNOTATION: None}}})


def test_the_spellings_are_the_chaos_packages() -> None:
    assert dc.ANNOTATION == faults.ANNOTATION
    assert (dc.INJECTED, dc.SKIPPED) == (report.INJECTED, report.SKIPPED)
    option = OPTIONS_BY_NAME["chaos_annotation"]
    assert (option.flag, option.env) == (dc.SETTING_FLAG, dc.SETTING_ENV)


def test_no_annotation_is_an_empty_plan() -> None:
    for enabled in (False, True):
        assert dc.plan_chaos(dc.ChaosFacts(db=DB, request=None, enabled=enabled)) == dc.ChaosPlan(Plan())


def test_a_fault_is_injected_only_after_the_conditional_removal() -> None:
    planned = dc.plan_chaos(dc.ChaosFacts(db=DB, request=dc.ChaosRequest("delete-pod", "delete-pod"), enabled=True))
    assert planned == dc.ChaosPlan(Plan((REMOVAL,)), inject="delete-pod")


@pytest.mark.parametrize("request_", [dc.ChaosRequest("kill-postgres", "kill-postgres"),
                                      dc.ChaosRequest("kill-primary", None, "unknown fault 'kill-primary'")])
def test_with_the_setting_off_nothing_is_injected_and_a_warning_names_the_flag(request_: dc.ChaosRequest) -> None:
    for facts in (dc.ChaosFacts(db=DB, request=request_), dc.ChaosFacts(db=DB, request=request_, enabled=False)):
        planned = dc.plan_chaos(facts)
        assert planned.inject is None
        assert planned == dc.ChaosPlan(Plan((REMOVAL, Emit(dc.disabled_event(request_.value)))))
    event = dc.disabled_event("kill-postgres")
    assert (event.type, event.reason) == ("Warning", "ChaosDisabled")
    assert event.message.startswith(f"annotation {dc.ANNOTATION}=kill-postgres: not injected")
    assert "--chaos-annotation" in event.message and "manifests/overlays/chaos" in event.message


def test_a_refused_request_is_removed_then_announced_and_injects_nothing() -> None:
    request = dc.ChaosRequest("fill-volume", None, "fill-volume is not available as a one-off annotation")
    planned = dc.plan_chaos(dc.ChaosFacts(db=DB, request=request, enabled=True))
    assert planned == dc.ChaosPlan(Plan((REMOVAL, Emit(EventSpec(
        "Warning", "ChaosRefused",
        f"annotation {dc.ANNOTATION}=fill-volume: fill-volume is not available as a one-off annotation"))),))


@pytest.mark.parametrize(("injection", "event"), [
    (dc.Injection("delete-pod", "injected", "Pod orders-0"),
     EventSpec("Normal", "ChaosInjected", "delete-pod: injected Pod orders-0")),
    (dc.Injection("delete-job", "skipped", detail="no running Job"),
     EventSpec("Normal", "ChaosSkipped", "delete-job: skipped (no running Job)")),
    (dc.Injection("kill-postgres", "failed", "Pod orders-0", "exec unsupported"),
     EventSpec("Warning", "ChaosFailed", "kill-postgres: failed Pod orders-0 (exec unsupported)")),
    (dc.Injection("kill-postgres", "unsupported"), EventSpec("Warning", "ChaosFailed", "kill-postgres: unsupported")),
])
def test_the_report_is_one_event_by_outcome(injection: dc.Injection, event: EventSpec) -> None:
    assert dc.plan_report(injection) == Plan((Emit(event),))
