"""`hack/cluster down` leaves the host as it found it; `up` brings every node back.

The machine is shared (CI, later sessions), and the real node changes the host: processes,
mounts, a bridge and veths, routes, nftables/iptables rules, cgroups, sysctls that kubelet sets,
files outside the cluster folder. hack/real-node records `host-state` before its first change;
after `down`, the same command must print exactly that again. Then `up` restarts the cluster for
the tests that follow (disruptive: it runs alone).
"""

from __future__ import annotations

import difflib
import subprocess

import pytest
from tests.support.cluster import CLUSTER_SCRIPT, REPO, Cluster, install_crds, local_state_dir
from tests.support.kube import kubectl_json, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.disruptive, pytest.mark.local_only]

REAL_NODE = REPO / "hack" / "real-node"


def host_state() -> str:
    return subprocess.run([str(REAL_NODE), "host-state"], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def run_cluster(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(CLUSTER_SCRIPT), *args], capture_output=True, text=True, check=False,
                         timeout=timeout)
    assert out.returncode == 0, f"hack/cluster {' '.join(args)} failed:\n{out.stderr[-4000:]}"
    return out


def test_down_restores_the_host_and_up_brings_the_real_node_back(cluster: Cluster) -> None:
    before_file = local_state_dir() / "host-state.before"
    assert before_file.exists(), "hack/real-node network-up records the host state before its first change"
    before = before_file.read_text()
    running = host_state()
    assert "link sdb0" in running, "the real node's bridge is up while the cluster runs"
    assert running != before

    run_cluster("down", timeout=180)
    try:
        after = host_state()
    finally:
        run_cluster("up")  # the cluster comes back for the tests that follow, whatever was found
        install_crds()
    diff = "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(), "before up", "after down",
                                          lineterm=""))
    assert after == before, f"hack/cluster down left changes on the host:\n{diff}"

    def real_node_ready() -> bool:
        node = kubectl_json("get", "node", "real-0")
        return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])

    wait_until(real_node_ready, timeout=60, what="real-0 Ready after up")
