"""The local cluster's real nodes and their faults (hack/real-node fault NODE cut|stop|crash|freeze|heal).

Three real nodes, each its own kubelet, containerd and pod subnet: a pod on one answers a pod on another. Each fault
does what it says, judged by what only real processes and packets show, and `heal` undoes it:
- cut: the node's pods answer neither another node's pods nor the host, `kubectl exec` cannot reach its kubelet,
  the node goes NotReady (its kubelet cannot reach the API server); its container keeps running (no restart after
  the heal);
- freeze: the node's containers answer nothing; after the heal they answer, not restarted;
- stop: kubelet and containerd gone, the containers still answer; the node goes NotReady;
- crash: every process of the node killed and its bridge down: its pod answers nothing (not even a refusal); the
  heal boots it, kubelet starts the pod again (a restart).
Disruptive (nodes go away) and local only (it runs hack/real-node on this host).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from tests.support import images
from tests.support.cluster import host_refuses, real_node_fault
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.pod_security import BUSYBOX_UID, restricted

pytestmark = [pytest.mark.cluster, pytest.mark.disruptive, pytest.mark.local_only]

SERVER, CLIENT = "real-2", "real-1"
GRACE = 60  # kube-controller-manager's --node-monitor-grace-period (hack/cluster)


@contextlib.contextmanager
def faulted(node: str, kind: str) -> Iterator[None]:
    """The fault `kind` on `node` while the block runs; healed afterwards, whatever happens."""
    real_node_fault(node, kind)
    try:
        yield
    finally:
        real_node_fault(node, "heal")


def on(node: str, name: str, command: list[str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": restricted({"restartPolicy": "Always", "terminationGracePeriodSeconds": 1,
                                "nodeSelector": {"kubernetes.io/hostname": node},
                                "containers": [{"name": "main", "image": images.BUSYBOX, "command": command}]},
                               BUSYBOX_UID)}


def pod_ip(ns: str, name: str) -> str:
    return str(kubectl_json("get", "pod", name, "-n", ns)["status"].get("podIP") or "")


def restarts(ns: str, name: str) -> int:
    statuses = kubectl_json("get", "pod", name, "-n", ns)["status"].get("containerStatuses") or [{}]
    return int(statuses[0].get("restartCount") or 0)


def answer(ns: str, ip: str) -> str | None:
    """What the server pod at `ip` answers the client pod on the other node (None: no answer within 3 s)."""
    out = kubectl("exec", "-n", ns, "client", "--", "timeout", "3", "wget", "-q", "-O", "-", f"http://{ip}:8080/",
                  check=False, timeout=30)
    return out.stdout.strip() if out.returncode == 0 else None


def execs(ns: str, name: str) -> bool:
    """Whether `kubectl exec` runs a command in the pod within 10 s."""
    try:
        return kubectl("exec", "-n", ns, name, "--request-timeout=8s", "--", "true", check=False,
                       timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def node_ready(node: str) -> str:
    conditions = kubectl_json("get", "node", node)["status"].get("conditions") or []
    return next((str(c["status"]) for c in conditions if c["type"] == "Ready"), "")


def test_three_real_nodes_and_each_fault_does_what_it_says_until_healed(real_namespace: str) -> None:
    ns = real_namespace
    nodes = sorted(n["metadata"]["name"] for n in kubectl_json("get", "nodes", "-l", "type=real")["items"])
    assert nodes[:3] == ["real-0", "real-1", "real-2"], nodes
    assert all(node_ready(n) == "True" for n in nodes)
    server = on(SERVER, "server", ["sh", "-c", "mkdir -p /tmp/w && echo served-by-$HOSTNAME > /tmp/w/index.html"
                                               " && exec httpd -f -p 8080 -h /tmp/w"])
    client = on(CLIENT, "client", ["sleep", "3600"])
    kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump_all([server, client]))
    kubectl("wait", "-n", ns, "--for=condition=Ready", "pod/server", "pod/client", "--timeout=120s", timeout=130)
    ip = pod_ip(ns, "server")
    assert ip.startswith("10.244.2.")  # real-2's subnet
    assert answer(ns, ip) == "served-by-server"  # from one node's pod to another's
    # cut: nothing reaches the node, its kubelet loses the API server, its container runs on
    with faulted(SERVER, "cut"):
        assert answer(ns, ip) is None
        host = subprocess.run(["curl", "-s", "-m", "2", f"http://{ip}:8080/"], capture_output=True, text=True,
                              check=False)
        assert host.returncode != 0  # nor from the host
        assert not execs(ns, "server")  # the API server cannot reach its kubelet
        wait_until(lambda: node_ready(SERVER) == "Unknown", timeout=GRACE + 60, what=f"{SERVER} NotReady (cut)")
    wait_until(lambda: answer(ns, ip), timeout=30, what="the server answering after the cut")
    wait_until(lambda: node_ready(SERVER) == "True", timeout=60, what=f"{SERVER} Ready after the cut")
    assert execs(ns, "server")
    assert restarts(ns, "server") == 0

    # freeze: every process stopped where it was, then resumed
    with faulted(SERVER, "freeze"):
        assert answer(ns, ip) is None
    assert wait_until(lambda: answer(ns, ip), timeout=30, what="the server answering after the freeze")
    assert restarts(ns, "server") == 0

    # stop: no kubelet, no containerd; the container goes on serving, the node goes NotReady
    with faulted(SERVER, "stop"):
        assert answer(ns, ip) == "served-by-server"
        wait_until(lambda: node_ready(SERVER) == "Unknown", timeout=GRACE + 60, what=f"{SERVER} NotReady (stop)")
        assert answer(ns, ip) == "served-by-server"
    wait_until(lambda: node_ready(SERVER) == "True", timeout=60, what=f"{SERVER} Ready after the stop")
    assert restarts(ns, "server") == 0

    # crash: everything of the node killed; booted again, kubelet starts the pod anew
    with faulted(SERVER, "crash"):
        assert answer(ns, ip) is None
        assert not host_refuses(ip, 8080)  # no answer at all, as a machine powered off: not even a refusal
    wait_until(lambda: restarts(ns, "server") >= 1 and answer(ns, pod_ip(ns, "server")), timeout=120,
               what="the server started again after the crash")
