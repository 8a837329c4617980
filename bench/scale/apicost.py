"""What each kind of write costs the API server (issue #18): kube-apiserver CPU per request.

The scale benchmark's floor makes ~9 writes per database and the operator ~16; this measures what
those writes cost the API server, which is the bottleneck of the scale runs on a small machine. One
fresh kwok-only control plane (hack/cluster, SAMPLEDB_REAL_NODE=0) in --cluster-dir; each case makes
N writes at a concurrency of 16 with a plain client and reads kube-apiserver's CPU seconds
(utime+stime, /proc) before and after. The cases:

  child create (POST) / child apply (SSA)   the operator's child bodies (decide.children.desired: the connection
                                            ConfigMap, 3 Services, 2 PVCs, the StatefulSet at 0 replicas)
                                            created by POST or by server-side apply; per object
  SampleDB create                           a SampleDB with resources, parameters and a backup schedule
  SampleDB finalizer (merge patch)          what the operator's first pass writes on the SampleDB itself
  SampleDB status (merge patch)             a status of 5 conditions, one reason changed per write
  Event create                              a core/v1 Event about the SampleDB

The SampleDB cases run twice: against the real CRD (manifests/crd, with its CEL validation rules) and
against a copy without any x-kubernetes-validations (group nocel.sampledb.io), to show what the rules
cost. Cases run interleaved, --rounds times, each round in a fresh namespace; the table gives the
median per case. CPU includes the control plane's reaction inside the window (e.g. the PVCs' binding,
the Services' endpoints), as it does in the scale runs.

    .venv/bin/python bench/scale/apicost.py --n 300 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale
import yaml

from sampledb_operator import dataplane
from sampledb_operator.decide.children import desired as d
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.resources import CONFIGMAP, EVENT, PVC, SAMPLEDB, SERVICE, STATEFULSET
from sampledb_operator.model.sampledb import SampleDB

Obj = dict[str, Any]
CONCURRENCY = 16
NOCEL_GROUP = "nocel.sampledb.io"
SPEC: Obj = {"version": "16.4", "storage": {"size": "1Gi"},
             "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
             "parameters": {"max_connections": "100", "shared_buffers": "128MB"},
             "backup": {"schedule": "0 3 * * *"}}
CONDITIONS = ("SpecValid", "Initialized", "Degraded", "Ready", "Progressing")


def without_cel(crd: Obj) -> Obj:
    """The CRD under another group, with every x-kubernetes-validations removed."""
    out = copy.deepcopy(crd)

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("x-kubernetes-validations", None)
            for v in node.values():
                strip(v)
        elif isinstance(node, list):
            for v in node:
                strip(v)

    strip(out)
    out["metadata"]["name"] = f"{crd['spec']['names']['plural']}.{NOCEL_GROUP}"
    out["spec"]["group"] = NOCEL_GROUP
    return out


def apiserver_cpu(cluster_dir: str) -> float:
    pid = Path(cluster_dir, "pids", "kube-apiserver.pid").read_text().strip()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(ns: str, n: int) -> list[Obj]:
    """The operator's child bodies for n databases, without owners (no SampleDB exists), the StatefulSet at
    0 replicas (no pods: the case is the write, not the workload)."""
    scripts = dataplane.all_scripts()
    out = []
    for i in range(n):
        db = SampleDB.model_validate({"apiVersion": SAMPLEDB.api_version, "kind": "SampleDB",
                                      "metadata": {"name": f"db{i}", "namespace": ns, "generation": 1,
                                                   "uid": f"00000000-0000-0000-0000-{i:012d}"},
                                      "spec": {"version": "16.4", "storage": {"size": "1Gi"}}})
        for child in d.children(d.Inputs(db=db, scripts=scripts)):
            if child["kind"] in ("ConfigMap", "Service", "PersistentVolumeClaim", "StatefulSet") \
                    and not d.is_shared_scripts(child):
                body = copy.deepcopy(child)
                body["metadata"].pop("ownerReferences", None)
                if body["kind"] == "StatefulSet":
                    body["spec"]["replicas"] = 0
                out.append(body)
    return out


def status(i: int) -> Obj:
    now = "2026-12-01T00:00:00Z"
    conds = [{"type": t, "status": "False", "reason": "Waiting", "message": "waiting for the database pod to be ready",
              "lastTransitionTime": now, "observedGeneration": 1} for t in CONDITIONS]
    conds[3]["reason"] = f"Step{i}"
    return {"status": {"phase": "Provisioning", "observedGeneration": 1, "endpoint": "db.ns.svc:5432",
                       "secretName": "db-credentials", "conditions": conds}}


async def timed(cluster_dir: str, calls: list[Callable[[], Awaitable[Any]]]) -> tuple[float, float]:
    """Run the calls CONCURRENCY at a time: (API server CPU seconds, wall seconds)."""
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with limit:
            await call()

    cpu, start = apiserver_cpu(cluster_dir), time.monotonic()
    await asyncio.gather(*(one(c) for c in calls))
    return apiserver_cpu(cluster_dir) - cpu, time.monotonic() - start


async def one_round(client: KubeClient, cluster_dir: str, n: int, rnd: int) -> dict[str, tuple[float, float, int]]:
    """Every case once, in namespaces of this round: case -> (CPU s, wall s, writes)."""
    out: dict[str, tuple[float, float, int]] = {}
    for mode in ("post", "apply"):
        ns = f"children-{mode}-{rnd}"
        await make_namespace(client, ns)
        label = "create (POST)" if mode == "post" else "apply (SSA)"
        out[f"child {label}"] = await child_case(client, cluster_dir, ns, n, mode)
    for group in (SAMPLEDB.group, NOCEL_GROUP):
        ns = f"sampledbs-{'cel' if group == SAMPLEDB.group else 'nocel'}-{rnd}"
        await make_namespace(client, ns)
        out.update(await sampledb_cases(client, cluster_dir, ns, n, group))
    return out


async def child_case(client: KubeClient, cluster_dir: str, ns: str, n: int, mode: str) -> tuple[float, float, int]:
    apis = {r.kind: ResourceApi(client, r) for r in (CONFIGMAP, SERVICE, PVC, STATEFULSET)}
    bodies = children(ns, n)

    def call(body: Obj) -> Callable[[], Awaitable[Any]]:
        api = apis[body["kind"]]
        if mode == "post":
            return lambda: api.create(body, field_manager="apicost")
        return lambda: api.apply(body, field_manager="apicost")

    return (*await timed(cluster_dir, [call(b) for b in bodies]), len(bodies))


async def sampledb_cases(client: KubeClient, cluster_dir: str, ns: str, n: int,
                         group: str) -> dict[str, tuple[float, float, int]]:
    """The SampleDB writes against the CRD of `group` (and, for the real CRD, the Events)."""
    api = ResourceApi(client, replace(SAMPLEDB, group=group))
    tag = "CEL rules" if group == SAMPLEDB.group else "no CEL"
    names = [f"db{i}" for i in range(n)]
    finalizer = {"metadata": {"finalizers": ["sampledb.io/finalizer"]}}

    def create(name: str) -> Callable[[], Awaitable[Any]]:
        body = {"apiVersion": f"{group}/{SAMPLEDB.version}", "kind": "SampleDB",
                "metadata": {"name": name, "namespace": ns}, "spec": SPEC}
        return lambda: api.create(body)

    def patch(name: str, body: Obj, subresource: str | None = None) -> Callable[[], Awaitable[Any]]:
        return lambda: api.patch(name, body, namespace=ns, subresource=subresource)

    out = {f"SampleDB create ({tag})": (*await timed(cluster_dir, [create(x) for x in names]), n)}
    out[f"SampleDB finalizer, merge patch ({tag})"] = (
        *await timed(cluster_dir, [patch(x, finalizer) for x in names]), n)
    statuses = [patch(x, status(i), "status") for i in range(3) for x in names]
    out[f"SampleDB status, merge patch ({tag})"] = (*await timed(cluster_dir, statuses), len(statuses))
    if group == SAMPLEDB.group:
        events = ResourceApi(client, EVENT)
        posted = [event_call(events, ns, x, group, i) for i, x in enumerate(names)]
        out["Event create"] = (*await timed(cluster_dir, posted), n)
    return out


def event_call(api: ResourceApi, ns: str, name: str, group: str, i: int) -> Callable[[], Awaitable[Any]]:
    body = event(ns, name, group, i)
    return lambda: api.create(body)


def event(ns: str, name: str, group: str, i: int) -> Obj:
    now = "2026-12-01T00:00:00.000000Z"
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.{i:016x}", "namespace": ns},
            "involvedObject": {"apiVersion": f"{group}/{SAMPLEDB.version}", "kind": "SampleDB", "name": name,
                               "namespace": ns},
            "type": "Normal", "reason": "CreatedChildren", "message": "created the database's children",
            "source": {"component": "apicost"}, "reportingComponent": "apicost", "reportingInstance": "apicost",
            "action": "Reconcile", "eventTime": now}


async def make_namespace(client: KubeClient, ns: str) -> None:
    await client.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": ns}}, timeout=30)


async def measure(kubeconfig: str, cluster_dir: str, n: int, rounds: int) -> dict[str, list[tuple[float, float, int]]]:
    client = await KubeClient.connect(kubeconfig)
    try:
        results: dict[str, list[tuple[float, float, int]]] = {}
        for rnd in range(1, rounds + 1):
            for case, got in (await one_round(client, cluster_dir, n, rnd)).items():
                results.setdefault(case, []).append(got)
                cpu, wall, writes = got
                print(f"  round {rnd}: {case}: {cpu / writes * 1000:.2f} ms CPU per write, {wall:.1f} s",
                      file=sys.stderr)
        return results
    finally:
        await client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300, help="databases per case (default 300)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cluster-dir", default="/tmp/apicost-cluster")
    args = parser.parse_args()
    crd = yaml.safe_load((scale.REPO / "manifests/crd/sampledb.io_sampledbs.yaml").read_text())
    load = os.getloadavg()
    try:
        env = scale.cluster_env(args.cluster_dir, 1)
        scale.kubectl(env, "apply", "--server-side", "-f", "-", stdin=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": [crd, without_cel(crd)]}))
        scale.kubectl(env, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        results = asyncio.run(measure(env["KUBECONFIG"], args.cluster_dir, args.n, args.rounds))
    finally:
        scale.cluster_down(args.cluster_dir)
    print(f"N={args.n} per case, {args.rounds} rounds, {os.cpu_count()} cores, load avg (1 min) "
          f"{load[0]:.2f} before / {os.getloadavg()[0]:.2f} after\n")
    print("| write | writes per round | kube-apiserver CPU ms per write (median) | min - max | wall s (median) |")
    print("|---|---:|---:|---:|---:|")
    for case, got in results.items():
        per = [cpu / writes * 1000 for cpu, _wall, writes in got]
        print(f"| {case} | {got[0][2]} | {statistics.median(per):.2f} | {min(per):.2f} - {max(per):.2f} "
              f"| {statistics.median(w for _c, w, _n in got):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
