"""The generated CRDs: committed copies are current, schemas are structural, rules are affordable."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sampledb_operator.model import crd, reference
from sampledb_operator.model.names import MAX_NAME_LENGTH
from sampledb_operator.model.sampledb import CRON_RE, PARAMETER_NAME_RE, SUPPORTED_MAJORS, VERSION_RE

REPO = Path(__file__).resolve().parents[3]
INT_OR_STRING_ANYOF = [{"type": "integer"}, {"type": "string"}]


def _schema(kind: str) -> dict[str, Any]:
    info = next(k for k in crd.KINDS if k.kind == kind)
    return crd.openapi_schema(info)


def _nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, prop in node.get("properties", {}).items():
        yield from _nodes(prop, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")


ALL_NODES = [(kind, path, node) for kind in ("SampleDB", "SampleDBBackup") for path, node in _nodes(_schema(kind))]


# ------------------------------------------------------------------------------------ committed == generated


@pytest.mark.parametrize("rel", sorted(reference.generated_files()))
def test_committed_file_matches_the_models(rel: str) -> None:
    path = REPO / rel
    assert path.exists(), f"{rel} is missing: run `python hack/gen-crd.py`"
    assert path.read_text() == reference.generated_files()[rel], f"{rel} is stale: run `python hack/gen-crd.py`"


def test_generation_is_deterministic() -> None:
    assert reference.generated_files() == reference.generated_files()


def test_committed_crds_are_valid_yaml_crd_objects() -> None:
    for info in crd.KINDS:
        doc = yaml.safe_load((REPO / "manifests" / "crd" / info.file_name).read_text())
        assert doc["kind"] == "CustomResourceDefinition"
        assert doc["metadata"]["name"] == info.crd_name


# ------------------------------------------------------------------------------------ structural schema


# Kubernetes' own types passed through to the instances' pods as given: the API server checks them when the
# StatefulSet is applied (a refusal is the SampleDB's ChildRejected). Nothing else keeps unknown fields.
PASSED_THROUGH = {"SampleDB.spec.scheduling.affinity", "SampleDB.spec.scheduling.topologySpreadConstraints[]"}


@pytest.mark.parametrize(("kind", "path", "node"), ALL_NODES, ids=[f"{k}{p or '.'}" for k, p, _ in ALL_NODES])
def test_every_node_is_structural(kind: str, path: str, node: dict[str, Any]) -> None:
    assert "$ref" not in node and "oneOf" not in node and "allOf" not in node and "not" not in node
    if f"{kind}{path}" in PASSED_THROUGH:
        assert {k: v for k, v in node.items() if k != "description"} == {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return
    assert "x-kubernetes-preserve-unknown-fields" not in node
    if node.get("x-kubernetes-int-or-string"):
        assert "type" not in node and node["anyOf"] == INT_OR_STRING_ANYOF
        return
    assert "anyOf" not in node
    assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}
    if node["type"] == "object":
        assert not ("properties" in node and "additionalProperties" in node)
        assert set(node.get("required", [])) <= set(node.get("properties", {}))
    if node["type"] == "array":
        assert "items" in node


@pytest.mark.parametrize(("kind", "path", "node"), ALL_NODES, ids=[f"{k}{p or '.'}" for k, p, _ in ALL_NODES])
def test_every_field_has_a_description(kind: str, path: str, node: dict[str, Any]) -> None:
    if path == ".metadata" or path.startswith(".metadata.") or path.endswith(("[]", "{}")):
        return
    assert node.get("description"), f"{kind}{path} has no description"


def _type_ok(value: Any, node: dict[str, Any]) -> bool:
    if node.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str)
    expected = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}[node["type"]]
    if expected is int and isinstance(value, bool):
        return False
    return isinstance(value, expected) and ("enum" not in node or value in node["enum"])


@pytest.mark.parametrize(("kind", "path", "node"), [n for n in ALL_NODES if "default" in n[2]],
                         ids=[f"{k}{p}" for k, p, n in ALL_NODES if "default" in n])
def test_defaults_have_the_node_type(kind: str, path: str, node: dict[str, Any]) -> None:
    assert _type_ok(node["default"], node)
    if node["type"] == "object":
        assert node["default"] == {}, "object defaults are {} so nested defaults apply"
        assert not node.get("required"), "a defaulted object cannot have required fields"


def test_status_has_no_default() -> None:
    for kind in ("SampleDB", "SampleDBBackup"):
        assert "default" not in _schema(kind)["properties"]["status"]


# ------------------------------------------------------------------------------------ CEL affordability


def _bounded(node: dict[str, Any]) -> list[str]:
    """Unbounded strings/lists/maps inside `node` (CEL cost estimates need bounds)."""
    missing = []
    for path, n in _nodes(node):
        if n.get("x-kubernetes-int-or-string") or n.get("type") == "string":
            if "maxLength" not in n and "enum" not in n and n.get("format") != "date-time":
                missing.append(path or ".")
        elif (n.get("type") == "array" and "maxItems" not in n) or (
            n.get("type") == "object" and "additionalProperties" in n and "maxProperties" not in n
        ):
            missing.append(path or ".")
    return missing


@pytest.mark.parametrize(
    ("kind", "path", "node"),
    [n for n in ALL_NODES if n[2].get("x-kubernetes-validations") and n[1]],
    ids=[f"{k}{p}" for k, p, n in ALL_NODES if n.get("x-kubernetes-validations") and p],
)
def test_everything_a_cel_rule_touches_is_bounded(kind: str, path: str, node: dict[str, Any]) -> None:
    assert _bounded(node) == []


def test_transition_rules_are_not_inside_atomic_lists() -> None:
    for kind, path, node in ALL_NODES:
        if any("oldSelf" in r["rule"] for r in node.get("x-kubernetes-validations", [])):
            assert "[]" not in path, f"{kind}{path}: oldSelf cannot be correlated inside a list"


def test_every_rule_has_a_message() -> None:
    for _kind, _path, node in ALL_NODES:
        for rule in node.get("x-kubernetes-validations", []):
            assert rule["message"] and not rule["message"].endswith(" ")


# ------------------------------------------------------------------------------------ contents


def test_sampledb_crd_names_scope_and_subresource() -> None:
    spec = crd.crd_manifest(crd.SAMPLEDB)["spec"]
    assert spec["group"] == "sampledb.io" and spec["scope"] == "Namespaced"
    assert spec["names"] == {"kind": "SampleDB", "listKind": "SampleDBList", "plural": "sampledbs",
                             "singular": "sampledb", "shortNames": ["sdb"]}
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["storage"] and version["served"]
    assert version["subresources"] == {"status": {}}


def test_sampledb_printer_columns() -> None:
    columns = crd.crd_manifest(crd.SAMPLEDB)["spec"]["versions"][0]["additionalPrinterColumns"]
    always = [c["name"] for c in columns if not c.get("priority")]
    assert always == ["Version", "Phase", "Ready", "Instances", "Primary", "Storage", "Last Backup", "Age"]


def test_backup_crd_names_and_columns() -> None:
    spec = crd.crd_manifest(crd.SAMPLEDBBACKUP)["spec"]
    assert spec["names"]["plural"] == "sampledbbackups" and spec["names"]["shortNames"] == ["sdbb"]
    columns = spec["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns if not c.get("priority")] == ["Database", "Reason", "Phase", "Size", "Verified",
                                                                          "Age"]


def test_spec_has_every_field_of_the_issue() -> None:
    spec = _schema("SampleDB")["properties"]["spec"]
    assert set(spec["properties"]) >= {
        "version", "image", "storage", "resources", "parameters", "init", "backup", "deletionPolicy",
        "restore", "paused", "migrations", "upgrade",
    }
    assert spec["properties"]["deletionPolicy"]["enum"] == ["Snapshot", "Retain", "Delete"]
    assert spec["properties"]["deletionPolicy"]["default"] == "Snapshot"
    assert spec["properties"]["storage"]["properties"]["size"]["x-kubernetes-int-or-string"] is True


def test_status_has_every_field_of_the_issue() -> None:
    status = _schema("SampleDB")["properties"]["status"]
    assert set(status["properties"]) >= {
        "phase", "conditions", "observedGeneration", "currentVersion", "endpoint", "secretName",
        "lastBackup", "lastSnapshot", "appliedMigrations",
    }
    conditions = status["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_name_length_rule_uses_the_names_module_limit() -> None:
    rules = _schema("SampleDB")["x-kubernetes-validations"]
    assert any(r["rule"] == f"self.metadata.name.size() <= {MAX_NAME_LENGTH}" for r in rules)
    assert any(f"at most {MAX_NAME_LENGTH} characters" in r["message"] for r in rules)


def test_supported_majors_rule_uses_the_model_constant() -> None:
    version = _schema("SampleDB")["properties"]["spec"]["properties"]["version"]
    listed = ", ".join(str(m) for m in SUPPORTED_MAJORS)
    assert any(f"in [{listed}]" in r["rule"] for r in version["x-kubernetes-validations"])


def test_backup_spec_is_immutable() -> None:
    rules = _schema("SampleDBBackup")["properties"]["spec"]["x-kubernetes-validations"]
    assert {"rule": "self == oldSelf", "message": "spec is immutable; create a new SampleDBBackup instead"} in rules


# ------------------------------------------------------------------------------------ regexes inside CEL rules
# (RE2 and Python agree on these: no backreferences or lookarounds.)


@pytest.mark.parametrize("text", ["13.0", "16.4", "18.10", "99.99"])
def test_version_format_accepts(text: str) -> None:
    assert re.fullmatch(VERSION_RE, text)


@pytest.mark.parametrize("text", ["16", "16.4.1", "v16.4", "016.4", "16.04", "16.", ".4", "16 .4", "1e1.0"])
def test_version_format_rejects(text: str) -> None:
    assert not re.fullmatch(VERSION_RE, text)


@pytest.mark.parametrize("text", ["0 3 * * *", "*/15 * * * 1-5", "0 0 1 JAN,JUL *", "5  4 * * SUN", "@daily",
                                  "@hourly", "@weekly", "@monthly", "@yearly", "@annually", "0 0 L * *"])
def test_cron_format_accepts(text: str) -> None:
    assert re.fullmatch(CRON_RE, text)


@pytest.mark.parametrize("text", ["* * * *", "* * * * * *", "@every 5m", "@reboot", "daily", "0 3 * * *\n",
                                  " 0 3 * * *", "0 3 * * * ", "0;3 * * * *"])
def test_cron_format_rejects(text: str) -> None:
    assert not re.fullmatch(CRON_RE, text)


@pytest.mark.parametrize(("text", "ok"), [("shared_buffers", True), ("pg_stat_statements.max", True),
                                          ("Shared_Buffers", False), ("a b", False), ("x.", False)])
def test_parameter_name_format(text: str, ok: bool) -> None:
    assert bool(re.fullmatch(PARAMETER_NAME_RE, text)) is ok


# ------------------------------------------------------------------------------------ docs/reference.md


def test_reference_documents_every_field_with_its_default() -> None:
    reference = (REPO / "docs" / "reference.md").read_text().replace("&lt;", "<").replace("&gt;", ">")
    for kind in ("SampleDB", "SampleDBBackup"):
        for top in ("spec", "status"):
            for path, node in _nodes(_schema(kind)["properties"][top], top):
                for name, prop in node.get("properties", {}).items():
                    row = next((line for line in reference.splitlines()
                                if line.startswith(f"| `{name}` |") and prop["description"][:30] in line), None)
                    assert row is not None, f"{kind} {path}.{name} is not in docs/reference.md"
                    default_cell = row.split(" | ")[2]
                    assert default_cell.startswith("`") == ("default" in prop), row


def test_reference_lists_every_rule_message() -> None:
    reference = (REPO / "docs" / "reference.md").read_text().replace("&lt;", "<").replace("&gt;", ">")
    for _kind, _path, node in ALL_NODES:
        for rule in node.get("x-kubernetes-validations", []):
            assert rule["message"] in reference


def test_sizes_are_int_or_string_quantities_as_kubernetes_declares_them_and_say_so_for_kubectl_explain() -> None:
    """Issue #11, item 15: `kubectl explain` prints a field's type, and an int-or-string field of a CRD has
    none (it shows <Object>, as for controller-gen's quantities), so the description names what it is."""
    spec = _schema("SampleDB")["properties"]["spec"]["properties"]
    for node in (spec["storage"]["properties"]["size"], spec["backup"]["properties"]["storage"]["properties"]["size"]):
        assert node["x-kubernetes-int-or-string"] is True
        assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}]
        assert "type" not in node  # a structural int-or-string schema: no type of its own
        assert node["description"].startswith("Quantity (int-or-string: an integer, or a string such as 10Gi).")
