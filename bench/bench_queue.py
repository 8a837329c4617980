"""Work-queue throughput: add + get + done per second, with concurrent workers on one event loop.

Two scenarios, each with W workers (default 4) whose "reconcile" yields to the loop once:
- distinct: N distinct keys (default 10,000), every add is processed once;
- hot: N adds spread round-robin over H hot keys (default 100); adds of a key already waiting are
  deduplicated, so fewer items are processed than added.
The producer adds in batches of 100 and yields between batches, so adds and processing interleave.
Metrics are live (the operator's registry), as in production. Prints one markdown table row per
scenario:

    | scenario | workers | adds | processed | seconds | adds/s | processed/s |

Usage: .venv/bin/python bench/bench_queue.py [--keys N] [--hot H] [--workers W] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time

from sampledb_operator.runtime.clock import RealClock
from sampledb_operator.runtime.workqueue import ShutDown, WorkQueue

_BATCH = 100
_names = itertools.count()


async def _worker(queue: WorkQueue[str], processed: list[int]) -> None:
    while True:
        try:
            item = await queue.get()
        except ShutDown:
            return
        await asyncio.sleep(0)  # the reconcile: yields once
        processed[0] += 1
        queue.done(item)


async def run_scenario(keys: list[str], workers: int) -> tuple[int, float]:
    """Add `keys` (in order) while `workers` process them; (items processed, seconds)."""
    queue = WorkQueue[str](f"bench-{next(_names)}", clock=RealClock(), controller="bench")
    processed = [0]
    started = time.perf_counter()
    tasks = [asyncio.create_task(_worker(queue, processed)) for _ in range(workers)]
    for i, key in enumerate(keys, 1):
        queue.add(key)
        if i % _BATCH == 0:
            await asyncio.sleep(0)
    await queue.shutdown(drain=True)
    await asyncio.gather(*tasks)
    return processed[0], time.perf_counter() - started


def row(name: str, workers: int, adds: int, processed: int, seconds: float) -> str:
    return (f"| {name} | {workers} | {adds} | {processed} | {seconds:.3f} | {adds / seconds:,.0f} | "
            f"{processed / seconds:,.0f} |")


async def main_async(args: argparse.Namespace) -> None:
    scenarios = {
        f"{args.keys} distinct keys": [f"ns/key-{i}" for i in range(args.keys)],
        f"{args.keys} adds of {args.hot} hot keys": [f"ns/hot-{i % args.hot}" for i in range(args.keys)],
    }
    print("| scenario | workers | adds | processed | seconds | adds/s | processed/s |")
    print("|---|---|---|---|---|---|---|")
    for name, keys in scenarios.items():
        best: tuple[int, float] | None = None
        for _ in range(args.repeat):
            result = await run_scenario(keys, args.workers)
            if best is None or result[1] < best[1]:
                best = result
        assert best is not None
        print(row(name, args.workers, len(keys), *best))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000, help="adds per scenario")
    parser.add_argument("--hot", type=int, default=100, help="distinct keys of the hot scenario")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3, help="runs per scenario; the fastest is shown")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
