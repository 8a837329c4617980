"""One cluster of the chaos suite: its SampleDBs, its operator processes behind the fault proxy,
what the suite samples while faults fall (Jobs, RSS), and the end-state checks.

Invariants: the suite's own requests go straight to the API server (never through the proxy) and
tolerate its absence (an apiserver restart): an error is "not yet", never a crash; the operators
watch only this world's namespaces; kube-apiserver is restarted only when `cluster_dir` is given
(a cluster the suite started itself, never the shared one); every wait is a poll with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tests.chaos.proxy import FaultProxy
from tests.support.kube import KWOK_PLACEMENT
from tests.support.operator import REPO, OperatorProcess

from sampledb_operator.chaos.faults import running_job
from sampledb_operator.chaos.inject import Injector
from sampledb_operator.chaos.plan import Target
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import KubeError, NotFound
from sampledb_operator.kube.exec import exec_in_pod
from sampledb_operator.kube.resources import (
    CONFIGMAP,
    JOB,
    LEASE,
    NAMESPACE,
    PDB,
    POD,
    PVC,
    SAMPLEDB,
    SAMPLEDBBACKUP,
    SECRET,
    SERVICE,
    STATEFULSET,
)
from sampledb_operator.model import names

Obj = dict[str, Any]
KINDS = (SAMPLEDB, SAMPLEDBBACKUP, POD, SERVICE, CONFIGMAP, STATEFULSET, JOB, PVC, SECRET, PDB, LEASE, NAMESPACE)
CHILD_KINDS = ("StatefulSet", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim", "Job", "Pod",
               "PodDisruptionBudget")
MANAGED = "app.kubernetes.io/managed-by=sampledb-operator"
LEASE_NAME = "sampledb-operator"
INIT_SQL = "CREATE TABLE IF NOT EXISTS t (id int);\n"
SEED_SQL = """
CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric(12,2));
INSERT INTO accounts SELECT g, 'owner ' || g || ' ünïcødé', g * 1.5 FROM generate_series(1, 500) g;
CREATE TABLE events (id bigserial PRIMARY KEY, account int REFERENCES accounts, payload jsonb);
INSERT INTO events (account, payload) SELECT 1 + g % 500, jsonb_build_object('n', g, 'tag', md5(g::text))
  FROM generate_series(1, 2000) g;
"""
TABLES_SQL = "SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables ORDER BY 1"


@dataclass
class Db:
    target: Target
    real: bool
    policy: str
    uid: str = ""
    credentials: tuple[str, str] = ("", "")  # Secret uid, sha256 of its data
    checksums: dict[str, str] = field(default_factory=dict)  # table -> "count|md5" (real ones)
    deleted_at: float | None = None


def ready(obj: Obj | None) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in ((obj or {}).get("status") or {}).get("conditions") or [])


def why_not_ready(obj: Obj | None) -> str:
    """The Ready condition's reason and message (what the operator says it waits for), or why there is none."""
    if obj is None:
        return "the SampleDB is missing"
    cond = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    return f"{cond.get('reason')}: {str(cond.get('message') or '')[:160]}" if cond else "no Ready condition"


def controller_uid(obj: Obj) -> str:
    """The uid of the object's controller (its ownerReference with controller: true), "" without one."""
    return next((str(o.get("uid")) for o in (obj.get("metadata") or {}).get("ownerReferences") or []
                 if o.get("controller")), "")


def pod_trouble(pod: Obj) -> str | None:
    """`ns/name phase (the failing condition's reason: message)` for a pod that is neither running ready nor
    finished; None for the others."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Unknown"
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if phase == "Succeeded" or (phase == "Running" and (conditions.get("Ready") or {}).get("status") == "True"):
        return None
    failing = next((c for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                    if (c := conditions.get(t)) is not None and c.get("status") != "True"), None)
    detail = f" ({failing.get('type')} {failing.get('reason')}: {str(failing.get('message') or '')[:120]})" \
        if failing else ""
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')} {phase}{detail}"


class World:
    """A cluster: `kubeconfig` (admin), `kubectl` argv for pods/exec of psql, `cluster_dir` when the
    suite owns the cluster (apiserver restarts allowed)."""

    def __init__(self, name: str, kubeconfig: str, kubectl: tuple[str, ...], *, seed: int, operators: int,
                 cluster_dir: Path | None, proxy_options: dict[str, Any]) -> None:
        self.name, self.kubeconfig, self.kubectl = name, kubeconfig, kubectl
        self.cluster_dir = cluster_dir
        self.n_operators = operators
        self.proxy = FaultProxy(kubeconfig, seed, **proxy_options)
        self.client: KubeClient | None = None
        self.apis: dict[str, ResourceApi] = {}
        self.dbs: dict[Target, Db] = {}
        self.namespaces: list[str] = []
        self.operators: list[OperatorProcess] = []
        self.injector: Injector | None = None
        self.job_violations: list[dict[str, Any]] = []
        self.job_samples = 0
        self.rss: list[dict[str, Any]] = []  # {op, instance (pid), age (s since its first sample), kb}
        self.instances: dict[str, int] = defaultdict(int)
        self.closing = False
        self.pid_seen: dict[int, float] = {}

    # ------------------------------------------------------------------ setup

    async def connect(self) -> None:
        self.client = await KubeClient.connect(self.kubeconfig)
        self.apis = {r.kind: ResourceApi(self.client, r, timeout=20) for r in KINDS}

    async def create_namespace(self, name: str, *, kwok: bool) -> None:
        labels = {"sampledb.io/test": "true", "sampledb.io/chaos-suite": "true"}
        if not kwok:
            labels["pod-security.kubernetes.io/enforce"] = "restricted"
        meta: Obj = {"name": name, "labels": labels}
        if kwok:
            meta["annotations"] = dict(KWOK_PLACEMENT)
        await self.apis["Namespace"].create({"metadata": meta})
        self.namespaces.append(name)
        await self.apis["ConfigMap"].create({"metadata": {"name": "init-sql", "namespace": name},
                                             "data": {"init.sql": INIT_SQL}})

    async def create_db(self, ns: str, name: str, *, real: bool, policy: str) -> None:
        if real:
            spec: Obj = {"version": "15.20", "storage": {"size": "256Mi"}, "deletionPolicy": policy}
        else:
            spec = {"version": "16.4", "storage": {"size": "1Gi"}, "deletionPolicy": policy,
                    "init": {"configMapKeyRef": {"name": "init-sql", "key": "init.sql"}}}
        obj = await self.apis["SampleDB"].create({"metadata": {"name": name, "namespace": ns}, "spec": spec})
        target = Target(ns, name)
        self.dbs[target] = Db(target, real, policy, uid=obj["metadata"]["uid"])

    def operator_args(self) -> list[str]:
        args = ["--namespaces", ",".join(self.namespaces), "--workers", "4", "--recheck-period", "5"]
        if self.n_operators > 1:
            return [*args, "--lease-namespace", self.namespaces[0], "--lease-name", LEASE_NAME]
        return [*args, "--no-leader-elect"]

    async def start_operators(self) -> None:
        kubeconfig = await self.proxy.start()
        for i in range(self.n_operators):
            ident = f"{self.name}-op-{i}"
            extra = ["--identity", ident] if self.n_operators > 1 else []
            op = OperatorProcess(kubeconfig, *self.operator_args(), *extra)
            self.operators.append(op)
            await self.restart(i)
        assert self.client is not None
        self.injector = Injector(self.apis, partial(exec_in_pod, self.client, timeout=120), list(self.dbs))

    async def restart(self, index: int) -> None:
        if self.closing:
            return
        op = self.operators[index]
        ident = f"{self.name}-op-{index}"
        await asyncio.to_thread(op.start, wait_ready=False, timeout=120)
        if self.is_closing():  # stopped meanwhile: this one must not outlive the suite
            op.kill()
            return
        self.instances[ident] += 1

    def is_closing(self) -> bool:
        return self.closing

    def kill(self, index: int) -> None:
        self.operators[index].kill()

    async def leader_index(self) -> int | None:
        if self.n_operators < 2:
            return 0
        try:
            lease = await self.apis["Lease"].get(LEASE_NAME, self.namespaces[0])
        except KubeError:
            return None
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        for i in range(self.n_operators):
            if holder == f"{self.name}-op-{i}":
                return i
        return None

    async def restart_apiserver(self) -> None:
        assert self.cluster_dir is not None, "kube-apiserver is restarted only on the suite's own cluster"
        env = {**os.environ, "SAMPLEDB_CLUSTER_DIR": str(self.cluster_dir)}
        out = await asyncio.to_thread(subprocess.run, [str(REPO / "hack" / "cluster"), "restart", "kube-apiserver"],
                                      capture_output=True, text=True, check=False, timeout=300, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"hack/cluster restart kube-apiserver failed:\n{out.stderr[-2000:]}")

    # ------------------------------------------------------------------ real databases

    def _kubectl(self, *args: str, timeout: float = 120) -> str:
        out = subprocess.run([*self.kubectl, *args], capture_output=True, text=True, timeout=timeout, check=False,
                             env={**os.environ, "KUBECONFIG": self.kubeconfig})
        if out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args[:6])} failed: {out.stderr[-1000:]}")
        return out.stdout

    def sql(self, db: Target, statement: str) -> str:
        return self._kubectl("exec", "-n", db.namespace, names.pod_name(db.name), "-c", "postgres", "--", "psql",
                             "-X", "-v", "ON_ERROR_STOP=1", "-U", "postgres", "-d", "app", "-qAt", "-c",
                             statement).strip()

    def checksums(self, db: Target) -> dict[str, str]:
        """Every user table: row count and an order-independent md5 of its rows."""
        out = {}
        for table in [t for t in self.sql(db, TABLES_SQL).splitlines() if t]:
            out[table] = self.sql(db, f"SELECT count(*) || '|' || coalesce(md5(string_agg(h, '' ORDER BY h)), '') "
                                      f"FROM (SELECT md5(t::text) AS h FROM {table} t) s")
        return out

    async def seed_real(self) -> None:
        for db in (d for d in self.dbs.values() if d.real):
            await asyncio.to_thread(self.sql, db.target, SEED_SQL)
            db.checksums = await asyncio.to_thread(self.checksums, db.target)
            assert db.checksums["public.accounts"].startswith("500|"), db.checksums

    # ------------------------------------------------------------------ state

    async def list_in(self, kind: str, **kw: Any) -> list[Obj]:
        items: list[Obj] = []
        for ns in self.namespaces:
            items.extend((await self.apis[kind].list_all(ns, **kw)).items)
        return items

    async def record_credentials(self) -> None:
        for db in self.dbs.values():
            secret = await self.apis["Secret"].get(names.secret_name(db.target.name), db.target.namespace)
            db.credentials = (secret["metadata"]["uid"], _digest(secret.get("data") or {}))

    async def live_not_ready(self) -> list[str]:
        """Live SampleDBs not Ready, missing a child (StatefulSet, client Service, ConfigMap, Secret) or with
        fewer running ready database pods of a live StatefulSet than instances (a stale Ready would not show
        these), and deleted ones still present; [] when all is well."""
        seen = {Target(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in await self.list_in("SampleDB")}
        bad = [f"{t} not Ready ({why_not_ready(seen.get(t))})" for t, d in self.dbs.items()
               if d.deleted_at is None and not ready(seen.get(t))]
        live = [t for t, d in self.dbs.items() if d.deleted_at is None]
        owners: set[str] = set()  # uids of the StatefulSets not being deleted
        for kind, name_of in (("StatefulSet", names.statefulset_name), ("Service", names.client_service_name),
                              ("ConfigMap", names.configmap_name), ("Secret", names.secret_name)):
            objs = [o for o in await self.list_in(kind) if not o["metadata"].get("deletionTimestamp")]
            if kind == "StatefulSet":
                owners = {o["metadata"]["uid"] for o in objs}
            present = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs}
            bad += [f"{t}: {kind} {name_of(t.name)} missing" for t in live
                    if (t.namespace, name_of(t.name)) not in present]
        pods: dict[tuple[str, str], list[Obj]] = defaultdict(list)
        for pod in await self.list_in("Pod", label_selector=f"{MANAGED},{COMPONENT_LABEL}=database"):
            meta = pod["metadata"]
            pods[(meta["namespace"], (meta.get("labels") or {}).get(DATABASE_LABEL, ""))].append(pod)
        # a pod deleted as the faults stopped leaves a Ready the operator has not revised yet; a pod of a
        # StatefulSet deleted as they stopped runs on until the garbage collector deletes it
        for t in live:
            want = int(((seen.get(t) or {}).get("spec") or {}).get("instances") or 1)
            running = [p for p in pods[(t.namespace, t.name)]
                       if not p["metadata"].get("deletionTimestamp") and pod_trouble(p) is None
                       and controller_uid(p) in owners]
            if len(running) < want:
                bad.append(f"{t}: {len(running)} of {want} database pods running ready")
        bad += [f"{t} (deleted, {d.policy}) still present: finalizers "
                f"{(seen[t].get('metadata') or {}).get('finalizers')}"
                for t, d in self.dbs.items() if d.deleted_at is not None and t in seen]
        return bad

    async def pods_in_trouble(self) -> list[str]:
        """The pods of the run's namespaces that are neither running ready nor finished, with why (for a
        report that did not settle: a pod the scheduler never placed is not the operator's doing)."""
        return [line for pod in await self.list_in("Pod") if (line := pod_trouble(pod)) is not None]

    # ------------------------------------------------------------------ sampling while faults fall

    async def sample_jobs(self, stop: asyncio.Event) -> None:
        """Every second: no two unfinished Jobs for one purpose (database, component, owner) at once."""
        while not stop.is_set():
            with contextlib.suppress(KubeError):
                groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
                for job in await self.list_in("Job", label_selector=MANAGED):
                    meta = job["metadata"]
                    if meta.get("deletionTimestamp") or not running_job(job) or \
                            (job.get("status") or {}).get("succeeded") or (job.get("status") or {}).get("failed"):
                        continue
                    labels = meta.get("labels") or {}
                    owner = controller_uid(job)
                    key = (meta["namespace"], labels.get("sampledb.io/database", ""),
                           labels.get("app.kubernetes.io/component", ""), owner)
                    groups[key].append(meta["name"])
                self.job_samples += 1
                for key, jobs in groups.items():
                    if len(jobs) > 1:
                        self.job_violations.append({"key": list(key), "jobs": sorted(jobs)})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)

    async def sample_rss(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for i, op in enumerate(self.operators):
                proc = op.proc
                if proc is not None and proc.poll() is None:
                    kb = _vmrss(proc.pid)
                    if kb:  # one process = one pid; its age counts from its first sample
                        first = self.pid_seen.setdefault(proc.pid, time.monotonic())
                        self.rss.append({"op": f"{self.name}-op-{i}", "instance": proc.pid,
                                         "age": round(time.monotonic() - first, 1), "kb": kb})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=2.0)

    # ------------------------------------------------------------------ end-state checks

    async def check(self) -> dict[str, Any]:
        """The end-state assertions, as findings (empty lists: all held)."""
        out: dict[str, Any] = {"not_ready": await self.live_not_ready()}
        out["checksums"] = []
        for db in (d for d in self.dbs.values() if d.real and d.deleted_at is None):
            now = await asyncio.to_thread(self.checksums, db.target)
            if now != db.checksums:
                out["checksums"].append(f"{db.target}: before {db.checksums} after {now}")
        out["credentials"] = []
        for db in (d for d in self.dbs.values() if d.deleted_at is None):
            try:
                secret = await self.apis["Secret"].get(names.secret_name(db.target.name), db.target.namespace)
                now_cred: tuple[str, str] = (secret["metadata"]["uid"], _digest(secret.get("data") or {}))
            except NotFound:
                now_cred = ("absent", "")
            if now_cred != db.credentials:
                out["credentials"].append(f"{db.target}: {db.credentials} -> {now_cred}")
        deleted = {d.uid: d for d in self.dbs.values() if d.deleted_at is not None}
        out["orphans"] = []
        for kind in CHILD_KINDS:
            for obj in await self.list_in(kind):
                owners = {o.get("uid") for o in (obj["metadata"].get("ownerReferences") or [])}
                for uid in owners & set(deleted):
                    out["orphans"].append(f"{kind} {obj['metadata']['namespace']}/{obj['metadata']['name']} "
                                          f"owned by deleted {deleted[uid].target}")
        out["data_volumes"], out["snapshots"] = [], []
        pvcs = {(o["metadata"]["namespace"], o["metadata"]["name"]): o
                for o in await self.list_in("PersistentVolumeClaim")}
        backups = await self.list_in("SampleDBBackup")
        for db in deleted.values():
            pvc = pvcs.get((db.target.namespace, names.data_pvc_name(db.target.name)))
            keep = db.policy == "Retain"
            if keep != (pvc is not None and not pvc["metadata"].get("deletionTimestamp")):
                out["data_volumes"].append(f"{db.target} ({db.policy}): data PVC {'missing' if keep else 'left'}")
            pre = [b for b in backups if b["metadata"]["namespace"] == db.target.namespace
                   and (b.get("spec") or {}).get("database") == db.target.name
                   and (b.get("spec") or {}).get("reason") == "pre-delete"]
            ok = [b for b in pre if (b.get("status") or {}).get("phase") == "Succeeded"]
            if len(ok) != (1 if db.policy == "Snapshot" else 0):
                out["snapshots"].append(f"{db.target} ({db.policy}): {len(ok)} successful pre-delete snapshots "
                                        f"of {len(pre)}: {[b['metadata']['name'] for b in pre]}")
        out["stuck_backups"] = [f"{b['metadata']['namespace']}/{b['metadata']['name']}" for b in backups
                                if b["metadata"].get("deletionTimestamp")]
        out["jobs"] = self.job_violations[:20]
        return out

    async def stop(self) -> None:
        """Stop the operators and the proxy (the suite's own client stays open)."""
        self.closing = True
        for op in self.operators:
            if op.running:
                await asyncio.to_thread(op.stop)
        await self.proxy.stop()

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    async def delete_namespaces(self) -> None:
        for ns in self.namespaces:
            with contextlib.suppress(KubeError):
                for kind in ("SampleDB", "SampleDBBackup"):
                    for obj in (await self.apis[kind].list_all(ns)).items:
                        if obj["metadata"].get("finalizers"):
                            await self.apis[kind].patch(obj["metadata"]["name"], {"metadata": {"finalizers": None}},
                                                        namespace=ns)
                await self.apis["Namespace"].delete(ns)


def _digest(data: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _vmrss(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None
