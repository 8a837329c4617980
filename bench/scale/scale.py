"""Scale benchmark (issue #18): N SampleDBs created at once, time until each is Ready.

Each run gets a fresh kwok-only control plane (hack/cluster with SAMPLEDB_REAL_NODE=0 in
/tmp/scale-<label>-<n>-<round>, enough fake nodes for every pod), one system under test, and this
script as the observer: it creates N SampleDBs (each with an init Job from a ConfigMap: 8 children, 9 before
the `-ro` Service was made only for databases with standbys)
and watches them until every one has Ready=True. Systems:

  floor            the API server's own floor for this work: `scale.py floor`, a plain asyncio client
                   (no caches, no queue, no operator) that creates the same child bodies the operator
                   would (decide.children.desired), the init Job once the StatefulSet is ready, and a Ready
                   status once the Job succeeded: one write per object (a shared one, the namespace's
                   scripts ConfigMap, once). floor:src=DIR takes the child
                   bodies from the checkout in DIR (give the floor the tree the operator runs from).
                   floor:writes=operator (label floor-operator-writes): the same plain client doing the
                   operator's 16 writes a database (its four statuses, two Events, the role label, the
                   init Job's expiry, server-side apply of the children) and its nine watches, in the
                   operator's stages, with the finalizer policy installed: what the operator's features
                   cost without its caches, queue and passes (OperatorWritesFloor).
  operator         this operator (`sampledb-operator run`), options after a colon:
                   operator:workers=16, operator:src=/tmp/old-tree (PYTHONPATH=<src>/operator: an older
                   checkout made with `git archive`), operator:label=before,
                   operator:replicas=3:shards=6 (three sharded processes; CPU is their sum, RSS the
                   largest one's), operator:flags=--no-streaming-lists (more of its flags, comma-separated).
                   An operator's cluster has the finalizer policy (manifests/admission, from this
                   checkout), as manifests/overlays/admission installs it on Kubernetes 1.36+;
                   operator:admission=0 leaves it out (the operator then adds each finalizer itself: one
                   write more a database, as on a cluster without the policy).

The databases are spread over namespaces, --per-namespace (default 100) each (`scale-000`, `scale-001`,
...; the operator, the floor and the observer then watch all namespaces): a platform's databases live in
its teams' namespaces, and Kubernetes' own scalability limits are a few thousand pods and Services per
namespace. `--per-namespace 0` puts all N in the one namespace `scale`: then kube-controller-manager's
EndpointSlice and StatefulSet controllers and the scheduler scan all of a namespace's pods or Services for
each event, and the control plane's work grows with N squared.

Recorded per run: all-Ready time (first create to last Ready), median create->Ready, the system's
CPU seconds (utime+stime from /proc), peak RSS (VmHWM), its requests by verb per database (the
operator's /metrics rest_client_requests_total; the floor counts its own), reconciles per database,
and the load average; the CPU seconds of each control-plane component (etcd, kube-apiserver, the controller
manager, the scheduler, kwok, the hostpath provisioner) and of this observer over the same span, where the
two cores went; every client's requests to the API server per database over the same span (its
apiserver_request_total: the system's, the controllers', the scheduler's, kwok's, the observer's), writes by
verb and resource; for the operator, once all are Ready, a restart: seconds to synced, writes in the
15 s after, RSS (for sharded replicas, replica 0 SIGKILLed and started again with its identity while the
others run: seconds until its caches hold its shards again, sampledb_shards_cached; its writes but
those renewing its shard Leases; and, just before, its floor: a plain client's process fetching what
that replica caches, start to exit). Systems run
interleaved (round 1: each system, round 2: each system, ...).

    .venv/bin/python bench/scale/scale.py run --n 300 --systems floor,operator [--rounds 1] [--out DIR]
    make bench-scale N=1000

`run --backups`: once an operator has made all N Ready (and a sharded replica's restart is measured), the
observer makes one on-demand SampleDBBackup of every database at once and waits until each finished (its
Job completes on kwok): all done, median, the fleet's CPU and writes per backup, each replica's backup
reconciles (sharded: each backup is its database's owner's). One operator's restart is measured after it.

`scale.py restart` measures restarts alone: one cluster, N databases made Ready by the first system
listed, then each system restarted over them in turn, --rounds times (seconds to synced, writes in the
15 s after, RSS), each round after the restart's floor (`scale.py syncfloor`: a plain client's
process filling plain dicts by the same streaming lists, start to exit), e.g. streaming against
paged lists. Each round first waits (up to --settle-timeout) for the machine's 1-minute load average
to fall under --settle-load, so restarts are timed at rest:

    .venv/bin/python bench/scale/scale.py restart --n 5000 --rounds 3 \
        --systems "operator:workers=16,operator:label=paged:flags=--no-streaming-lists"

Prints a markdown table; writes results.json and ready.png (Ready count over time per system) in --out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, os.environ.get("SAMPLEDB_BENCH_SRC", str(REPO)) + "/operator")  # floor:src=DIR sets it

from sampledb_operator import dataplane  # noqa: E402
from sampledb_operator.decide import jobs  # noqa: E402
from sampledb_operator.decide import status as st  # noqa: E402

try:  # decide/ by concern; a checkout from before that (floor:src=DIR) has desired at decide/'s top
    from sampledb_operator.decide.children import desired as d
except ImportError:
    from sampledb_operator.decide import desired as d  # type: ignore[no-redef]
from sampledb_operator.decide.labels import DATABASE_LABEL, MANAGED_SELECTOR  # noqa: E402
from sampledb_operator.kube.api import ResourceApi  # noqa: E402
from sampledb_operator.kube.client import KubeClient  # noqa: E402
from sampledb_operator.kube.errors import Conflict, Gone, KubeTransportError  # noqa: E402
from sampledb_operator.kube.events import build_event  # noqa: E402
from sampledb_operator.kube.resources import (  # noqa: E402
    CONFIGMAP,
    EVENT,
    JOB,
    PDB,
    POD,
    PVC,
    SAMPLEDB,
    SAMPLEDBBACKUP,
    SECRET,
    SERVICE,
    STATEFULSET,
)
from sampledb_operator.model import names  # noqa: E402
from sampledb_operator.model.objects import condition_true  # noqa: E402
from sampledb_operator.model.sampledb import SampleDB  # noqa: E402
from sampledb_operator.observability import metrics  # noqa: E402
from sampledb_operator.reconcilers.sampledb import watched_resources  # noqa: E402

Obj = dict[str, Any]
DbKey = tuple[str, str]  # (namespace, name) of a SampleDB
NAMESPACE = "scale"
# the operator processes' bytecode (PYTHONPYCACHEPREFIX): outside the work tree, reused by every run
PYCACHE = Path(os.environ.get("SAMPLEDB_CACHE", str(Path.home() / ".cache/sampledb-operator"))) / "bench-pycache"
PODS_PER_NODE = 250  # hack/cluster and hack/kwok/stages.yaml give each fake node 250 pods
KWOK_PLACEMENT = {
    "scheduler.alpha.kubernetes.io/node-selector": "type=kwok",
    "scheduler.alpha.kubernetes.io/defaultTolerations":
        '[{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]',
}
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")
RBAC_WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")  # sampledb_api_requests_total's
PER_NAMESPACE = 100  # databases per namespace by default


def namespace_of(i: int, per_namespace: int) -> str:
    """The namespace of the i-th database: NAMESPACE for all when per_namespace is 0, else `scale-000`,
    `scale-001`, ... with per_namespace databases each."""
    return NAMESPACE if per_namespace <= 0 else f"{NAMESPACE}-{i // per_namespace:03d}"


def namespaces(n: int, per_namespace: int) -> list[str]:
    """The namespaces N databases live in (namespace_of's)."""
    return sorted({namespace_of(i, per_namespace) for i in range(n)})


def watched_namespace(per_namespace: int) -> str:
    """What the floor, the observer and the restart's floor watch: NAMESPACE, or all namespaces ("")."""
    return NAMESPACE if per_namespace <= 0 else ""


def db_key(obj: Obj) -> DbKey:
    """(namespace, name) of a SampleDB: how the floor and the observer tell databases apart."""
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


def sampledb(i: int, per_namespace: int) -> Obj:
    return {
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": f"db-{i:05d}", "namespace": namespace_of(i, per_namespace)},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"},
                 "init": {"configMapKeyRef": {"name": "init-sql", "key": "init.sql"}}},
    }


# ---------------------------------------------------------------------------------------- watching


async def watch_forever(api: ResourceApi, namespace: str, on_obj: Callable[[str, Obj], None], *,
                        label_selector: str | None = None) -> None:
    """List, then watch from the list's resourceVersion, resuming after each server timeout and after a
    dropped or silent stream (from the last version seen; 410 relists); on_obj for every object seen
    (type, object). Runs until cancelled. (A dropped stream used to end the task silently: the N=5,000
    observer then never saw the last databases become Ready.)"""
    rv = ""
    while True:
        if not rv:
            listing = await api.list_all(namespace, label_selector=label_selector)
            for item in listing.items:
                on_obj("ADDED", item)
            rv = listing.resource_version
        try:
            async with contextlib.aclosing(api.watch(namespace, resource_version=rv, label_selector=label_selector,
                                                     timeout_seconds=290, read_timeout=120)) as events:
                async for ev in events:
                    rv = ev.resource_version or rv
                    if ev.type in ("ADDED", "MODIFIED", "DELETED"):
                        on_obj(ev.type, ev.object)
        except Gone:
            rv = ""
        except KubeTransportError as exc:
            print(f"  observer: watch resumed after {exc!r}", file=sys.stderr)


def ready_condition(obj: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


# ------------------------------------------------------------------------------------------- floor


class Floor:
    """The children of every SampleDB, created with no operator machinery at all."""

    def __init__(self, client: KubeClient, namespace: str, concurrency: int) -> None:
        self.apis = {r.kind: ResourceApi(client, r) for r in (SAMPLEDB, SECRET, CONFIGMAP, PVC, SERVICE,
                                                              STATEFULSET, JOB, PDB)}
        self.namespace = namespace
        self.scripts = dataplane.all_scripts()
        self.limit = asyncio.Semaphore(concurrency)
        self.dbs: dict[DbKey, SampleDB] = {}
        self.stage: dict[DbKey, str] = {}  # children | job | ready
        self.made: set[tuple[str, str, str]] = set()  # (kind, namespace, name) of the children created
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def write(self, call: Awaitable[Obj]) -> None:
        async with self.limit:
            with contextlib.suppress(Conflict):
                await call

    @staticmethod
    def database_of(obj: Obj) -> DbKey:
        """(namespace, name) of the database a child belongs to (by its database label)."""
        meta = obj["metadata"]
        return meta.get("namespace") or "", (meta.get("labels") or {}).get(DATABASE_LABEL, "")

    def on_sampledb(self, _type: str, obj: Obj) -> None:
        key = db_key(obj)
        if key in self.stage:
            return
        self.stage[key] = "children"
        db = SampleDB.model_validate(obj)
        self.dbs[key] = db
        bodies = [d.secret(db, secrets.token_urlsafe(24)), *d.children(d.Inputs(db=db, scripts=self.scripts))]
        for body in bodies:
            made = (body["kind"], body["metadata"]["namespace"], body["metadata"]["name"])
            if made in self.made:  # a child the databases share (the namespace's scripts ConfigMap): made once
                continue
            self.made.add(made)
            self.spawn(self.write(self.apis[body["kind"]].create(body)))

    def on_statefulset(self, _type: str, obj: Obj) -> None:
        key = self.database_of(obj)
        if self.stage.get(key) != "children" or not st.statefulset_ready(obj):
            return
        self.stage[key] = "job"
        body = jobs.init_job(self.dbs[key])
        assert body is not None
        self.spawn(self.write(self.apis["Job"].create(body)))

    def on_job(self, _type: str, obj: Obj) -> None:
        key = self.database_of(obj)
        if self.stage.get(key) != "job" or not (obj.get("status") or {}).get("succeeded"):
            return
        self.stage[key] = "ready"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        cond = {"type": "Ready", "status": "True", "reason": "DatabaseReady", "message": "ready",
                "lastTransitionTime": now, "observedGeneration": 1}
        patch = {"status": {"phase": "Running", "observedGeneration": 1, "conditions": [cond]}}
        self.spawn(self.write(self.apis["SampleDB"].patch(key[1], patch, namespace=key[0],
                                                          subresource="status")))

    async def run(self) -> None:
        await asyncio.gather(
            watch_forever(self.apis["SampleDB"], self.namespace, self.on_sampledb),
            watch_forever(self.apis["StatefulSet"], self.namespace, self.on_statefulset,
                          label_selector=MANAGED_SELECTOR),
            watch_forever(self.apis["Job"], self.namespace, self.on_job, label_selector=MANAGED_SELECTOR),
        )


class OperatorWritesFloor(Floor):
    """The floor doing the operator's writes and watches (`floor:writes=operator`): what the operator's features
    cost a plain client, apart from its machinery (caches, queue, passes, decisions).

    It watches the nine kinds the operator caches, with the operator's selectors (reconcilers/sampledb.py
    watched_resources), and writes what one operator writes for a database, in the operator's stages:
    - the SampleDB seen: the Secret (POST), the connection ConfigMap, both Services and both claims (server-side
      apply; the namespace's scripts ConfigMap once), then a status and a `CreatedChildren` Event;
    - the data claim bound: the StatefulSet (apply) and a status;
    - the database pod Ready: the init SQL's ConfigMap read (GET), the init Job (POST), the pod's role label
      (merge patch) and a status;
    - the Job succeeded: its expiry (merge patch of ttlSecondsAfterFinished), a Ready status and a
      `DatabaseReady` Event.
    16 writes a database, as the operator's (docs/benchmarks.md). The statuses carry the operator's five
    conditions; each stage's writes go out at once, as a pass's do."""

    FIELD_MANAGER = "scale-floor"

    def __init__(self, client: KubeClient, namespace: str, concurrency: int) -> None:
        super().__init__(client, namespace, concurrency)
        for r in (SAMPLEDBBACKUP, POD, EVENT):
            self.apis[r.kind] = ResourceApi(client, r)
        self.objs: dict[DbKey, Obj] = {}  # each SampleDB as last seen (the Events' subject)
        self.events = 0

    def on_sampledb(self, _type: str, obj: Obj) -> None:
        key = db_key(obj)
        self.objs[key] = obj
        if key in self.stage:
            return
        self.stage[key] = "children"
        db = SampleDB.model_validate(obj)
        self.dbs[key] = db
        children = [c for c in d.children(d.Inputs(db=db, scripts=self.scripts)) if c["kind"] != "StatefulSet"]
        writes: list[Awaitable[Obj]] = [self.apis["Secret"].create(d.secret(db, secrets.token_urlsafe(24)))]
        for body in children:
            made = (body["kind"], body["metadata"]["namespace"], body["metadata"]["name"])
            if made in self.made:  # the namespace's scripts ConfigMap: applied once
                continue
            self.made.add(made)
            writes.append(self.apis[body["kind"]].apply(body, field_manager=self.FIELD_MANAGER))
        self.spawn(self.stage_writes(key, writes, ("Provisioning", "VolumeNotBound",
                                     "waiting for the data volume to be bound"), "CreatedChildren"))

    def on_pvc(self, _type: str, obj: Obj) -> None:
        """The StatefulSet once its pod's data claim is bound (decide/children/binding.py), not waiting for the
        backups'."""
        key = self.database_of(obj)
        if (self.stage.get(key) != "children" or (obj.get("status") or {}).get("phase") != "Bound"
                or obj["metadata"]["name"] != names.data_pvc_name(key[1])):
            return
        self.stage[key] = "statefulset"
        sts = next(c for c in d.children(d.Inputs(db=self.dbs[key], scripts=self.scripts))
                   if c["kind"] == "StatefulSet")
        self.spawn(self.stage_writes(key, [self.apis["StatefulSet"].apply(sts, field_manager=self.FIELD_MANAGER)],
                                     ("Provisioning", "DatabaseNotReady", "waiting for the database pod")))

    def on_statefulset(self, _type: str, obj: Obj) -> None:
        """Seen (decoded), nothing to do: the operator's init waits for the pod, not the StatefulSet."""

    def on_pod(self, _type: str, obj: Obj) -> None:
        key = self.database_of(obj)
        if self.stage.get(key) != "statefulset" or not condition_true(obj, "Ready"):
            return
        self.stage[key] = "job"
        body = jobs.init_job(self.dbs[key])
        assert body is not None
        pod = self.apis["Pod"].patch(obj["metadata"]["name"], {"metadata": {"labels": {names.ROLE_LABEL: "primary"}}},
                                     namespace=key[0])
        self.spawn(self.stage_writes(key, [self.apis["ConfigMap"].get("init-sql", key[0]),
                                           self.apis["Job"].create(body), pod],
                                     ("Initializing", "Initializing", "the init SQL runs")))

    def on_job(self, _type: str, obj: Obj) -> None:
        key = self.database_of(obj)
        if self.stage.get(key) != "job" or not (obj.get("status") or {}).get("succeeded"):
            return
        self.stage[key] = "ready"
        expiry = self.apis["Job"].patch(obj["metadata"]["name"], {"spec": {"ttlSecondsAfterFinished": 86400}},
                                        namespace=key[0])
        self.spawn(self.stage_writes(key, [expiry], ("Running", "DatabaseReady", "the database accepts connections"),
                                     "DatabaseReady"))

    async def stage_writes(self, key: DbKey, writes: list[Awaitable[Obj]], status: tuple[str, str, str],
                           event: str = "") -> None:
        """A stage's writes at once, then its status (phase, reason, message) and Event (as a pass writes its
        status after its steps)."""
        await asyncio.gather(*(self.write(w) for w in writes))
        message = status[2]
        await self.write(self.apis["SampleDB"].patch(key[1], operator_status(*status), namespace=key[0],
                                                     subresource="status"))
        if event:
            self.events += 1
            body = build_event(self.objs[key], "Normal", event, message, action=event, component="sampledb-operator",
                               instance="scale-floor", now=datetime.now(UTC), unique=self.events)
            await self.write(self.apis["Event"].create(body))

    async def run(self) -> None:
        def seen(_type: str, _obj: Obj) -> None:
            """A kind the operator caches but this stage list does not act on: decoded, then dropped."""

        kinds = {"SampleDB": self.on_sampledb, "SampleDBBackup": seen, "StatefulSet": self.on_statefulset,
                 "PersistentVolumeClaim": self.on_pvc, "Job": self.on_job, "Service": seen, "ConfigMap": seen,
                 "Secret": seen, "PodDisruptionBudget": seen, "Pod": self.on_pod}
        await asyncio.gather(*(watch_forever(self.apis[r.kind], self.namespace, kinds[r.kind], label_selector=sel)
                               for r, sel in watched_resources()))


def operator_status(phase: str, reason: str, message: str) -> Obj:
    """A status merge patch the size of the operator's: its five conditions, a phase and its records."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = phase == "Running"

    def cond(type_: str, ok: bool, why: str, text: str) -> Obj:
        return {"type": type_, "status": "True" if ok else "False", "reason": why, "message": text,
                "lastTransitionTime": now, "observedGeneration": 1}

    return {"status": {
        "phase": phase, "observedGeneration": 1,
        "conditions": [cond("SpecValid", True, "Valid", "the spec is valid"),
                       cond("Initialized", ready, "InitSucceeded" if ready else reason, message),
                       cond("Degraded", False, "AsExpected", "no problems found"),
                       cond("Ready", ready, reason, message),
                       cond("Progressing", not ready, "Reconciled" if ready else reason, message)],
        "endpoint": "db.svc:5432", "secretName": "db-credentials", "appliedParameters": "44136fa355b3678a",
        "readyInstances": "1/1" if ready else "0/1", "currentVersion": "16.4" if ready else None,
    }}


def requests_by_verb_here() -> dict[str, float]:
    out: dict[str, float] = {}
    for family in metrics.rest_client_requests_total.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                out[sample.labels["method"]] = out.get(sample.labels["method"], 0) + sample.value
    return out


async def floor_main(args: argparse.Namespace) -> int:
    client = await KubeClient.connect(args.kubeconfig)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    kind = OperatorWritesFloor if args.writes == "operator" else Floor
    floor = kind(client, args.namespace, args.concurrency)
    runner = asyncio.ensure_future(floor.run())
    await asyncio.to_thread(Path(args.ready_file).write_text, "ready\n")
    await stop.wait()
    runner.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await runner
    await asyncio.to_thread(Path(args.stats).write_text, json.dumps({"requests": requests_by_verb_here()}))
    await client.close()
    return 0


def replica_selectors(shards: int, held: list[int]) -> list[tuple[Any, str | None]]:
    """What a sharded replica with filtered caches holding the shards `held` lists (app.build_caches): each
    filtered kind through its shards' selector and, for the kinds with objects that may lack a bucket
    (app.STRAYS), through that second selector too; the other kinds whole. The cordoned nodes' watch (a field
    selector, none or a few nodes) is left out."""
    from sampledb_operator.app import STRAYS
    from sampledb_operator.reconcilers.sampledb import watched_resources
    from sampledb_operator.reconcilers.shard_labels import FILTERED_KINDS, children_selector

    out: list[tuple[Any, str | None]] = []
    for resource, base in watched_resources():
        if resource.kind not in FILTERED_KINDS:
            out.append((resource, base))
            continue
        out.append((resource, children_selector(held, shards, base)))
        if resource.kind in STRAYS:
            out.append((resource, STRAYS[resource.kind][0](base)))
    return out


async def sync_floor_main(args: argparse.Namespace) -> int:
    """A restart's floor: a plain client filling plain dicts with what the operator caches (the same
    streaming lists: every watched resource at once, each until its initial-events-end bookmark), with
    no packing, indexes, queue or reconciling; with --held, what a sharded replica holding those shards
    caches (replica_selectors). Prints {"fetch_s": connect to synced, "objects": n}."""
    from sampledb_operator.kube.api import initial_events_end
    from sampledb_operator.reconcilers.sampledb import watched_resources

    started = time.monotonic()
    watched = watched_resources() if args.held is None else replica_selectors(
        args.shards, [int(k) for k in args.held.split(",") if k])
    client = await KubeClient.connect(args.kubeconfig)
    caches: dict[str, dict[tuple[str, str], Obj]] = {}

    async def fill(api: ResourceApi, selector: str | None) -> None:
        cache = caches.setdefault(api.resource.plural, {})
        async with contextlib.aclosing(api.watch(args.namespace, resource_version="", label_selector=selector,
                                                 timeout_seconds=600, read_timeout=120,
                                                 send_initial_events=True)) as events:
            async for ev in events:
                if initial_events_end(ev):
                    return
                meta = ev.object.get("metadata") or {}
                cache[(meta.get("namespace") or "", meta.get("name") or "")] = ev.object

    try:
        await asyncio.gather(*(fill(ResourceApi(client, r), s) for r, s in watched))
    finally:
        await client.close()
    print(json.dumps({"fetch_s": round(time.monotonic() - started, 2),
                      "objects": sum(len(c) for c in caches.values())}))
    return 0


# ----------------------------------------------------------------------------------------- cluster


def cluster_env(cluster_dir: str, nodes: int) -> dict[str, str]:
    env = {**os.environ, "SAMPLEDB_CLUSTER_DIR": cluster_dir, "SAMPLEDB_REAL_NODE": "0",
           "SAMPLEDB_CLUSTER_NODES": str(nodes)}
    out = subprocess.run([str(REPO / "hack/cluster"), "up"], env=env, check=True, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("export "):
            k, _, v = line.removeprefix("export ").partition("=")
            env[k] = v
    return env


def cluster_down(cluster_dir: str) -> None:
    env = {**os.environ, "SAMPLEDB_CLUSTER_DIR": cluster_dir, "SAMPLEDB_REAL_NODE": "0"}
    subprocess.run([str(REPO / "hack/cluster"), "down"], env=env, check=False, capture_output=True)


def kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> None:
    subprocess.run([f"{env['SAMPLEDB_TESTCLUSTER_BIN']}/testcluster", "kubectl", *args], env=env, check=True,
                   input=stdin, capture_output=True, text=True)


def prepare(env: dict[str, str], names: list[str], *, admission: bool = False) -> None:
    """The CRD, and each namespace (NAMESPACE too: the shard Leases live there) with the init ConfigMap
    and its default ServiceAccount (pods need it); with `admission`, the install's finalizer policy
    (manifests/admission: a new SampleDB has the finalizer from its creation), once the API server applies it."""
    kubectl(env, "apply", "--server-side", "-f", str(REPO / "manifests/crd"))
    kubectl(env, "wait", "--for=condition=Established", "--timeout=60s", "-f", str(REPO / "manifests/crd"))
    if admission:
        kubectl(env, "apply", "--server-side", "-f", str(REPO / "manifests/admission"))
        wait_for_admission(env)
    wanted = sorted({NAMESPACE, *names})
    items: list[Obj] = []
    for name in wanted:
        items.append({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": name, "annotations": KWOK_PLACEMENT}})
        items.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "init-sql", "namespace": name},
                      "data": {"init.sql": "CREATE TABLE t (id int);\n"}})
    kubectl(env, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    for _ in range(300):
        got = subprocess.run([f"{env['SAMPLEDB_TESTCLUSTER_BIN']}/testcluster", "kubectl", "get", "sa", "-A",
                              "--field-selector", "metadata.name=default", "--no-headers",
                              "-o", "custom-columns=NS:.metadata.namespace"],
                             env=env, capture_output=True, check=False, text=True)
        if got.returncode == 0 and set(wanted) <= set(got.stdout.split()):
            return
        time.sleep(0.2)  # polling a cluster condition from a benchmark driver, not synchronising code
    raise RuntimeError("no default ServiceAccount")


def wait_for_admission(env: dict[str, str]) -> None:
    """Until a dry-run creation of a SampleDB comes back with the finalizer (policies load asynchronously)."""
    probe = json.dumps({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                        "metadata": {"name": "probe", "namespace": "default"},
                        "spec": {"version": "16.4", "storage": {"size": "1Gi"}}})
    for _ in range(300):
        got = subprocess.run([f"{env['SAMPLEDB_TESTCLUSTER_BIN']}/testcluster", "kubectl", "create", "--dry-run=server",
                              "-o", "json", "-f", "-"], env=env, input=probe, capture_output=True, check=False,
                             text=True)
        if got.returncode == 0 and "sampledb.io/finalizer" in got.stdout:
            return
        time.sleep(0.2)  # polling a cluster condition from a benchmark driver, not synchronising code
    raise RuntimeError("the finalizer policy never took effect")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------ system


@dataclass
class System:
    label: str
    kind: str  # floor | operator
    workers: int = 4
    src: str | None = None
    replicas: int = 1  # operator processes, each with --shards `shards` (sharding when shards > 1)
    shards: int = 1
    flags: tuple[str, ...] = ()  # more command-line flags of the operator
    admission: bool = True  # an operator's run installs manifests/admission (admission=0: not)
    writes: str = "children"  # a floor's: children (Floor) or operator (OperatorWritesFloor)

    @property
    def slug(self) -> str:
        """The label as a directory name part."""
        return self.label.replace(" ", "").replace("=", "")

    @classmethod
    def parse(cls, spec: str) -> System:
        kind, _, rest = spec.partition(":")
        opts = dict(p.split("=", 1) for p in rest.split(":") if p)
        workers = int(opts.get("workers", 4))
        writes = opts.get("writes", "children")
        if writes not in ("children", "operator"):
            raise ValueError(f"writes={writes}: children or operator")
        same = kind == "floor" and writes == "operator"
        label = opts.get("label") or (("floor-operator-writes" if same else kind) if kind == "floor"
                                      else f"operator w={workers}")
        flags = tuple(f for f in opts.get("flags", "").split(",") if f)
        # the operator's writes include the SampleDB's finalizer, which the admission policy adds at creation
        admission = (kind == "operator" or same) and opts.get("admission", "1") != "0"
        return cls(label, kind, workers, opts.get("src"), int(opts.get("replicas", 1)), int(opts.get("shards", 1)),
                   flags, admission, writes)


def nodes_for(n: int) -> int:
    """kwok nodes for N databases: a StatefulSet pod and an init Job pod each, PODS_PER_NODE a node."""
    return math.ceil(2 * n / PODS_PER_NODE) + 1


def default_timeout(n: int) -> float:
    """Seconds to wait for N databases to be Ready when --timeout is not given."""
    return max(600.0, 1.5 * n)


def proc_stats(pid: int) -> tuple[float, float]:
    """CPU seconds (user+system) and peak RSS in MiB of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    hwm = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmHWM:"))
    return cpu, hwm / 1024


def component_of(argv: list[str]) -> str | None:
    """The control-plane component a process is, by its argv: `testcluster <component> ...` (hack/testcluster's
    one binary runs etcd, kube-apiserver, the controller manager, the scheduler and the hostpath provisioner)
    or `kwok ...`; None for any other process."""
    if not argv:
        return None
    program = Path(argv[0]).name
    if program == "kwok":
        return "kwok"
    if program == "testcluster" and len(argv) > 1 and not argv[1].startswith("-"):
        return argv[1]
    return None


def cluster_cpu(cluster_dir: str) -> dict[str, float]:
    """CPU seconds so far (utime+stime) of each control-plane component of the cluster in `cluster_dir`
    (every process of it names the directory in its arguments), summed per component: where the machine's
    cores went while a system ran (the API server, etcd, kwok and the controllers share them with it)."""
    out: dict[str, float] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = [a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
            name = component_of(argv) if any(cluster_dir in a for a in argv[1:]) else None
            if name is not None:
                out[name] = out.get(name, 0.0) + proc_stats(int(proc.name))[0]
        except (OSError, ValueError, StopIteration):  # the process ended meanwhile
            continue
    return out


APISERVER_WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION")


def parse_apiserver_requests(text: str) -> dict[str, float]:
    """kube-apiserver's apiserver_request_total summed by "VERB resource[/subresource]" (every client's requests:
    the system's, the controllers', the scheduler's, kwok's, the observer's); WATCH and the like included."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line[len("apiserver_request_total{"):].rpartition("} ")
        labels = dict(part.split("=", 1) for part in labels_text.split('",') if "=" in part)
        labels = {k: v.strip('"') for k, v in labels.items()}
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        key = f"{labels.get('verb', '')} {resource}"
        out[key] = out.get(key, 0.0) + float(value)
    return out


def apiserver_requests(env: dict[str, str]) -> dict[str, float]:
    """The API server's requests so far, by verb and resource (parse_apiserver_requests); {} when unreadable."""
    got = subprocess.run([f"{env['SAMPLEDB_TESTCLUSTER_BIN']}/testcluster", "kubectl", "get", "--raw", "/metrics"],
                         env=env, capture_output=True, text=True, timeout=60, check=False)
    return parse_apiserver_requests(got.stdout) if got.returncode == 0 else {}


def apiserver_per_db(before: dict[str, float], after: dict[str, float], n: int) -> tuple[float, float,
                                                                                        dict[str, float]]:
    """(all requests, writes, the write counts of at least 0.1 per database by "VERB resource"), per database,
    between two readings of apiserver_requests."""
    delta = {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}
    n = max(1, n)
    writes = {k: v for k, v in delta.items() if k.split(" ", 1)[0] in APISERVER_WRITE_VERBS}
    return (round(sum(delta.values()) / n, 2), round(sum(writes.values()) / n, 2),
            {k: round(v / n, 2) for k, v in sorted(writes.items(), key=lambda kv: -kv[1]) if v / n >= 0.1})


def scrape(port: int, controller: str = "sampledb") -> tuple[dict[str, float], float, dict[str, float]]:
    """rest_client_requests_total by method, the `controller`'s reconciles, and the requests by
    "verb resource[/subresource]" (sampledb_api_requests_total: where the writes go), from /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    by_verb: dict[str, float] = {}
    by_resource: dict[str, float] = {}
    reconciles = 0.0
    for line in text.splitlines():
        if line.startswith("sampledb_api_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            inner = labels[len("sampledb_api_requests_total{"):-1].split(",")
            fields = {k: v.strip('"') for k, v in (part.split("=", 1) for part in inner)}
            sub = fields.get("subresource", "")
            key = f"{fields['verb']} {fields['resource']}" + (f"/{sub}" if sub else "")
            by_resource[key] = by_resource.get(key, 0) + float(value)
        elif line.startswith("rest_client_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            method = labels.split('method="', 1)[1].split('"', 1)[0]
            by_verb[method] = by_verb.get(method, 0) + float(value)
        elif line.startswith("controller_runtime_reconcile_total{") and f'controller="{controller}"' in line:
            reconciles += float(line.rsplit(" ", 1)[1])
    return by_verb, reconciles, by_resource


def start_fleet(system: System, env: dict[str, str], workdir: Path,
                per_namespace: int) -> list[tuple[subprocess.Popen[bytes], int | None]]:
    """The system's processes: the floor, or `replicas` operator processes (sharded when shards > 1: each
    replica its own identity, the shard Leases in the benchmark's namespace)."""
    if system.kind == "floor" or (system.replicas == 1 and system.shards == 1):
        return [start_system(system, env, workdir, per_namespace)]
    fleet = []
    for i in range(system.replicas):
        extra = ["--shards", str(system.shards), "--lease-namespace", NAMESPACE, "--identity", f"bench-{i}"]
        fleet.append(start_system(system, env, workdir, per_namespace, log_name=f"operator-{i}", extra=extra))
    return fleet


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_system(system: System, env: dict[str, str], workdir: Path, per_namespace: int, *,
                 log_name: str = "", extra: list[str] | None = None) -> tuple[subprocess.Popen[bytes], int | None]:
    """Start the floor or one operator process (watching NAMESPACE, or all namespaces when the databases
    are spread); returns it and its metrics port (None for the floor)."""
    log = (workdir / f"{log_name or system.kind}.log").open("wb")
    if system.kind == "floor":
        marker = workdir / "floor.ready"
        fenv = {**env, "SAMPLEDB_BENCH_SRC": system.src} if system.src else env
        proc = subprocess.Popen([sys.executable, __file__, "floor", "--kubeconfig", env["KUBECONFIG"],
                                 "--namespace", watched_namespace(per_namespace),
                                 "--stats", str(workdir / "floor.json"), "--ready-file", str(marker),
                                 "--writes", system.writes],
                                env=fenv, stdout=log, stderr=subprocess.STDOUT)
        started(proc, lambda: marker.exists() or proc.poll() is not None, 60)
        return proc, None
    port, health = free_port(), free_port()
    penv = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # compiled bytecode kept (outside the work tree) and reused, as the image's precompiled package is: without
    # it every start, a measured restart included, compiled the operator's ~120 modules again (~0.3 s here)
    penv["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    if system.src:
        penv["PYTHONPATH"] = f"{system.src}/operator"
    scope = ["--namespaces", NAMESPACE] if per_namespace <= 0 else []  # else all namespaces
    proc = subprocess.Popen(
        [sys.executable, "-m", "sampledb_operator", "run", "--kubeconfig", env["KUBECONFIG"], "--no-leader-elect",
         *scope, "--workers", str(system.workers), "--log-level", "warning",
         "--metrics-bind", f"127.0.0.1:{port}", "--health-bind", f"127.0.0.1:{health}", *system.flags,
         *(extra or [])],
        env=penv, stdout=log, stderr=subprocess.STDOUT)

    def ready() -> bool:
        if proc.poll() is not None:
            return True
        try:
            answer = urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=2)
            return bool(answer.status == 200)
        except OSError:
            return False

    started(proc, ready, 120)
    return proc, port


def started(proc: subprocess.Popen[bytes], ready: Callable[[], bool], timeout: float) -> None:
    """Wait until `ready`; a process that is not by `timeout` is stopped (never left running) and TimeoutError
    raised."""
    try:
        wait_until(ready, timeout)
    except TimeoutError:
        stop(proc)
        raise


RESTART_WINDOW = 15.0  # seconds a restarted operator is watched for writes after its caches synced


def measure_sync_floor(env: dict[str, str], per_namespace: int, *, shards: int = 1,
                       held: list[int] | None = None) -> tuple[float, float, float]:
    """The restart's floor (sync_floor_main; with `held`, a sharded replica's holding those shards): seconds
    from start to exit, seconds from connect to synced, objects fetched."""
    start = time.monotonic()
    sharded = ["--shards", str(shards), "--held", ",".join(map(str, held))] if held is not None else []
    answer = subprocess.run([sys.executable, __file__, "syncfloor", "--kubeconfig", env["KUBECONFIG"],
                             "--namespace", watched_namespace(per_namespace), *sharded],
                            env=env, check=True, capture_output=True, timeout=600)
    total = time.monotonic() - start
    got = json.loads(answer.stdout.decode().strip().splitlines()[-1])
    return round(total, 2), float(got["fetch_s"]), float(got["objects"])


def measure_restart(system: System, env: dict[str, str], workdir: Path,
                    per_namespace: int) -> tuple[float, float, float]:
    """Start the operator again over the N Ready databases: seconds from its start to every cache synced
    (its sampledb_caches_synced_timestamp_seconds against the wall clock when it was started, as
    process_start_time_seconds counts from a whole second; until /readyz answered for an older tree without that
    gauge), its writes in the RESTART_WINDOW after that (a restart must write nothing: every database is as
    declared), its peak RSS. The time until /readyz answered is printed too: it adds the health endpoint's
    latency while the first passes run."""
    start, started_at = time.monotonic(), time.time()
    proc, port = start_system(system, env, workdir, per_namespace, log_name="restart")
    readyz = time.monotonic() - start
    try:
        if proc.poll() is not None or port is None:
            raise RuntimeError("the restarted operator exited")
        window_end = time.monotonic() + RESTART_WINDOW
        wait_until(lambda: time.monotonic() >= window_end, RESTART_WINDOW + 5)  # a measurement window
        requests, _reconciles, _by_resource = scrape(port)
        _cpu, rss = proc_stats(proc.pid)
        synced_at = synced_timestamp(port)
        synced = synced_at - started_at if synced_at else readyz
    finally:
        stop(proc)
    print(f"  restart of {system.label}: caches synced {synced:.2f} s after its start, /readyz answered"
          f" after {readyz:.2f} s", file=sys.stderr)
    return round(synced, 2), sum(v for k, v in requests.items() if k in WRITE_VERBS), round(rss, 1)


def unlabelled_value(port: int, name: str, *more: str) -> float | None:
    """The value of the unlabelled metric `name` from /metrics (None when the process has none); with `more`
    names, the smallest of their values, all from one scrape (None when one is missing)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values: list[float] = []
    for wanted in (name, *more):
        found = [float(line.split()[1]) for line in text.splitlines() if line.startswith(f"{wanted} ")]
        if not found:
            return None
        values.append(found[0])
    return min(values)


def gauge(port: int, name: str, *more: str) -> float | None:
    """unlabelled_value, None too while the process does not answer."""
    try:
        return unlabelled_value(port, name, *more)
    except OSError:
        return None


def owned_shards(port: int) -> list[int]:
    """The shards a replica owns now (sampledb_shard_owned{shard="k"} 1), from /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sorted(int(line.split('shard="', 1)[1].split('"', 1)[0]) for line in text.splitlines()
                  if line.startswith("sampledb_shard_owned{") and float(line.rsplit(" ", 1)[1]) == 1.0)


def measure_replica_restart(system: System, env: dict[str, str], workdir: Path, per_namespace: int, *,
                            fleet: list[tuple[subprocess.Popen[bytes], int | None]],
                            index: int = 0) -> tuple[tuple[float, float, float], tuple[float, float], float | None]:
    """One replica of a sharded fleet SIGKILLed while the others run (its shard Leases still name it) and
    started again with the same identity: seconds from its start until it owns and caches as many shards
    as before (sampledb_shards_owned and sampledb_shards_cached, polled every 0.1 s: with filtered caches,
    once it took its shards back, labelled and listed them), its writes in the RESTART_WINDOW after that but
    those to its shard Leases (renewed every retry period, the lock's own traffic), its peak RSS. The new process takes
    `index`'s place in `fleet` (the caller stops it). Before it, the restart's floor with the fleet running
    as it will during the restart: a plain client's process fetching what the replica caches (its shards'
    objects, those without a bucket, the SampleDBBackups), start to exit, and the objects it fetched."""
    proc, port = fleet[index]
    held = gauge(port, "sampledb_shards_cached") if port is not None else None
    if not held or port is None:
        raise RuntimeError(f"replica {index} caches no shard before its restart")
    shards = owned_shards(port)
    floor_total, floor_fetch, floor_objects = measure_sync_floor(env, per_namespace, shards=system.shards, held=shards)
    print(f"  restart floor of replica {index} (shards {shards}): {floor_objects:.0f} objects fetched in"
          f" {floor_fetch} s, {floor_total} s from its start to its exit", file=sys.stderr)
    proc.kill()
    proc.wait()
    start, wall_start = time.monotonic(), time.time()
    extra = ["--shards", str(system.shards), "--lease-namespace", NAMESPACE, "--identity", f"bench-{index}"]
    new, new_port = start_system(system, env, workdir, per_namespace, log_name=f"restart-{index}", extra=extra)
    fleet[index] = (new, new_port)
    readyz = time.monotonic() - start
    if new.poll() is not None or new_port is None:
        raise RuntimeError("the restarted replica exited")
    deadline = start + 300
    while (gauge(new_port, "sampledb_shards_cached", "sampledb_shards_owned") or 0) < held:  # one scrape a poll
        if time.monotonic() > deadline:
            raise TimeoutError(f"the restarted replica did not own and cache its {held:.0f} shards again")
        time.sleep(0.1)  # polling another process's metrics from the driver
    synced = time.monotonic() - start
    logged = logged_shards_enqueued(workdir / f"restart-{index}.log", wall_start, int(held))
    window_end = time.monotonic() + RESTART_WINDOW
    wait_until(lambda: time.monotonic() >= window_end, RESTART_WINDOW + 5)  # a measurement window
    _requests, _reconciles, by_resource = scrape(new_port)
    _cpu, rss = proc_stats(new.pid)
    writes = {k: v for k, v in by_resource.items() if k.split()[0] in RBAC_WRITE_VERBS}
    leases = sum(v for k, v in writes.items() if k.split()[1] == "leases")
    print(f"  restart of replica {index} of {system.label}: its {held:.0f} shards owned and cached {synced:.2f} s"
          f" after its start (by its log: {logged if logged is None else round(logged, 2)} s), /readyz answered"
          f" after {readyz:.2f} s; writes {writes} ({leases:.0f} to its shard Leases, not counted)", file=sys.stderr)
    return ((round(synced, 2), sum(writes.values()) - leases, round(rss, 1)), (floor_total, floor_objects),
            None if logged is None else round(logged, 2))


def logged_shards_enqueued(log: Path, wall_start: float, held: int) -> float | None:
    """Seconds from `wall_start` (Unix time) to the restarted replica's log line enqueueing the last of its `held`
    shards ("shard's objects enqueued": owned and cached), or None without such lines (another log format). The
    poll of /metrics above times the same moment late when the replica's first passes hold its scrape up (0.6-1.3
    s at 5,000: docs/benchmarks.md, "Restarts"); a JSON log line carries the moment itself."""
    stamps: list[float] = []
    for line in log.read_text(errors="replace").splitlines():
        if "shard's objects enqueued" not in line:
            continue
        with contextlib.suppress(ValueError, KeyError, TypeError):
            stamps.append(datetime.fromisoformat(json.loads(line)["timestamp"].replace("Z", "+00:00")).timestamp())
    return sorted(stamps)[held - 1] - wall_start if held > 0 and len(stamps) >= held else None


def settle(max_load: float, timeout: float) -> None:
    """Wait (at most `timeout` s) until the 1-minute load average is under `max_load`: a restart is timed on a
    cluster at rest, after the control plane has finished the work the creation left (pods, Jobs, volumes),
    and not while something else on this shared machine runs. Prints how long it waited."""
    start = time.monotonic()
    while os.getloadavg()[0] >= max_load and time.monotonic() - start < timeout:
        time.sleep(5.0)  # polling the machine's load from the driver
    print(f"  settled for {time.monotonic() - start:.0f} s: load {os.getloadavg()[0]:.2f}", file=sys.stderr)


def synced_timestamp(port: int) -> float | None:
    """sampledb_caches_synced_timestamp_seconds from /metrics (None without it: an older tree)."""
    found = unlabelled_value(port, "sampledb_caches_synced_timestamp_seconds")
    return found if found is not None and found > 0 else None


def wait_until(cond: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("system did not start")
        time.sleep(0.2)  # polling another process's readiness from the driver


# -------------------------------------------------------------------------------------- observer


async def observe(kubeconfig: str, n: int, wait_s: float,
                  per_namespace: int) -> tuple[dict[DbKey, float], dict[DbKey, float], float]:
    """Create N SampleDBs and wait until each is Ready: (created, ready) times by (namespace, name), and t0."""
    client = await KubeClient.connect(kubeconfig)
    api = ResourceApi(client, SAMPLEDB)
    ready: dict[DbKey, float] = {}
    all_ready = asyncio.Event()

    def on_obj(_type: str, obj: Obj) -> None:
        key = db_key(obj)
        if key not in ready and ready_condition(obj):
            ready[key] = time.monotonic()
            if len(ready) >= n:
                all_ready.set()

    t0 = time.monotonic()
    try:
        bodies = {db_key(body): body for body in (sampledb(i, per_namespace) for i in range(n))}
        created = await create_and_wait(api, bodies, on_obj, all_ready, wait_s=wait_s, per_namespace=per_namespace,
                                        progress=lambda: f"{len(ready)}/{n} Ready")
    finally:
        await client.close()
    return created, ready, t0


async def create_and_wait(api: ResourceApi, bodies: dict[DbKey, Obj], on_obj: Callable[[str, Obj], None],
                          finished: asyncio.Event, *, wait_s: float, per_namespace: int,
                          progress: Callable[[], str]) -> dict[DbKey, float]:
    """Watch `api`'s resource (on_obj for every object seen), create `bodies` (20 at a time) and wait at most
    wait_s for `finished`; the time each body was sent."""
    created: dict[DbKey, float] = {}
    watcher = asyncio.ensure_future(watch_forever(api, watched_namespace(per_namespace), on_obj))
    limit = asyncio.Semaphore(20)

    async def create(key: DbKey, body: Obj) -> None:
        async with limit:
            created[key] = time.monotonic()
            await api.create(body)

    try:
        await asyncio.gather(*(create(k, b) for k, b in bodies.items()))
        await asyncio.wait_for(finished.wait(), wait_s)
    except TimeoutError:
        print(f"  timed out: {progress()}", file=sys.stderr)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return created


BACKUP_DONE = ("Succeeded", "Failed")


def backup_for(key: DbKey) -> Obj:
    """The on-demand SampleDBBackup the backups phase makes of one database."""
    namespace, name = key
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": f"{name}-bench", "namespace": namespace},
            "spec": {"database": name, "reason": "manual"}}


def backup_done(obj: Obj) -> str | None:
    """The phase of a finished backup (Succeeded or Failed), or None while it is under way."""
    phase = (obj.get("status") or {}).get("phase")
    return phase if phase in BACKUP_DONE else None


async def observe_backups(kubeconfig: str, keys: list[DbKey], wait_s: float,
                          per_namespace: int) -> tuple[dict[DbKey, float], dict[DbKey, tuple[float, str]]]:
    """Create a backup of every database in `keys` at once and wait until each finished: (created, done) by the
    database's (namespace, name), done with the phase it ended in."""
    client = await KubeClient.connect(kubeconfig)
    api = ResourceApi(client, SAMPLEDBBACKUP)
    wanted = {backup_for(k)["metadata"]["name"] for k in keys}
    done: dict[DbKey, tuple[float, str]] = {}
    all_done = asyncio.Event()

    def on_obj(_type: str, obj: Obj) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", (obj.get("spec") or {}).get("database") or "")
        phase = backup_done(obj)
        if meta["name"] in wanted and key not in done and phase is not None:
            done[key] = (time.monotonic(), phase)
            if len(done) >= len(keys):
                all_done.set()

    try:
        created = await create_and_wait(api, {k: backup_for(k) for k in keys}, on_obj, all_done, wait_s=wait_s,
                                        per_namespace=per_namespace,
                                        progress=lambda: f"{len(done)}/{len(keys)} backups finished")
    finally:
        await client.close()
    return created, done


@dataclass
class BackupsResult:
    """The backups phase: one backup of every Ready database at once, with the fleet that made them Ready."""

    n: int
    succeeded: int
    failed: int
    all_done_s: float  # first create to the last finished
    median_s: float  # create -> finished
    cpu_s: float  # the fleet's, during the phase
    writes_per_backup: float
    per_backup_by_resource: dict[str, float]  # the fleet's requests per backup (sampledb_api_requests_total)
    reconciles_by_replica: list[float]  # backup reconciles each replica ran (sharded: each backup by its owner)
    control_plane_cpu_s: dict[str, float]


def summarize_backups(created: dict[DbKey, float], done: dict[DbKey, tuple[float, str]]) -> tuple[int, int, float,
                                                                                              float]:
    """(succeeded, failed, all done s from the first create, median create -> done s)."""
    succeeded = sum(1 for _t, phase in done.values() if phase == "Succeeded")
    lat = [t - created[k] for k, (t, _p) in done.items() if k in created]
    last = max((t for t, _p in done.values()), default=math.nan)
    first = min(created.values(), default=math.nan)
    return (succeeded, len(done) - succeeded, round(last - first, 1) if done else math.nan,
            round(statistics.median(lat), 1) if lat else math.nan)


def run_backups(fleet: list[tuple[subprocess.Popen[bytes], int | None]], env: dict[str, str], keys: list[DbKey], *,
                timeout: float, per_namespace: int) -> BackupsResult:
    """The backups phase against a running fleet (its counters read before and after)."""
    ports = [port for _proc, port in fleet if port is not None]
    before = [scrape(port, "sampledbbackup") for port in ports]
    cpu_before = sum(proc_stats(proc.pid)[0] for proc, _port in fleet)
    cluster_before = cluster_cpu(env["SAMPLEDB_CLUSTER_DIR"])
    created, done = asyncio.run(observe_backups(env["KUBECONFIG"], keys, timeout, per_namespace))
    cluster_after = cluster_cpu(env["SAMPLEDB_CLUSTER_DIR"])
    cpu = sum(proc_stats(proc.pid)[0] for proc, _port in fleet) - cpu_before
    after = [scrape(port, "sampledbbackup") for port in ports]
    writes = sum(a[0].get(v, 0) - b[0].get(v, 0) for a, b in zip(after, before, strict=True) for v in WRITE_VERBS)
    by_resource: dict[str, float] = {}
    for a, b in zip(after, before, strict=True):
        for k, v in a[2].items():
            by_resource[k] = by_resource.get(k, 0) + v - b[2].get(k, 0)
    n = max(1, len(keys))
    succeeded, failed, all_done, median = summarize_backups(created, done)
    result = BackupsResult(
        n=len(keys), succeeded=succeeded, failed=failed, all_done_s=all_done, median_s=median, cpu_s=round(cpu, 1),
        writes_per_backup=round(writes / n, 2),
        per_backup_by_resource={k: round(v / n, 2) for k, v in sorted(by_resource.items()) if v},
        reconciles_by_replica=[a[1] - b[1] for a, b in zip(after, before, strict=True)],
        control_plane_cpu_s={k: round(v - cluster_before.get(k, 0.0), 1) for k, v in sorted(cluster_after.items())})
    print(f"  backups: {succeeded}/{len(keys)} Succeeded, {failed} Failed, all done {all_done} s, median {median} s,"
          f" CPU {result.cpu_s} s, {result.writes_per_backup} writes per backup, backup reconciles by replica"
          f" {result.reconciles_by_replica}", file=sys.stderr)
    return result


@dataclass
class RunResult:
    label: str
    round: int
    n: int
    ready: int
    all_ready_s: float
    median_s: float
    first_ready_s: float
    cpu_s: float
    peak_rss_mib: float
    writes_per_db: float
    gets_per_db: float
    reconciles_per_db: float
    requests: dict[str, float]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    nodes: int
    ready_times: list[float] = field(default_factory=list)
    per_db_by_resource: dict[str, float] = field(default_factory=dict)  # the operator's requests per database
    restart_synced_s: float | None = None  # a restarted operator: start to /readyz (caches synced)
    restart_writes: float | None = None  # its writes in the RESTART_WINDOW seconds after that
    restart_rss_mib: float | None = None  # its peak RSS then (the steady state, without a creation burst)
    per_namespace: int = 0  # databases per namespace (0: all in NAMESPACE)
    restart_floor_s: float | None = None  # a sharded replica's restart's floor: a plain client's process, start to exit
    restart_floor_objects: float | None = None  # the objects it fetched (what the replica caches)
    restart_logged_s: float | None = None  # a sharded replica's restart by its log (logged_shards_enqueued)
    control_plane_cpu_s: dict[str, float] = field(default_factory=dict)  # per component, during the creation
    observer_cpu_s: float = 0.0  # the observer's (this script's) CPU during the creation
    apiserver_requests_per_db: float = 0.0  # every client's requests to the API server during the creation, per DB
    apiserver_writes_per_db: float = 0.0  # of them writes (the system's, the controllers', scheduler's, kwok's...)
    apiserver_writes_by_resource: dict[str, float] = field(default_factory=dict)  # per DB, "VERB resource"
    backups: BackupsResult | None = None  # with --backups: one backup of every database, after they are Ready


def run_one(system: System, n: int, rnd: int, out: Path, *, timeout: float, per_namespace: int,
            backups: bool = False) -> RunResult:
    nodes = nodes_for(n)
    slug = system.slug
    cluster_dir = f"/tmp/scale-{slug}-{n}-{rnd}"
    workdir = out / f"{slug}-{rnd}"
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"run: {system.label} N={n} round {rnd} ({nodes} kwok nodes, {cluster_dir})", file=sys.stderr)
    try:
        env = cluster_env(cluster_dir, nodes)
        prepare(env, namespaces(n, per_namespace), admission=system.admission)
        fleet = start_fleet(system, env, workdir, per_namespace)
        restart: tuple[float | None, float | None, float | None] = (None, None, None)
        floor: tuple[float, float] | None = None
        logged: float | None = None
        backed: BackupsResult | None = None
        try:
            made = make_ready(fleet, env, n=n, timeout=timeout, per_namespace=per_namespace)
            everything = system.kind == "operator" and len(made.ready) == n
            if everything and system.shards > 1 and len(fleet) > 1:
                restart, floor, logged = measure_replica_restart(system, env, workdir, per_namespace, fleet=fleet)
            if everything and backups:  # after a sharded replica's restart, before one operator's (it stops the fleet)
                backed = run_backups(fleet, env, sorted(made.ready), timeout=timeout, per_namespace=per_namespace)
        finally:
            for proc, _port in fleet:
                stop(proc)
        if system.kind == "operator" and len(made.ready) == n and len(fleet) == 1:
            restart = measure_restart(system, env, workdir, per_namespace)
    finally:
        cluster_down(cluster_dir)
    return record(made, system, rnd=rnd, nodes=nodes, restart=restart, workdir=workdir, per_namespace=per_namespace,
                  restart_floor=floor, restart_logged=logged, backups=backed)


@dataclass
class Made:
    """What one system did while the observer created N SampleDBs and waited for them to be Ready."""

    n: int
    created: dict[DbKey, float]
    ready: dict[DbKey, float]
    t0: float
    cpu: float
    rss: float
    reconciles: float
    requests: dict[str, float]
    by_resource: dict[str, float]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    control_plane_cpu: dict[str, float] = field(default_factory=dict)  # CPU s per component during the run
    observer_cpu: float = 0.0  # this script's CPU s during the run (it creates the SampleDBs and watches them)
    apiserver: tuple[dict[str, float], dict[str, float]] = ({}, {})  # apiserver_requests before and after


def make_ready(fleet: list[tuple[subprocess.Popen[bytes], int | None]], env: dict[str, str], *,
               n: int, timeout: float, per_namespace: int) -> Made:
    """The observer's run against a started fleet, and the fleet's counters (read before it is stopped)."""
    load_before = os.getloadavg()
    requests_before = apiserver_requests(env)
    cluster_before, observer_before = cluster_cpu(env["SAMPLEDB_CLUSTER_DIR"]), time.process_time()
    created, ready, t0 = asyncio.run(observe(env["KUBECONFIG"], n, timeout, per_namespace))
    load_after = os.getloadavg()
    requests_after = apiserver_requests(env)
    observer = time.process_time() - observer_before
    cluster_after = cluster_cpu(env["SAMPLEDB_CLUSTER_DIR"])
    control_plane = {k: v - cluster_before.get(k, 0.0) for k, v in sorted(cluster_after.items())}
    stats = [proc_stats(proc.pid) for proc, _port in fleet]
    cpu, rss = sum(c for c, _r in stats), max(r for _c, r in stats)  # CPU of all; the largest replica
    reconciles = 0.0
    requests: dict[str, float] = {}
    by_resource: dict[str, float] = {}
    for _proc, port in fleet:
        if port is not None:
            got, got_reconciles, got_by_resource = scrape(port)
            reconciles += got_reconciles
            for k, v in got.items():
                requests[k] = requests.get(k, 0) + v
            for k, v in got_by_resource.items():
                by_resource[k] = by_resource.get(k, 0) + v
    return Made(n, created, ready, t0, cpu, rss, reconciles, requests, by_resource, load_before, load_after,
                control_plane, observer, (requests_before, requests_after))


def record(made: Made, system: System, *, rnd: int, nodes: int,
           restart: tuple[float | None, float | None, float | None], workdir: Path, per_namespace: int,
           restart_floor: tuple[float, float] | None = None, restart_logged: float | None = None,
           backups: BackupsResult | None = None) -> RunResult:
    """The run's RunResult, written to workdir/result.json and printed."""
    n, ready, created, t0 = made.n, made.ready, made.created, made.t0
    requests = made.requests
    if system.kind == "floor":  # the floor counts its own requests, written when it stopped
        requests = json.loads((workdir / "floor.json").read_text())["requests"]
    times = sorted(t - t0 for t in ready.values())
    lat = [ready[k] - created[k] for k in ready]
    api_requests, api_writes, api_by_resource = apiserver_per_db(*made.apiserver, n)
    result = RunResult(
        label=system.label, round=rnd, n=n, ready=len(ready),
        all_ready_s=round(times[-1], 1) if times else math.nan,
        median_s=round(statistics.median(lat), 1) if lat else math.nan,
        first_ready_s=round(times[0], 1) if times else math.nan,
        cpu_s=round(made.cpu, 1), peak_rss_mib=round(made.rss, 1),
        writes_per_db=round(sum(v for k, v in requests.items() if k in WRITE_VERBS) / n, 2),
        gets_per_db=round(requests.get("GET", 0) / n, 2),
        reconciles_per_db=round(made.reconciles / n, 2),
        requests=requests, load_before=made.load_before, load_after=made.load_after, nodes=nodes,
        ready_times=[round(t, 2) for t in times],
        per_db_by_resource={k: round(v / n, 2) for k, v in sorted(made.by_resource.items())},
        restart_synced_s=restart[0], restart_writes=restart[1], restart_rss_mib=restart[2],
        per_namespace=per_namespace,
        restart_floor_s=restart_floor[0] if restart_floor else None,
        restart_floor_objects=restart_floor[1] if restart_floor else None,
        restart_logged_s=restart_logged,
        control_plane_cpu_s={k: round(v, 1) for k, v in made.control_plane_cpu.items()},
        observer_cpu_s=round(made.observer_cpu, 1),
        apiserver_requests_per_db=api_requests, apiserver_writes_per_db=api_writes,
        apiserver_writes_by_resource=api_by_resource,
        backups=backups,
    )
    (workdir / "result.json").write_text(json.dumps(asdict(result)))
    print(f"  {row(result)}", file=sys.stderr)
    print(f"  CPU s during the creation: {cpu_line(result)}", file=sys.stderr)
    print(f"  the API server's requests per database: {api_requests} ({api_writes} writes: "
          + ", ".join(f"{k} {v}" for k, v in api_by_resource.items()) + ")", file=sys.stderr)
    return result


HEADER = ("| system | round | N | Ready | all Ready s | median create->Ready s | first Ready s | CPU s | peak RSS MiB "
          "| writes/DB | GETs/DB | reconciles/DB | load avg (1 min) before/after "
          "| restart: synced s / writes / RSS MiB |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")


def cpu_line(r: RunResult) -> str:
    """Where the cores went during a run's creation: the system, each control-plane component, the observer."""
    parts = [f"{r.label} {r.cpu_s:.1f}", *(f"{k} {v:.1f}" for k, v in r.control_plane_cpu_s.items()),
             f"observer {r.observer_cpu_s:.1f}"]
    return ", ".join(parts)


def row(r: RunResult) -> str:
    return (f"| {r.label} | {r.round} | {r.n} | {r.ready} | {r.all_ready_s} | {r.median_s} | {r.first_ready_s} "
            f"| {r.cpu_s} | {r.peak_rss_mib} | {r.writes_per_db} | {r.gets_per_db} | {r.reconciles_per_db or '-'} "
            f"| {r.load_before[0]:.1f} / {r.load_after[0]:.1f} "
            f"| {_restart(r)} |")


def _restart(r: RunResult) -> str:
    if r.restart_synced_s is None:
        return "-"
    floor = "" if r.restart_floor_s is None else \
        f" (floor {r.restart_floor_s} s, {r.restart_floor_objects or 0:.0f} objects)"
    logged = "" if r.restart_logged_s is None else f" (by its log {r.restart_logged_s} s)"
    return f"{r.restart_synced_s}{logged} / {r.restart_writes or 0:.0f} / {r.restart_rss_mib}{floor}"


def chart(results: list[RunResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for r in results:
        xs = [0.0, *r.ready_times]
        ax.step(xs, range(len(xs)), where="post", label=f"{r.label} (round {r.round})")
    ax.set_xlabel("seconds since the first SampleDB was created")
    ax.set_ylabel("SampleDBs Ready")
    ax.set_title(f"N={results[0].n}: SampleDBs Ready over time")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def run_main(args: argparse.Namespace) -> int:
    systems = [System.parse(s) for s in args.systems.split(",")]
    out = Path(args.out or f"/tmp/scale-results/{datetime.now(UTC):%Y%m%dT%H%M%S}-n{args.n}")
    out.mkdir(parents=True, exist_ok=True)
    timeout = args.timeout or default_timeout(args.n)
    results = [run_one(s, args.n, rnd, out, timeout=timeout, per_namespace=args.per_namespace, backups=args.backups)
               for rnd in range(1, args.rounds + 1) for s in systems]
    return report(results, out)


def restart_main(args: argparse.Namespace) -> int:
    """N databases made Ready once by the first system (recorded as a run, with the first restart of that
    system), then each system restarted over them in turn, round after round."""
    systems = [System.parse(s) for s in args.systems.split(",")]
    if any(s.kind != "operator" or s.replicas != 1 for s in systems):
        raise SystemExit("restart: single operator processes only")
    out = Path(args.out or f"/tmp/scale-results/{datetime.now(UTC):%Y%m%dT%H%M%S}-restart-n{args.n}")
    maker = systems[0]
    workdir = out / f"{maker.slug}-1"
    workdir.mkdir(parents=True, exist_ok=True)
    cluster_dir = f"/tmp/scale-restart-{args.n}"
    nodes = nodes_for(args.n)
    rows: list[dict[str, Any]] = []
    try:
        env = cluster_env(cluster_dir, nodes)
        prepare(env, namespaces(args.n, args.per_namespace), admission=maker.admission)
        fleet = [start_system(maker, env, workdir, args.per_namespace)]
        try:
            made = make_ready(fleet, env, n=args.n, timeout=args.timeout or default_timeout(args.n),
                              per_namespace=args.per_namespace)
        finally:
            stop(fleet[0][0])
        if made.ready.keys() != made.created.keys() or len(made.ready) != args.n:
            raise SystemExit(f"restart: only {len(made.ready)} of {args.n} Ready")
        for rnd in range(1, args.rounds + 1):
            settle(args.settle_load, args.settle_timeout)
            load = os.getloadavg()[0]
            total, fetch, objects = measure_sync_floor(env, args.per_namespace)
            rows.append({"label": f"floor ({objects:.0f} objects; fetch {fetch} s)", "round": rnd,
                         "synced_s": total, "writes": 0.0, "rss_mib": "-", "load": round(load, 2)})
            print(f"  restart {rows[-1]}", file=sys.stderr)
            for system in systems:
                load = os.getloadavg()[0]
                synced, writes, rss = measure_restart(system, env, workdir, args.per_namespace)
                rows.append({"label": system.label, "round": rnd, "synced_s": synced, "writes": writes,
                             "rss_mib": rss, "load": round(load, 2)})
                print(f"  restart {rows[-1]}", file=sys.stderr)
    finally:
        cluster_down(cluster_dir)
    first = next((r for r in rows if r["label"] == maker.label), None)
    restart = (first["synced_s"], first["writes"], first["rss_mib"]) if first else (None, None, None)
    result = record(made, maker, rnd=1, nodes=nodes, restart=restart, workdir=workdir,
                    per_namespace=args.per_namespace)
    (out / "restarts.json").write_text(json.dumps(rows))
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, N={args.n}; results in {out}\n")
    print(HEADER)
    print(row(result))
    print("\n| system | round | synced s | writes in 15 s | RSS MiB | load avg (1 min) |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['label']} | {r['round']} | {r['synced_s']} | {r['writes']:.0f} | {r['rss_mib']} | {r['load']} |")
    return 0


def report_main(args: argparse.Namespace) -> int:
    """Table and chart of runs already made (their result.json files), e.g. of runs cut short."""
    results = [RunResult(**json.loads(Path(f).read_text())) for f in args.results]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return report(results, out)


def ratios(results: list[RunResult], base: str) -> list[str]:
    """Table rows of each other system's all Ready, median and CPU over those of the run labelled `base` in the
    same round (none when `base` did not run)."""
    floors = {r.round: r for r in results if r.label == base}
    rows = []
    for r in results:
        f = floors.get(r.round)
        if f is not None and r.label != base:
            rows.append(f"| {r.label} | {r.round} | {r.all_ready_s / f.all_ready_s:.2f} "
                        f"| {r.median_s / f.median_s:.2f} | {r.cpu_s / max(f.cpu_s, 0.1):.2f} |")
    return rows


def report(results: list[RunResult], out: Path) -> int:
    (out / "results.json").write_text(json.dumps([asdict(r) for r in results]))
    chart(results, out / "ready.png")
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores; results in {out}\n")
    print(HEADER)
    for r in results:
        print(row(r))
    for base in ("floor", "floor-operator-writes"):  # each system against each floor that ran
        table = ratios(results, base)
        if table:
            print(f"\n| system | round | all Ready / {base} | median / {base} | CPU / {base} |\n"
                  "|---|---:|---:|---:|---:|")
            print("\n".join(table))
    return 0


PER_NAMESPACE_HELP = ("databases per namespace (default %(default)s; 0: all in one namespace `scale`: then the control "
                      "plane's own controllers, which scan a namespace's pods and Services for each event, grow with N "
                      "squared)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="the benchmark")
    run.add_argument("--n", type=int, default=300)
    run.add_argument("--systems", default="floor,operator")
    run.add_argument("--rounds", type=int, default=1)
    run.add_argument("--timeout", type=float, default=0.0,
                     help="seconds to wait for all Ready (default max(600, 1.5 N))")
    run.add_argument("--out", default="")
    run.add_argument("--per-namespace", type=int, default=PER_NAMESPACE, help=PER_NAMESPACE_HELP)
    run.add_argument("--backups", action="store_true",
                     help="once all are Ready, an operator makes one backup of every database at once (timed)")
    rs = sub.add_parser("restart", help="restarts alone: N databases Ready once, then each system restarted")
    rs.add_argument("--n", type=int, default=1000)
    rs.add_argument("--systems", default="operator:workers=16,operator:label=paged:flags=--no-streaming-lists")
    rs.add_argument("--rounds", type=int, default=3)
    rs.add_argument("--timeout", type=float, default=0.0)
    rs.add_argument("--settle-load", type=float, default=1.5,
                    help="each round waits until the 1-minute load average is under this (default 1.5)")
    rs.add_argument("--settle-timeout", type=float, default=900.0, help="for at most this many seconds")
    rs.add_argument("--out", default="")
    rs.add_argument("--per-namespace", type=int, default=PER_NAMESPACE, help=PER_NAMESPACE_HELP)
    fl = sub.add_parser("floor", help="(internal) the floor client process")
    fl.add_argument("--kubeconfig", required=True)
    fl.add_argument("--namespace", default=NAMESPACE)
    fl.add_argument("--concurrency", type=int, default=64)
    fl.add_argument("--writes", choices=("children", "operator"), default="children",
                    help="children: one write per child (Floor); operator: the operator's writes and watches")
    fl.add_argument("--stats", required=True)
    fl.add_argument("--ready-file", required=True)
    sf = sub.add_parser("syncfloor", help="(internal) a restart's floor: the caches' lists by a plain client")
    sf.add_argument("--kubeconfig", required=True)
    sf.add_argument("--namespace", default=NAMESPACE)
    sf.add_argument("--shards", type=int, default=1, help="with --held: the replicas' --shards")
    sf.add_argument("--held", help="a sharded replica's shards (comma-separated): fetch what it caches")
    rep = sub.add_parser("report", help="table and chart of result.json files of earlier runs")
    rep.add_argument("results", nargs="+")
    rep.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "report":
        return report_main(args)
    if args.command == "floor":
        return asyncio.run(floor_main(args))
    if args.command == "syncfloor":
        return asyncio.run(sync_floor_main(args))
    if args.command == "restart":
        return restart_main(args)
    return run_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
