"""Memory of a restart's first sync of the caches, without a cluster: its peak against what stays.

A restarted operator fills every cache at once: one streaming list per watched resource, all in flight
together, each object decoded from its own JSON line, packed into its store's pending listing, and at
the end bookmark the store replaced and every object delivered to the handlers as ADDED. This runs the
operator's own Watcher and Store (app.build_caches' transform and index) over a fake API whose watch
streams serve N databases' objects (bench_cache_memory.texts: what the operator writes plus the API
server's metadata) for every kind at once, interleaved a few events at a time as concurrent streams
are. The handlers do what the operator's do with a child event: map it to its database's key and add
it to a set (the work queue's dedupe).

Prints one markdown row: the traced bytes at the sync's peak and after it (gc'd), their difference
per database (the sync's transient cost, what a restart's peak RSS pays on top of the caches), and,
in a second run without tracing, the growth of the process's resident memory over the sync: at its
peak (VmHWM) and after it and a malloc_trim (what the operator does once synced).

`--mode cpu` times the same sync instead (process CPU, best of --rounds, no tracing) against decoding the
same lines alone (what a plain client's process does with them): what caching an object costs on a restart
beyond reading it, per object.

Usage: .venv/bin/python bench/bench_cache_sync.py [--n N] [--mode both|traced|untraced|cpu] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cache_memory import texts

from sampledb_operator import dataplane
from sampledb_operator.decide import cache
from sampledb_operator.decide.labels import DATABASE_LABEL
from sampledb_operator.kube import jsoncodec
from sampledb_operator.kube.api import INITIAL_EVENTS_END_ANNOTATION, ListResult, WatchEvent
from sampledb_operator.kube.resources import Resource
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability.logging import configure_logging
from sampledb_operator.runtime.clock import RealClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.watcher import Watcher

BATCH = 8  # events one stream yields before the event loop runs another (the network's interleaving)


class Synced(Exception):
    """Ends a fake stream once its initial events are delivered (the bench stops there)."""


class FakeApi:
    """A WatchApi serving one kind's objects as a streaming list: ADDED per JSON line, then the end bookmark."""

    def __init__(self, kind: str, lines: list[bytes]) -> None:
        self.resource = Resource("", "v1", kind, kind.lower() + "s")
        self.lines = lines

    async def list_all(self, namespace: str | None = None, **_: Any) -> ListResult:
        raise AssertionError("the bench streams its lists")

    async def watch(self, namespace: str | None = None, **_: Any) -> AsyncGenerator[WatchEvent, None]:
        for i, line in enumerate(self.lines):
            decoded = jsoncodec.loads(line)
            yield WatchEvent(decoded["type"], decoded["object"])
            if i % BATCH == 0:
                await asyncio.sleep(0)  # another stream's turn
        yield WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "99999999",
                                                   "annotations": {INITIAL_EVENTS_END_ANNOTATION: "true"}}})
        raise Synced


def streams(n: int) -> dict[str, list[bytes]]:
    """Each kind's watch lines for n databases (the texts are built first: they are the API server's, not ours)."""
    scripts = dataplane.all_scripts()
    version = [1_000_000]
    by_kind: dict[str, list[bytes]] = {}
    for i in range(n):
        for kind, text in texts(i, scripts, version):
            by_kind.setdefault(kind, []).append(b'{"type":"ADDED","object":' + text.encode() + b"}\n")
    return by_kind


async def sync(by_kind: dict[str, list[bytes]]) -> dict[str, Store]:
    keys: set[ObjectRef] = set()

    def enqueue(_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = (meta.get("labels") or {}).get(DATABASE_LABEL) or meta.get("name")
        keys.add(ObjectRef(meta.get("namespace") or "", str(name)))

    stores: dict[str, Store] = {}
    watchers = []
    for kind, lines in by_kind.items():
        stores[kind] = Store(kind, transform=cache.Compactor(), index_labels=(DATABASE_LABEL,))
        watcher = Watcher(FakeApi(kind, lines), stores[kind], clock=RealClock(), streaming=True)
        watcher.add_handler(enqueue)
        watchers.append(watcher)

    async def one(w: Watcher) -> None:
        with contextlib.suppress(Synced):
            await w._watch_once()  # one cycle: the streaming list, then (here) the end

    await asyncio.gather(*(one(w) for w in watchers))
    assert all(s.synced.is_set() for s in stores.values())
    return stores


def vm(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def traced(n: int) -> None:
    by_kind = streams(n)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    stores = asyncio.run(sync(by_kind))
    peak = tracemalloc.get_traced_memory()[1]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    objects = sum(len(s) for s in stores.values())
    print(json.dumps({"objects": objects, "peak_mib": (peak - base) / 2**20, "after_mib": (after - base) / 2**20,
                      "transient_per_db": (peak - after) / n}))


def untraced(n: int) -> None:
    by_kind = streams(n)  # the input (the API server's lines) is resident before the sync starts
    gc.collect()
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc_trim(0)
    before = vm("VmRSS")
    assert vm("VmHWM") - before < 64, "the input's own peak would hide the sync's"
    stores = asyncio.run(sync(by_kind))
    hwm = vm("VmHWM")
    gc.collect()
    libc.malloc_trim(0)
    print(json.dumps({"objects": sum(len(s) for s in stores.values()), "peak_growth_mib": hwm - before,
                      "after_trim_growth_mib": vm("VmRSS") - before}))


def cpu(n: int, rounds: int) -> None:
    by_kind = streams(n)
    objects = sum(len(lines) for lines in by_kind.values())
    decode = sync_s = float("inf")
    for _ in range(rounds):  # interleaved: both see the same machine
        gc.collect()
        start = time.process_time()
        for lines in by_kind.values():
            for line in lines:
                jsoncodec.loads(line)
        decode = min(decode, time.process_time() - start)
        gc.collect()
        start = time.process_time()
        asyncio.run(sync(by_kind))
        sync_s = min(sync_s, time.process_time() - start)
    print("| databases | objects | decode alone s | sync s | sync us per object | over decoding us per object |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {n} | {objects} | {decode:.3f} | {sync_s:.3f} | {sync_s / objects * 1e6:.1f} "
          f"| {(sync_s - decode) / objects * 1e6:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5000, help="databases")
    parser.add_argument("--mode", choices=("both", "traced", "untraced", "cpu"), default="both")
    parser.add_argument("--rounds", type=int, default=5, help="--mode cpu: the best of this many")
    args = parser.parse_args()
    if args.mode == "cpu":
        configure_logging("warning", "json", stream=sys.stderr)  # as deployed: json; the table alone on stdout
        cpu(args.n, args.rounds)
        return
    if args.mode == "traced":
        traced(args.n)
        return
    if args.mode == "untraced":
        untraced(args.n)
        return
    run = [sys.executable, __file__, "--n", str(args.n), "--mode"]
    t, u = (json.loads(subprocess.run([*run, mode], check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            for mode in ("traced", "untraced"))
    print("| databases | objects | traced at peak MiB | traced after MiB | transient bytes per database "
          "| resident growth: peak / after trim MiB |")
    print("|---:|---:|---:|---:|---:|---|")
    print(f"| {args.n} | {t['objects']} | {t['peak_mib']:.1f} | {t['after_mib']:.1f} | {t['transient_per_db']:.0f} "
          f"| {u['peak_growth_mib']:.1f} / {u['after_trim_growth_mib']:.1f} |")


if __name__ == "__main__":
    main()
