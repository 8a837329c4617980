"""Every pod template the operator builds meets the restricted Pod Security Standard and has no API token.

One checker (`restricted_violations`) is applied to each builder: the StatefulSet, and the init, backup,
restore, migration, upgrade, thaw, verify and prune Jobs. A test also pins the modules that build pod
specs, so a new builder is added here too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sampledb_operator.decide import jobs
from sampledb_operator.decide.backup import backup_files, restore, verify
from sampledb_operator.decide.children import desired, exporter, pooler
from sampledb_operator.decide.upgrades import upgrade
from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

PACKAGE = Path(desired.__file__).parents[2]  # sampledb_operator/
# volume types the restricted (and baseline) standard allows
ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                   "projected", "secret"}


def restricted_violations(template: Obj) -> list[str]:
    """What in a pod template breaks the restricted Pod Security Standard (or this operator's extra rules:
    no service account token, a read-only root filesystem). Empty: the template complies."""
    spec = template["spec"]
    pod_sc = spec.get("securityContext") or {}
    out: list[str] = []
    if spec.get("automountServiceAccountToken") is not False:
        out.append("automountServiceAccountToken is not false")
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(f"{field} set")
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            out.append(f"volume {volume['name']}: {sorted(kinds - ALLOWED_VOLUMES)}")
    if pod_sc.get("runAsUser") == 0:
        out.append("pod runAsUser 0")
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    if not containers:
        out.append("no containers")
    for c in containers:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            out.append(f"{name}: runAsNonRoot not true")
        if sc.get("runAsUser") == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile {seccomp}")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: capabilities added")
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if sc.get("readOnlyRootFilesystem") is not True:
            out.append(f"{name}: root filesystem writable")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(f"{name}: hostPort")
    return out


def make_db(**spec: Any) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "generation": 1},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, **spec}})


BACKUP: Obj = {
    "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
    "metadata": {"name": "orders-manual-1", "namespace": "shop", "uid": "u-b", "generation": 1},
    "spec": {"database": "orders"},
    "status": {"phase": "Succeeded", "version": "16.4",
               "location": {"pvcName": "orders-backups", "path": "/sampledb/backups/orders-manual-1.dump"}},
}


def _init_job(ref: str) -> Obj:
    body = jobs.init_job(make_db(init={ref: {"name": "sql", "key": "init.sql"}}))
    assert body is not None
    return body


def _verify_job() -> Obj:
    view = verify.BackupView(name="orders-manual-1", uid="u-b", phase="Succeeded", has_location=True)
    return verify.verify_job(make_db(), BACKUP, verify.Candidate(view, "", "orders-verify-1"))


BUILDERS: dict[str, Any] = {
    "statefulset": lambda: desired.statefulset(make_db(parameters={"work_mem": "8MB"})),
    "init-configmap": lambda: _init_job("configMapKeyRef"),
    "init-secret": lambda: _init_job("secretKeyRef"),
    "backup": lambda: jobs.backup_job(make_db(), backup_name="b", backup_uid="u", claim_name="orders-backups"),
    "restore": lambda: restore.restore_job(make_db(restore={"backupName": "orders-manual-1"}), BACKUP),
    "migrate": lambda: jobs.migration_job(make_db(), name="m", snapshot_configmap="s", digest="d"),
    "upgrade": lambda: upgrade.upgrade_job(make_db(version="17.2"), name="u", data_dir="pgdata-17"),
    "thaw": lambda: jobs.job(make_db(), name="t", component="thaw", script="thaw.sh"),
    "verify": _verify_job,
    "prune": lambda: backup_files.prune_job(SampleDBBackup.model_validate(BACKUP), image="postgres:16.4"),
    "pooler": lambda: pooler.deployment(make_db(pooler={"instances": 2}), ca=True),
}


@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_every_pod_template_meets_restricted(builder: str) -> None:
    body = BUILDERS[builder]()
    assert restricted_violations(body["spec"]["template"]) == []


@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_a_read_only_root_has_a_writable_tmp(builder: str) -> None:
    """Scripts (and the postgres entrypoint) write temporary files under /tmp: an emptyDir."""
    spec = BUILDERS[builder]()["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    for c in spec["containers"]:
        if c.get("command", [""])[0] == "rm":
            continue  # the prune Job runs rm alone, writing nothing but the backup volume
        if c["name"] == exporter.CONTAINER:
            continue  # postgres_exporter writes no file
        tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
        assert tmp and "emptyDir" in volumes[tmp[0]["name"]], c["name"]


def test_the_checker_reports_what_breaks_restricted() -> None:
    template = {"spec": {"hostNetwork": True, "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
                         "containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}}
    found = restricted_violations(template)
    assert {"automountServiceAccountToken is not false", "hostNetwork set", "volume h: ['hostPath']",
            "c: runAsNonRoot not true", "c: seccompProfile None", "c: allowPrivilegeEscalation not false",
            "c: capabilities do not drop ALL", "c: capabilities added", "c: root filesystem writable"} <= set(found)


def test_only_known_modules_build_pod_specs() -> None:
    """A new place that builds a pod spec must be added to BUILDERS above."""
    operator_root = PACKAGE
    building = sorted(str(p.relative_to(operator_root)) for p in operator_root.rglob("*.py")
                      if re.search(r'"containers":\s*\[', p.read_text()))
    assert building == ["decide/backup/backup_files.py", "decide/children/desired_statefulset.py",
                        "decide/children/pooler.py", "decide/jobs.py"]
