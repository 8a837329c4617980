"""The shipped RBAC is enough and no more, proven by running the operator under it.

The operator runs as its ServiceAccount (a TokenRequest token) with the shipped roles, bindings and
ValidatingAdmissionPolicy (tests/support/rbac.py moves them to test namespaces), through the whole
lifecycle on kwok: create, Ready, edits, storage growth, parameters reload, a second instance and back
(the disruption budget made and deleted), init from a ConfigMap and from an opted-in Secret, migrations,
scheduled backups with retention and verification, a manual backup, a restore, a minor and a major upgrade,
deleting a backup, deletion with each policy, and deleting the namespace. Every API request is counted by
(verb, group, resource, subresource, code) in sampledb_api_requests_total; the test fails on any refused
request, and unless the set of (group, resource, verb) the API server authorized equals what the roles grant
(apart from NEEDED_BY's entries the lifecycle cannot show, each with its reason): the role can only shrink.
Removal tests take single grants away and show the behaviour that needs them fail. The opt-in grants of the
sampledb.io/chaos annotation (manifests/components/chaos, CHAOS_NEEDED_BY) are not in the default
install; a test of its own shows the overlay adding exactly them and the annotation's faults using
them, and the default install refusing those faults.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.e2e.conftest import apply, condition, sampledb, status, wait_ready
from tests.support.kube import create_namespace, get_or_none, kubectl, kubectl_json, release_finalizers, wait_until
from tests.support.operator import REPO, OperatorProcess
from tests.support.rbac import (
    delete_suffixed,
    granted,
    refused,
    relocated,
    render,
    requests,
    token_kubeconfig,
    used,
)

pytestmark = pytest.mark.cluster

MANIFESTS = REPO / "manifests"
WATCHED = ("shop", "analytics")  # the namespaces manifests/overlays/namespaced lists
EVERY_MINUTE = "* * * * *"
POLICY_DENIAL = "ValidatingAdmissionPolicy"
RBAC_DENIAL = "is forbidden: User"

# Every (group, resource, verb) the shipped roles grant, and the behaviour that needs it. The
# lifecycle test shows each one used (authorized at least once) unless it is in EXEMPT.
NEEDED_BY: dict[tuple[str, str, str], str] = {
    ("sampledb.io", "sampledbs", "list"): "cache of SampleDBs (every reconcile)",
    ("sampledb.io", "sampledbs", "watch"): "cache of SampleDBs (every reconcile)",
    ("sampledb.io", "sampledbs", "patch"): "finalizer added on create, removed by each deletion policy",
    ("sampledb.io", "sampledbs", "get"): "a failover or switchover reads the SampleDB live before it fences",
    ("sampledb.io", "sampledbs/status", "patch"): "status and conditions (kubectl wait --for=condition=Ready)",
    ("sampledb.io", "sampledbbackups", "list"): "cache of SampleDBBackups",
    ("sampledb.io", "sampledbbackups", "watch"): "cache of SampleDBBackups",
    ("sampledb.io", "sampledbbackups", "create"): "pre-upgrade, pre-delete (Snapshot policy) and scheduled backups",
    ("sampledb.io", "sampledbbackups", "patch"): "the backup files finalizer; releasing it after the prune Job",
    ("sampledb.io", "sampledbbackups", "delete"): "retention of scheduled backups",
    ("sampledb.io", "sampledbbackups/status", "patch"): "backup phase, location, verification",
    ("apps", "statefulsets", "get"): "a failover confirms the old primary's StatefulSet at 0 replicas (live)",
    ("apps", "statefulsets", "list"): "cache of children",
    ("apps", "statefulsets", "watch"): "cache of children",
    ("apps", "statefulsets", "create"): "server-side apply of a new StatefulSet",
    ("apps", "statefulsets", "patch"): "server-side apply (edits, upgrades)",
    ("apps", "statefulsets", "delete"): "deletion steps (Snapshot, Retain, Delete)",
    ("batch", "jobs", "list"): "cache of children",
    ("batch", "jobs", "watch"): "cache of children",
    ("batch", "jobs", "create"): "init, backup, restore, migrate, upgrade, reload, verify, prune Jobs",
    ("batch", "jobs", "patch"): "TTL of finished Jobs",
    ("", "persistentvolumeclaims", "get"): "a backup to a volume the user made (not in the label-selected cache)",
    ("", "persistentvolumeclaims", "list"): "cache of children",
    ("", "persistentvolumeclaims", "watch"): "cache of children",
    ("", "persistentvolumeclaims", "create"): "server-side apply of the data and backup volumes",
    ("", "persistentvolumeclaims", "patch"): "storage growth; the Retain policy's label",
    ("", "persistentvolumeclaims", "delete"): "Snapshot and Delete policies delete the data volume",
    ("", "services", "list"): "cache of children",
    ("", "services", "watch"): "cache of children",
    ("", "services", "create"): "server-side apply of the Services",
    ("", "services", "patch"): "server-side apply of the Services",
    ("", "services", "delete"): "deletion steps",
    ("apps", "deployments", "list"): "cache of children",
    ("apps", "deployments", "watch"): "cache of children",
    ("apps", "deployments", "create"): "server-side apply of a new pooler Deployment",
    ("apps", "deployments", "patch"): "server-side apply of the pooler Deployment",
    ("apps", "deployments", "delete"): "spec.pooler removed: its Deployment goes",
    ("policy", "poddisruptionbudgets", "list"): "cache of children",
    ("policy", "poddisruptionbudgets", "watch"): "cache of children",
    ("policy", "poddisruptionbudgets", "create"): "server-side apply of a new PodDisruptionBudget (a second instance)",
    ("policy", "poddisruptionbudgets", "patch"): "server-side apply of the PodDisruptionBudget",
    ("policy", "poddisruptionbudgets", "delete"): "scaled down to one instance: the PodDisruptionBudget goes",
    ("", "configmaps", "get"): "init SQL and migrations ConfigMaps the user names",
    ("", "configmaps", "list"): "cache of children",
    ("", "configmaps", "watch"): "cache of children",
    ("", "configmaps", "create"): "server-side apply of the config and scripts ConfigMaps; migration snapshots",
    ("", "configmaps", "patch"): "parameters reload (server-side apply)",
    ("", "configmaps", "delete"): "deletion steps; stale migration snapshots",
    ("", "secrets", "get"): "the init Secret's sampledb.io/init-sql opt-in label",
    ("", "secrets", "list"): "cache of children",
    ("", "secrets", "watch"): "cache of children",
    ("", "secrets", "create"): "the credentials Secret",
    ("", "secrets", "patch"): "the Retain policy's label",
    ("", "secrets", "delete"): "Snapshot and Delete policies delete the credentials",
    ("", "events", "create"): "Events",
    ("", "events", "patch"): "repeated Events (count)",
    ("", "events", "list"): "why a StatefulSet or Job has no pod (its FailedCreate Events)",
    ("", "pods", "get"): "replication",
    ("", "pods", "list"): "replication; a failed Job's pods (termination message)",
    ("", "pods", "watch"): "replication",
    ("", "pods", "patch"): "replication: role labels on the instances' pods",
    ("", "pods", "delete"): "replication: failover",
    ("", "pods/log", "get"): "why a container keeps crashing (the end of its last run's log)",
    ("sampledb.io", "sampledbs/finalizers", "update"): "ownerReferences with blockOwnerDeletion",
    ("sampledb.io", "sampledbbackups/finalizers", "update"): "ownerReferences with blockOwnerDeletion",
    ("storage.k8s.io", "storageclasses", "get"): "storage growth: can the class expand",
    ("", "namespaces", "get"): "deletion: is the namespace terminating (no snapshot Job possible)",
    ("", "nodes", "list"): "node maintenance: the cordoned nodes (the watch's first list)",
    ("", "nodes", "watch"): "node maintenance: the cordoned nodes",
    ("coordination.k8s.io", "leases", "list"): "the nodes' heartbeats (kube-node-lease), while a database has standbys",
    ("coordination.k8s.io", "leases", "get"): "leader election",
    ("coordination.k8s.io", "leases", "create"): "leader election (the first replica)",
    ("coordination.k8s.io", "leases", "update"): "leader election (renew, release)",
}
# Grants the lifecycle cannot show used, with the reason they stay.
EXEMPT: dict[tuple[str, str, str], str] = {
    # used by replication (reconcilers/replication.py, issue #13), which owns the pods rule
    **{("", "pods", verb): "replication" for verb in ("get", "list", "watch", "patch", "delete")},
    # read only when a database's StatefulSet or Job lacks its pod (tests/e2e/test_stuck_databases.py)
    ("", "events", "list"): "a pod refused to a StatefulSet or Job",
    ("", "pods/log", "get"): "a container in CrashLoopBackOff (tests/e2e/test_stuck_databases.py)",
    # live reads before a fence or promotion, which needs real servers (tests/e2e/test_rolling_update.py runs a
    # switchover under the shipped role)
    ("sampledb.io", "sampledbs", "get"): "a failover or switchover: the SampleDB read live before it fences",
    ("apps", "statefulsets", "get"): "a failover or switchover: the old primary's StatefulSet confirmed at 0",
    # the OwnerReferencesPermissionEnforcement admission plugin (off here, on in OpenShift) requires
    # update on the owner's finalizers to set blockOwnerDeletion, which the operator's children carry
    ("sampledb.io", "sampledbs/finalizers", "update"): "OwnerReferencesPermissionEnforcement",
    ("sampledb.io", "sampledbbackups/finalizers", "update"): "OwnerReferencesPermissionEnforcement",
}
# What manifests/components/chaos (in manifests/overlays/chaos) adds to the ClusterRole sampledb-operator, and
# the fault of the sampledb.io/chaos annotation (reconcilers/chaos.py, with --chaos-annotation) that needs it.
# test_the_chaos_overlay_adds_exactly_the_grants_the_annotations_faults_use shows them used: jobs delete
# by the request counter, pods/exec (a WebSocket, not counted there) by the fault's Event. The exec is a
# GET upgrade, authorized as `get` and, since Kubernetes 1.35, as `create` as well: each alone is refused.
CHAOS_NEEDED_BY: dict[tuple[str, str, str], str] = {
    ("", "pods/exec", "get"): "the chaos annotation: kill-postgres (the exec's WebSocket upgrade)",
    ("", "pods/exec", "create"): "the chaos annotation: kill-postgres (the exec's WebSocket upgrade, Kubernetes 1.35+)",
    ("batch", "jobs", "delete"): "the chaos annotation: delete-job",
}


def fallback_lists(reqs_used: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """The `list` grants of the caches filled by streaming lists: a streaming list is a watch (authorized
    as `watch`), so on a server that offers it `list` is never asked for; it is what the watcher falls
    back to where the server refuses streaming lists (runtime/watcher.py), so it stays granted."""
    return {(group, resource, "list") for group, resource, verb in reqs_used if verb == "watch"}


@pytest.fixture
def spaces(cluster: object) -> Iterator[dict[str, str]]:
    """An operator namespace and a watched (kwok) namespace; deleted after the test, with the
    cluster-scoped copies of the roles and policy (named with the suffix)."""
    token = secrets.token_hex(3)
    names = {"operator": f"t-rbac-op-{token}", "watched": f"t-rbac-db-{token}", "suffix": f"-t{token}"}
    for key in ("operator", "watched"):
        create_namespace(names[key], kwok=True)
    yield names
    delete_suffixed(names["suffix"])
    for key in ("operator", "watched"):
        release_finalizers(names[key])
        kubectl("delete", "namespace", names[key], "--wait=false", "--ignore-not-found", check=False)


def install(layout: str, spaces: dict[str, str], *, edit: Any = None) -> list[dict[str, Any]]:
    """The layout's RBAC and policy, relocated, optionally edited in place (edit(objs, suffix)),
    applied; the applied objects."""
    objs = relocated(render(MANIFESTS / layout), spaces["operator"], {WATCHED[0]: spaces["watched"]},
                     spaces["suffix"])
    objs = [o for o in objs if o["metadata"].get("namespace") in (None, spaces["operator"], spaces["watched"])]
    if edit is not None:
        edit(objs, spaces["suffix"])
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(objs))
    return objs


def operator_as_sa(spaces: dict[str, str], tmp_path: Path, *args: str) -> OperatorProcess:
    """The operator with the relocated ServiceAccount's token, watching the test's namespace; `args` more flags."""
    config = token_kubeconfig(tmp_path / "operator.kubeconfig", spaces["operator"])
    return OperatorProcess(config, "--namespaces", spaces["watched"], "--leader-elect", "--lease-namespace",
                           spaces["operator"], "--identity", "rbac-test", "--lease-duration", "4",
                           "--renew-deadline", "3", "--retry-period", "1", "--workers", "2",
                           "--recheck-period", "2", *args)


def configmap(ns: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def backup_phase(name: str, ns: str) -> str | None:
    return ((get_or_none("sampledbbackup", name, ns) or {}).get("status") or {}).get("phase")


def patch_spec(name: str, ns: str, spec: dict[str, Any]) -> None:
    kubectl("patch", "sampledb", name, "-n", ns, "--type=merge", "-p", json.dumps({"spec": spec}))


def gone(kind: str, name: str, ns: str) -> bool:
    return get_or_none(kind, name, ns) is None


def template_annotations(deployment: str, ns: str) -> dict[str, str]:
    obj = get_or_none("deployment", deployment, ns) or {}
    return dict(((obj.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations") or {})


def operator_requests(op: OperatorProcess, verb: str, resource: str) -> float:
    return op.metric("sampledb_api_requests_total", verb=verb, resource=resource)


def run_lifecycle(op: OperatorProcess, ns: str) -> None:
    """Everything a user does with SampleDBs, up to deleting them; the namespace is left to the caller."""
    init_secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "ret-init", "namespace": ns, "labels": {"sampledb.io/init-sql": "true"}},
        "stringData": {"init.sql": "CREATE TABLE t (id int);"}}
    apply([configmap(ns, "life-init", {"init.sql": "CREATE TABLE greetings (id int);"}),
           configmap(ns, "life-sql", {"0001_init.sql": "CREATE TABLE users (id int);"}), init_secret,
           sampledb("life", ns, storage={"size": "1Gi", "storageClassName": "expandable"},
                    init={"configMapKeyRef": {"name": "life-init", "key": "init.sql"}},
                    migrations={"configMapName": "life-sql"},
                    backup={"schedule": EVERY_MINUTE, "retention": 1, "verify": True}),
           sampledb("ret", ns, deletionPolicy="Retain", init={"secretKeyRef": {"name": "ret-init", "key": "init.sql"}}),
           sampledb("del", ns, deletionPolicy="Delete")])
    for name in ("life", "ret", "del"):
        wait_ready(name, ns)
    wait_until(lambda: condition("life", ns, "Migrated").get("status") == "True", timeout=120, what="Migrated=True")
    assert condition("ret", ns, "Initialized").get("reason") == "InitSucceeded"

    # paused twice: the second Paused Event is a repeat, counted on the first (events patch)
    for _ in range(2):
        patch_spec("del", ns, {"paused": True})
        wait_until(lambda: condition("del", ns, "Progressing").get("reason") == "Paused", timeout=60, what="paused")
        patch_spec("del", ns, {"paused": False})
        wait_until(lambda: condition("del", ns, "Progressing").get("reason") not in (None, "Paused"), timeout=60,
                   what="resumed")
    wait_until(lambda: any(e.get("reason") == "Paused" and (e.get("count") or 0) >= 2
                           for e in kubectl_json("get", "events", "-n", ns)["items"]),
               timeout=60, what="the repeated Paused Event counted")

    # a second instance and back: the disruption budgets made (the standby's, the primary's), then deleted
    patch_spec("del", ns, {"replicas": 2})
    wait_until(lambda: all(((get_or_none("poddisruptionbudget", budget, ns) or {}).get("status") or {}).get(
        "currentHealthy") == 1 for budget in ("del", "del-primary")), timeout=180,
        what="the disruption budgets over the ready standby and the ready primary")
    # a database with a standby: the nodes' heartbeats are read (leases list, every 5 s)
    wait_until(lambda: ("coordination.k8s.io", "leases", "list") in used(requests(op.metrics_text())), timeout=30,
               what="the nodes' heartbeat Leases listed")
    patch_spec("del", ns, {"replicas": 1})
    wait_until(lambda: gone("poddisruptionbudget", "del", ns) and gone("poddisruptionbudget", "del-primary", ns)
               and gone("statefulset", "del-i1", ns), timeout=120,
               what="the disruption budgets and the second instance gone")
    wait_ready("del", ns)

    # a pooler and back: its Deployment made, changed with its configuration, deleted with spec.pooler
    patch_spec("del", ns, {"pooler": {"instances": 1}})
    wait_until(lambda: get_or_none("deployment", "del-pooler", ns), timeout=60, what="the pooler's Deployment")
    first = template_annotations("del-pooler", ns)
    patch_spec("del", ns, {"pooler": {"instances": 1, "mode": "transaction"}})
    wait_until(lambda: template_annotations("del-pooler", ns) != first, timeout=60,
               what="the pooler's Deployment rolled")
    patch_spec("del", ns, {"pooler": None})
    wait_until(lambda: gone("deployment", "del-pooler", ns) and gone("service", "del-pooler", ns), timeout=60,
               what="the pooler gone")

    # edits: a reloadable parameter, storage growth, a minor upgrade (pre-upgrade backup, rolled StatefulSet)
    patch_spec("life", ns, {"version": "16.6", "parameters": {"work_mem": "8MB"}, "storage": {"size": "2Gi"}})
    wait_until(lambda: kubectl_json("get", "pvc", "data-life-0", "-n", ns)["spec"]["resources"]["requests"]["storage"]
               == "2Gi", timeout=90, what="the data volume to grow")
    wait_until(lambda: status("life", ns).get("currentVersion") == "16.6"
               and status("life", ns).get("observedGeneration") == 2, timeout=180, what="the minor upgrade")
    wait_ready("life", ns)

    # a manual backup, a new database restored from it, a major upgrade of that one
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
           "metadata": {"name": "life-manual", "namespace": ns}, "spec": {"database": "life", "reason": "manual"}})
    wait_until(lambda: backup_phase("life-manual", ns) == "Succeeded", timeout=120, what="the manual backup")
    # a backup to a volume the user made (the operator's cache holds only its own)
    apply([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "own-backups", "namespace": ns},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
           {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": "life-own", "namespace": ns},
            "spec": {"database": "life", "reason": "manual", "storage": {"claimName": "own-backups"}}}])
    wait_until(lambda: backup_phase("life-own", ns) == "Succeeded", timeout=120, what="the backup to a user's volume")
    assert operator_requests(op, "get", "persistentvolumeclaims") > 0
    apply(sampledb("copy", ns, version="16.6", deletionPolicy="Delete", restore={"backupName": "life-manual"}))
    wait_ready("copy", ns)
    assert condition("copy", ns, "Initialized").get("reason") == "Restored"
    patch_spec("copy", ns, {"version": "17.2"})
    wait_until(lambda: status("copy", ns).get("currentVersion") == "17.2", timeout=180, what="the major upgrade")
    wait_ready("copy", ns)

    # deleting a backup runs a prune Job, then releases the backup's finalizer
    kubectl("delete", "sampledbbackup", "life-manual", "life-own", "-n", ns, "--wait=false")
    for name in ("life-manual", "life-own"):
        wait_until(lambda n=name: gone("sampledbbackup", n, ns), timeout=120, what=f"backup {name} deleted")

    # the schedule: backups every minute, verified, the older ones deleted (retention 1)
    wait_until(lambda: operator_requests(op, "delete", "sampledbbackups") > 0, timeout=200,
               what="retention to delete a scheduled backup")
    wait_until(lambda: any((b.get("status") or {}).get("verified") is True
                           for b in kubectl_json("get", "sampledbbackups", "-n", ns)["items"]),
               timeout=120, what="a verified backup")

    # deletion, one database per policy
    for name in ("life", "ret", "del"):
        kubectl("delete", "sampledb", name, "-n", ns, "--wait=false")
    for name in ("life", "ret", "del"):
        wait_until(lambda n=name: gone("sampledb", n, ns), timeout=180, what=f"SampleDB {name} deleted")
    retained = kubectl_json("get", "pvc", "data-ret-0", "-n", ns)["metadata"]["labels"]
    assert retained["sampledb.io/retained-from"] == "ret"
    wait_until(lambda: gone("pvc", "data-del-0", ns), timeout=60, what="the Delete policy's volume deleted")
    assert any(b["spec"]["reason"] == "pre-delete" and b["spec"]["database"] == "life"
               for b in kubectl_json("get", "sampledbbackups", "-n", ns)["items"])


def delete_namespace(ns: str, timeout: float = 180) -> None:
    kubectl("delete", "namespace", ns, "--wait=false")
    wait_until(lambda: get_or_none("namespace", ns) is None, timeout=timeout, what=f"namespace {ns} to be deleted")




def denials(log: str) -> list[str]:
    """Log lines of requests refused by RBAC or by the admission policy."""
    return [line for line in log.splitlines() if RBAC_DENIAL in line or POLICY_DENIAL in line]


def as_operator(spaces: dict[str, str], *args: str, input: str | None = None) -> Any:
    return kubectl(*args, f"--as=system:serviceaccount:{spaces['operator']}:sampledb-operator", input=input,
                   check=False)


def job(ns: str, *, labels: dict[str, str] | None = None, sa: str | None = None, **pod: Any) -> dict[str, Any]:
    """A Job like the operator's (restricted, token-less, labelled), with `pod` fields overriding."""
    meta_labels = {"app.kubernetes.io/managed-by": "sampledb-operator"} if labels is None else labels
    spec: dict[str, Any] = {
        "restartPolicy": "Never", "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 999, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "postgres:16.4", "command": ["true"], "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
        **({"serviceAccountName": sa} if sa else {}), **pod}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": "probe-", "namespace": ns, "labels": meta_labels},
            "spec": {"template": {"metadata": {"labels": meta_labels}, "spec": spec}}}


def dry_run_as_operator(spaces: dict[str, str], obj: dict[str, Any]) -> Any:
    return as_operator(spaces, "create", "--dry-run=server", "-f", "-", input=json.dumps(obj))


def wait_policy_enforced(spaces: dict[str, str]) -> None:
    """The relocated policy is loaded by the API server: an unlabelled Job of the operator's is refused."""
    wait_until(lambda: POLICY_DENIAL in dry_run_as_operator(spaces, job(spaces["watched"], labels={})).stderr,
               timeout=30, what="the admission policy to be enforced")


def test_the_lifecycle_under_the_shipped_rbac_and_policy_uses_every_grant_and_is_never_refused(
        spaces: dict[str, str], tmp_path: Path) -> None:
    objs = install("default", spaces)
    assert {o["kind"] for o in objs} >= {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    roles = granted(objs)
    assert set(NEEDED_BY) == roles, "NEEDED_BY must name what each shipped grant is for, and nothing else"
    wait_policy_enforced(spaces)
    with operator_as_sa(spaces, tmp_path) as op:
        try:
            run_lifecycle(op, spaces["watched"])
            before_namespace_deletion = requests(op.metrics_text())
            delete_namespace(spaces["watched"])
        except AssertionError:
            print(op.log_text()[-8000:])
            raise
        reqs = requests(op.metrics_text())
        log = op.log_text()
    for triple, codes in sorted(reqs.items()):
        print("request", triple, codes)
    # nothing refused while the namespace stood; after, only what a terminating namespace refuses
    assert refused(before_namespace_deletion) == {}
    assert denials(log) == []
    assert used(reqs) <= roles
    unused = roles - used(reqs) - fallback_lists(used(reqs)) - set(EXEMPT)
    assert unused == set(), f"granted but never used by the lifecycle: remove from manifests/rbac/rbac.yaml: {unused}"


def test_the_operators_identity_cannot_start_a_privileged_pod_in_kube_system(spaces: dict[str, str]) -> None:
    """The escalation of issue #12: with the operator's credentials, a Job in kube-system running as
    clusterrole-aggregation-controller (which may escalate ClusterRoles). RBAC allows creating Jobs
    in every namespace (the default layout); the admission policy refuses it, and every other way
    out of the restricted, token-less pod the operator builds."""
    install("default", spaces)
    assert kubectl("auth", "can-i", "create", "jobs.batch", "-n", "kube-system",
                   f"--as=system:serviceaccount:{spaces['operator']}:sampledb-operator").stdout.strip() == "yes"
    wait_policy_enforced(spaces)
    ns = spaces["watched"]
    accepted = dry_run_as_operator(spaces, job(ns))
    assert accepted.returncode == 0, accepted.stderr
    hostile = {
        "kube-system escalation": job("kube-system", sa="clusterrole-aggregation-controller"),
        "token mounted": job(ns, automountServiceAccountToken=True),
        "another ServiceAccount": job(ns, sa="builder", automountServiceAccountToken=False),
        "unlabelled": job(ns, labels={"app": "x"}),
        "root": job(ns, securityContext={"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}),
        "host network": job(ns, hostNetwork=True),
        "hostPath": job(ns, volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
        "projected token": job(ns, volumes=[{"name": "t", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}}]}}]),
    }
    privileged = job(ns)
    privileged["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {
        "privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}
    hostile["privileged"] = privileged
    for what, obj in hostile.items():
        out = dry_run_as_operator(spaces, obj)
        assert out.returncode != 0, f"{what}: accepted"
        assert POLICY_DENIAL in out.stderr and "Forbidden" in out.stderr, f"{what}: {out.stderr}"
    # the same Job by a cluster admin is the cluster's business, not the policy's
    admin = kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(hostile["kube-system escalation"]))
    assert admin.returncode == 0


# -- taking single grants away: the behaviour that needs each one fails ------------------------------


def without(role: str, group: str, resource: str, verb: str) -> Any:
    """An edit of the relocated objects: `verb` on group/resource taken out of the role named `role`."""
    def edit(objs: list[dict[str, Any]], suffix: str) -> None:
        [obj] = [o for o in objs
                 if o["kind"] in {"ClusterRole", "Role"} and o["metadata"]["name"] in (role, role + suffix)]
        rules = []
        for rule in obj["rules"]:
            if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
                others = [r for r in rule["resources"] if r != resource]
                if others:
                    rules.append({**rule, "resources": others})
                if rule["verbs"] != [verb]:
                    rules.append({**rule, "resources": [resource], "verbs": [v for v in rule["verbs"] if v != verb]})
            else:
                rules.append(rule)
        assert rules != obj["rules"], f"{verb} {resource} not granted by {role}"
        obj["rules"] = rules
    return edit


def refused_requests(op: OperatorProcess, verb: str, resource: str) -> float:
    return op.metric("sampledb_api_requests_total", verb=verb, resource=resource, code="403")


def init_job_refused(op: OperatorProcess, ns: str) -> None:
    """Without `create` on Jobs the init Job is never made: the database never becomes Ready."""
    apply([configmap(ns, "init", {"init.sql": "SELECT 1;"}),
           sampledb("db", ns, init={"configMapKeyRef": {"name": "init", "key": "init.sql"}})])
    wait_until(lambda: refused_requests(op, "create", "jobs") > 0, timeout=90, what="the init Job refused")
    said = wait_until(lambda: (c := condition("db", ns, "Degraded")).get("reason") == "OperatorForbidden" and c,
                      timeout=60, what="Degraded=OperatorForbidden")  # the status says whose grant is missing
    assert 'cannot create resource "jobs"' in said["message"]
    assert kubectl_json("get", "jobs", "-n", ns)["items"] == []
    assert condition("db", ns, "Ready").get("status") != "True"
    assert condition("db", ns, "Initialized").get("status") != "True"


def snapshot_deletion_refused(op: OperatorProcess, ns: str) -> None:
    """Without `get` on Namespaces the Snapshot policy cannot tell whether a snapshot Job can be made:
    the SampleDB keeps its finalizer and its data."""
    apply(sampledb("db", ns))
    wait_ready("db", ns)
    kubectl("delete", "sampledb", "db", "-n", ns, "--wait=false")
    wait_until(lambda: refused_requests(op, "get", "namespaces") > 0, timeout=90, what="the Namespace read refused")
    db = kubectl_json("get", "sampledb", "db", "-n", ns)
    assert "sampledb.io/finalizer" in db["metadata"]["finalizers"]
    assert get_or_none("pvc", "data-db-0", ns) is not None
    assert kubectl_json("get", "sampledbbackups", "-n", ns)["items"] == []


REMOVALS = {
    "jobs-create/init-job": (without("sampledb-operator", "batch", "jobs", "create"), init_job_refused),
    "namespaces-get/snapshot-deletion": (without("sampledb-operator-cluster-reads", "", "namespaces", "get"),
                                         snapshot_deletion_refused),
}


@pytest.mark.parametrize("removal", sorted(REMOVALS))
def test_removing_a_grant_breaks_the_behaviour_that_needs_it(removal: str, spaces: dict[str, str],
                                                             tmp_path: Path) -> None:
    edit, behaviour = REMOVALS[removal]
    install("default", spaces, edit=edit)
    with operator_as_sa(spaces, tmp_path) as op:
        try:
            behaviour(op, spaces["watched"])
        except AssertionError:
            print(op.log_text()[-5000:])
            raise
        assert RBAC_DENIAL in op.log_text()


# -- the opt-in chaos annotation: the overlay's grants used by its faults, refused without them -----

CHAOS = "sampledb.io/chaos"


def stand_in_job(ns: str, database: str) -> dict[str, Any]:
    """A suspended Job labelled as the database's: one that stays running on kwok (where Jobs' pods
    succeed at once), for delete-job to find."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "stand-in", "namespace": ns, "labels": {"sampledb.io/database": database}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "postgres:16.4", "command": ["true"]}]}}}}


def chaos_answer(ns: str, name: str, fault: str) -> dict[str, Any]:
    """Annotate the SampleDB with `fault`; the Event that answers it (ChaosInjected, ChaosFailed, ...)."""
    kubectl("annotate", "sampledb", name, "-n", ns, f"{CHAOS}={fault}", "--overwrite")

    def answer() -> dict[str, Any] | None:
        return next((e for e in kubectl_json("get", "events", "-n", ns)["items"]
                     if str(e.get("reason", "")).startswith("Chaos") and fault in str(e.get("message", ""))
                     and e["involvedObject"].get("name") == name), None)
    event: dict[str, Any] = wait_until(answer, timeout=60, what=f"the answer to {CHAOS}={fault}")
    return event


def database_with_a_running_job(ns: str) -> None:
    apply(sampledb("db", ns))
    wait_ready("db", ns)
    apply(stand_in_job(ns, "db"))


def test_the_chaos_overlay_adds_exactly_the_grants_the_annotations_faults_use(spaces: dict[str, str],
                                                                             tmp_path: Path) -> None:
    [deployment] = [o for o in render(MANIFESTS / "overlays" / "chaos") if o["kind"] == "Deployment"]
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "SAMPLEDB_CHAOS_ANNOTATION", "value": "true"} in env, "the overlay turns the setting on"
    objs = install("overlays/chaos", spaces)
    assert not set(NEEDED_BY) & set(CHAOS_NEEDED_BY)
    assert granted(objs) == set(NEEDED_BY) | set(CHAOS_NEEDED_BY), "the overlay adds CHAOS_NEEDED_BY, nothing else"
    ns = spaces["watched"]
    with operator_as_sa(spaces, tmp_path, "--chaos-annotation") as op:
        try:
            database_with_a_running_job(ns)
            deleted = chaos_answer(ns, "db", "delete-job")
            assert (deleted["type"], deleted["reason"]) == ("Normal", "ChaosInjected"), deleted["message"]
            assert "Job stand-in" in deleted["message"]
            wait_until(lambda: gone("job", "stand-in", ns), timeout=30, what="the running Job deleted")
            # kwok's pods have no kubelet to exec into: RBAC authorizes the exec, then the API server
            # cannot reach the node (ChaosFailed); what matters here is that nothing forbids it
            killed = chaos_answer(ns, "db", "kill-postgres")
            assert killed["reason"] in {"ChaosInjected", "ChaosFailed"}, killed["message"]
            assert "forbidden" not in killed["message"].lower(), killed["message"]
        except AssertionError:
            print(op.log_text()[-5000:])
            raise
        reqs = requests(op.metrics_text())
        log = op.log_text()
    assert refused(reqs) == {}
    assert denials(log) == []
    assert ("batch", "jobs", "delete") in used(reqs)


CHAOS_REMOVALS = {
    "default-install": ("default", None, ("delete-job", "kill-postgres")),
    "pods-exec-get": ("overlays/chaos", without("sampledb-operator", "", "pods/exec", "get"), ("kill-postgres",)),
    "pods-exec-create": ("overlays/chaos", without("sampledb-operator", "", "pods/exec", "create"), ("kill-postgres",)),
}


@pytest.mark.parametrize("removal", sorted(CHAOS_REMOVALS))
def test_without_the_chaos_grants_the_annotations_faults_are_refused(removal: str, spaces: dict[str, str],
                                                                     tmp_path: Path) -> None:
    """The setting on without the grants its faults need: the default install (none of them), or the
    overlay with one verb of pods/exec taken away (the exec's upgrade needs both)."""
    layout, edit, refused_faults = CHAOS_REMOVALS[removal]
    install(layout, spaces, edit=edit)
    ns = spaces["watched"]
    with operator_as_sa(spaces, tmp_path, "--chaos-annotation") as op:
        try:
            database_with_a_running_job(ns)
            if "delete-job" in refused_faults:
                deleted = chaos_answer(ns, "db", "delete-job")
                assert (deleted["type"], deleted["reason"]) == ("Warning", "ChaosFailed"), deleted["message"]
                assert 'cannot delete resource "jobs"' in deleted["message"]
                assert get_or_none("job", "stand-in", ns) is not None
                assert refused_requests(op, "delete", "jobs") > 0
            killed = chaos_answer(ns, "db", "kill-postgres")
            # the WebSocket handshake refused: 403 without the API server's Status body
            assert (killed["type"], killed["reason"]) == ("Warning", "ChaosFailed"), killed["message"]
            assert "pods/exec failed: 403" in killed["message"]
        except AssertionError:
            print(op.log_text()[-5000:])
            raise


# -- namespaced installs: deleting a watched namespace never wedges -------------------------------


def namespace_with_a_database_and_a_backup(ns: str) -> None:
    apply([sampledb("db", ns),
           {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": "db-one", "namespace": ns}, "spec": {"database": "db", "reason": "manual"}}])
    wait_ready("db", ns)
    wait_until(lambda: backup_phase("db-one", ns) == "Succeeded", timeout=120, what="the backup")
    assert "sampledb.io/finalizer" in kubectl_json("get", "sampledb", "db", "-n", ns)["metadata"]["finalizers"]


def test_deleting_a_watched_namespace_of_a_namespaced_install_completes(spaces: dict[str, str],
                                                                       tmp_path: Path) -> None:
    objs = install("overlays/namespaced", spaces)
    assert [o["kind"] for o in objs if o["metadata"]["name"].startswith("sampledb-operator-release-finalizers")] \
        == ["ClusterRole", "ClusterRoleBinding"]
    assert [o["metadata"]["namespace"] for o in objs if o["kind"] == "RoleBinding"
            and o["roleRef"]["kind"] == "ClusterRole"] == [spaces["watched"]]
    with operator_as_sa(spaces, tmp_path) as op:
        ns = spaces["watched"]
        try:
            namespace_with_a_database_and_a_backup(ns)
            delete_namespace(ns, timeout=180)
        except AssertionError:
            print(op.log_text()[-5000:])
            raise


def test_without_the_cluster_wide_release_grant_a_namespaced_install_wedges_namespace_deletion(
        spaces: dict[str, str], tmp_path: Path) -> None:
    """Why release-finalizers.yaml exists: with the per-namespace RoleBinding alone, the namespace's
    deletion removes the binding and the operator's finalizer patch is refused.

    The namespace controller deletes the binding and the SampleDBs in no set order: when the
    operator's release wins, nothing is refused this time. The test takes the losing order on
    purpose (the binding first, as the namespace controller may), so that it fails whenever the
    release would not be refused, not only under load."""
    def unbound(objs: list[dict[str, Any]], suffix: str) -> None:
        objs[:] = [o for o in objs if not (o["kind"] == "ClusterRoleBinding"
                                           and o["metadata"]["name"].startswith("sampledb-operator-release"))]
    objs = install("overlays/namespaced", spaces, edit=unbound)
    ns = spaces["watched"]
    [binding] = [o["metadata"]["name"] for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == ns]
    with operator_as_sa(spaces, tmp_path) as op:
        namespace_with_a_database_and_a_backup(ns)
        kubectl("delete", "rolebinding", binding, "-n", ns)
        kubectl("delete", "namespace", ns, "--wait=false")
        wait_until(lambda: refused_requests(op, "patch", "sampledbs") > 0
                   or refused_requests(op, "patch", "sampledbbackups") > 0,
                   timeout=120, what="a finalizer patch refused")
        assert get_or_none("namespace", ns) is not None


def test_the_shipped_policy_refuses_the_escalation_by_the_installed_operators_service_account(
        spaces: dict[str, str]) -> None:
    """The same escalation against the objects exactly as shipped (not relocated), as
    tests/support/install.py installs them: impersonating system:serviceaccount:sampledb-system:sampledb-operator."""
    kubectl("apply", "-f", str(MANIFESTS / "operator" / "namespace.yaml"))
    kubectl("apply", "-f", str(MANIFESTS / "rbac"))
    kubectl("apply", "-f", str(MANIFESTS / "policy"))
    shipped = {"operator": "sampledb-system"}
    wait_until(lambda: POLICY_DENIAL in dry_run_as_operator(shipped, job(spaces["watched"], labels={})).stderr,
               timeout=30, what="the shipped admission policy to be enforced")
    out = dry_run_as_operator(shipped, job("kube-system", sa="clusterrole-aggregation-controller"))
    assert out.returncode != 0
    assert POLICY_DENIAL in out.stderr and "sampledb-operator-confinement" in out.stderr, out.stderr
    accepted = dry_run_as_operator(shipped, job(spaces["watched"]))
    assert accepted.returncode == 0, accepted.stderr
