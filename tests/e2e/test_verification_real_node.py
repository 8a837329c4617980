"""Backup verification on real PostgreSQL (the local cluster's real node): a backup taken with
spec.backup.verify is verified by restoring it for real; a byte flipped in its dump on the volume is
caught by a verification requested with the sampledb.io/verify annotation, and BackupHealthy turns False.

Pods in `real_namespace` run for real; the operator runs as a local process (tests/support/operator.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from tests.e2e.conftest import apply, condition, jobs_of, sampledb, wait_ready
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

VERSION = "15.20"  # an image the real node has (docs/dataplane.md)
ROWS = 3000

SEED_SQL = f"""
CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric(12,2), opened timestamptz);
INSERT INTO accounts SELECT g, 'owner ' || g || ' ünïcødé ✓', g * 1.5, '2026-01-01'::timestamptz + g * interval '1 h'
  FROM generate_series(1, {ROWS}) g;
CREATE TABLE notes (id bigserial PRIMARY KEY, body jsonb);
INSERT INTO notes (body) SELECT jsonb_build_object('n', g) FROM generate_series(1, 100) g;
"""

# Flips (XORs with 0xff) the byte in the middle of the dump, in place, as uid 999 (the files' owner).
FLIP = r"""
set -eu
f=/backups/$1.dump
size=$(stat -c %s "$f")
off=$((size / 2))
old=$(od -An -tu1 -j "$off" -N1 "$f" | tr -d ' ')
printf "$(printf '\\%03o' $((old ^ 255)))" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
echo "flipped byte $off of $size ($old)"
"""


def backup_status(name: str, ns: str) -> dict[str, Any]:
    return (get_or_none("sampledbbackup", name, ns) or {}).get("status") or {}


def verified_condition(name: str, ns: str) -> dict[str, Any]:
    return next((c for c in backup_status(name, ns).get("conditions", []) if c["type"] == "Verified"), {})


def psql(db: str, ns: str, statement: str) -> str:
    sts = kubectl_json("get", "statefulsets", "-n", ns, "-l", f"sampledb.io/database={db}")["items"][0]
    out = kubectl("exec", "-n", ns, f"{sts['metadata']['name']}-0", "-c", "postgres", "--", "psql", "-X",
                  "-v", "ON_ERROR_STOP=1", "-U", "app", "-d", "app", "-qAt", "-c", statement, timeout=60)
    return out.stdout.strip()


def flip_a_byte(db: str, backup: str, ns: str) -> str:
    """A pod mounting the backup volume flips one byte of the backup's dump; its log line."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bit-rot", "namespace": ns},
           "spec": {"restartPolicy": "Never",
                    "securityContext": {"runAsUser": 999, "runAsGroup": 999, "fsGroup": 999, "runAsNonRoot": True,
                                        "seccompProfile": {"type": "RuntimeDefault"}},  # restricted PSS
                    "containers": [{"name": "flip", "image": f"postgres:{VERSION}",
                                    "securityContext": {"allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}},
                                    "command": ["bash", "-c", FLIP, "flip", backup],
                                    "volumeMounts": [{"name": "backups", "mountPath": "/backups"}]}],
                    "volumes": [{"name": "backups", "persistentVolumeClaim": {"claimName": f"{db}-backups"}}]}}
    kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))
    wait_until(lambda: (get_or_none("pod", "bit-rot", ns) or {}).get("status", {}).get("phase")
               in ("Succeeded", "Failed") or None, timeout=120, what="the bit-rot pod")
    assert get_or_none("pod", "bit-rot", ns)["status"]["phase"] == "Succeeded", kubectl(  # type: ignore[index]
        "logs", "bit-rot", "-n", ns, check=False).stdout
    return kubectl("logs", "bit-rot", "-n", ns).stdout.strip()


def test_a_verified_backup_restores_for_real_and_a_flipped_byte_is_caught(kubeconfig: str,
                                                                          real_namespace: str) -> None:
    ns = real_namespace
    with OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect", "--workers", "2") as op:
        apply(sampledb("ledger", ns, version=VERSION, storage={"size": "256Mi"}, backup={"verify": True},
                       deletionPolicy="Delete"))
        wait_ready("ledger", ns, timeout=300)
        psql("ledger", ns, SEED_SQL)
        apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
               "metadata": {"name": "ledger-manual-1", "namespace": ns}, "spec": {"database": "ledger"}})

        wait_until(lambda: backup_status("ledger-manual-1", ns).get("verified") is not None, timeout=300,
                   what="the automatic verification")
        status = backup_status("ledger-manual-1", ns)
        cond = verified_condition("ledger-manual-1", ns)
        assert status["verified"] is True, cond
        assert (cond["status"], cond["reason"]) == ("True", "Verified")
        assert "matches its snapshot" in cond["message"]
        assert status["verification"]["dataCompared"] is True
        assert status["verification"]["tables"] == 2
        assert status["verification"]["rows"] == ROWS + 100
        assert condition("ledger", ns, "BackupHealthy")["status"] == "True"

        line = flip_a_byte("ledger", "ledger-manual-1", ns)
        assert line.startswith("flipped byte")
        kubectl("annotate", "sdbb", "ledger-manual-1", "-n", ns, "sampledb.io/verify=after-bit-rot")

        wait_until(lambda: backup_status("ledger-manual-1", ns).get("verified") is False, timeout=300,
                   what="the requested verification to fail")
        cond = verified_condition("ledger-manual-1", ns)
        assert (cond["status"], cond["reason"]) == ("False", "ChecksumMismatch")
        assert "checksum mismatch for ledger-manual-1.dump" in cond["message"]
        assert backup_status("ledger-manual-1", ns)["verification"]["request"] == "after-bit-rot"
        health = wait_until(lambda: condition("ledger", ns, "BackupHealthy") or None, timeout=30, what="health")
        assert (health["status"], health["reason"]) == ("False", "VerificationFailed")
        assert "ledger-manual-1" in health["message"] and "ChecksumMismatch" in health["message"]
        events = kubectl_json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=ledger")["items"]
        assert any(e["reason"] == "VerificationFailed" and e["type"] == "Warning" for e in events)
        # An integrity failure is not retried: one pod, failed at once by the podFailurePolicy.
        damaged_job = backup_status("ledger-manual-1", ns)["verification"]["jobName"]
        pods = kubectl_json("get", "pods", "-n", ns, "-l", f"job-name={damaged_job}")["items"]
        assert len(pods) == 1
        assert len(jobs_of(ns, "verify")) == 2
        assert op.metric("sampledb_backup_verifications_total", namespace=ns, database="ledger",
                         result="failed") == 1
