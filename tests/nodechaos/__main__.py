"""`make node-chaos`: repeated node failures under a writer, checked like a Jepsen run. `python -m tests.nodechaos
--seed N --rounds R [--asynchronous] [--out FILE]`.

On the local cluster's three real nodes (it must be running: `make cluster-up`; it is never started or stopped
here), the operator installed as users install it, one database of three instances (one per node,
failoverDelaySeconds 0; synchronous unless --asynchronous) and a writer inserting through its Service every 0.2 s
from a node other than the primary's. Each round, drawn from the seed: a fault (`hack/real-node fault`: stop,
cut, freeze or crash) of the primary's node (three rounds in four) or of a standby's, held 20 to 90 s, then healed;
then the database must be whole again within 5 minutes (three instances ready, both standbys streaming, no
failover running). Throughout, every instance is asked from the host every 0.3 s whether it is a primary.

Checked in every round, and the run fails (exit 1) when one does not hold:
- never two primaries: the primary at the round's start is last seen one before any other instance is first seen
  one, and no third instance is ever seen one;
- no accepted write lost: the rows after the round are at least the rows before it plus the writes the writer saw
  accepted in it (synchronous; with --asynchronous the writes lost are counted and reported, as the stated bound
  allows);
- the database whole again after the heal.
The report (one line per round: the fault, its node's role, the time to a new primary, the longest time without an
accepted write, the writes accepted and lost) is printed and written as JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.e2e.real_data import NS, delete, installed_operator, sql, start_writer, status, unique, write_downtime
from tests.e2e.test_node_failures import sampling, three_with_a_writer
from tests.e2e.test_node_maintenance import node_of, pods, real_nodes
from tests.support import kube
from tests.support.cluster import install_crds, local_cluster_running, real_node_fault, start_local_cluster
from tests.support.kube import kubectl, wait_until

FAULTS = ("stop", "cut", "freeze", "crash")
SETTLE_S = 300.0


@dataclass
class Round:
    index: int
    fault: str
    node: str
    role: str  # of the instance on the faulted node: primary or standby
    held_s: float
    old_primary: str
    new_primary: str
    failover_s: float | None  # from the fault to a new primary recorded (None: the primary stayed)
    longest_without_writes_s: float
    accepted: int
    lost: int
    problems: list[str]


def heartbeat_rows(name: str) -> int:
    return int(sql(name, "SELECT count(*) FROM heartbeat", superuser=True))


def settled(name: str) -> bool:
    """Three instances ready, no failover running, both standbys streaming from the primary."""
    st = status(name)
    if st.get("readyInstances") != "3/3" or st.get("targetPrimary"):
        return False
    try:
        out = sql(name, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", superuser=True,
                  check=False)
    except AssertionError:  # no primary pod to ask yet
        return False
    return out == "2"


def one_round(name: str, index: int, rng: random.Random, *, synchronous: bool) -> Round:
    wait_until(lambda: settled(name), timeout=SETTLE_S, interval=2.0, what="the database whole before the round")
    old = str(status(name)["primary"])
    placed = {pod: node_of(name, pod) for pod in pods(name)}
    primary_node = placed[old]
    assert primary_node is not None
    target_primary = rng.random() < 0.75
    node = primary_node if target_primary else rng.choice(sorted(n for p, n in placed.items() if p != old and n))
    fault = rng.choice(FAULTS)
    held = round(rng.uniform(20, 90), 1)
    # the rows before this round's writer writes its first (start_writer deletes the last one first, then waits for
    # writes accepted, which are this round's)
    kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--ignore-not-found", "--wait=true", timeout=120)
    before = heartbeat_rows(name)
    start_writer(name, avoid=primary_node if node == primary_node else node)
    problems: list[str] = []
    failover_s: float | None = None
    with sampling(name) as sampler:
        started = time.monotonic()
        real_node_fault(node, fault)
        try:
            deadline = started + held
            while time.monotonic() < deadline:
                if failover_s is None and (status(name).get("primary") or old) != old:
                    failover_s = round(time.monotonic() - started, 1)
                time.sleep(1.0)  # poll interval: the loop re-checks the recorded primary
        finally:
            real_node_fault(node, "heal")
        try:
            wait_until(lambda: settled(name), timeout=SETTLE_S, interval=2.0, what="the database whole after heal")
        except AssertionError as exc:
            problems.append(f"not whole {SETTLE_S:.0f} s after the heal: {exc}")
        new = str(status(name).get("primary") or old)
        if failover_s is None and new != old:
            failover_s = round(time.monotonic() - started, 1)
    seen = {pod: times for pod, times in sampler.seen.items() if times}
    if new != old and seen.get(old) and seen.get(new) and max(seen[old]) >= min(seen[new]):
        problems.append(f"two primaries: {old} seen a primary after {new} was")
    others = sorted(pod for pod in seen if pod not in (old, new))
    if others:
        problems.append(f"seen a primary, never elected: {others}")
    downtime, accepted = write_downtime(name)
    kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--wait=false")
    lost = max(0, before + accepted - heartbeat_rows(name))
    if lost and synchronous:
        problems.append(f"{lost} accepted writes lost with synchronous replication")
    return Round(index=index, fault=fault, node=node, role="primary" if node == primary_node else "standby",
                 held_s=held, old_primary=old, new_primary=new, failover_s=failover_s,
                 longest_without_writes_s=round(downtime, 1), accepted=accepted, lost=lost, problems=problems)


def line(r: Round) -> str:
    failover = "no failover" if r.failover_s is None else f"new primary after {r.failover_s:.0f} s"
    verdict = "ok" if not r.problems else "FAILED: " + "; ".join(r.problems)
    return (f"[{r.index}] {r.fault} of the {r.role}'s node {r.node} for {r.held_s:.0f} s: {failover},"
            f" {r.longest_without_writes_s:.1f} s without writes, {r.accepted} accepted, {r.lost} lost: {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.nodechaos", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=51)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--asynchronous", action="store_true", help="asynchronous replication (default: synchronous)")
    parser.add_argument("--out", default="node-chaos-report.json")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the heal and the clean-up below still run
    if not local_cluster_running():
        raise SystemExit("node-chaos: the local cluster is not running (make cluster-up); it needs its real nodes")
    cluster = start_local_cluster()  # the running one: its address and tools
    os.environ["KUBECONFIG"] = cluster.kubeconfig
    kube.configure(cluster.kubeconfig, cluster.kubectl)
    install_crds()
    if len(real_nodes()) < 3:
        raise SystemExit("node-chaos: three real nodes needed (SAMPLEDB_REAL_NODES)")
    rng = random.Random(args.seed)
    synchronous = not args.asynchronous
    rounds: list[Round] = []
    install = installed_operator(cluster)
    next(install)
    name = unique("nodechaos")
    try:
        three_with_a_writer(name, synchronous=synchronous)
        for index in range(args.rounds):
            r = one_round(name, index, rng, synchronous=synchronous)
            rounds.append(r)
            print(line(r), flush=True)
    finally:
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--ignore-not-found", "--wait=false", check=False)
        delete(name)
    next(install, None)  # its logs hold no refused request
    failed = [r for r in rounds if r.problems]
    Path(args.out).write_text(json.dumps({"seed": args.seed, "synchronous": synchronous,
                                          "rounds": [asdict(r) for r in rounds]}, indent=2))
    print(f"node-chaos: seed {args.seed}, {len(rounds)} rounds, {len(failed)} failed; report: {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
