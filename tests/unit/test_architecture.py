"""The import direction of docs/architecture.md, checked on the source; and decide/ without module-level state.

cli/app -> reconcilers -> runtime -> kube -> model; reconcilers -> decide -> model;
plugin (kubectl sampledb) -> kube, decide, model; observability is a leaf every layer may use.
chaos (the chaos command, beside the operator like the plugin) -> kube, decide, model; reconcilers -> chaos
(the annotation's one-off fault). kubernetes_asyncio is imported only by kube/, psycopg only by pg/; model/,
decide/ and the planning modules of chaos/ do no I/O (no asyncio, aiohttp or kubernetes_asyncio).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "operator" / "sampledb_operator"

# layer -> the package layers it may import (itself always allowed)
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "decide": {"model", "pki"},
    # X.509: issuing and reading certificates (the cryptography library only here)
    "pki": set(),
    "kube": {"model", "observability"},
    "runtime": {"kube", "model", "observability"},
    "reconcilers": {"runtime", "kube", "decide", "model", "observability", "dataplane", "chaos", "pg",
                    "pki"},
    # the operator's own SQL to the databases (psycopg only here)
    "pg": {"model", "observability"},
    "observability": set(),
    "dataplane": set(),
    # the kubectl plugin: a client of the API like kubectl, beside the operator, never inside it
    "plugin": {"kube", "model", "decide", "observability"},
    # failure simulation: a client of the API like the plugin; never runtime or reconcilers
    "chaos": {"kube", "model", "decide", "observability"},
}
# modules outside model/ and decide/ that must stay pure as well
PURE_MODULES = {"chaos/faults.py", "chaos/plan.py", "chaos/report.py", "pki/certs.py"}
IO_MODULES = {"asyncio", "aiohttp", "kubernetes_asyncio", "socket", "subprocess", "requests"}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py"))


def _layer(path: Path) -> str | None:
    rel = path.relative_to(PKG).parts
    return rel[0] if len(rel) > 1 else None


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against the module's package
                base = list(path.relative_to(PKG).parent.parts)
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                names.append(".".join(["sampledb_operator", *base, *([node.module] if node.module else [])]))
            elif node.module:
                names.append(node.module)
    return names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_module_imports_follow_the_layer_direction(path: Path) -> None:
    layer = _layer(path)
    rel = path.relative_to(PKG).as_posix()
    bad: list[str] = []
    for name in _imports(path):
        top = name.split(".")[0]
        if top == "kubernetes_asyncio" and layer != "kube":
            bad.append(f"{name} (only kube/ may import kubernetes_asyncio)")
        if top == "psycopg" and layer != "pg":
            bad.append(f"{name} (only pg/ may import psycopg)")
        if (layer in ("model", "decide") or rel in PURE_MODULES) and top in IO_MODULES:
            bad.append(f"{name} ({rel} is pure: no I/O modules)")
        if not name.startswith("sampledb_operator.") or layer is None:
            continue
        target = name.split(".")[1]
        if target == layer or target not in ALLOWED:
            continue
        if target not in ALLOWED.get(layer, set()):
            bad.append(f"{name} ({layer}/ must not import {target}/)")
    assert not bad, "\n".join(bad)


def test_the_source_root_is_not_a_package_named_operator() -> None:
    assert not (PKG.parent / "__init__.py").exists()


def test_the_pure_modules_named_exist() -> None:
    assert all((PKG / rel).is_file() for rel in PURE_MODULES), PURE_MODULES


MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "bytearray"}


def _module_state(path: Path) -> list[str]:
    """Module-level names of `path` bound to a mutable container, and functions memoized by functools."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if ast.unparse(target) == "__all__":
                continue
            value = node.value
            if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp) or (
                    isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in MUTABLE_CALLS):
                found.append(f"{ast.unparse(target)} (line {node.lineno})")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found += [f"{node.name} memoized by {ast.unparse(d)} (line {node.lineno})" for d in node.decorator_list
                      if any(w in ast.unparse(d) for w in ("lru_cache", "functools.cache", "cached_property"))]
    return found


@pytest.mark.parametrize("path", sorted((PKG / "decide").rglob("*.py")), ids=lambda p: p.name)
def test_decide_holds_no_module_level_state(path: Path) -> None:
    """A decision depends on its arguments only: no module-level dict, list or set (a constant table is a
    MappingProxyType, a frozenset or a tuple) and no functools memo; a memo a measurement justifies is held by an
    object its owner makes (e.g. decide/cache.Compactor, a store's transform)."""
    assert _module_state(path) == [], f"{path.relative_to(PKG)} keeps state at module level"


MAX_MODULE_LINES = 400


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_of_the_package_is_over_400_lines(path: Path) -> None:
    """Small modules: one role each, read in one sitting; a larger one is split by concern."""
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(PKG)} has {lines} lines: split it by concern"
