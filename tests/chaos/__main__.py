"""`make chaos`: the full chaos suite (issue #14). `python -m tests.chaos --seed N [--out DIR]`.

Two worlds: `kwok`, a kwok-only control plane this command starts itself (hack/cluster with
SAMPLEDB_CLUSTER_DIR=/tmp/chaos-cluster, SAMPLEDB_REAL_NODE=0), holding the fake-node SampleDBs,
two operator processes with leader election, and the kube-apiserver restarts; and `real`, the
cluster of --real-kubeconfig (default: the repository's running local cluster, .cluster/kubeconfig,
which is never restarted, started or stopped here) holding the real-PostgreSQL SampleDBs in a
namespace of their own with one operator process watching only it. Both operators reach their API
server through a fault proxy (tests/chaos/proxy.py). The own cluster is stopped at the end, also on
failure. Exit code 0 when every end-state check held; the report is printed and written as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.chaos.report import markdown
from tests.chaos.suite import Runner, Sizes, layout, machine, make_plan, setup
from tests.chaos.world import World
from tests.support.cluster import CRD_DIR, REPO
from tests.support.operator import LOG_DIR_ENV

CLUSTER = REPO / "hack" / "cluster"


def own_cluster(state_dir: Path) -> tuple[str, tuple[str, ...]]:
    env = {**os.environ, "SAMPLEDB_CLUSTER_DIR": str(state_dir), "SAMPLEDB_REAL_NODE": "0"}
    out = subprocess.run([str(CLUSTER), "up"], capture_output=True, text=True, check=False, timeout=1800, env=env)
    if out.returncode != 0:
        raise SystemExit(f"chaos: hack/cluster up ({state_dir}) failed:\n{out.stderr[-3000:]}")
    kubectl = (f"{(state_dir / 'bin-dir').read_text().strip()}/testcluster", "kubectl")
    kubeconfig = str(state_dir / "kubeconfig")
    install_crds(kubeconfig, kubectl)
    return kubeconfig, kubectl


def install_crds(kubeconfig: str, kubectl: tuple[str, ...]) -> None:
    """The CRDs applied (server-side, idempotent) and Established: a fresh cluster has none."""
    kenv = {**os.environ, "KUBECONFIG": kubeconfig}
    for args in (["apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR)],
                 ["wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR)]):
        subprocess.run([*kubectl, *args], check=True, capture_output=True, timeout=120, env=kenv)


def stop_own_cluster(state_dir: Path) -> None:
    env = {**os.environ, "SAMPLEDB_CLUSTER_DIR": str(state_dir)}
    subprocess.run([str(CLUSTER), "down"], capture_output=True, text=True, check=False, timeout=300, env=env)


def shared_cluster(kubeconfig: str | None) -> tuple[str, tuple[str, ...]]:
    path = kubeconfig or os.environ.get("KUBECONFIG") or str(REPO / ".cluster" / "kubeconfig")
    bin_dir = REPO / ".cluster" / "bin-dir"
    kubectl: tuple[str, ...] = (f"{bin_dir.read_text().strip()}/testcluster", "kubectl") if bin_dir.exists() \
        else (os.environ.get("SAMPLEDB_KUBECTL", "kubectl"),)
    probe = subprocess.run([*kubectl, "get", "--raw", "/readyz"], capture_output=True, text=True, check=False,
                           timeout=30, env={**os.environ, "KUBECONFIG": path})
    if probe.returncode != 0:
        raise SystemExit(f"chaos: the real-node cluster ({path}) does not answer; start it (make cluster-up) or "
                         "give --real-dbs 0:\n" + probe.stderr[-500:])
    install_crds(path, kubectl)  # right after `make cluster-up` the tests' fixtures have not installed them
    return path, kubectl


async def main_async(args: argparse.Namespace) -> int:
    sizes = replace(Sizes(), kwok_dbs=args.kwok_dbs, real_dbs=args.real_dbs, faults=args.faults,
                    seconds=args.seconds, operator_kills=args.operator_kills,
                    apiserver_restarts=args.apiserver_restarts, deletions=args.deletions)
    state_dir = Path(args.cluster_dir)
    proxy = {"conflict_rate": args.conflict_rate, "throttle_rate": args.throttle_rate}
    worlds: dict[str, World] = {}
    try:
        kubeconfig, kubectl = await asyncio.to_thread(own_cluster, state_dir)
        worlds["kwok"] = World("kwok", kubeconfig, kubectl, seed=args.seed, operators=2, cluster_dir=state_dir,
                               proxy_options=proxy)
        if sizes.real_dbs:
            real_kubeconfig, real_kubectl = shared_cluster(args.real_kubeconfig)
            worlds["real"] = World("real", real_kubeconfig, real_kubectl, seed=args.seed + 1, operators=1,
                                   cluster_dir=None, proxy_options=proxy)
        dbs = layout(f"chaos-{args.seed}-{secrets.token_hex(2)}", sizes, "kwok", "real")  # names apart from a past run
        events = make_plan(args.seed, sizes, dbs, restart_world="kwok", operator_worlds=sorted(worlds))
        runner = Runner(args.seed, sizes, worlds, events)
        runner.result.machine = machine()
        runner.result.timings["setup_s"] = await setup(worlds, dbs, deadline_s=600)
        result = await runner.run()
        result.machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        result.machine["command"] = " ".join(["python -m tests.chaos", *sys.argv[1:]])
        text = markdown(result)
        print(text)
        write_outputs(Path(args.out), args.seed, result, text, log=runner.log, worlds=worlds)
        return 0 if result.ok else 1
    finally:
        for w in worlds.values():
            await w.stop()
        if "real" in worlds:
            await worlds["real"].delete_namespaces()
        for w in worlds.values():
            await w.close()
        await asyncio.to_thread(stop_own_cluster, state_dir)


def write_outputs(out: Path, seed: int, result: Any, text: str, *, log: list[str], worlds: dict[str, World]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"chaos-{seed}.json").write_text(json.dumps(_jsonable(result), indent=1, sort_keys=True))
    (out / f"chaos-{seed}.md").write_text(text)
    (out / f"chaos-{seed}.log").write_text("\n".join(log))
    for w in worlds.values():
        for i, op in enumerate(w.operators):
            (out / f"chaos-{seed}-{w.name}-op-{i}.log").write_text(op.log_text())


def _jsonable(result: Any) -> dict[str, Any]:
    from dataclasses import fields

    raw = {f.name: dict(v) if isinstance(v := getattr(result, f.name), dict) else v for f in fields(result)}
    out: dict[str, Any] = json.loads(json.dumps(raw, default=str))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=None, help="the run's seed (default: random, printed)")
    p.add_argument("--kwok-dbs", type=int, default=Sizes.kwok_dbs)
    p.add_argument("--real-dbs", type=int, default=Sizes.real_dbs)
    p.add_argument("--faults", type=int, default=Sizes.faults)
    p.add_argument("--seconds", type=float, default=Sizes.seconds, help="length of the fault phase")
    p.add_argument("--operator-kills", type=int, default=Sizes.operator_kills)
    p.add_argument("--apiserver-restarts", type=int, default=Sizes.apiserver_restarts)
    p.add_argument("--deletions", type=int, default=Sizes.deletions)
    p.add_argument("--conflict-rate", type=float, default=0.05)
    p.add_argument("--throttle-rate", type=float, default=0.03)
    p.add_argument("--cluster-dir", default="/tmp/chaos-cluster", help="state dir of the own kwok-only cluster")
    p.add_argument("--real-kubeconfig", default=None, help="cluster with the real node (default: .cluster's)")
    p.add_argument("--out", default="/tmp/chaos-reports")
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(10**6)
    print(f"chaos: seed {args.seed}", flush=True)
    # the operators' logs are copied into --out at the end; their working copies go with this directory
    with tempfile.TemporaryDirectory(prefix="chaos-operator-logs-") as logs:
        os.environ[LOG_DIR_ENV] = logs
        return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
