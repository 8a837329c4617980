"""The SampleDB and SampleDBBackup CRDs on a real API server: admission messages, defaults, columns,
explain, kubectl edit, and model round trips.

The invalid-manifest table runs with `--dry-run=server`: the request goes through decoding,
defaulting, schema and CEL validation exactly like a real create, and nothing is stored.
"""

from __future__ import annotations

import itertools
import json
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.unit.model.hostile_input import (
    ACCEPTED_BACKUP_NAMES,
    ACCEPTED_SAMPLEDBS,
    BACKUP_NAME_MESSAGE,
    DELETE,
    HOSTILE_BACKUP_NAMES,
    HOSTILE_SAMPLEDBS,
    VALID,
    VALID_BACKUP,
    Case,
    variant,
)
from tests.unit.model.sampledb_strategies import specs

from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.sampledb import SampleDB, SampleDBSpec
from sampledb_operator.model.schema import dump

pytestmark = pytest.mark.cluster

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"
KEY = {"name": "init-sql", "key": "init.sql"}


def create(obj: dict[str, Any], namespace: str, *, dry_run: bool = False) -> Any:
    args = ["create", "-n", namespace, "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    return kubectl(*args, input=json.dumps(obj), check=False)


INVALID_SAMPLEDBS: list[tuple[str, dict[str, Any], str]] = [
    ("version-missing", {"spec.version": DELETE}, "spec.version: Required value"),
    ("version-major-only", {"spec.version": "16"}, 'must be MAJOR.MINOR without leading zeros, e.g. "16.4"'),
    ("version-three-parts", {"spec.version": "16.4.1"}, "must be MAJOR.MINOR"),
    ("version-v-prefix", {"spec.version": "v16.4"}, "must be MAJOR.MINOR"),
    ("version-leading-zero", {"spec.version": "16.04"}, "must be MAJOR.MINOR"),
    ("version-major-too-old", {"spec.version": "12.9"},
     "PostgreSQL 12 is not supported: the major version must be one of 13, 14, 15, 16, 17, 18"),
    ("version-major-too-new", {"spec.version": "19.0"}, "PostgreSQL 19 is not supported"),
    ("version-a-number", {"spec.version": 16.4}, "spec.version: Invalid value: \"number\""),
    ("version-too-long", {"spec.version": "16." + "1" * 20}, "spec.version: Too long"),
    ("storage-missing", {"spec.storage": DELETE}, "spec.storage: Required value"),
    ("storage-size-missing", {"spec.storage.size": DELETE}, "spec.storage.size: Required value"),
    ("storage-size-words", {"spec.storage.size": "ten gigs"},
     "must be a Kubernetes quantity such as 10Gi, 512Mi or 500m"),
    ("storage-size-gb-suffix", {"spec.storage.size": "10GB"}, "must be a Kubernetes quantity"),
    ("storage-size-too-small", {"spec.storage.size": "10Mi"}, "spec.storage.size: Invalid value: \"10Mi\": "
     "must be at least 64Mi"),
    ("storage-size-negative", {"spec.storage.size": "-1Gi"}, "must be at least 64Mi"),
    ("storage-size-tiny-int", {"spec.storage.size": 1024}, "must be at least 64Mi"),
    ("storage-class-invalid", {"spec.storage.storageClassName": "Fast_SSD"}, "must be a DNS-1123 subdomain"),
    ("deletion-policy-unknown", {"spec.deletionPolicy": "Destroy"},
     'spec.deletionPolicy: Unsupported value: "Destroy": supported values: "Snapshot", "Retain", "Delete"'),
    ("schedule-words", {"spec.backup.schedule": "every day"},
     "must be a cron schedule of 5 fields (minute hour day-of-month month day-of-week)"),
    ("schedule-four-fields", {"spec.backup.schedule": "0 3 * *"}, "must be a cron schedule of 5 fields"),
    ("schedule-six-fields", {"spec.backup.schedule": "0 0 3 * * *"}, "must be a cron schedule of 5 fields"),
    ("schedule-every-macro", {"spec.backup.schedule": "@every 1h"}, "must be a cron schedule of 5 fields"),
    ("schedule-empty", {"spec.backup.schedule": ""}, "spec.backup.schedule"),
    ("retention-zero", {"spec.backup.retention": 0}, "spec.backup.retention: Invalid value: 0"),
    ("retention-too-many", {"spec.backup.retention": 5000}, "should be less than or equal to 1000"),
    ("backup-storage-too-small", {"spec.backup.storage": {"size": "1Mi"}},
     "spec.backup.storage.size: Invalid value: \"1Mi\": must be at least 64Mi"),
    ("name-too-long", {"metadata.name": "a" * 64}, "metadata.name: Invalid value: "
     "must be at most 63 characters: it names the database's Service"),
    ("name-starts-with-digit", {"metadata.name": "1db"}, "metadata.name: Invalid value: must be a DNS-1035 label"),
    ("name-with-dot", {"metadata.name": "my.db"}, "must be a DNS-1035 label"),
    ("init-both-sources", {"spec.init": {"configMapKeyRef": KEY, "secretKeyRef": KEY}},
     "init needs exactly one of configMapKeyRef or secretKeyRef"),
    ("init-no-source", {"spec.init": {}}, "init needs exactly one of configMapKeyRef or secretKeyRef"),
    ("init-key-missing", {"spec.init": {"configMapKeyRef": {"name": "init-sql"}}},
     "spec.init.configMapKeyRef.key: Required value"),
    ("init-configmap-name-invalid", {"spec.init": {"secretKeyRef": {"name": "Init SQL", "key": "a"}}},
     "spec.init.secretKeyRef.name: Invalid value"),
    ("parameters-managed", {"spec.parameters": {"port": "5433"}}, "these parameters cannot be set"),
    ("parameters-bad-name", {"spec.parameters": {"Shared Buffers": "1GB"}},
     "parameter names must be lowercase postgresql.conf settings"),
    ("parameters-multiline", {"spec.parameters": {"work_mem": "4MB\nfsync = off"}},
     "parameter values must be a single line"),
    ("parameters-unquoted-number", {"spec.parameters": {"max_connections": 200}},
     "spec.parameters.max_connections: Invalid value: \"integer\""),
    ("resources-unknown-name", {"spec.resources": {"requests": {"gpu": "1"}}},
     "resource names must be cpu, memory, ephemeral-storage or hugepages-<page size>"),
    ("resources-bad-quantity", {"spec.resources": {"limits": {"memory": "lots"}}},
     "spec.resources.limits[memory]: Invalid value: \"lots\": must be a Kubernetes quantity"),
    ("image-with-space", {"spec.image": "postgres 16"}, "spec.image: Invalid value: \"postgres 16\""),
    ("restore-without-backup", {"spec.restore": {}}, "spec.restore.backupName: Required value"),
    ("restore-source-without-store", {"spec.restore": {"backupName": "a", "database": "orders"}},
     "spec.restore.database: Invalid value: database names a source in an object store: it needs"
     " objectStore"),
    ("migrations-bad-configmap", {"spec.migrations": {"configMapName": "Bad_Name"}},
     "spec.migrations.configMapName: Invalid value: \"Bad_Name\": must be a DNS-1123 subdomain"),
    ("paused-not-boolean", {"spec.paused": "yes"}, "spec.paused: Invalid value: \"string\""),
    ("upgrade-not-boolean", {"spec.upgrade": {"backupBeforeMinor": "no"}},
     "spec.upgrade.backupBeforeMinor: Invalid value: \"string\""),
    ("unknown-field", {"spec.hibernate": True}, 'unknown field "spec.hibernate"'),
]

INVALID_BACKUPS: list[tuple[str, dict[str, Any], str]] = [
    ("database-missing", {"spec.database": DELETE}, "spec.database: Required value"),
    ("database-too-long", {"spec.database": "a" * 64}, "spec.database: Too long"),
    ("database-not-a-label", {"spec.database": "my.db"}, "must be a DNS-1035 label"),
    ("reason-unknown", {"spec.reason": "because"}, 'spec.reason: Unsupported value: "because"'),
    ("claim-name-invalid", {"spec.storage": {"claimName": "No_Such"}}, "must be a DNS-1123 subdomain"),
]


def test_invalid_table_is_large_enough() -> None:
    assert len(INVALID_SAMPLEDBS) >= 30


@pytest.mark.parametrize(("changes", "message"), [c[1:] for c in INVALID_SAMPLEDBS],
                         ids=[c[0] for c in INVALID_SAMPLEDBS])
def test_invalid_sampledb_is_rejected_with_a_clear_message(
    kubeconfig: str, changes: dict[str, Any], message: str
) -> None:
    proc = create(variant(VALID, changes), "default", dry_run=True)
    assert proc.returncode != 0, f"accepted: {proc.stdout}"
    assert message in proc.stderr, proc.stderr


@pytest.mark.parametrize(("changes", "message"), [c[1:] for c in INVALID_BACKUPS],
                         ids=[c[0] for c in INVALID_BACKUPS])
def test_invalid_backup_is_rejected_with_a_clear_message(
    kubeconfig: str, changes: dict[str, Any], message: str
) -> None:
    proc = create(variant(VALID_BACKUP, changes), "default", dry_run=True)
    assert proc.returncode != 0, f"accepted: {proc.stdout}"
    assert message in proc.stderr, proc.stderr


# ------------------------------------------------------------------------------------ hostile input (issue #12)
# The same table as tests/unit/model/test_refused_input.py, which checks validate_spec's side.


@pytest.mark.parametrize("case", HOSTILE_SAMPLEDBS, ids=[c.id for c in HOSTILE_SAMPLEDBS])
def test_hostile_sampledb_is_refused_at_admission(kubeconfig: str, case: Case) -> None:
    proc = create(variant(VALID, case.changes), "default", dry_run=True)
    assert proc.returncode != 0, f"accepted: {proc.stdout}"
    assert case.message in proc.stderr, proc.stderr
    assert case.field in proc.stderr, proc.stderr


@pytest.mark.parametrize("changes", [c[1] for c in ACCEPTED_SAMPLEDBS], ids=[c[0] for c in ACCEPTED_SAMPLEDBS])
def test_boundary_sampledb_is_accepted(kubeconfig: str, changes: dict[str, Any]) -> None:
    proc = create(variant(VALID, changes), "default", dry_run=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", [n for _, n in HOSTILE_BACKUP_NAMES], ids=[i for i, _ in HOSTILE_BACKUP_NAMES])
def test_backup_name_the_backup_script_refuses_is_refused_at_admission(kubeconfig: str, name: str) -> None:
    proc = create(variant(VALID_BACKUP, {"metadata.name": name}), "default", dry_run=True)
    assert proc.returncode != 0, f"accepted: {proc.stdout}"
    assert "metadata.name: Invalid value" in proc.stderr and BACKUP_NAME_MESSAGE in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", [n for _, n in ACCEPTED_BACKUP_NAMES], ids=[i for i, _ in ACCEPTED_BACKUP_NAMES])
def test_backup_name_the_backup_script_accepts_is_accepted(kubeconfig: str, name: str) -> None:
    proc = create(variant(VALID_BACKUP, {"metadata.name": name}), "default", dry_run=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("where", ["spec.storage.size", "spec.resources"])
def test_a_quantity_with_a_huge_exponent_is_refused_at_once(kubeconfig: str, where: str) -> None:
    """Without the format check first, isQuantity()/quantity() on "1e-2147483648" kept the API server
    busy for minutes (after the request itself had timed out)."""
    value = "1e-2147483648"
    changes = {where: value} if where == "spec.storage.size" else {where: {"requests": {"memory": value}}}
    start = time.monotonic()
    proc = create(variant(VALID, changes), "default", dry_run=True)
    assert proc.returncode != 0 and "decimal exponent" in proc.stderr, proc.stderr
    assert time.monotonic() - start < 5


def test_real_create_rejects_like_the_dry_run(namespace: str) -> None:
    proc = create(variant(VALID, {"spec.version": "12.9"}), namespace)
    assert proc.returncode != 0
    assert "the major version must be one of 13, 14, 15, 16, 17, 18" in proc.stderr
    assert kubectl("get", "sdb", "-n", namespace, "-o", "name").stdout.strip() == ""


def test_valid_base_manifest_gets_the_model_defaults(namespace: str) -> None:
    assert create(VALID, namespace).returncode == 0
    stored = kubectl_json("get", "sdb", "db", "-n", namespace)
    assert stored["spec"] == dump(SampleDBSpec.model_validate(VALID["spec"]))
    assert stored["spec"]["deletionPolicy"] == "Snapshot"
    assert stored["spec"]["upgrade"] == {"backupBeforeMinor": True, "method": "Link"}


# ------------------------------------------------------------------------------------ updates


def _patch(namespace: str, spec_patch: dict[str, Any], name: str = "db", kind: str = "sdb") -> Any:
    return kubectl("patch", kind, name, "-n", namespace, "--type", "merge",
                   "-p", json.dumps({"spec": spec_patch}), check=False)


REJECTED_UPDATES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("storage-shrinks", {}, {"storage": {"size": "512Mi"}},
     "storage size can only grow: cannot shrink from 1Gi to 512Mi"),
    ("storage-shrinks-as-integer", {}, {"storage": {"size": 2**29}}, "storage size can only grow"),
    ("storage-class-set-later", {}, {"storage": {"storageClassName": "fast"}},
     "spec.storage.storageClassName: Forbidden: storageClassName is immutable"),
    ("storage-class-changed", {"spec.storage.storageClassName": "standard"},
     {"storage": {"storageClassName": "fast"}}, "storageClassName is immutable"),
    ("storage-class-removed", {"spec.storage.storageClassName": "standard"},
     {"storage": {"storageClassName": None}}, "storageClassName is immutable"),
    ("backup-storage-shrinks", {"spec.backup.storage": {"size": "2Gi"}}, {"backup": {"storage": {"size": "1Gi"}}},
     "backup storage size can only grow: cannot shrink from 2Gi to 1Gi"),
    ("major-downgrade", {}, {"version": "15.8"},
     "major-version downgrade from 16.4 to 15.8 is not allowed; restore a backup into a new SampleDB instead"),
    ("restore-added-later", {}, {"restore": {"backupName": "db-manual-1"}},
     "spec.restore: Forbidden: restore can only be set when the SampleDB is created"),
    ("restore-changed", {"spec.restore": {"backupName": "a"}}, {"restore": {"backupName": "b"}},
     "restore can only be set when the SampleDB is created"),
]


@pytest.mark.parametrize(("initial", "spec_patch", "message"), [c[1:] for c in REJECTED_UPDATES],
                         ids=[c[0] for c in REJECTED_UPDATES])
def test_forbidden_update_is_rejected_and_nothing_changes(
    namespace: str, initial: dict[str, Any], spec_patch: dict[str, Any], message: str
) -> None:
    assert create(variant(VALID, initial), namespace).returncode == 0
    before = kubectl_json("get", "sdb", "db", "-n", namespace)
    proc = _patch(namespace, spec_patch)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    after = kubectl_json("get", "sdb", "db", "-n", namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_allowed_updates_are_stored(namespace: str) -> None:
    assert create(variant(VALID, {"spec.restore": {"backupName": "a"}}), namespace).returncode == 0
    steps: list[dict[str, Any]] = [
        {"storage": {"size": "2Gi"}},           # grow
        {"storage": {"size": 3 * 2**30}},       # grow, as an integer
        {"version": "16.2"},                    # minor downgrade: same binaries, allowed
        {"version": "18.1"},                    # major upgrade, skipping one
        {"restore": None},                      # dropping restore after creation
        {"backup": {"schedule": "@daily", "retention": 3}},
    ]
    for step in steps:
        proc = _patch(namespace, step)
        assert proc.returncode == 0, f"{step}: {proc.stderr}"
    spec = SampleDBSpec.model_validate(kubectl_json("get", "sdb", "db", "-n", namespace)["spec"])
    assert spec.storage.size == 3 * 2**30
    assert spec.version == "18.1" and spec.restore is None
    assert spec.backup.schedule == "@daily" and spec.backup.retention == 3


def test_backup_spec_cannot_change(namespace: str) -> None:
    assert create(VALID_BACKUP, namespace).returncode == 0
    proc = _patch(namespace, {"reason": "pre-upgrade"}, name="db-manual-1", kind="sdbb")
    assert proc.returncode != 0
    assert "spec is immutable; create a new SampleDBBackup instead" in proc.stderr


# ------------------------------------------------------------------------------------ samples


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_sample_is_accepted_and_stored_as_the_model_reads_it(namespace: str, path: Path) -> None:
    kubectl("apply", "-n", namespace, "-f", str(path))
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] == "SampleDB":
            stored = kubectl_json("get", "sdb", doc["metadata"]["name"], "-n", namespace)
            assert SampleDB.model_validate(stored).spec == SampleDB.model_validate(doc).spec
        elif doc["kind"] == "SampleDBBackup":
            stored = kubectl_json("get", "sdbb", doc["metadata"]["name"], "-n", namespace)
            assert SampleDBBackup.model_validate(stored).spec == SampleDBBackup.model_validate(doc).spec


# ------------------------------------------------------------------------------------ kubectl UX


def test_get_sdb_shows_version_phase_ready_storage_last_backup_age(namespace: str) -> None:
    assert create(VALID, namespace).returncode == 0
    status = {
        "phase": "Running",
        "currentVersion": "16.4",
        "endpoint": f"db.{namespace}.svc:5432",
        "conditions": [{"type": "Ready", "status": "True", "reason": "DatabaseReady", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "lastBackup": {"name": "db-scheduled-1", "completedAt": "2026-01-01T00:00:00Z"},
        "readyInstances": "1/1", "primary": "db-0",
    }
    kubectl("patch", "sdb", "db", "-n", namespace, "--subresource=status", "--type", "merge",
            "-p", json.dumps({"status": status}))
    header, row = kubectl("get", "sdb", "-n", namespace).stdout.strip().splitlines()
    assert header.split() == ["NAME", "VERSION", "PHASE", "READY", "INSTANCES", "PRIMARY", "STORAGE", "LAST", "BACKUP",
                              "AGE"]
    assert row.split()[:7] == ["db", "16.4", "Running", "True", "1/1", "db-0", "1Gi"]
    wide_header = kubectl("get", "sdb", "-n", namespace, "-o", "wide").stdout.splitlines()[0].split()
    assert wide_header[-3:] == ["CURRENT", "ENDPOINT", "UPGRADE"]
    stored = SampleDB.model_validate(kubectl_json("get", "sdb", "db", "-n", namespace))
    assert stored.status.phase == "Running" and stored.status.conditions[0].reason == "DatabaseReady"


def test_get_sdbb_shows_database_reason_phase_size_age(namespace: str) -> None:
    assert create(VALID_BACKUP, namespace).returncode == 0
    kubectl("patch", "sdbb", "db-manual-1", "-n", namespace, "--subresource=status", "--type", "merge",
            "-p", json.dumps({"status": {"phase": "Succeeded", "sizeBytes": 4096}}))
    header, row = kubectl("get", "sdbb", "-n", namespace).stdout.strip().splitlines()
    assert header.split() == ["NAME", "DATABASE", "REASON", "PHASE", "SIZE", "VERIFIED", "AGE"]
    assert row.split()[:5] == ["db-manual-1", "db", "manual", "Succeeded", "4096"]


def test_explain_shows_field_descriptions(kubeconfig: str) -> None:
    def explained() -> str | None:
        proc = kubectl("explain", "sampledb.spec.storage", check=False)
        return proc.stdout if proc.returncode == 0 and "storageClassName" in proc.stdout else None

    text = wait_until(explained, timeout=60, what="the SampleDB schema in the published OpenAPI")
    text = " ".join(text.split())  # kubectl explain wraps descriptions
    assert "The data volume." in text
    assert "Size of the data volume" in text
    assert "Immutable after creation" in text


def test_kubectl_edit_with_a_scripted_editor_stores_the_change(namespace: str, tmp_path: Path) -> None:
    assert create(VALID, namespace).returncode == 0
    editor = _editor(tmp_path, size="2Gi")
    kubectl("edit", "sdb", "db", "-n", namespace, env={"EDITOR": str(editor)})
    stored = kubectl_json("get", "sdb", "db", "-n", namespace)
    assert stored["spec"]["storage"]["size"] == "2Gi"
    assert stored["metadata"]["generation"] == 2


def test_kubectl_edit_that_breaks_a_rule_is_refused_with_the_reason(namespace: str, tmp_path: Path) -> None:
    assert create(VALID, namespace).returncode == 0
    editor = _editor(tmp_path, size="512Mi")
    # a refused edit leaves "a copy of your changes" in $TMPDIR: the test's own directory, not /tmp
    proc = kubectl("edit", "sdb", "db", "-n", namespace, env={"EDITOR": str(editor), "TMPDIR": str(tmp_path)},
                   check=False)
    assert proc.returncode != 0
    copies = [copy.read_text() for copy in tmp_path.glob("kubectl-edit-*.yaml")]  # one per editor round
    assert copies and all("size: 512Mi" in copy for copy in copies)
    seen = (tmp_path / "seen.log").read_text()  # kubectl re-opens the file with the errors as comments
    assert "storage size can only grow: cannot shrink from 1Gi to 512Mi" in seen
    assert kubectl_json("get", "sdb", "db", "-n", namespace)["spec"]["storage"]["size"] == "1Gi"


def _editor(tmp_path: Path, *, size: str) -> Path:
    """An $EDITOR that sets spec.storage.size and logs every file kubectl hands it."""
    script = tmp_path / "editor.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, yaml\n"
        "path = sys.argv[-1]\n"
        "text = open(path).read()\n"
        f"open({str(tmp_path / 'seen.log')!r}, 'a').write(text)\n"
        "doc = yaml.safe_load(text)\n"
        f"doc['spec']['storage']['size'] = {size!r}\n"
        "open(path, 'w').write(yaml.safe_dump(doc))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


# ------------------------------------------------------------------------------------ round trip

_names = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=specs)
def test_spec_round_trips_through_the_api_server_unchanged(namespace: str, spec: SampleDBSpec) -> None:
    name = f"rt-{next(_names)}"
    obj = {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": name},
           "spec": dump(spec)}
    proc = create(obj, namespace)
    assert proc.returncode == 0, proc.stderr
    stored = kubectl_json("get", "sdb", name, "-n", namespace)
    assert SampleDBSpec.model_validate(stored["spec"]) == spec
    assert stored["spec"] == dump(spec)
