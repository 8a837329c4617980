"""decide/children/desired.disruption_budget, primary_disruption_budget and decide/plan.removals: a database of more
than one instance has a PodDisruptionBudget over its standbys' pods (at most one of them evicted at a time) and one
over its primary's pod (never evicted while ready: it leaves a drained node by a switchover), both owned by its
SampleDB; a single instance has none, and budgets left from more instances are planned for deletion."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sampledb_operator.decide import jobs, plan
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.labels import DATABASE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, owner_reference
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB

SCRIPTS = {"lib.sh": "#!/bin/bash\n"}
PDB_KEY = ("PodDisruptionBudget", "orders")
PRIMARY_PDB_KEY = ("PodDisruptionBudget", "orders-primary")
ROLE = names.ROLE_LABEL


def make_db(name: str = "orders", **spec: Any) -> SampleDB:
    body: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}, **spec}
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": name, "namespace": "shop", "uid": "uid-1", "generation": 1}, "spec": body})


def instances(count: int) -> tuple[d.Instance, ...]:
    return tuple(d.Instance(i) for i in range(count))


def children(db: SampleDB) -> list[dict[str, Any]]:
    return d.children(d.Inputs(db, SCRIPTS, instances=instances(db.spec.replicas)))


def budgets(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "PodDisruptionBudget"]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def test_a_single_instance_has_no_disruption_budget() -> None:
    assert budgets(children(make_db())) == []


def standby_budget(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in budgets(objs) if o["metadata"]["name"] == "orders")


def primary_budget(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in budgets(objs) if o["metadata"]["name"] == "orders-primary")


@pytest.mark.parametrize("replicas", [2, 3, 9])
def test_more_than_one_instance_has_a_standbys_budget_of_one_unavailable_and_a_primary_budget(replicas: int) -> None:
    """All standbys but one kept available, as a count of healthy pods (each instance is a StatefulSet of its own,
    and the disruption controller measures maxUnavailable against the controllers of the pods that exist, which an
    instance without a pod would leave); the primary always (a drain of its node waits for the switchover)."""
    db = make_db(replicas=replicas)
    made = children(db)
    assert len(budgets(made)) == 2
    base = {"app.kubernetes.io/instance": "orders", DATABASE_LABEL: "orders", "app.kubernetes.io/component": "database"}
    standbys, primary = standby_budget(made), primary_budget(made)
    assert standbys["apiVersion"] == primary["apiVersion"] == "policy/v1"
    assert standbys["metadata"]["name"] == names.disruption_budget_name("orders") == "orders"
    assert primary["metadata"]["name"] == names.primary_disruption_budget_name("orders") == "orders-primary"
    assert standbys["metadata"]["namespace"] == primary["metadata"]["namespace"] == "shop"
    assert standbys["spec"] == {"minAvailable": replicas - 2, "selector": {"matchLabels": {**base, ROLE: "replica"}},
                                "unhealthyPodEvictionPolicy": "AlwaysAllow"}
    assert primary["spec"] == {"minAvailable": 1, "selector": {"matchLabels": {**base, ROLE: "primary"}},
                               "unhealthyPodEvictionPolicy": "AlwaysAllow"}
    statefulsets = [o for o in made if o["kind"] == "StatefulSet"]
    assert len(statefulsets) == replicas
    for sts in statefulsets:  # every instance's pod is in exactly one budget, by its role
        labels = sts["spec"]["template"]["metadata"]["labels"]
        for role in ("primary", "replica"):
            pod = {**labels, ROLE: role}
            assert [b["metadata"]["name"] for b in budgets(made) if selects(b["spec"]["selector"], pod)] == [
                "orders-primary" if role == "primary" else "orders"]
        assert not any(selects(b["spec"]["selector"], {k: v for k, v in labels.items() if k != ROLE})
                       for b in budgets(made))


def test_the_budgets_select_no_pod_of_a_job_nor_of_another_database() -> None:
    db = make_db(replicas=3)
    job = jobs.init_job(make_db(replicas=3, init={"configMapKeyRef": {"name": "i", "key": "k"}}))
    assert job is not None
    other = next(o for o in children(make_db("billing", replicas=3)) if o["kind"] == "StatefulSet")
    for pdb in budgets(children(db)):
        assert not selects(pdb["spec"]["selector"], job["spec"]["template"]["metadata"]["labels"])
        for role in ("primary", "replica"):
            assert not selects(pdb["spec"]["selector"], {**other["spec"]["template"]["metadata"]["labels"], ROLE: role})


def test_the_budgets_are_owned_by_the_sampledb_and_labelled_like_the_other_children() -> None:
    """The long-lived children with an owner: no deletion step needs them, the garbage collector removes them."""
    db = make_db(replicas=2)
    service = next(o for o in children(db) if o["kind"] == "Service")
    for pdb in budgets(children(db)):
        assert pdb["metadata"]["ownerReferences"] == [owner_reference(db)]
        assert pdb["metadata"]["labels"] == service["metadata"]["labels"]
        assert pdb["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY
    assert owner_reference(db)["controller"] is True


def test_a_long_database_name_gives_a_primary_budget_name_that_fits() -> None:
    long = "d" * 63
    name = names.primary_disruption_budget_name(long)
    assert len(name) <= 63 and name.endswith("-primary")
    assert name != names.disruption_budget_name(long)


def server_view(obj: dict[str, Any]) -> dict[str, Any]:
    """What the API server holds after applying `obj`: its fields, the server's metadata and the disruption
    controller's status."""
    out = copy.deepcopy(obj)
    out["metadata"].update(uid="pdb-uid", resourceVersion="5", generation=1, creationTimestamp="2026-01-01T00:00:00Z")
    out["status"] = {"currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1, "expectedPods": 3,
                     "observedGeneration": 1}
    return out


def test_the_budget_is_planned_when_missing_and_not_again_once_made() -> None:
    want = children(make_db(replicas=3))
    actions = plan.plan(want, {})
    assert {PDB_KEY, PRIMARY_PDB_KEY} <= {a.key for a in actions}
    observed = {plan.key_of(a.obj): server_view(a.obj) for a in actions}
    assert plan.plan(want, observed) == []
    assert plan.removals(want, observed) == []


def test_the_standbys_budget_follows_the_number_of_instances_and_the_primarys_does_not() -> None:
    three, two = children(make_db(replicas=3)), children(make_db(replicas=2))
    assert plan.drift(standby_budget(two), server_view(standby_budget(three))) == "spec.minAvailable differs"
    assert plan.drift(primary_budget(two), server_view(primary_budget(three))) is None


@pytest.mark.parametrize(("edit", "path"), [
    ({"spec": {"minAvailable": 0}}, "spec.minAvailable"),
    ({"spec": {"minAvailable": "50%"}}, "spec.minAvailable"),
    ({"spec": {"selector": {"matchLabels": {"app.kubernetes.io/component": "other"}}}}, "spec.selector"),
    ({"metadata": {"ownerReferences": []}}, "metadata.ownerReferences"),
])
def test_a_budget_edited_by_hand_is_drift(edit: dict[str, Any], path: str) -> None:
    want = children(make_db(replicas=3))
    pdb = standby_budget(want)
    observed = server_view(pdb)
    for part, fields in edit.items():
        for key, value in fields.items():
            if isinstance(value, dict) and isinstance(observed[part].get(key), dict):
                observed[part][key] = {**observed[part][key], **value}
            else:
                observed[part][key] = value
    reason = plan.drift(pdb, observed)
    assert reason is not None and reason.startswith(path)
    [action] = plan.plan([pdb], {PDB_KEY: observed})
    assert action.obj == pdb


def test_a_budget_no_longer_desired_is_removed_and_nothing_else_ever_is() -> None:
    three = children(make_db(replicas=3))
    observed = {plan.key_of(o): server_view(o) for o in three}
    one = children(make_db(replicas=1))  # scaled down: no budget (and fewer StatefulSets, which are not pruned)
    removals = plan.removals(one, observed)
    assert sorted(r.key for r in removals) == [PDB_KEY, PRIMARY_PDB_KEY]
    assert sorted(r.reason for r in removals) == [
        "PodDisruptionBudget orders is no longer needed: the database has one instance",
        "PodDisruptionBudget orders-primary is no longer needed: the database has one instance"]
    assert {k for k in observed if k not in {plan.key_of(o) for o in one}} > {PDB_KEY, PRIMARY_PDB_KEY}  # others stay
    gone = {PDB_KEY, PRIMARY_PDB_KEY}
    assert plan.removals(one, {k: v for k, v in observed.items() if k not in gone}) == []  # gone: done


def test_a_budget_being_deleted_is_not_deleted_again() -> None:
    pdb = standby_budget(children(make_db(replicas=3)))
    deleting = server_view(pdb)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    assert plan.removals(children(make_db()), {PDB_KEY: deleting}) == []
