"""`kubectl sampledb` against the real API server and the real operator (kwok: Jobs succeed without
running, pods are Running without a container): status, backup, restore, upgrade, pause, resume,
and psql up to the commands it runs (no PostgreSQL here), with the password never in an argv or
in the plugin's output.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.e2e.conftest import apply, condition, sampledb, status, wait_ready
from tests.support.kube import kubectl_argv, kubectl_json, wait_until
from tests.support.operator import REPO, OperatorProcess

pytestmark = pytest.mark.cluster


def plugin(kubeconfig: str, *args: str, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `kubectl-sampledb ARGS` (as `python -m sampledb_operator.plugin`, what the console script runs)."""
    return subprocess.run([sys.executable, "-m", "sampledb_operator.plugin", "--kubeconfig", kubeconfig, *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False,
                          env={**os.environ, **(env or {})})


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


def password_of(db: str, ns: str) -> str:
    secret = kubectl_json("get", "secret", f"{db}-credentials", "-n", ns)
    return base64.b64decode(secret["data"]["password"]).decode()


def managers(kind: str, name: str, ns: str) -> set[str]:
    obj = kubectl_json("get", kind, name, "-n", ns, "--show-managed-fields")
    return {m["manager"] for m in obj["metadata"].get("managedFields", [])}


def test_status_shows_one_screen_about_a_ready_database(kubeconfig: str, namespace: str,
                                                        operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("shop", ns))
    wait_ready("shop", ns)
    out = ok(plugin(kubeconfig, "status", "shop", "-n", ns))
    assert out.startswith(f"SampleDB {ns}/shop\n")
    assert "  Phase:           Running\n" in out
    assert "  Ready:           True (DatabaseReady)\n" in out
    assert "  Version:         16.4 (running 16.4)\n" in out
    assert f"  Endpoint:        shop.{ns}.svc:5432\n" in out
    children = {tuple(line.split()[:2]) for line in out.split("\nChildren\n")[1].split("\n\n")[0].splitlines()[1:]}
    assert {("StatefulSet", "shop"), ("Pod", "shop-0"), ("PersistentVolumeClaim", "data-shop-0"),
            ("PersistentVolumeClaim", "shop-backups"), ("Service", "shop"), ("Service", "shop-headless"),
            ("Secret", "shop-credentials"), ("ConfigMap", "shop-config")} <= children
    assert ("ConfigMap", "sampledb-scripts") not in children  # the namespace's, shared: no one database's child
    assert re.search(r"^  Ready +True +DatabaseReady ", out, re.M)   # the conditions table
    assert password_of("shop", ns) not in out


def test_status_of_a_missing_database_fails_with_one_line(kubeconfig: str, namespace: str) -> None:
    done = plugin(kubeconfig, "status", "nope", "-n", namespace)
    assert done.returncode == 1
    assert done.stderr == f'Error: sampledbs.sampledb.io "nope" not found (namespace {namespace})\n'


def test_the_namespace_comes_from_the_kubeconfig_context(kubeconfig: str, namespace: str, tmp_path: Path) -> None:
    config = yaml.safe_load(Path(kubeconfig).read_text())
    for ctx in config["contexts"]:
        ctx["context"]["namespace"] = namespace
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    done = plugin(str(tmp_path / "kubeconfig"), "status", "nope")
    assert f"(namespace {namespace})" in done.stderr


def test_backup_creates_a_manual_sampledbbackup_and_waits_for_it(kubeconfig: str, namespace: str,
                                                                 operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("inv", ns))
    wait_ready("inv", ns)
    out = ok(plugin(kubeconfig, "backup", "inv", "-n", ns, "--name", "inv-by-hand", "--wait", "--timeout", "90"))
    lines = out.splitlines()
    assert lines[0] == "sampledbbackup.sampledb.io/inv-by-hand created"
    assert lines[-1].startswith("sampledbbackup.sampledb.io/inv-by-hand Succeeded")
    backup = kubectl_json("get", "sampledbbackup", "inv-by-hand", "-n", ns)
    assert backup["spec"] == {"database": "inv", "reason": "manual"}
    assert "kubectl-sampledb" in managers("sampledbbackup", "inv-by-hand", ns)
    wait_until(lambda: (status("inv", ns).get("lastBackup") or {}).get("name") == "inv-by-hand", timeout=30,
               what="status.lastBackup")
    screen = ok(plugin(kubeconfig, "status", "inv", "-n", ns))
    assert "  Last backup:     inv-by-hand, " in screen
    assert "inv-by-hand   manual   Succeeded" in screen

    default = ok(plugin(kubeconfig, "backup", "inv", "-n", ns))   # the operator's naming, no wait
    [name] = [w for w in default.split() if w.startswith("sampledbbackup.sampledb.io/")]
    assert name.removeprefix("sampledbbackup.sampledb.io/").startswith("inv-manual-")

    refused = plugin(kubeconfig, "backup", "missing", "-n", ns)
    assert refused.returncode == 1 and "not found" in refused.stderr
    assert not [b for b in kubectl_json("get", "sdbb", "-n", ns)["items"] if b["spec"]["database"] == "missing"]


def test_restore_creates_a_new_database_from_a_backup(kubeconfig: str, namespace: str,
                                                      operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("src", ns, parameters={"max_connections": "50"},
                   migrations={"configMapName": "not-copied"}))
    wait_ready("src", ns)
    ok(plugin(kubeconfig, "backup", "src", "-n", ns, "--name", "src-1", "--wait", "--timeout", "90"))
    out = ok(plugin(kubeconfig, "restore", "src-1", "--to", "src-copy", "-n", ns, "--wait", "--timeout", "120"))
    assert out.splitlines()[0] == ("sampledb.sampledb.io/src-copy created, restoring SampleDBBackup src-1"
                                   " (of src, PostgreSQL 16.4)")
    copy = kubectl_json("get", "sampledb", "src-copy", "-n", ns)
    assert copy["spec"]["restore"] == {"backupName": "src-1"}
    assert copy["spec"]["parameters"] == {"max_connections": "50"}
    assert "migrations" not in copy["spec"]
    assert (condition("src-copy", ns, "Initialized")["reason"], condition("src-copy", ns, "Ready")["status"]) == \
        ("Restored", "True")
    assert "kubectl-sampledb" in managers("sampledb", "src-copy", ns)

    again = plugin(kubeconfig, "restore", "src-1", "--to", "src-copy", "-n", ns)
    assert again.returncode == 1 and "already exists" in again.stderr


def test_upgrade_patches_the_version_and_the_operator_upgrades(kubeconfig: str, namespace: str,
                                                               operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("up", ns))
    wait_ready("up", ns)
    out = ok(plugin(kubeconfig, "upgrade", "up", "16.6", "-n", ns))
    assert out.splitlines()[0] == "sampledb.sampledb.io/up: spec.version 16.4 -> 16.6"
    assert out.splitlines()[1].startswith("minor upgrade from the running 16.4")
    wait_until(lambda: condition("up", ns, "Upgrading").get("reason") == "UpgradeSucceeded", timeout=120,
               what="the upgrade")
    assert status("up", ns)["currentVersion"] == "16.6"
    assert ok(plugin(kubeconfig, "upgrade", "up", "16.6", "-n", ns)) == \
        "sampledb.sampledb.io/up already asks for version 16.6\n"
    refused = plugin(kubeconfig, "upgrade", "up", "15.8", "-n", ns)
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error from server (Invalid):") and "downgrade" in refused.stderr


def test_pause_and_resume(kubeconfig: str, namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("nap", ns))
    wait_ready("nap", ns)
    assert ok(plugin(kubeconfig, "pause", "nap", "-n", ns)).startswith("sampledb.sampledb.io/nap paused")
    assert kubectl_json("get", "sampledb", "nap", "-n", ns)["spec"]["paused"] is True
    wait_until(lambda: status("nap", ns).get("phase") == "Paused", timeout=60, what="phase Paused")
    assert "  Paused:          yes" in ok(plugin(kubeconfig, "status", "nap", "-n", ns))
    assert ok(plugin(kubeconfig, "pause", "nap", "-n", ns)) == "sampledb.sampledb.io/nap already paused\n"
    assert ok(plugin(kubeconfig, "resume", "nap", "-n", ns)) == "sampledb.sampledb.io/nap resumed\n"
    wait_until(lambda: status("nap", ns).get("phase") == "Running", timeout=60, what="phase Running again")


def fake_program(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return path


def test_psql_forwards_the_client_service_and_passes_the_password_only_in_psqls_environment(
        kubeconfig: str, namespace: str, operator: OperatorProcess, tmp_path: Path) -> None:
    """No PostgreSQL runs under kwok: kubectl and psql are stand-ins that record what they were given.
    The real kubectl's port-forward is checked for its arguments with --dry-run."""
    ns = namespace
    apply(sampledb("pg", ns))
    wait_ready("pg", ns)
    password = password_of("pg", ns)

    dry = plugin(kubeconfig, "psql", "pg", "-n", ns, "--dry-run", "--", "-c", "select 1")
    assert ok(dry).splitlines() == [
        f"kubectl port-forward --namespace {ns} --kubeconfig {kubeconfig} --address 127.0.0.1 service/pg :5432",
        "PGPASSWORD=<password from Secret pg-credentials> psql --host 127.0.0.1 --port '<local port>'"
        " --username app --dbname app -c 'select 1'"]

    record = tmp_path / "record.json"
    kubectl_stub = fake_program(tmp_path / "kubectl", f"""
import json, signal, sys, time
open({str(tmp_path / 'forward.json')!r}, "w").write(json.dumps(sys.argv[1:]))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("Forwarding from 127.0.0.1:54321 -> 5432", flush=True)
time.sleep(120)
""")
    psql_stub = fake_program(tmp_path / "psql", f"""
import json, os, sys
json.dump({{"argv": sys.argv[1:], "PGPASSWORD": os.environ.get("PGPASSWORD")}}, open({str(record)!r}, "w"))
print("psql stand-in ran")
""")
    done = plugin(kubeconfig, "psql", "pg", "-n", ns, "--psql", str(psql_stub), "--", "-c", "select 1",
                  env={"SAMPLEDB_KUBECTL": str(kubectl_stub)})
    assert ok(done) == "psql stand-in ran\n"
    seen = json.loads(record.read_text())
    assert seen["PGPASSWORD"] == password
    assert seen["argv"] == ["--host", "127.0.0.1", "--port", "54321", "--username", "app", "--dbname", "app",
                            "-c", "select 1"]
    forward = json.loads((tmp_path / "forward.json").read_text())
    assert forward == ["port-forward", "--namespace", ns, "--kubeconfig", kubeconfig, "--address", "127.0.0.1",
                       "service/pg", ":5432"]
    for text in (*seen["argv"], *forward, done.stdout, done.stderr, dry.stdout, dry.stderr):
        assert password not in text

    # the real kubectl's port-forward (the test cluster's) accepts those arguments and reaches the
    # API server: under kwok there is no container to connect to, which it reports
    real = plugin(kubeconfig, "psql", "pg", "-n", ns, "--psql", str(psql_stub),
                  env={"SAMPLEDB_KUBECTL": " ".join(kubectl_argv())})
    if real.returncode == 0:   # a cluster whose pods run: the stand-in psql ran through a real forward
        assert json.loads(record.read_text())["PGPASSWORD"] == password
    else:
        assert real.stderr.startswith("Error: kubectl port-forward failed:"), real.stderr
    assert password not in real.stdout + real.stderr
