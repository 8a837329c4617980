"""docs/security.md's RBAC tables are the shipped roles, rule for rule.

Shipped: every Role and ClusterRole in a YAML file under manifests/ (manifests/rbac, the namespaced
overlay's release-finalizers.yaml, ...), and the rules a kustomize component or overlay appends to
one of them with a JSON patch (`op: add`, `path: /rules/-`: manifests/components/chaos). Documented:
each table whose header is `| API group | Resources | Verbs | For |`, named by the paragraph before it, which starts
"**ClusterRole `name`**" or "**Role `name`**", followed by ", added by `<component directory>`" for the
rules a component appends. The test fails on a role, a rule or a verb on one side only, and on a patch
of a role it does not understand (so that a new way of granting cannot slip past it). No cluster and
no kustomize: the files are read as YAML.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
DOC = REPO / "docs" / "security.md"
ROLE_KINDS = {"Role", "ClusterRole"}
HEADER = "| API group | Resources | Verbs | For |"
CAPTION = re.compile(r"^\*\*(?P<kind>ClusterRole|Role) `(?P<name>[a-z0-9.-]+)`(?:, added by `(?P<by>[^`]+)`)?\*\*")
KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")

Triple = tuple[str, str, str]  # (API group, resource[/subresource], verb)
Key = tuple[str, str, str]  # (kind, name, "" for the shipped role or the directory of the component adding rules)


def _rule_triples(rules: list[dict[str, Any]], where: str) -> set[Triple]:
    out: set[Triple] = set()
    for rule in rules:
        assert set(rule) <= {"apiGroups", "resources", "verbs"}, f"{where}: a rule this test does not read: {rule}"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    out.add((group, resource, verb))
    return out


def _yaml_files() -> Iterator[Path]:
    for path in sorted(MANIFESTS.rglob("*")):
        if path.is_file() and (path.suffix in {".yaml", ".yml"} or path.name == "Kustomization"):
            yield path


def _documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _kustomization_patches(path: Path) -> Iterator[tuple[dict[str, Any], Any]]:
    """(target, patch content) of each patch of a kustomization; content is the parsed patch."""
    [doc] = _documents(path)
    for entry in list(doc.get("patches") or []) + list(doc.get("patchesJson6902") or []):
        content = yaml.safe_load(entry["patch"]) if "patch" in entry else yaml.safe_load(
            (path.parent / entry["path"]).read_text())
        yield dict(entry.get("target") or {}), content
    for rel in doc.get("patchesStrategicMerge") or []:
        yield {}, yaml.safe_load((path.parent / rel).read_text())


def shipped_roles() -> dict[Key, set[Triple]]:
    """Every role under manifests/ and every set of rules a kustomization appends to one."""
    roles: dict[Key, set[Triple]] = {}
    for path in _yaml_files():
        rel = path.relative_to(REPO).as_posix()
        if path.name in KUSTOMIZATIONS:
            for target, content in _kustomization_patches(path):
                touches_role = target.get("kind") in ROLE_KINDS or (
                    isinstance(content, dict) and content.get("kind") in ROLE_KINDS)
                if not touches_role:
                    continue
                where = f"{rel}: patch of {target.get('kind')} {target.get('name')}"
                appends = isinstance(content, list) and all(
                    isinstance(op, dict) and op.get("op") == "add" and op.get("path") == "/rules/-" for op in content)
                assert appends, f"{where}: only JSON patches that append rules (add /rules/-) are understood"
                key = (str(target["kind"]), str(target["name"]), path.parent.relative_to(REPO).as_posix())
                roles.setdefault(key, set()).update(_rule_triples([op["value"] for op in content], where))
            continue
        for doc in _documents(path):
            if isinstance(doc, dict) and doc.get("kind") in ROLE_KINDS:
                key = (doc["kind"], doc["metadata"]["name"], "")
                assert key not in roles, f"{rel}: {key[0]} {key[1]} is defined twice under manifests/"
                roles[key] = _rule_triples(doc.get("rules") or [], f"{rel}: {key[0]} {key[1]}")
    return roles


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _names(cell: str, where: str) -> list[str]:
    names = re.findall(r"`([^`]+)`", cell)
    assert names and re.sub(r"`[^`]+`|,|\s", "", cell) == "", f"{where}: resources as `name`, `name`: {cell!r}"
    return names


def documented_roles(text: str) -> dict[Key, set[Triple]]:
    """The RBAC tables of the document, by the role their caption names."""
    lines = text.splitlines()
    roles: dict[Key, set[Triple]] = {}
    for i, line in enumerate(lines):
        if line.strip() != HEADER:
            continue
        end = next((j for j in range(i - 1, -1, -1) if lines[j].strip()), 0)  # the paragraph before the table
        start = next((j + 1 for j in range(end, -1, -1) if not lines[j].strip()), 0)
        caption = lines[start]  # its first line
        match = CAPTION.match(caption.strip())
        assert match, f"docs/security.md line {i + 1}: an RBAC table needs a caption **Role `name`** before it"
        key = (match["kind"], match["name"], (match["by"] or "").rstrip("/"))
        assert key not in roles, f"docs/security.md line {i + 1}: a second table for {key}"
        triples: set[Triple] = set()
        for n in range(i + 2, len(lines)):
            row = lines[n]
            if not row.strip().startswith("|"):
                break
            where = f"docs/security.md line {n + 1}"
            group_cell, resources_cell, verbs_cell, _for = _cells(row)
            group = "" if group_cell == "core" else group_cell.strip("`")
            assert group_cell in {"core", f"`{group}`"}, f"{where}: group as `group` or core"
            verbs = [v.strip() for v in verbs_cell.split(",")]
            assert all(re.fullmatch(r"[a-z]+", v) for v in verbs), f"{where}: verbs as `a, b`: {verbs_cell!r}"
            triples.update((group, r, v) for r in _names(resources_cell, where) for v in verbs)
        roles[key] = triples
    return roles


def test_the_manifests_hold_the_roles_this_test_expects() -> None:
    roles = shipped_roles()
    assert ("ClusterRole", "sampledb-operator", "") in roles
    assert ("ClusterRole", "sampledb-operator", "manifests/components/chaos") in roles


def test_the_chaos_grants_are_not_in_the_base_role() -> None:
    roles = shipped_roles()
    base = roles["ClusterRole", "sampledb-operator", ""]
    chaos = roles["ClusterRole", "sampledb-operator", "manifests/components/chaos"]
    assert chaos == {("", "pods/exec", "get"), ("", "pods/exec", "create"), ("batch", "jobs", "delete")}
    assert not base & chaos
    assert not any(resource == "pods/exec" for _, resource, _ in base)


def differences(doc_text: str) -> list[str]:
    """What differs between the document's tables and the shipped roles, one line each."""
    shipped, documented = shipped_roles(), documented_roles(doc_text)
    problems = []
    for key in sorted(set(shipped) | set(documented)):
        label = f"{key[0]} {key[1]}" + (f" added by {key[2]}" if key[2] else "")
        if key not in documented:
            problems.append(f"{label}: shipped, no table in docs/security.md")
        elif key not in shipped:
            problems.append(f"{label}: a table in docs/security.md, not shipped")
        else:
            problems.extend(f"{label}: {t} granted, not in the table" for t in sorted(shipped[key] - documented[key]))
            problems.extend(f"{label}: {t} in the table, not granted" for t in sorted(documented[key] - shipped[key]))
    return problems


def test_the_security_doc_tables_are_the_shipped_roles() -> None:
    problems = differences(DOC.read_text())
    assert problems == [], "docs/security.md differs from manifests/:\n" + "\n".join(problems)


@pytest.mark.parametrize(("old", "new", "complaint"), [
    ("| core | `pods/log` | get |", "| core | `pods/log` | get, list |",
     "ClusterRole sampledb-operator: ('', 'pods/log', 'list') in the table, not granted"),
    ("| `batch` | `jobs` | delete |", "| `batch` | `jobs` | list |",
     "added by manifests/components/chaos: ('batch', 'jobs', 'delete') granted, not in the table"),
    ("**Role `sampledb-operator-leader-election`**", "**Role `sampledb-operator-leases`**",
     "Role sampledb-operator-leader-election: shipped, no table"),
])
def test_a_drifted_table_is_named(old: str, new: str, complaint: str) -> None:
    text = DOC.read_text()
    assert text.count(old) == 1, f"{old!r} is not in docs/security.md once: update this test with the document"
    problems = differences(text.replace(old, new))
    assert any(complaint in line for line in problems), problems
