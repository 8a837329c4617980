"""decide/children/scheduling.py: spec.scheduling in the instances' pod templates, and the spread of the instances over
nodes, without any server."""

from __future__ import annotations

from typing import Any

from sampledb_operator.decide import jobs
from sampledb_operator.decide.children import desired_statefulset as sts_builder
from sampledb_operator.decide.children import pgconfig, scheduling
from sampledb_operator.decide.upgrades import upgrade
from sampledb_operator.model.sampledb import SampleDB

TERM = {"labelSelector": {"matchLabels": {"sampledb.io/database": "orders", "app.kubernetes.io/component": "database"}},
        "topologyKey": "kubernetes.io/hostname"}


def database(**spec: Any) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1"},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, **spec}})


def template(db: SampleDB, index: int) -> dict[str, Any]:
    built: dict[str, Any] = sts_builder.statefulset(db, index=index)["spec"]["template"]
    return built


def test_without_scheduling_instance_0_has_no_scheduling_fields_and_the_others_prefer_other_nodes() -> None:
    db = database(replicas=3)
    first = template(db, 0)["spec"]
    fields = {"affinity", "nodeSelector", "tolerations", "topologySpreadConstraints", "priorityClassName"}
    assert not fields & set(first)
    assert template(db, 0) == template(database(), 0)  # adding standbys never changes (restarts) instance 0
    second = template(db, 1)["spec"]["affinity"]
    assert second == {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": TERM}]}}
    assert TERM["labelSelector"]["matchLabels"].items() <= template(db, 0)["metadata"]["labels"].items()


def test_required_spread_and_no_spread() -> None:
    required = database(replicas=2, scheduling={"instanceSpread": "Required"})
    assert template(required, 1)["spec"]["affinity"] == {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TERM]}}
    assert "affinity" not in template(database(replicas=2, scheduling={"instanceSpread": "None"}), 1)["spec"]


def test_the_users_fields_pass_through_and_the_spread_is_added_to_their_anti_affinity() -> None:
    theirs = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                  {"weight": 10, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "cache"}},
                                                     "topologyKey": "kubernetes.io/hostname"}}]},
              "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                  {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": {"sampledb.io/database": "orders"}}}]
    db = database(replicas=2, scheduling={
        "nodeSelector": {"pool": "db"}, "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db",
                                                         "effect": "NoSchedule"}],
        "affinity": theirs, "topologySpreadConstraints": spread, "priorityClassName": "databases",
        "podLabels": {"team": "payments", "app": "mine"}, "podAnnotations": {"example.com/owner": "payments"}})
    for index in (0, 1):
        pod = template(db, index)
        assert pod["spec"]["nodeSelector"] == {"pool": "db"}
        assert pod["spec"]["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "db",
                                               "effect": "NoSchedule"}]
        assert pod["spec"]["topologySpreadConstraints"] == spread and pod["spec"]["priorityClassName"] == "databases"
        assert pod["spec"]["affinity"]["nodeAffinity"] == theirs["nodeAffinity"]
        assert pod["metadata"]["labels"]["team"] == "payments"
        assert pod["metadata"]["labels"]["sampledb.io/database"] == "orders"
        assert pod["metadata"]["annotations"]["example.com/owner"] == "payments"
        assert pgconfig.RESTART_ANNOTATION in pod["metadata"]["annotations"]
    assert template(db, 0)["spec"]["affinity"]["podAntiAffinity"] == theirs["podAntiAffinity"]
    assert template(db, 1)["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] \
        == [*theirs["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
            {"weight": 100, "podAffinityTerm": TERM}]
    assert len(theirs["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]) == 1  # not mutated


def test_the_operators_labels_win_over_the_users() -> None:
    assert scheduling.pod_labels(database(scheduling={"podLabels": {"x": "1"}}), {"x": "2", "y": "3"}) == {
        "x": "2", "y": "3"}


def test_the_databases_jobs_run_where_its_instances_may_and_the_upgrade_job_still_beside_its_pod() -> None:
    node_affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}
    toleration = {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
    db = database(scheduling={
        "nodeSelector": {"pool": "db"}, "tolerations": [toleration], "priorityClassName": "databases",
        "affinity": {"nodeAffinity": node_affinity,
                     "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TERM]}}})
    pod = jobs.job(db, name="orders-x", component="backup", script="backup.sh")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "db"} and pod["tolerations"] == [toleration]
    assert pod["affinity"] == {"nodeAffinity": node_affinity}  # not the instances' anti-affinity
    assert "priorityClassName" not in pod and "topologySpreadConstraints" not in pod
    moved = upgrade.upgrade_job(db, name="orders-upgrade-1", data_dir="pgdata-17")["spec"]["template"]["spec"]
    assert moved["tolerations"] == [toleration] and moved["affinity"]["nodeAffinity"] == node_affinity
    assert moved["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == \
        "kubernetes.io/hostname"
    plain = jobs.job(database(), name="orders-x", component="backup", script="backup.sh")["spec"]["template"]["spec"]
    assert not {"nodeSelector", "tolerations", "affinity"} & set(plain)
