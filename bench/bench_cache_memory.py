"""Memory of the operator's caches per database, without a cluster.

Builds N databases' cached objects as the operator writes them (decide/children/desired.py: the SampleDB, its
ConfigMap, three Services, two PVCs, the StatefulSet, the Secret; plus the database Pod the
StatefulSet controller makes; no init Job: these databases have no init SQL) with the metadata the
API server adds (uid, resourceVersion, creationTimestamp), each as its own JSON text decoded
separately (as watch events are: equal strings are distinct objects), and fills one Store per kind as
app.build_caches does (the cache transform, the database label indexed). Prints one markdown row:
objects per database, the bytes tracemalloc traces per database in the stores (packed objects,
entries, refs, indexes, interned strings) and the growth of resident memory per database without
tracing, each the slope between two fills; the decoded RECENT windows, a constant per store, are
reported apart.

Usage: .venv/bin/python bench/bench_cache_memory.py [--n N]
"""

from __future__ import annotations

import argparse
import gc
import json
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

from sampledb_operator import dataplane
from sampledb_operator.decide import cache
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.labels import DATABASE_LABEL
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.runtime.store import RECENT, Store

NAMESPACE = "scale"


def database(i: int) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": f"db-{i:05d}", "namespace": NAMESPACE, "uid": str(uuid.uuid4())},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
    })


def pod(statefulset: dict[str, Any]) -> dict[str, Any]:
    template = statefulset["spec"]["template"]
    name = statefulset["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {**template["metadata"], "name": f"{name}-0", "namespace": NAMESPACE,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                                              "uid": str(uuid.uuid4()), "controller": True}]},
            "spec": {**template["spec"], "nodeName": "kwok-node-3"},
            "status": {"phase": "Running", "podIP": "10.0.0.7",
                       "conditions": [{"type": t, "status": "True"} for t in ("Initialized", "Ready",
                                                                              "ContainersReady", "PodScheduled")]}}


def texts(i: int, scripts: dict[str, str], version: list[int]) -> list[tuple[str, str]]:
    """(kind, JSON text) of database i's cached objects, with server metadata."""
    db = database(i)
    objs = [db.model_dump(by_alias=True, exclude_none=True)]
    objs += [o for o in d.children(d.Inputs(db=db, scripts=scripts)) if not d.is_shared_scripts(o)]
    objs.append(d.secret(db, "not-a-real-password"))
    objs.append(pod(next(o for o in objs if o["kind"] == "StatefulSet")))
    out = []
    for obj in objs:
        version[0] += 1
        obj["metadata"].update(uid=str(uuid.uuid4()), resourceVersion=str(version[0]),
                               creationTimestamp="2026-12-01T17:00:00Z")
        out.append((obj["kind"], json.dumps(obj)))
    return out


def fill(stores: dict[str, Store], first: int, n: int, scripts: dict[str, str], version: list[int]) -> None:
    for i in range(first, first + n):
        for kind, text in texts(i, scripts, version):
            if kind not in stores:
                stores[kind] = Store(kind, transform=cache.Compactor(), index_labels=(DATABASE_LABEL,))
            stores[kind].upsert(json.loads(text))


def resident_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def grow(n: int, scripts: dict[str, str], measure: Callable[[], float]) -> tuple[float, float]:
    """(bytes per database, constant bytes) of `measure` over the stores: filled with n databases, then with n
    more; the slope is the cost of one more database, the rest (the decoded RECENT windows) is constant."""
    stores: dict[str, Store] = {}
    version = [1_000_000]
    gc.collect()
    start = measure()
    fill(stores, 0, n, scripts, version)
    gc.collect()
    half = measure()
    fill(stores, n, n, scripts, version)
    gc.collect()
    full = measure()
    per_db = (full - half) / n
    return per_db, (half - start) - n * per_db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="databases in each of the two fills")
    args = parser.parse_args()
    scripts = dataplane.all_scripts()
    rss_per_db, _ = grow(args.n, scripts, lambda: resident_mib() * 2**20)
    tracemalloc.start()
    traced_per_db, window = grow(args.n, scripts, lambda: float(tracemalloc.get_traced_memory()[0]))
    tracemalloc.stop()
    print("| databases | objects per database | traced bytes per database | resident bytes per database "
          "| decoded windows (constant) |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {2 * args.n} | {len(texts(0, scripts, [0]))} | {traced_per_db:.0f} | {rss_per_db:.0f} "
          f"| {window / 2**20:.1f} MiB (RECENT={RECENT} per store) |")


if __name__ == "__main__":
    main()
