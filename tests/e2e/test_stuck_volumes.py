"""A database whose data volume is full or read-only says so, in the kernel's and PostgreSQL's words, and says it
no more once the volume is grown or writable again, with its rows intact (issue: status explains stuck
databases). The real operator, control plane and node; the local cluster's StorageClass `sized`, whose volumes
are tmpfs mounts of the claim's size, grown in place (hack/testcluster/provisioner.go): this test fills one, or
remounts it read-only, on the host, as a disk fills or a file system turns read-only after errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.e2e.conftest import apply, condition, sampledb, status, wait_ready
from tests.e2e.test_stuck_databases import cleared, degraded
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.local_only]
VERSION = "15.20"


def psql(ns: str, name: str, statement: str) -> str:
    out = kubectl("exec", "-n", ns, f"{name}-0", "-c", "postgres", "--", "psql", "-X", "-v", "ON_ERROR_STOP=1",
                  "-U", "postgres", "-d", "app", "-qAt", "-c", statement)
    return str(out.stdout).strip()


def volume_path(ns: str, name: str) -> Path:
    """The host directory (a tmpfs mount) of the database's data volume."""
    claim = kubectl_json("get", "pvc", f"data-{name}-0", "-n", ns)
    pv = kubectl_json("get", "pv", claim["spec"]["volumeName"])
    path = Path((pv["spec"].get("local") or pv["spec"]["hostPath"])["path"])  # sized: a local PV of the real node
    assert path.is_mount(), f"{path} is not a size-enforcing volume"
    return path


def write_wal(ns: str, name: str, segments: int = 12) -> None:
    """Make the server start `segments` new WAL segments (past those a checkpoint recycled): on a full volume the
    first one it must create fails, and PostgreSQL PANICs (its session ends with an error)."""
    kubectl("exec", "-n", ns, f"{name}-0", "-c", "postgres", "--", "psql", "-X", "-U", "postgres", "-d", "app", "-qAt",
            "-c", f"DO $$ BEGIN FOR i IN 1..{segments} LOOP PERFORM pg_logical_emit_message(false, 'fill', 'x');"
            " PERFORM pg_switch_wal(); END LOOP; END $$", check=False)


def remount_read_only_across_a_restart(ns: str, name: str, path: Path) -> None:
    """A file system cannot turn read-only while a server writes to it: the pod is deleted (as a node's reboot
    would) and the volume remounted read-only in the moment between the old server's exit and the new one's
    start (mount refuses with "busy" until the old one has closed its files)."""
    uid = kubectl_json("get", "pod", f"{name}-0", "-n", ns)["metadata"]["uid"]
    kubectl("delete", "pod", f"{name}-0", "-n", ns, "--wait=false")

    def remounted() -> bool:
        return subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, check=False,
                              timeout=10).returncode == 0
    wait_until(remounted, timeout=120, interval=0.05, what=f"{path} remounted read-only once {name}-0 ({uid}) stopped")


def rows_kept(ns: str, name: str) -> int:
    psql(ns, name, "CREATE TABLE kept AS SELECT g AS id FROM generate_series(1, 5000) g; CHECKPOINT")
    return int(psql(ns, name, "SELECT count(*) FROM kept"))


def test_a_full_volume_is_said_and_cleared_once_grown(real_namespace: str, real_operator: OperatorProcess) -> None:
    ns, name = real_namespace, "full"
    apply(sampledb(name, ns, version=VERSION, storage={"size": "128Mi", "storageClassName": "sized"}))
    wait_ready(name, ns, timeout=240)
    assert rows_kept(ns, name) == 5000
    path = volume_path(ns, name)
    filler = path / "filler"
    done = subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert "No space left on device" in done.stderr, done.stderr
    write_wal(ns, name)
    cond = degraded(name, ns, "VolumeFull", timeout=180)
    assert "No space left on device" in cond["message"] and f"{name}-0" in cond["message"]
    assert cond["message"].count("grow spec.storage.size") == 1
    # the fix a user makes: a bigger volume (the class allows expansion); the filler stays
    kubectl("patch", "sampledb", name, "-n", ns, "--type", "merge", "-p", '{"spec": {"storage": {"size": "256Mi"}}}')
    cleared(name, ns, timeout=300)
    wait_ready(name, ns, timeout=300)
    assert filler.exists() and int(psql(ns, name, "SELECT count(*) FROM kept")) == 5000


def test_a_read_only_volume_is_said_and_cleared_once_writable(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns, name = real_namespace, "rofs"
    apply(sampledb(name, ns, version=VERSION, storage={"size": "128Mi", "storageClassName": "sized"}))
    wait_ready(name, ns, timeout=240)
    assert rows_kept(ns, name) == 5000
    path = volume_path(ns, name)
    try:
        remount_read_only_across_a_restart(ns, name, path)
        cond = degraded(name, ns, "VolumeReadOnly", timeout=180)
        assert "Read-only file system" in cond["message"] and f"{name}-0" in cond["message"]
        assert status(name, ns)["phase"] == "Degraded"
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(path)], check=True, timeout=30)
    cleared(name, ns, timeout=300)
    wait_ready(name, ns, timeout=300)
    assert int(psql(ns, name, "SELECT count(*) FROM kept")) == 5000
    assert condition(name, ns, "Degraded").get("reason") == "AsExpected"
    wait_until(lambda: psql(ns, name, "INSERT INTO kept VALUES (0) RETURNING id") == "0", timeout=30,
               what="the database writable again")
