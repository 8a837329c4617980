"""The import direction of docs/architecture.md, checked on the source (the top-level modules and decide/'s
concerns included); decide/ without module-level state.

cli/app -> reconcilers -> runtime -> kube -> model; reconcilers -> decide -> model;
plugin (kubectl sampledb) -> kube, decide, model; observability is a leaf every layer may use.
chaos (the chaos command, beside the operator like the plugin) -> kube, decide, model; reconcilers -> chaos
(the annotation's one-off fault). kubernetes_asyncio is imported only by kube/, psycopg only by pg/; model/,
decide/ and the planning modules of chaos/ do no I/O (no asyncio, aiohttp or kubernetes_asyncio).
"""

from __future__ import annotations

import ast
import re
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


# the top-level modules: what each may import of the package (app and sharded wire the operator together)
TOP_LEVEL: dict[str, set[str]] = {
    "__init__.py": set(),
    "__main__.py": {"cli"},
    "config.py": set(),  # the settings: a leaf, read by the commands
    "cli.py": {"config", "app", "chaos", "model", "observability"},  # app, chaos and model on first use
    "app.py": {"config", "sharded", "reconcilers", "runtime", "kube", "decide", "model", "observability"},
    "sharded.py": {"config", "reconcilers", "runtime", "kube", "decide", "model", "observability"},
}


def _package_imports(path: Path) -> set[str]:
    """The package's modules or layers `path` imports ("sampledb_operator" itself for its version)."""
    out = set()
    for name in _imports(path):
        parts = name.split(".")
        if parts[0] == "sampledb_operator":
            out.add(parts[1].removesuffix(".py") if len(parts) > 1 else "sampledb_operator")
    return out


@pytest.mark.parametrize("name", sorted(TOP_LEVEL))
def test_top_level_modules_import_only_what_they_wire(name: str) -> None:
    text = (PKG / name).read_text()
    lazy = {m.split(".")[1] for m in re.findall(r'import_module\("(sampledb_operator\.[\w.]+)"\)', text)}
    found = (_package_imports(PKG / name) | lazy) - {"sampledb_operator"}
    assert found <= TOP_LEVEL[name], sorted(found - TOP_LEVEL[name])


def test_every_top_level_module_has_its_rule() -> None:
    assert {p.name for p in PKG.glob("*.py")} == set(TOP_LEVEL)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_layer_imports_the_modules_that_wire_the_operator(path: Path) -> None:
    """A layer may read the settings (config.py); the modules that wire the operator import the layers, never
    the other way round."""
    if _layer(path) is None:
        return
    assert not _package_imports(path) & {"app", "sharded", "cli", "__main__"}


def test_decide_concerns_do_not_import_each_other_both_ways() -> None:
    """decide/'s sub-packages (children, lifecycle, replicas, upgrades, backup, sql) are concerns: one may read
    another, never both ways, so each can be read from the ones below it."""
    decide = PKG / "decide"
    concerns = {p.name for p in decide.iterdir() if (p / "__init__.py").is_file()}
    edges = set()
    for concern in concerns:
        for path in (decide / concern).rglob("*.py"):
            for name in _imports(path):
                parts = name.split(".")
                if parts[:2] == ["sampledb_operator", "decide"] and len(parts) > 2 and parts[2] in concerns \
                        and parts[2] != concern:
                    edges.add((concern, parts[2]))
    assert concerns >= {"children", "lifecycle", "replicas", "upgrades", "backup", "sql"}
    assert not {(a, b) for a, b in edges if (b, a) in edges}, sorted(edges)
