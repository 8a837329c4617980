"""Planning a chaos run (pure): scope refusals, seeded reproducibility, rate, fault subsets, the
annotation and the fill size."""

from __future__ import annotations

import pytest

from sampledb_operator.chaos.faults import (
    ANNOTATION,
    CHILD_DELETIONS,
    DEFAULT_FAULTS,
    HEADROOM,
    Fault,
    annotation_request,
    fill_size,
    parse_faults,
)
from sampledb_operator.chaos.plan import (
    Scope,
    ScopeError,
    Target,
    fault_count,
    parse_duration,
    plan,
    scope_from_flags,
)

DBS = [Target("shop", "orders"), Target("shop", "billing"), Target("crm", "leads")]


@pytest.mark.parametrize(("namespace", "all_ns", "selector", "all_", "says"), [
    (None, False, "tier=qa", False, "--namespace"),
    ("shop", True, "tier=qa", False, "--namespace"),
    ("shop", False, None, False, "selector"),
    ("shop", False, "  ", False, "selector"),
    (None, True, None, False, "selector"),
    (None, True, None, True, "--all needs --namespace"),
    ("shop", False, "tier=qa", True, "not both"),
])
def test_a_run_without_a_full_scope_is_refused(namespace: str | None, all_ns: bool, selector: str | None, all_: bool,
                                               says: str) -> None:
    with pytest.raises(ScopeError, match=says):
        scope_from_flags(namespace, all_ns, selector, all_)


def test_the_scopes_that_are_accepted() -> None:
    assert scope_from_flags("shop", False, "tier=qa", False) == Scope("shop", "tier=qa")
    assert scope_from_flags("shop", False, None, True) == Scope("shop", None)
    assert scope_from_flags(None, True, "tier=qa", False) == Scope(None, "tier=qa")
    assert "every SampleDB" in Scope("shop", None).describe()


def test_the_same_seed_gives_the_same_plan_whatever_the_listing_order() -> None:
    one = plan(seed=7, targets=DBS, faults=DEFAULT_FAULTS, rate=6, duration=600)
    two = plan(seed=7, targets=list(reversed(DBS)), faults=list(reversed(DEFAULT_FAULTS)), rate=6, duration=600)
    assert one == two
    other = plan(seed=8, targets=DBS, faults=DEFAULT_FAULTS, rate=6, duration=600)
    assert [(p.fault, p.target) for p in other] != [(p.fault, p.target) for p in one]


def test_the_rate_sets_how_many_faults_and_when() -> None:
    schedule = plan(seed=1, targets=DBS, faults=DEFAULT_FAULTS, rate=4, duration=150)
    assert len(schedule) == fault_count(4, 150) == 10
    assert [p.at for p in schedule] == [15.0 * i for i in range(10)]
    assert [p.index for p in schedule] == list(range(10))
    assert fault_count(0.5, 60) == 0 and fault_count(3, 20) == 1 and fault_count(2, 0) == 0


def test_only_the_given_kinds_and_the_given_databases_are_planned() -> None:
    schedule = plan(seed=3, targets=DBS[:2], faults=(Fault.DELETE_POD, Fault.KILL_POSTGRES), rate=60, duration=60)
    assert {p.fault for p in schedule} == {Fault.DELETE_POD, Fault.KILL_POSTGRES}
    assert {p.target for p in schedule} == set(DBS[:2])


def test_kill_leader_has_no_database_target_and_is_never_a_default() -> None:
    assert Fault.KILL_LEADER not in DEFAULT_FAULTS
    schedule = plan(seed=3, targets=DBS, faults=(Fault.KILL_LEADER,), rate=6, duration=60)
    assert schedule and all(p.target is None for p in schedule)


def test_nothing_to_plan_is_an_error() -> None:
    with pytest.raises(ValueError, match="no SampleDB"):
        plan(seed=1, targets=[], faults=DEFAULT_FAULTS, rate=1, duration=60)
    with pytest.raises(ValueError, match="no fault"):
        plan(seed=1, targets=DBS, faults=(), rate=1, duration=60)


def test_fault_names_parse_with_delete_child_standing_for_the_four_deletions() -> None:
    assert parse_faults(None) == DEFAULT_FAULTS
    assert parse_faults("kill-postgres, delete-child") == (Fault.KILL_POSTGRES, *CHILD_DELETIONS)
    assert parse_faults("kill-leader") == (Fault.KILL_LEADER,)
    with pytest.raises(ValueError, match="unknown fault 'kill-primary'"):
        parse_faults("delete-pod,kill-primary")


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("5m", 300), ("1.5h", 5400), ("500ms", 0.5)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("five minutes")


def test_the_annotation_names_a_one_off_fault_or_is_refused() -> None:
    assert annotation_request({}) is None
    assert annotation_request({"other": "x"}) is None
    request = annotation_request({ANNOTATION: "delete-pod"})
    assert request is not None and request.fault is Fault.DELETE_POD
    unknown = annotation_request({ANNOTATION: "kill-primary"})
    assert unknown is not None and unknown.fault is None and "unknown fault" in unknown.refusal
    fill = annotation_request({ANNOTATION: "fill-volume"})
    assert fill is not None and fill.fault is None and "sampledb-operator chaos" in fill.refusal


def test_the_fill_leaves_the_headroom_below_the_capacity_and_on_the_filesystem() -> None:
    mib = 2**20
    # a quota'd volume: 256 MiB, 40 used, 216 free -> fill to 8 MiB free
    assert fill_size(256 * mib, 40 * mib, 216 * mib) == 208 * mib
    # a provisioner without quotas shows the host's 100 GiB free: the PVC's size still bounds the fill
    assert fill_size(256 * mib, 40 * mib, 100 * 1024 * mib) == 256 * mib - 40 * mib - HEADROOM
    # the filesystem is fuller than the volume's size says
    assert fill_size(256 * mib, 40 * mib, 20 * mib) == 12 * mib
    assert fill_size(256 * mib, 250 * mib, 6 * mib) == 0
    assert fill_size(None, 0, 50 * mib) == 42 * mib
