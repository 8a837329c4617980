"""decide/replicas/hibernation.py: the annotation's values, what a hibernation waits for, and the condition's course."""

from __future__ import annotations

from sampledb_operator.decide.replicas import hibernation as h
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.sampledb import Problem
from sampledb_operator.model.sampledb_status import SampleDBStatus


def status(reason: str | None = None, ok: bool = False, **fields: object) -> SampleDBStatus:
    conds = [] if reason is None else [Condition(type="Hibernated", status="True" if ok else "False", reason=reason,
                                                 message="m", last_transition_time="2026-12-06T00:00:00Z")]
    return SampleDBStatus.model_validate({"currentVersion": "15.20", "phase": "Running", **fields,
                                          "conditions": [c.model_dump(by_alias=True) for c in conds]})


def test_the_annotation_values() -> None:
    assert h.requested(None) is False and h.requested({}) is False
    assert h.requested({h.HIBERNATION_ANNOTATION: "on"}) is True
    assert h.requested({h.HIBERNATION_ANNOTATION: " ON "}) is True
    assert h.requested({h.HIBERNATION_ANNOTATION: "off"}) is False
    refused = h.requested({h.HIBERNATION_ANNOTATION: "yes please"})
    assert isinstance(refused, Problem) and refused.reason == "InvalidHibernation" and "yes please" in refused.message


def test_what_a_hibernation_waits_for() -> None:
    assert h.must_wait(status(), []) is None
    assert "failover" in (h.must_wait(status(targetPrimary="orders-i1-0"), []) or "")
    assert "Upgrading" in (h.must_wait(status(phase="Upgrading"), []) or "")
    assert "not been ready" in (h.must_wait(SampleDBStatus(), []) or "")
    assert h.must_wait(status(), ["orders-backup-2", "orders-base-1"]) == \
        "Jobs orders-backup-2, orders-base-1 still run"
    # hibernated already: nothing of it runs, nothing to wait for (a Job left over must not wake it)
    assert h.must_wait(status("Hibernated", ok=True, phase="Upgrading"), ["orders-backup-2"]) is None


def test_the_condition_from_hibernated_to_awake() -> None:
    def cond(st: SampleDBStatus, **kw: object) -> tuple[str, str] | None:
        args: dict[str, object] = {"asked": False, "wait_for": None, "primary_ready": False, "stopping": 0,
                                   "generation": 1, **kw}
        c = h.condition(st, **args)  # type: ignore[arg-type]
        return None if c is None else (c.status, c.reason)

    assert cond(status()) is None  # never hibernated: no condition
    assert cond(status(), asked=True, wait_for="Job x still runs") == ("False", "HibernationPending")
    assert cond(status(), asked=True) == ("True", "Hibernated")
    asleep = status("Hibernated", ok=True)
    assert h.hibernating(asleep) and h.waking(asleep)
    assert cond(asleep) == ("False", "Waking")  # no longer asked
    waking = status("Waking")
    assert h.waking(waking) and not h.hibernating(waking)
    assert cond(waking) == ("False", "Waking")
    assert cond(waking, primary_ready=True) == ("False", "Awake")
    awake = status("Awake")
    assert not h.waking(awake) and cond(awake) is None  # left as it is
    assert cond(status("HibernationPending")) == ("False", "Awake")  # asked, then no longer, before it stopped
