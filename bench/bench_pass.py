"""The SampleDB reconciler's own CPU per pass, on the in-memory fake cluster (no API server, no network).

What the scale benchmark cannot isolate on a shared 2-core machine: the Python work of one pass (reading the
caches, building the desired children, comparing them with the observed ones, computing the status), apart
from the API server's time and the requests' transport. Two scenarios, each over D databases (default 200)
in one namespace, as the operator keeps them:
- create: each database taken from its creation to Ready in the passes a real cluster brings (the children, the
  volumes bound, the pod ready, the init Job finished), one database after another; the fake API's writes are
  in-memory dicts;
- idle: P passes (default 10) over every Ready database with nothing to do: what each watch event that wakes a
  settled database, and each look again after a status write, costs.
The best of R repeats (default 3) is reported, so one slow moment of the machine does not count. Prints one
markdown table row per scenario:

    | scenario | databases | passes | seconds | us/pass |

Usage: .venv/bin/python bench/bench_pass.py [--databases D] [--passes P] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests.support's fake cluster

from tests.support.fake_cluster import NS, FakeCluster, sampledb

from sampledb_operator.model import names
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability.logging import configure_logging
from sampledb_operator.reconcilers.sampledb import SampleDBReconciler

INIT = {"configMapKeyRef": {"name": "init-sql", "key": "init.sql"}}  # as the scale benchmark's databases
CREATE_PASSES = 4  # a database's passes from its creation to Ready (_create)


async def _create(cluster: FakeCluster, reconcile: SampleDBReconciler, ref: ObjectRef) -> None:
    """One database from nothing to Ready, in CREATE_PASSES passes."""
    name = ref.name
    cluster.put("SampleDB", sampledb(name, init=INIT))
    await reconcile(ref)  # the children; the volumes wait to bind
    for pvc in (names.data_pvc_name(name), names.backup_pvc_name(name)):
        cluster.bind(pvc)
    await reconcile(ref)  # the StatefulSet
    cluster.statefulset_ready(names.statefulset_name(name))
    await reconcile(ref)  # the init Job
    cluster.finish_job(next(str(j["metadata"]["name"]) for j in cluster.of_kind("Job")
                            if str(j["metadata"]["name"]).startswith(f"{name}-init")))
    await reconcile(ref)  # Ready
    db = cluster.get("SampleDB", name)
    assert db is not None and db["status"]["phase"] == "Running", db and db.get("status")


async def _round(databases: int, passes: int) -> tuple[float, int, float, int]:
    cluster = FakeCluster()
    cluster.put("ConfigMap", {"metadata": {"name": "init-sql"}, "data": {"init.sql": "SELECT 1;"}})
    reconcile = cluster.reconciler()
    refs = [ObjectRef(NS, f"db-{i:05d}") for i in range(databases)]
    started = time.perf_counter()
    for ref in refs:
        await _create(cluster, reconcile, ref)
    create_s = time.perf_counter() - started
    written = len(cluster.written())
    started = time.perf_counter()
    for _ in range(passes):
        for ref in refs:
            await reconcile(ref)
    idle_s = time.perf_counter() - started
    assert len(cluster.written()) == written, "an idle pass wrote"
    return create_s, CREATE_PASSES * databases, idle_s, passes * databases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--databases", type=int, default=200)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    configure_logging("warning", "json")  # as the scale benchmark runs the operator
    rounds = [asyncio.run(_round(args.databases, args.passes)) for _ in range(args.repeat)]
    create_s, made, _, _ = min(rounds, key=lambda r: r[0])
    _, _, idle_s, idle_passes = min(rounds, key=lambda r: r[2])
    print("| scenario | databases | passes | seconds | us/pass |")
    print("|---|---:|---:|---:|---:|")
    print(f"| create | {args.databases} | {made} | {create_s:.3f} | {create_s / made * 1e6:.0f} |")
    print(f"| idle | {args.databases} | {idle_passes} | {idle_s:.3f} | {idle_s / idle_passes * 1e6:.0f} |")


if __name__ == "__main__":
    main()
