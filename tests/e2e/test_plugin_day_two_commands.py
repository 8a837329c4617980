"""`kubectl sampledb switchover`, `logs` and `report` against the real API server and the real operator, in a
namespace whose pods go to kwok's fake nodes: no PostgreSQL runs there, so a switchover is checked up to
what it would send (its refusals and --dry-run; a real one needs replication, tests/e2e/test_replication.py),
`logs` up to the API server's answer for a pod no kubelet serves, and `report` for its whole archive, with
no Secret value in it.
"""

from __future__ import annotations

import base64
import json
import tarfile
from pathlib import Path

import pytest
import yaml
from tests.e2e.conftest import apply, sampledb, status, wait_ready
from tests.e2e.test_plugin import ok, plugin
from tests.support.kube import kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def secret_values(name: str, ns: str) -> list[str]:
    data = kubectl_json("get", "secret", name, "-n", ns)["data"]
    return [base64.b64decode(data[key]).decode() for key in ("password", "uri")]


def test_switchover_logs_and_report_on_fake_nodes(kubeconfig: str, namespace: str, operator: OperatorProcess,
                                                  tmp_path: Path) -> None:
    ns = namespace
    apply([sampledb("solo", ns), sampledb("ha", ns, replicas=2)])
    wait_ready("solo", ns)
    wait_ready("ha", ns)
    wait_until(lambda: [(i["name"], i["role"], i["ready"]) for i in status("ha", ns).get("instances", [])]
               == [("ha-0", "primary", True), ("ha-i1-0", "replica", True)], timeout=90,
               what="status.instances of ha: a ready primary and a ready standby")

    # switchover: the refusals, one line each, and nothing written
    for args, words in ((["solo"], "SampleDB solo has one instance (spec.replicas 1): there is no standby"),
                        (["ha", "--to", "ha-0"], "ha-0 is already the primary of ha"),
                        (["ha", "--to", "ha-i7-0"], "ha-i7-0 is not an instance of ha; its instances: ha-0 (primary,"
                                                    " ready), ha-i1-0 (replica, ready)")):
        refused = plugin(kubeconfig, "switchover", *args, "-n", ns)
        assert refused.returncode == 1, refused
        assert refused.stderr.startswith(f"Error: {words}") and refused.stderr.count("\n") == 1, refused.stderr
    # --dry-run: the standby chosen (the only ready one) and the patch, under both names
    for command in ("switchover", "promote"):
        dry = plugin(kubeconfig, command, "ha", "--dry-run", "-n", ns)
        assert json.loads(ok(dry)) == {"metadata": {"annotations": {"sampledb.io/switchover": "ha-i1-0"}}}
        assert dry.stderr.startswith("ha-0 -> ha-i1-0 (")
    assert "sampledb.io/switchover" not in (kubectl_json("get", "sampledb", "ha", "-n", ns)["metadata"]
                                            .get("annotations") or {})

    # logs: the pod is chosen and asked for through the API server, which has no kubelet to ask on kwok
    unknown = plugin(kubeconfig, "logs", "ha", "--instance", "nope-0", "-n", ns)
    assert (unknown.returncode, unknown.stderr.splitlines()[0]) == (1, "Error: nope-0 is not an instance of ha;"
                                                                       " its instances: ha-0 (primary, ready),"
                                                                       " ha-i1-0 (replica, ready)")
    for args in (["ha"], ["ha", "--instance", "ha-i1-0", "--tail", "5"], ["ha", "-f"]):
        done = plugin(kubeconfig, "logs", *args, "-n", ns, timeout=60)
        assert done.returncode == 1, done
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("Error from server ("), done.stderr
        assert "Traceback" not in done.stderr

    # report: the archive, with every Secret by name only and no Secret value anywhere
    target = tmp_path / "ha.tar.gz"
    out = ok(plugin(kubeconfig, "report", "ha", "-n", ns, "-o", str(target), "--log-lines", "50"))
    assert out.startswith(f"wrote {target} (")
    assert (target.stat().st_mode & 0o777) == 0o600
    with tarfile.open(target, "r:gz") as tar:
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                 for m in tar.getmembers() if m.isfile()}
    assert {"README.txt", "status.txt", "sampledb.yaml", "status.yaml", "secrets.yaml", "events.yaml",
            "statefulsets/ha.yaml", "statefulsets/ha-i1.yaml", "pods/ha-0.yaml", "pods/ha-i1-0.yaml",
            "persistentvolumeclaims/data-ha-0.yaml", "services/ha.yaml", "configmaps/ha-config.yaml"} <= set(files)
    assert files["status.txt"].startswith(f"SampleDB {ns}/ha\n")
    assert yaml.safe_load(files["sampledb.yaml"])["status"]["primary"] == "ha-0"
    secrets = {s["name"]: s for s in yaml.safe_load(files["secrets.yaml"])}
    # the superuser's and the TLS Secrets too, by name and keys only
    assert set(secrets) == {"ha-credentials", "ha-superuser", "ha-ca", "ha-tls"}
    assert "password" in secrets["ha-credentials"]["keys"] and "ca.key" in secrets["ha-ca"]["keys"]
    assert any(e["involvedObject"]["name"] == "ha" for e in yaml.safe_load(files["events.yaml"]))
    assert "cannot read the log of ha-0" in files["README.txt"]   # no kubelet serves kwok's pods
    everything = "\n".join(files.values()) + out
    for value in secret_values("ha-credentials", ns):
        assert value not in everything
    for secret, key in (("ha-ca", "ca.key"), ("ha-tls", "tls.key")):
        private = base64.b64decode(kubectl_json("get", "secret", secret, "-n", ns)["data"][key]).decode()
        assert private.strip() and private.strip() not in everything
    assert "solo" not in "\n".join(name for name in files)
