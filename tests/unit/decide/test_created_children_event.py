"""decide/events.created_children_event: a database's provisioning is announced by one CreatedChildren Event
(naming the StatefulSets that wait for their claims), a repair by one Event a pass; without any server."""

from __future__ import annotations

import pytest

from sampledb_operator.decide.events import EventSpec, created_children_event

FIRST = ("Secret orders-credentials", "PersistentVolumeClaim orders-data", "Service orders")
WAITING = {"orders": "orders-data"}


@pytest.mark.parametrize("provisioning", [True, False])
def test_a_pass_that_created_nothing_announces_nothing_whatever_waits(provisioning: bool) -> None:
    assert created_children_event((), WAITING, provisioning=provisioning) is None
    assert created_children_event((), {}, provisioning=provisioning) is None


def test_the_first_pass_names_what_it_created_and_the_statefulset_that_waits_for_its_claim() -> None:
    assert created_children_event(FIRST, WAITING, provisioning=True) == EventSpec(
        "Normal", "CreatedChildren",
        "created Secret orders-credentials, PersistentVolumeClaim orders-data, Service orders;"
        " StatefulSet orders waits for its claim orders-data to be bound")


def test_a_pass_that_made_everything_at_once_names_it_all() -> None:
    created = (*FIRST, "StatefulSet orders")
    assert created_children_event(created, {}, provisioning=True) == EventSpec(
        "Normal", "CreatedChildren", "created " + ", ".join(created))


def test_while_provisioning_the_statefulset_made_once_its_claim_is_bound_is_not_announced_again() -> None:
    assert created_children_event(("StatefulSet orders",), {}, provisioning=True) is None
    assert created_children_event(("StatefulSet orders", "StatefulSet orders-2"), {}, provisioning=True) is None


def test_a_statefulset_made_again_once_the_database_has_run_is_a_repair_and_announced() -> None:
    assert created_children_event(("StatefulSet orders",), {}, provisioning=False) == EventSpec(
        "Normal", "CreatedChildren", "created StatefulSet orders")


def test_a_statefulset_made_with_other_children_while_provisioning_is_named_with_them() -> None:
    created = ("Service orders-ro", "StatefulSet orders-2")
    event = created_children_event(created, {}, provisioning=True)
    assert event is not None and event.message == "created Service orders-ro, StatefulSet orders-2"
