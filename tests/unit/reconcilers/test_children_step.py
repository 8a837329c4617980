"""reconcilers/children.py on the fake cluster: the children of a new database are made once, a pass over
children in shape writes nothing, drift is put back, the Secret is never overwritten, a SampleDB
ownerReference on a long-lived child is removed (but for the PodDisruptionBudget, owned on purpose), and the
PodDisruptionBudget comes with a second instance and goes at one."""

from __future__ import annotations

from tests.support.fake_cluster import NS, FakeCluster, sampledb

from sampledb_operator import dataplane
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.labels import labels
from sampledb_operator.kube.errors import Forbidden
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.reconcilers.children import (
    REFUSED_RECHECK_SECONDS,
    apply_children,
    deletable_children,
    disown,
    observed_children,
    replica_service_made,
    retire_legacy_scripts,
    unowned_children,
)
from sampledb_operator.reconcilers.credential_secrets import SecretOutcome, ensure_secret

SCRIPTS = dataplane.all_scripts()
SECRET = names.secret_name("orders")
NAME_LABEL = "app.kubernetes.io/name"


def new_database(cluster: FakeCluster) -> SampleDB:
    return SampleDB.model_validate(cluster.put("SampleDB", sampledb()))


async def children_step(cluster: FakeCluster, db: SampleDB) -> None:
    """The children step as the SampleDB reconciler runs it: the Secret, then the other children."""
    observed = observed_children(cluster.ctx, db)
    secret = await ensure_secret(cluster.ctx, db, observed)
    inputs = d.Inputs(db=db, scripts=SCRIPTS, replica_service=replica_service_made(db, observed))
    applied = await apply_children(cluster.ctx, db, observed, inputs,
                                   created_before=secret.created)
    assert applied.problems == () and secret.problems == ()
    await disown(cluster.ctx, db, observed)


def made_children(db: SampleDB) -> list[tuple[str, str]]:
    """What the children step makes of a single instance: the database's long-lived children (not an earlier
    version's own scripts ConfigMap, nor the `-ro` Service, made only once there are standbys, nor the TLS Secrets,
    made by the TLS step) and the namespace's shared scripts ConfigMap."""
    skipped = {("ConfigMap", d.legacy_scripts_configmap_name(db)),
               ("Service", names.replica_service_name(db.metadata.name)),
               ("Secret", names.ca_secret_name(db.metadata.name)), ("Secret", names.tls_secret_name(db.metadata.name))}
    return [c for c in unowned_children(db) if c not in skipped] + [("ConfigMap", d.SCRIPTS_CONFIGMAP)]


def stored_children(cluster: FakeCluster, db: SampleDB) -> set[tuple[str, str]]:
    return {(kind, name) for kind, name in [*unowned_children(db), ("ConfigMap", d.SCRIPTS_CONFIGMAP)]
            if cluster.get(kind, name) is not None}


async def test_a_new_database_gets_its_nine_children_once_and_one_event_naming_them() -> None:
    cluster = FakeCluster()
    db = new_database(cluster)
    await children_step(cluster, db)
    children = made_children(db)
    assert len(children) == 9
    assert stored_children(cluster, db) == set(children)
    assert len(cluster.written()) == 9
    assert cluster.written("create") == [("create", "Secret", names.superuser_secret_name("orders")),
                                         ("create", "Secret", SECRET)]
    [(kind, reason, message)] = cluster.recorder.events
    assert (kind, reason) == ("Normal", "CreatedChildren")
    assert all(f"{k} {n}" in message for k, n in children)

    cluster.writes.clear()
    await children_step(cluster, db)  # everything in shape: no write, no event
    assert cluster.written() == []
    assert len(cluster.recorder.events) == 1


async def test_a_service_label_changed_by_hand_is_put_back_and_only_that() -> None:
    cluster = FakeCluster()
    db = new_database(cluster)
    await children_step(cluster, db)
    client = names.client_service_name("orders")
    cluster.patch("Service", client, {"metadata": {"labels": {NAME_LABEL: "changed"}}})
    cluster.writes.clear()
    await children_step(cluster, db)
    assert cluster.written() == [("apply", "Service", client)]
    service = cluster.get("Service", client)
    assert service is not None and service["metadata"]["labels"][NAME_LABEL] == "postgresql"
    assert cluster.recorder.reasons()[-1] == "UpdatedService"


async def test_the_read_only_service_is_made_with_standbys_and_kept_in_shape_after_a_scale_down() -> None:
    cluster = FakeCluster()
    ro = names.replica_service_name("orders")
    await children_step(cluster, new_database(cluster))
    assert cluster.get("Service", ro) is None  # one instance: no -ro Service (it would select nothing)
    db = SampleDB.model_validate(cluster.put("SampleDB", sampledb(replicas=2)))
    cluster.writes.clear()
    await children_step(cluster, db)
    assert ("apply", "Service", ro) in cluster.written()
    db = SampleDB.model_validate(cluster.put("SampleDB", sampledb(replicas=1)))
    cluster.patch("Service", ro, {"metadata": {"labels": {NAME_LABEL: "changed"}}})
    cluster.writes.clear()
    await children_step(cluster, db)
    # still there, put back in shape, not deleted (the PodDisruptionBudgets go: one instance; the StatefulSet
    # records the generation its template is for, without an Event)
    assert sorted(cluster.written()) == [("apply", "Service", ro), ("apply", "StatefulSet", "orders"),
                                         ("delete", "PodDisruptionBudget", "orders"),
                                         ("delete", "PodDisruptionBudget", "orders-primary")]
    assert "UpdatedStatefulSet" not in cluster.recorder.reasons()
    service = cluster.get("Service", ro)
    assert service is not None and service["metadata"]["labels"][NAME_LABEL] == "postgresql"


async def test_the_secret_is_created_once_and_never_overwritten() -> None:
    cluster = FakeCluster()
    db = new_database(cluster)
    first = await ensure_secret(cluster.ctx, db, {})
    assert first.created == (f"Secret {names.superuser_secret_name('orders')}", f"Secret {SECRET}")
    stored = cluster.get("Secret", SECRET)
    assert stored is not None
    password = stored["data"]["password"]

    cluster.writes.clear()
    assert await ensure_secret(cluster.ctx, db, observed_children(cluster.ctx, db)) == SecretOutcome()
    assert cluster.written() == []  # seen in the cache: not even tried

    stale = await ensure_secret(cluster.ctx, db, {})  # a cache that has not seen it yet
    assert stale.created == () and stale.problems == ()
    assert cluster.written() == [("create", "Secret", names.superuser_secret_name("orders")),
                                 ("create", "Secret", SECRET)]  # tried, refused: AlreadyExists
    stored = cluster.get("Secret", SECRET)
    assert stored is not None and stored["data"]["password"] == password


async def test_a_deleted_secret_is_not_recreated_over_existing_data() -> None:
    cluster = FakeCluster()
    db = new_database(cluster)
    await children_step(cluster, db)
    await cluster.ctx.apis["Secret"].delete(SECRET, NS)
    cluster.writes.clear()
    outcome = await ensure_secret(cluster.ctx, db, observed_children(cluster.ctx, db))
    assert outcome.created == ()
    [problem] = outcome.problems
    assert problem.reason == "CredentialsMissing"
    assert cluster.written() == []


async def test_disown_removes_only_the_sampledb_owner_reference() -> None:
    cluster = FakeCluster()
    db = new_database(cluster)
    await children_step(cluster, db)
    config = names.configmap_name("orders")
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u-x"}
    owner = {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "name": "orders", "uid": db.metadata.uid}
    cluster.patch("ConfigMap", config, {"metadata": {"ownerReferences": [owner, other]}})
    cluster.patch("Service", names.client_service_name("orders"), {"metadata": {"ownerReferences": [owner]}})
    cluster.writes.clear()
    await disown(cluster.ctx, db, observed_children(cluster.ctx, db))
    assert sorted(cluster.written()) == [("patch", "ConfigMap", config),
                                         ("patch", "Service", names.client_service_name("orders"))]
    assert cluster.get("ConfigMap", config)["metadata"]["ownerReferences"] == [other]  # type: ignore[index]
    service = cluster.get("Service", names.client_service_name("orders"))
    assert service is not None and "ownerReferences" not in service["metadata"]

    cluster.writes.clear()
    await disown(cluster.ctx, db, observed_children(cluster.ctx, db))
    assert cluster.written() == []


async def test_a_second_database_of_the_namespace_shares_the_scripts_configmap_and_writes_none() -> None:
    cluster = FakeCluster()
    await children_step(cluster, new_database(cluster))
    other = SampleDB.model_validate(cluster.put("SampleDB", sampledb(name="billing")))
    cluster.writes.clear()
    await children_step(cluster, other)
    assert ("ConfigMap", d.SCRIPTS_CONFIGMAP) not in {(k, n) for _verb, k, n in cluster.written()}
    assert len(cluster.written()) == 8  # its own eight children
    assert cluster.get("ConfigMap", d.legacy_scripts_configmap_name(other)) is None


async def test_the_shared_scripts_edited_by_hand_are_put_back() -> None:
    cluster = FakeCluster()
    db = new_database(cluster)
    await children_step(cluster, db)
    cluster.patch("ConfigMap", d.SCRIPTS_CONFIGMAP, {"data": {"lib.sh": "echo changed"}})
    cluster.writes.clear()
    await children_step(cluster, db)
    assert cluster.written() == [("apply", "ConfigMap", d.SCRIPTS_CONFIGMAP)]
    shared = cluster.get("ConfigMap", d.SCRIPTS_CONFIGMAP)
    assert shared is not None and shared["data"] == SCRIPTS


async def test_an_earlier_versions_own_scripts_configmap_goes_once_nothing_mounts_it() -> None:
    """A database made by an earlier version has `<name>-scripts`, mounted by its StatefulSet: it stays while the
    StatefulSet's template or pods still use it, and goes once the template names the shared one and rolled out."""
    cluster = FakeCluster()
    db = new_database(cluster)
    legacy = d.legacy_scripts_configmap_name(db)
    cluster.put("ConfigMap", {"metadata": {"name": legacy, "labels": labels(db, "scripts")}, "data": SCRIPTS})
    await children_step(cluster, db)
    sts = cluster.get("StatefulSet", "orders")
    assert sts is not None
    old_template = {**sts["spec"]["template"], "spec": {**sts["spec"]["template"]["spec"], "volumes": [
        {**v, "configMap": {"name": legacy}} if v["name"] == "scripts" else v
        for v in sts["spec"]["template"]["spec"]["volumes"]]}}
    cluster.put("StatefulSet", {**sts, "spec": {**sts["spec"], "template": old_template}})
    cluster.statefulset_ready("orders")

    await retire_legacy_scripts(cluster.ctx, db, observed_children(cluster.ctx, db))  # the template mounts it
    assert cluster.get("ConfigMap", legacy) is not None

    ready = cluster.get("StatefulSet", "orders")
    assert ready is not None
    cluster.put("StatefulSet", {**ready, "spec": {**sts["spec"]}})  # the shared one in the template: rolling out
    cluster.set_status("StatefulSet", "orders", {**ready["status"], "updateRevision": "orders-next"})
    await retire_legacy_scripts(cluster.ctx, db, observed_children(cluster.ctx, db))  # old pods may still mount it
    assert cluster.get("ConfigMap", legacy) is not None

    cluster.statefulset_ready("orders")
    await retire_legacy_scripts(cluster.ctx, db, observed_children(cluster.ctx, db))
    assert cluster.get("ConfigMap", legacy) is None
    assert cluster.written("delete") == [("delete", "ConfigMap", legacy)]


PDB = names.disruption_budget_name("orders")
PRIMARY_PDB = names.primary_disruption_budget_name("orders")


def scaled(cluster: FakeCluster, replicas: int) -> SampleDB:
    """The SampleDB with spec.replicas = `replicas` (its uid kept: the fake server keeps the object's)."""
    return SampleDB.model_validate(cluster.put("SampleDB", sampledb(replicas=replicas)))


async def test_the_disruption_budgets_come_with_a_third_instance_and_go_at_one() -> None:
    """1 -> 3 -> 1: no budget for one instance, two (owned: one of the two standbys kept available, and the primary)
    for three, written once, deleted on the scale-down with an Event saying why, and nothing written after either."""
    cluster = FakeCluster()
    await children_step(cluster, new_database(cluster))
    assert cluster.get("PodDisruptionBudget", PDB) is None
    assert cluster.written(kind="PodDisruptionBudget") == []

    db = scaled(cluster, 3)
    cluster.writes.clear()
    await children_step(cluster, db)
    assert sorted(cluster.written(kind="PodDisruptionBudget")) == [("apply", "PodDisruptionBudget", PDB),
                                                                   ("apply", "PodDisruptionBudget", PRIMARY_PDB)]
    pdb = cluster.get("PodDisruptionBudget", PDB)
    assert pdb is not None
    assert pdb["spec"] == d.disruption_budget(db)["spec"]
    assert pdb["spec"]["minAvailable"] == 1
    primary = cluster.get("PodDisruptionBudget", PRIMARY_PDB)
    assert primary is not None and primary["spec"] == d.primary_disruption_budget(db)["spec"]
    for budget in (pdb, primary):
        assert [(r["kind"], r["uid"], r["controller"]) for r in budget["metadata"]["ownerReferences"]] == [
            ("SampleDB", db.metadata.uid, True)]
        assert budget["metadata"]["labels"] == labels(db, "database")
        assert ("PodDisruptionBudget", budget["metadata"]["name"]) in observed_children(cluster.ctx, db)  # cached
    cluster.writes.clear()
    await children_step(cluster, db)  # in shape: no write
    assert cluster.written() == []

    db = scaled(cluster, 1)
    cluster.writes.clear()
    events = len(cluster.recorder.events)
    await children_step(cluster, db)
    assert sorted(cluster.written(kind="PodDisruptionBudget")) == [("delete", "PodDisruptionBudget", PDB),
                                                                   ("delete", "PodDisruptionBudget", PRIMARY_PDB)]
    assert cluster.get("PodDisruptionBudget", PDB) is None
    assert cluster.get("PodDisruptionBudget", PRIMARY_PDB) is None
    assert ("PodDisruptionBudget", PDB) not in observed_children(cluster.ctx, db)
    assert sorted(cluster.recorder.events[events:]) == [
        ("Normal", "DeletedPodDisruptionBudget", f"PodDisruptionBudget {name} is no longer needed: the database has"
         " one instance") for name in (PDB, PRIMARY_PDB)]
    cluster.writes.clear()
    await children_step(cluster, db)
    assert cluster.written() == []


async def test_the_disruption_budget_follows_a_scale_from_three_to_two() -> None:
    cluster = FakeCluster()
    await children_step(cluster, scaled(cluster, 3))
    db = scaled(cluster, 2)
    cluster.writes.clear()
    await children_step(cluster, db)
    assert cluster.written(kind="PodDisruptionBudget") == [("apply", "PodDisruptionBudget", PDB)]
    pdb = cluster.get("PodDisruptionBudget", PDB)
    assert pdb is not None and pdb["spec"]["minAvailable"] == 0


async def test_a_disruption_budget_edited_or_deleted_by_hand_is_put_back_and_only_it() -> None:
    cluster = FakeCluster()
    db = scaled(cluster, 3)
    await children_step(cluster, db)
    cluster.patch("PodDisruptionBudget", PDB, {"spec": {"minAvailable": 0}})
    cluster.writes.clear()
    await children_step(cluster, db)
    assert cluster.written() == [("apply", "PodDisruptionBudget", PDB)]
    assert cluster.recorder.reasons()[-1] == "UpdatedPodDisruptionBudget"
    assert "spec.minAvailable differs" in cluster.recorder.events[-1][2]
    pdb = cluster.get("PodDisruptionBudget", PDB)
    assert pdb is not None and pdb["spec"]["minAvailable"] == 1

    await cluster.ctx.apis["PodDisruptionBudget"].delete(PDB, NS)
    cluster.writes.clear()
    await children_step(cluster, db)
    assert cluster.written() == [("apply", "PodDisruptionBudget", PDB)]
    assert cluster.get("PodDisruptionBudget", PDB) is not None


async def test_the_disruption_budget_keeps_its_owner_and_is_no_deletion_steps_child() -> None:
    """The garbage collector removes the budget with the SampleDB: disown leaves its ownerReference, and the
    deletion steps do not list it."""
    cluster = FakeCluster()
    db = scaled(cluster, 2)
    await children_step(cluster, db)
    cluster.writes.clear()
    await disown(cluster.ctx, db, observed_children(cluster.ctx, db))
    assert cluster.written() == []
    pdb = cluster.get("PodDisruptionBudget", PDB)
    assert pdb is not None and pdb["metadata"]["ownerReferences"][0]["kind"] == "SampleDB"
    assert ("PodDisruptionBudget", PDB) not in unowned_children(db)
    assert ("PodDisruptionBudget", PDB) not in deletable_children(db)


async def test_a_refused_deletion_of_the_budget_is_a_problem_and_looked_at_again_soon() -> None:
    """The operator's role without `delete` on PodDisruptionBudgets: Degraded says so, the pass goes on (its other
    children are kept in shape) and comes back soon; once allowed, the budget goes."""
    cluster = FakeCluster()
    await children_step(cluster, scaled(cluster, 3))
    db = scaled(cluster, 1)
    message = ('poddisruptionbudgets.policy "orders" is forbidden: User "system:serviceaccount:sampledb-system:'
               'sampledb-operator" cannot delete resource "poddisruptionbudgets" in API group "policy"')
    cluster.fail("PodDisruptionBudget", "delete", Forbidden(403, "Forbidden", message))
    cluster.patch("Service", names.client_service_name("orders"), {"metadata": {"labels": {NAME_LABEL: "x"}}})
    observed = observed_children(cluster.ctx, db)
    applied = await apply_children(cluster.ctx, db, observed, d.Inputs(db=db, scripts=SCRIPTS))
    assert sorted(applied.problems, key=str) == [
        Problem("OperatorForbidden", f"PodDisruptionBudget {name} not deleted: {message}", "spec")
        for name in (PDB, PRIMARY_PDB)]
    assert applied.recheck_after is not None and applied.recheck_after <= REFUSED_RECHECK_SECONDS
    service = cluster.get("Service", names.client_service_name("orders"))
    assert service is not None and service["metadata"]["labels"][NAME_LABEL] == "postgresql"
    assert cluster.get("PodDisruptionBudget", PDB) is not None

    cluster.fail("PodDisruptionBudget", "delete", None)
    await children_step(cluster, db)
    assert cluster.get("PodDisruptionBudget", PDB) is None
    assert cluster.get("PodDisruptionBudget", PRIMARY_PDB) is None


async def test_another_objects_budget_of_that_name_is_not_deleted_at_one_instance() -> None:
    """Only the database's own budget (its label, in the operator's cache) is ever deleted."""
    cluster = FakeCluster()
    db = new_database(cluster)
    cluster.put("PodDisruptionBudget", {"metadata": {"name": PDB, "labels": {"team": "payments"}},
                                        "spec": {"minAvailable": 1}})
    await children_step(cluster, db)
    assert cluster.written(kind="PodDisruptionBudget") == []
    assert cluster.get("PodDisruptionBudget", PDB) is not None
