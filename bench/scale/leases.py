"""Shard coordination at rest (issue #18): the Lease requests a sharded operator sends with nothing to do.

One kwok-only control plane (hack/cluster in /tmp/scale-leases), no databases. For each system (an
operator with replicas=R:shards=N, as scale.py's systems; rounds interleaved): start its R replicas,
wait until every shard is owned and each replica holds its fair share (the shards are at rest), then
count each replica's Lease requests (its sampledb_api_requests_total, by verb) and CPU over --window
seconds, stop the replicas (SIGTERM: they release their shards) and go on with the next system. Prints
a markdown table: per replica, requests and writes a second, and CPU seconds a minute.

    .venv/bin/python bench/scale/leases.py --window 60 --rounds 2 --systems \\
        "operator:src=/tmp/op-a:replicas=3:shards=6:label=a,operator:src=/tmp/op-b:replicas=3:shards=6:label=b"
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale

WRITES = ("create", "update", "patch", "delete")


def gauge(port: int, name: str) -> float:
    """One unlabelled gauge from the process's /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return next(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(f"{name} "))


def lease_requests(port: int) -> dict[str, float]:
    """The process's Lease requests so far, by verb."""
    _, _, by_resource = scale.scrape(port)
    return {key.split(" ", 1)[0]: value for key, value in by_resource.items() if key.endswith(" leases")}


def measure(system: scale.System, env: dict[str, str], workdir: Path, window: float) -> dict[str, float]:
    fleet = scale.start_fleet(system, env, workdir, scale.PER_NAMESPACE)
    try:
        ports = [port for _, port in fleet if port is not None]
        share = math.ceil(system.shards / len(ports))

        def at_rest() -> bool:
            owned = [gauge(port, "sampledb_shards_owned") for port in ports]
            return sum(owned) == system.shards and all(o <= share for o in owned)

        scale.wait_until(at_rest, 120)
        before = [(lease_requests(port), scale.proc_stats(proc.pid)[0]) for proc, port in fleet if port is not None]
        started = time.monotonic()
        time.sleep(window)  # the measured window itself, not a synchronisation
        elapsed = time.monotonic() - started
        after = [(lease_requests(port), scale.proc_stats(proc.pid)[0]) for proc, port in fleet if port is not None]
        if not at_rest():
            raise RuntimeError(f"{system.label}: the shards moved during the window")
    finally:
        for proc, _ in fleet:
            scale.stop(proc)
    requests, writes, cpu = [], [], []
    for (b, b_cpu), (a, a_cpu) in zip(before, after, strict=True):
        delta = {verb: a.get(verb, 0.0) - b.get(verb, 0.0) for verb in a}
        requests.append(sum(delta.values()) / elapsed)
        writes.append(sum(v for verb, v in delta.items() if verb in WRITES) / elapsed)
        cpu.append((a_cpu - b_cpu) / elapsed * 60)
    return {"requests_per_s": round(statistics.mean(requests), 2), "writes_per_s": round(statistics.mean(writes), 2),
            "cpu_s_per_min": round(statistics.mean(cpu), 2), "window_s": round(elapsed, 1),
            "load": round(os.getloadavg()[0], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default="operator:replicas=3:shards=6")
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    systems = [scale.System.parse(s) for s in args.systems.split(",")]
    if any(s.kind != "operator" or s.shards < 2 for s in systems):
        raise SystemExit("leases: sharded operators only (operator:replicas=R:shards=N, N >= 2)")
    out = Path(args.out or f"/tmp/scale-results/{datetime.now(UTC):%Y%m%dT%H%M%S}-leases")
    out.mkdir(parents=True, exist_ok=True)
    cluster_dir = "/tmp/scale-leases"
    rows = []
    try:
        env = scale.cluster_env(cluster_dir, 1)
        scale.prepare(env, [])
        for rnd in range(1, args.rounds + 1):
            for system in systems:
                workdir = out / f"{system.slug}-{rnd}"
                workdir.mkdir(parents=True, exist_ok=True)
                rows.append({"label": system.label, "round": rnd, "replicas": system.replicas,
                             "shards": system.shards, **measure(system, env, workdir, args.window)})
                print(f"  {rows[-1]}", file=sys.stderr)
    finally:
        scale.cluster_down(cluster_dir)
    (out / "leases.json").write_text(json.dumps(rows))
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores; results in {out}\n")
    print("| system | round | replicas x shards | Lease requests/s per replica | of which writes/s | "
          "CPU s/min per replica | window s | load avg |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['label']} | {r['round']} | {r['replicas']} x {r['shards']} | {r['requests_per_s']} | "
              f"{r['writes_per_s']} | {r['cpu_s_per_min']} | {r['window_s']} | {r['load']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
