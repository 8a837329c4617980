"""The short chaos run inside `make test` (issue #14): the full suite's machinery (tests/chaos/)
at a small size on the suite's own cluster, without restarting anything the other tests share.

8 SampleDBs on kwok's fake nodes and 1 with real PostgreSQL (data written first, checksummed per
table), 60 faults of every kind the chaos command has (the leader's SIGKILL standing in for
kill-leader: the operators here are processes, not pods), 3 more operator SIGKILLs and restarts
(two processes, leader election), one deletion per deletionPolicy, and the fault proxy cutting
watches and answering 409 and 429 the whole time. kube-apiserver restarts are left to `make chaos`
(its own cluster): restarting the shared one would disturb the tests running beside this one.
Then: every live SampleDB Ready, the real data unchanged, no orphan, one snapshot per Snapshot
deletion, never two Jobs for one purpose, no credentials regenerated, no finalizer left, RSS stable.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import replace

import pytest
from tests.chaos.report import markdown
from tests.chaos.suite import REAL_FAULTS, Result, Runner, Sizes, layout, machine, make_plan, setup
from tests.chaos.world import World
from tests.support.cluster import Cluster

from sampledb_operator.chaos.faults import Fault

pytestmark = pytest.mark.cluster

SEED = 14
SIZES = Sizes(kwok_dbs=8, real_dbs=1, faults=60, seconds=60, operator_kills=3, apiserver_restarts=0, deletions=3,
              namespaces=1, settle_timeout=240)


async def short_run(cluster: Cluster, seed: int, sizes: Sizes) -> Result:
    world = World("suite", cluster.kubeconfig, cluster.kubectl, seed=seed, operators=2, cluster_dir=None,
                  proxy_options={"conflict_rate": 0.05, "throttle_rate": 0.03})
    dbs = layout(f"chaos-{seed}-{secrets.token_hex(2)}", sizes, "suite", "suite")
    events = make_plan(seed, sizes, dbs, restart_world=None, operator_worlds=["suite"])
    runner = Runner(seed, sizes, {"suite": world}, events)
    runner.result.machine = machine()
    try:
        runner.result.timings["setup_s"] = await setup({"suite": world}, dbs, deadline_s=300)
        return await runner.run()
    finally:
        await world.stop()
        await world.delete_namespaces()
        await world.close()


def test_plan_is_a_function_of_the_seed() -> None:
    sizes = replace(SIZES, apiserver_restarts=2)
    dbs = layout("p", sizes, "k", "r")
    one = make_plan(SEED, sizes, dbs, restart_world="k", operator_worlds=["k", "r"])
    assert one == make_plan(SEED, sizes, dbs, restart_world="k", operator_worlds=["k", "r"])
    assert one != make_plan(SEED + 1, sizes, dbs, restart_world="k", operator_worlds=["k", "r"])
    kinds = {e.kind for e in one}
    assert {f.value for f in Fault} <= kinds, "every kind the chaos command has is planned"
    assert {"operator-kill", "apiserver-restart", "delete"} <= kinds
    assert sum(1 for e in one if e.kind in {f.value for f in Fault}) >= SIZES.faults
    deleted = [e.target for e in one if e.kind == "delete"]
    assert len(deleted) == len(set(deleted)) == SIZES.deletions
    assert len(REAL_FAULTS) == sum(1 for e in one if e.target and e.target.name.startswith("real-"))


def test_short_chaos_run_loses_nothing(cluster: Cluster) -> None:
    result = asyncio.run(short_run(cluster, SEED, SIZES))
    report = markdown(result)
    print(report)
    assert result.ok, report
    injected = {k.split("/")[0] for k, v in result.outcomes.items() if k.endswith("/injected") and v}
    assert {Fault.DELETE_POD.value, Fault.KILL_POSTGRES.value, Fault.FILL_VOLUME.value, Fault.DELETE_SERVICE.value,
            Fault.DELETE_CONFIGMAP.value, Fault.DELETE_STATEFULSET.value, Fault.KILL_LEADER.value} <= injected, \
        result.outcomes
    assert result.proxy["suite"].get("watch-cut", 0) > 0 and result.proxy["suite"].get("409", 0) > 0
    assert result.outcomes["operator-kill/sigkill"] >= 1
