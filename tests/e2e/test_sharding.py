"""Sharding with three real operator processes (--shards 6) on the real control plane.

The shard Leases end up held by three identities, two each; ~24 SampleDBs across two namespaces all
become Ready, each reconciled only by the process that owns its shard (from the processes' debug
logs); backups made by hand without labels get their database's bucket label; each process caches exactly the
children, database pods, SampleDBs and SampleDBBackups of its own shards (the shard-filtered caches: their
sampledb_cache_objects against the cluster's objects by bucket label, which every SampleDB and backup
carries after its first pass); a SIGKILLed
process's shards are taken by the others within the lease duration plus a few retry periods, whose
caches then hold their three shards' children; a database of those shards whose children and pod
template, and itself, lost their bucket label (as from a version before it) has its children and itself
labelled again by the new owner, keeps its volume, is Ready again, and its template stays without the
label (adding it would restart the pod) while every replica caches its pod (the watch of unlabelled pods);
and a new SampleDB in one of those shards, created with another shard's bucket label (copied from another
database's manifest), is put right by the replica caching it, becomes Ready, reconciled by its owner only.
kwok namespaces: the pods "run" without PostgreSQL.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support import kube
from tests.support.kube import kubectl, wait_until
from tests.support.operator import OperatorProcess

from sampledb_operator.decide.sharding import BUCKET_LABEL, bucket_of, buckets_of, shard_of

pytestmark = pytest.mark.cluster

LEASE = "sdb-shard-test"
SHARDS = 6
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 4.0, 3.0, 1.0
# After the kill each survivor sees the victim's Leases and heartbeat counter change for the last time
# up to one period late, waits lease_duration on its own clock, and takes the shards in its next
# period: lease_duration + 2 periods, plus API time.
TAKEOVER_BOUND = LEASE_DURATION + 3 * RETRY_PERIOD + 2.0
IDENTITIES = ("r1", "r2", "r3")
CHILD_KINDS = "statefulsets,persistentvolumeclaims,jobs,services,configmaps,secrets,poddisruptionbudgets"  # filtered
MANAGED = "app.kubernetes.io/managed-by=sampledb-operator"
DATABASE_PODS = f"{MANAGED},app.kubernetes.io/component=database"
RECONCILE_EVENTS = ("reconcile done", "reconcile done, requeue after", "reconcile done, rate-limited requeue",
                    "reconcile failed")


@pytest.fixture
def other_namespace(cluster: object) -> Iterator[str]:
    """A second kwok namespace for the test (the `namespace` fixture is the first)."""
    name = f"t-sharding-b-{secrets.token_hex(3)}"
    kube.create_namespace(name, kwok=True)
    try:
        yield name
    finally:
        kube.release_finalizers(name)
        kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


def replica(kubeconfig: str, namespaces: tuple[str, str], identity: str) -> OperatorProcess:
    return OperatorProcess(
        kubeconfig, "--namespaces", ",".join(namespaces), "--workers", "4", "--shards", str(SHARDS),
        "--lease-namespace", namespaces[0], "--lease-name", LEASE, "--identity", identity,
        "--lease-duration", f"{LEASE_DURATION:g}", "--renew-deadline", f"{RENEW_DEADLINE:g}",
        "--retry-period", f"{RETRY_PERIOD:g}", "--recheck-period", "2", "--log-level", "debug",
    )


@contextlib.contextmanager
def replicas(kubeconfig: str, namespaces: tuple[str, str]) -> Iterator[dict[str, OperatorProcess]]:
    """The three processes (not started); killed on the way out, their logs printed if the test failed."""
    ops = {identity: replica(kubeconfig, namespaces, identity) for identity in IDENTITIES}
    try:
        yield ops
    except BaseException:
        for identity, op in ops.items():
            lines = [ln for ln in op.log_text().splitlines() if '"level": "debug"' not in ln]
            print(f"---- log of {identity} (without debug lines) ----\n" + "\n".join(lines[-80:]))
        raise
    finally:
        for op in ops.values():
            if op.running:
                op.kill()


def shard_leases(ns: str) -> list[dict[str, Any]]:
    """The spec of every shard Lease ({} when absent), read in one call."""
    specs = {item["metadata"]["name"]: item.get("spec") or {}
             for item in kube.kubectl_json("get", "leases", "-n", ns)["items"]}
    return [specs.get(f"{LEASE}-shard-{shard}", {}) for shard in range(SHARDS)]


def holders(ns: str) -> list[str]:
    """holderIdentity of every shard Lease ("" when free or absent)."""
    return [spec.get("holderIdentity") or "" for spec in shard_leases(ns)]


def held_by(ns: str, shards: set[int], identities: tuple[str, ...]) -> list[dict[str, Any]] | None:
    """The shard Leases' specs once every one of `shards` is held by one of `identities`, else None."""
    specs = shard_leases(ns)
    return specs if all(specs[s].get("holderIdentity") in identities for s in shards) else None


def acquired_at(spec: dict[str, Any]) -> float:
    """A Lease's acquireTime as a Unix time (written by the holder from this machine's clock)."""
    return datetime.fromisoformat(spec["acquireTime"].replace("Z", "+00:00")).timestamp()


def balanced(ns: str) -> list[str] | None:
    """The holders when three identities hold two shards each, else None."""
    held = holders(ns)
    return held if sorted(Counter(held).values()) == [2, 2, 2] and "" not in held else None


def reconciled(op: OperatorProcess) -> set[tuple[str, str]]:
    """(namespace, name) of every SampleDB the process reconciled, from its debug log."""
    return {(ln["namespace"], ln["name"]) for ln in op.log_lines()
            if ln.get("controller") == "sampledb" and ln.get("event") in RECONCILE_EVENTS}


def children(namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every managed child of the filtered kinds in `namespaces`."""
    return [item for ns in namespaces
            for item in kube.kubectl_json("get", CHILD_KINDS, "-n", ns, "-l", MANAGED)["items"]]


def database_pods(namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
    return [item for ns in namespaces
            for item in kube.kubectl_json("get", "pods", "-n", ns, "-l", DATABASE_PODS)["items"]]


def caches_hold_their_shards(ops: dict[str, OperatorProcess], owned: dict[str, set[int]],
                             namespaces: tuple[str, str]) -> dict[str, Counter[str]] | None:
    """Each process's cached children, database pods, SampleDBs and SampleDBBackups per resource, once they equal
    the cluster's of its shards (by bucket label, the shared bucket included: every SampleDB and backup has one)
    and, for pods, every pod without the label (made from a template without it); else None."""
    found = children(namespaces)
    dbs = [item for ns in namespaces
           for item in kube.kubectl_json("get", "sampledbs,sampledbbackups", "-n", ns)["items"]]
    if any(BUCKET_LABEL not in (o["metadata"].get("labels") or {}) for o in [*found, *dbs]):
        return None
    pods = database_pods(namespaces)
    cached: dict[str, Counter[str]] = {}
    for identity, shards in owned.items():
        buckets = set(buckets_of(shards, SHARDS))
        want = Counter(o["kind"].lower() + "s" for o in [*found, *dbs]
                       if o["metadata"]["labels"][BUCKET_LABEL] in buckets)
        want["pods"] = sum(1 for p in pods if (p["metadata"].get("labels") or {}).get(BUCKET_LABEL, "-") in buckets
                           or BUCKET_LABEL not in (p["metadata"].get("labels") or {}))
        have = Counter({r: int(ops[identity].metric("sampledb_cache_objects", resource=r))
                        for r in [*CHILD_KINDS.split(","), "pods", "sampledbs", "sampledbbackups"]})
        if +have != +want:
            return None
        cached[identity] = have
    return cached


def backup_labels(ns: str, name: str) -> dict[str, str]:
    return kube.kubectl_json("get", "sampledbbackup", name, "-n", ns)["metadata"].get("labels") or {}


def statefulsets_of(name: str, ns: str) -> list[dict[str, Any]]:
    return list(kube.kubectl_json("get", "statefulsets", "-n", ns, "-l", f"sampledb.io/database={name}")["items"])


def template_labels(sts: dict[str, Any]) -> dict[str, str]:
    return dict(sts["spec"]["template"]["metadata"].get("labels") or {})


def rolled(db: tuple[str, str]) -> bool:
    """Every StatefulSet of database (namespace, name) has all its pods at its latest template."""
    return all((sts.get("status") or {}).get("currentRevision") == (sts.get("status") or {}).get("updateRevision")
               for sts in statefulsets_of(db[1], db[0]))


def unlabel(name: str, ns: str) -> None:
    """Remove the bucket label from the SampleDB `name`, every child of it and its pod template (which rolls
    its pod: the new one has no label), as a version before it made them."""
    kubectl("label", "sampledb", name, "-n", ns, f"{BUCKET_LABEL}-")
    kubectl("label", CHILD_KINDS, "-n", ns, "-l", f"sampledb.io/database={name}", f"{BUCKET_LABEL}-")
    path = "/spec/template/metadata/labels/" + BUCKET_LABEL.replace("/", "~1")
    for sts in statefulsets_of(name, ns):
        kubectl("patch", "statefulset", sts["metadata"]["name"], "-n", ns, "--type", "json",
                "-p", f'[{{"op": "remove", "path": "{path}"}}]')


def legacy_kept(ops: dict[str, OperatorProcess], legacy: tuple[str, str], *, after: list[str],
                survivors: dict[str, set[int]], data_uid: list[dict[str, Any]], namespaces: tuple[str, str]) -> None:
    """The database whose children and pod template lost the bucket label (before its shard moved): same data
    volume, Ready, its new pod (without the label) cached by every replica, its template never given the
    label again by its new owner's passes (which would roll the pod a second time)."""
    ns, name = legacy
    kept = kube.kubectl_json("get", "pvc", "-n", ns, "-l",
                             f"sampledb.io/database={name},app.kubernetes.io/component=storage")["items"]
    assert [p["metadata"]["uid"] for p in kept] == [p["metadata"]["uid"] for p in data_uid] != []

    def unlabelled_pods() -> list[str]:
        return [p["metadata"]["labels"]["sampledb.io/database"] for p in database_pods(namespaces)
                if BUCKET_LABEL not in (p["metadata"].get("labels") or {})]

    wait_until(lambda: unlabelled_pods() == [name] and rolled(legacy), timeout=60,
               what="the legacy database's pod rolled to its template without the label")
    wait_ready(name, ns, timeout=60)
    wait_until(lambda: legacy in reconciled(ops[after[shard_of(ns, name, SHARDS)]]), timeout=30,
               what="the new owner's pass over the legacy database")  # it never had it before the kill
    wait_until(lambda: caches_hold_their_shards(ops, survivors, namespaces), timeout=30,
               what="r1 and r2 caching the legacy database's unlabelled pod beside their shards' pods")
    [sts] = statefulsets_of(name, ns)
    assert BUCKET_LABEL in sts["metadata"]["labels"]  # labelled again by the labelling pass
    own = str(bucket_of(ns, name))
    assert kube.kubectl_json("get", "sampledb", name, "-n", ns)["metadata"]["labels"][BUCKET_LABEL] == own
    assert BUCKET_LABEL not in template_labels(sts) and rolled(legacy)  # the template kept as made: no second roll
    conditions = {c["type"]: c for c in kube.kubectl_json("get", "sampledb", name, "-n", ns)["status"]["conditions"]}
    assert "DataVolumeLost" not in str(conditions)


def late_misplaced_put_right(ops: dict[str, OperatorProcess], namespace: str, *, orphans: set[int],
                             after: list[str], survivors: dict[str, set[int]]) -> None:
    """A new SampleDB of one of the moved shards, created with a bucket label of the other survivor's shards
    (as copied from another database's manifest): that replica, the only one caching it, puts the label
    right; the owner then reconciles it to Ready, the other never does."""
    late = next(f"late-{i}" for i in range(1000) if shard_of(namespace, f"late-{i}", SHARDS) in orphans)
    new_owner = after[shard_of(namespace, late, SHARDS)]
    other = "r1" if new_owner == "r2" else "r2"
    # labelled with a bucket of the other survivor's shards: only that replica caches it until it is put right
    elsewhere = next(b for b in range(60) if b % SHARDS in survivors[other])
    manifest = sampledb(late, namespace)
    manifest["metadata"]["labels"] = {BUCKET_LABEL: str(elsewhere)}
    apply(manifest)
    wait_ready(late, namespace, timeout=120)
    assert (namespace, late) in reconciled(ops[new_owner])
    assert (namespace, late) not in reconciled(ops[other])
    labels = kube.kubectl_json("get", "sampledb", late, "-n", namespace)["metadata"]["labels"]
    assert labels[BUCKET_LABEL] == str(bucket_of(namespace, late))
    assert any(ln.get("event") == "bucket label put right" and ln.get("name") == late
               for ln in ops[other].log_lines())


def test_three_replicas_share_six_shards_and_a_killed_ones_shards_move(kubeconfig: str, namespace: str,
                                                                     other_namespace: str) -> None:
    namespaces = (namespace, other_namespace)
    with replicas(kubeconfig, namespaces) as ops:
        for op in ops.values():
            op.start()
        stable = wait_until(lambda: balanced(namespace), timeout=60, interval=0.5,
                            what="three replicas holding two shards each")
        for op in ops.values():
            assert op.metric("sampledb_shards_owned") == 2
            assert op.metric("sampledb_shard_members") == 3
            assert op.metric("leader_election_master_status") == 0     # no leader election with shards

        names = [(ns, f"db-{i:02d}") for ns in namespaces for i in range(12)]
        apply([sampledb(name, ns) for ns, name in names])
        for ns, name in names:
            wait_ready(name, ns, timeout=180)
        # backups made by hand, without labels: each gets its database's and that database's bucket label from
        # the backup's first pass (on the database's owner), then only that replica caches it
        backed_up = names[::4]
        apply([{"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
                "metadata": {"name": f"{name}-manual", "namespace": ns}, "spec": {"database": name}}
               for ns, name in backed_up])
        for ns, name in backed_up:
            wait_until(lambda ns=ns, name=name: backup_labels(ns, f"{name}-manual") == {
                "sampledb.io/database": name, BUCKET_LABEL: str(bucket_of(ns, name))},
                timeout=30, what=f"the backup of {name} labelled")
        assert holders(namespace) == stable, "a shard moved while the databases were made"

        owned = {identity: {s for s, h in enumerate(stable) if h == identity} for identity in IDENTITIES}
        seen: set[tuple[str, str]] = set()
        for identity, op in ops.items():
            done = reconciled(op)
            strays = {(ns, n) for ns, n in done if shard_of(ns, n, SHARDS) not in owned[identity]}
            assert not strays, f"{identity} (shards {sorted(owned[identity])}) reconciled {sorted(strays)}"
            seen |= done
        assert seen >= set(names)
        cached = wait_until(lambda: caches_hold_their_shards(ops, owned, namespaces), timeout=30,
                            what="each replica caching exactly its shards' children")
        assert all(ops[i].metric("sampledb_shards_cached") == 2 for i in IDENTITIES)
        everything = Counter(o["kind"].lower() + "s" for o in children(namespaces))
        assert all(cached[i]["services"] < everything["services"] for i in IDENTITIES)
        assert all(0 < cached[i]["pods"] < len(names) for i in IDENTITIES)  # the pods are filtered too
        assert sum(cached[i]["sampledbbackups"] for i in IDENTITIES) == len(backed_up)  # and the backups

        victim = "r3"
        orphans = owned[victim]
        legacy = next((ns, n) for ns, n in names if shard_of(ns, n, SHARDS) in orphans)
        data_uid = kube.kubectl_json("get", "pvc", "-n", legacy[0], "-l",
                                     f"sampledb.io/database={legacy[1]},app.kubernetes.io/component=storage")["items"]
        killed = time.time()
        assert ops[victim].kill() == -9
        unlabel(legacy[1], legacy[0])  # before the survivors take its shard
        taken = wait_until(lambda: held_by(namespace, orphans, ("r1", "r2")), timeout=TAKEOVER_BOUND + 20,
                           interval=0.2, what=f"the shards {sorted(orphans)} taken over")
        # When the survivors took the shards, by the acquireTime they wrote (the processes run on this
        # machine, so their clock is the test's): the polling's own latency is not the operator's.
        took = max(acquired_at(taken[s]) for s in orphans) - killed
        assert took <= TAKEOVER_BOUND, f"takeover {took:.1f}s after the kill (bound {TAKEOVER_BOUND:g}s)"
        after = holders(namespace)
        assert sorted(Counter(after).values()) == [3, 3]
        wait_until(lambda: [ops[i].metric("sampledb_shards_owned") for i in ("r1", "r2")] == [3, 3],
                   timeout=10, what="r1 and r2 owning 3 shards each")
        survivors = {i: {s for s, h in enumerate(after) if h == i} for i in ("r1", "r2")}
        wait_until(lambda: caches_hold_their_shards(ops, survivors, namespaces), timeout=30,
                   what="r1 and r2 caching their three shards' children, the unlabelled ones labelled again")
        legacy_kept(ops, legacy, after=after, survivors=survivors, data_uid=data_uid, namespaces=namespaces)

        late_misplaced_put_right(ops, namespace, orphans=orphans, after=after, survivors=survivors)
