"""Memory and time of one Prometheus scrape of /metrics with N SampleDBs cached, without a cluster.

Every scrape exports per-database series read from the SampleDB cache (observability/database_metrics.py)
and the count by phase (sampledb_databases). This fills the operator's SampleDB store (app.build_caches'
transform) with N Running databases whose status is what the operator writes (five conditions, one
instance, a last backup), points both metric sources at it as app.py does, and encodes the registry
as /metrics does. Prints one markdown row: series in the answer, its size, the traced bytes a scrape
allocates at its peak above what stays (per database; what each scrape adds to the process's resident
memory while it runs), for the first scrape (every database's lines written), one after every database's
object changed (as during a creation: every database's lines written again in place of the kept ones) and
one at rest (every database's lines kept from the scrape before), the bytes kept from one scrape to the
next (the lines and their rows), the time of a first scrape and the median of scrapes at rest (in a
process without tracing), and the share on the event loop (reading the cache into rows; /metrics encodes
the rest in a worker thread).

Usage: .venv/bin/python bench/bench_metrics_scrape.py [--n N]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from sampledb_operator import app
from sampledb_operator.decide import cache
from sampledb_operator.observability import database_metrics, health, metrics
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

CONDITIONS = (("Ready", "True", "Running"), ("Initialized", "True", "InitSucceeded"), ("Progressing", "False", "Idle"),
              ("Degraded", "False", "Healthy"), ("BackupHealthy", "True", "BackupSucceeded"))


def database(i: int) -> dict[str, Any]:
    name = f"db-{i:05d}"
    return {
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": name, "namespace": f"scale-{i // 100:03d}", "uid": str(uuid.uuid4()),
                     "resourceVersion": str(1_000_000 + i), "generation": 1,
                     "creationTimestamp": "2026-12-01T17:00:00Z", "finalizers": ["sampledb.io/snapshot"]},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "replicas": 1},
        "status": {
            "phase": "Running", "currentVersion": "16.4", "observedGeneration": 1, "readyInstances": 1,
            "primary": f"{name}-0", "endpoint": f"{name}.scale.svc:5432",
            "lastBackup": {"name": f"{name}-20261201", "completedAt": "2026-12-01T18:00:00Z"},
            "instances": [{"name": f"{name}-0", "role": "primary", "ready": True}],
            "conditions": [{"type": t, "status": s, "reason": r, "message": f"{t} is {s}: {r}",
                            "lastTransitionTime": "2026-12-01T17:05:00Z", "observedGeneration": 1}
                           for t, s, r in CONDITIONS],
        },
    }


def cached(n: int) -> tuple[StoreSet, Store]:
    store = Store("sampledbs", transform=cache.Compactor())
    for i in range(n):
        store.upsert(json.loads(json.dumps(database(i))))  # each decoded apart, as watch events are
    return StoreSet({None: store}), store


def scrape(*, body: bool = False) -> bytes:
    """What /metrics does, all on this thread: the rows taken (on the loop), the registry encoded and the
    per-database families rendered (in a thread), the answer joined chunk by chunk as it is sent (each chunk
    dropped once sent; kept and returned only with `body`)."""
    with database_metrics.taken() as render:
        parts = health.answer_parts(generate_latest, metrics.REGISTRY, render, False)
    sent = []
    for chunk in health.chunks(parts, health.ANSWER_CHUNK_BYTES):
        if body:
            sent.append(chunk)
    return b"".join(sent)


def change_every_database(store: Store, n: int, round_: int) -> None:
    """Every database's object written again with a new resourceVersion (as during a creation, when most
    databases change between two scrapes)."""
    for i in range(n):
        obj = database(i)
        obj["metadata"]["resourceVersion"] = str(2_000_000 + round_ * n + i)
        store.upsert(obj)


def first_scrape() -> bytes:
    """A scrape that writes every database's lines (the first after a start: none kept yet)."""
    database_metrics._collector.text = database_metrics._TextCache()
    return scrape()


def median_seconds(work: Callable[[], object], times: int = 5) -> float:
    spent = []
    for _ in range(times):
        t = time.perf_counter()
        work()
        spent.append(time.perf_counter() - t)
    return statistics.median(spent)


def measure(n: int, mode: str) -> dict[str, float]:
    caches, store = cached(n)
    app._set_metric_sources(_Caches(caches), None)  # type: ignore[arg-type]
    gc.collect()
    if mode == "untraced":
        body = scrape(body=True)
        series = sum(1 for line in body.splitlines() if line.startswith(b"sampledb_"))
        return {"first_seconds": median_seconds(first_scrape), "seconds": median_seconds(scrape),
                "loop_seconds": median_seconds(database_metrics._collector.take), "bytes": len(body), "series": series}
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    first_scrape()
    peak = tracemalloc.get_traced_memory()[1]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    scrape()
    rest_peak = tracemalloc.get_traced_memory()[1]
    change_every_database(store, n, 1)
    gc.collect()
    changed = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    scrape()
    changed_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"transient_per_db": (peak - max(base, after)) / n, "rest_transient_per_db": (rest_peak - after) / n,
            "changed_transient_per_db": (changed_peak - changed) / n, "kept_per_db": (after - base) / n}


class _Caches:
    """What app._set_metric_sources reads of app.Caches: the SampleDB StoreSet."""

    def __init__(self, sampledbs: StoreSet) -> None:
        self.sampledbs = sampledbs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5000, help="databases")
    parser.add_argument("--mode", choices=("both", "traced", "untraced"), default="both")
    args = parser.parse_args()
    if args.mode != "both":
        print(json.dumps(measure(args.n, args.mode)))
        return
    run = [sys.executable, str(Path(__file__).resolve()), "--n", str(args.n), "--mode"]
    t, u = (json.loads(subprocess.run([*run, mode], check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            for mode in ("traced", "untraced"))
    print("| databases | sampledb_ series | answer KiB "
          "| a scrape's transient: traced bytes per database, first / every database changed / at rest "
          "| kept between scrapes: bytes per database | first scrape s | scrape at rest s (median of 5) "
          "| of which on the event loop s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.n} | {u['series']:.0f} | {u['bytes'] / 1024:.0f} | {t['transient_per_db']:.0f} / "
          f"{t['changed_transient_per_db']:.0f} / {t['rest_transient_per_db']:.0f} "
          f"| {t['kept_per_db']:.0f} | {u['first_seconds']:.3f} | {u['seconds']:.3f} "
          f"| {u['loop_seconds']:.3f} |")


if __name__ == "__main__":
    main()
