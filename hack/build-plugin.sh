#!/usr/bin/env bash
# Builds the kubectl plugin alone: the distribution `kubectl-sampledb`, without the operator.
#
# Usage: hack/build-plugin.sh [OUT_DIR]        (default: dist/ of the work tree)
#
# From this source tree, without installing or importing it: the modules the plugin imports
# (operator/sampledb_operator/plugin/ and, transitively, the parts of kube/, model/, decide/ and
# observability/ it uses; found by reading their import statements) are staged in a temporary
# folder with a generated pyproject.toml: name kubectl-sampledb, the version of the top-level
# pyproject.toml (the operator's; `kubectl-sampledb --version` reads it, plugin/version.py), the console script
# kubectl-sampledb, and as dependencies only the distributions those modules import, with the
# top-level pyproject.toml's bounds (prometheus-client among them: the API client counts its requests
# in observability/metrics.py; a small pure-Python package). kubernetes_asyncio, needed only
# for a kubeconfig user with a legacy auth-provider, is the extra `auth-provider`. A module of the
# plugin that starts importing anything else (croniter, psycopg, ...) fails this build, by name.
#
# Writes into OUT_DIR:
#   kubectl_sampledb-<version>-py3-none-any.whl   for pipx (or pip) on any platform
#   kubectl-sampledb-linux-amd64.tar.gz           for krew: a launcher `kubectl-sampledb` and
#       lib/cp3XY/, the wheel installed with its dependencies (pip install --target) for each
#       CPython of $PLUGIN_PYTHONS (default 3.11 3.12 3.13 3.14, linux x86_64 wheels). The
#       dependencies pydantic-core, aiohttp, orjson, PyYAML, ... are compiled, and Python cannot
#       import compiled modules out of a zip file, hence no zipapp. The launcher runs the
#       plugin with the first python3 on PATH of those versions ($KUBECTL_SAMPLEDB_PYTHON first).
#   sampledb.yaml                                 the krew manifest (plugin `sampledb`) for that
#       archive, at $PLUGIN_RELEASE_URL/kubectl-sampledb-linux-amd64.tar.gz, with its sha256
#
# Needs PyPI (the build backend setuptools, and the krew archive's dependencies; pip's cache
# keeps them). Environment: $PY, the Python that builds (default: the work tree's .venv/bin/python);
# $PLUGIN_PYTHONS; $PLUGIN_RELEASE_URL (default: the GitHub release v<version> of
# sampledb/sampledb-operator); $SOURCE_DATE_EPOCH, the files' time in the wheel and the archive
# (default: the last commit's), so that a rebuild with the same dependency versions gives the same bytes.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PY:-$repo/.venv/bin/python}
PLUGIN_PYTHONS=${PLUGIN_PYTHONS:-3.11 3.12 3.13 3.14}
out=${1:-$repo/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
archive_name=kubectl-sampledb-linux-amd64.tar.gz
tags=() pythons=()   # cp311 cp312 ...; python3.14 python3.13 ... (newest first: the launcher's order)
for python in $PLUGIN_PYTHONS; do
  [[ "$python" =~ ^3\.[0-9]+$ ]] || { echo "build-plugin: PLUGIN_PYTHONS: not a 3.N version: $python" >&2; exit 1; }
  tags+=("cp${python/./}")
  pythons=("python$python" "${pythons[@]}")
done
# Reproducible: the wheel's and the archive's times are this (default: the last commit's).
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 315532800)}
export SOURCE_DATE_EPOCH

tmp=$(mktemp -d "${TMPDIR:-/tmp}/build-plugin.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# -- stage the plugin's modules and write its pyproject.toml ---------------------------------------
version=$("$PY" - "$repo" "$tmp/src" <<'PYTHON'
import ast
import importlib.metadata
import json
import re
import shutil
import sys
import tomllib
from pathlib import Path

repo, stage = Path(sys.argv[1]), Path(sys.argv[2])
root = repo / "operator"
PACKAGE = "sampledb_operator"
ENTRY = f"{PACKAGE}.plugin"
# Imported only inside a function, for one rare case: an extra of the distribution, not a dependency.
EXTRAS = {"kubernetes_asyncio": "auth-provider"}


def fail(message: str) -> None:
    sys.exit(f"build-plugin: {message}")


def source(module: str) -> Path | None:
    path = root.joinpath(*module.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def imports(module: str, path: Path) -> list[tuple[str, bool]]:
    """(name, nested) of every import of a module; `from a import b` gives a and a.b."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(node) for node in tree.body}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__"):
            fail(f"{path.relative_to(repo)}:{node.lineno}: an import by name, which this build cannot follow")
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        found += [(name, id(node) not in top) for name in names]
    return found


def main() -> None:
    entry_dir = root.joinpath(*ENTRY.split("."))
    todo = [ENTRY] + [f"{ENTRY}.{p.stem}" for p in sorted(entry_dir.glob("*.py")) if p.stem != "__init__"]
    staged: dict[str, Path] = {}
    third: dict[str, dict[str, bool]] = {}  # top-level module -> {importing module: only nested}
    while todo:
        module = todo.pop()
        path = source(module)
        if module in staged or path is None:
            continue
        staged[module] = path
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # the packages above it
        for name, nested in imports(module, path):
            top = name.partition(".")[0]
            if top == PACKAGE:
                todo.append(name)
            elif top and top != "__future__" and top not in sys.stdlib_module_names:
                seen = third.setdefault(top, {})
                seen[module] = seen.get(module, True) and nested

    project = tomllib.loads((repo / "pyproject.toml").read_text())
    bounds = {canonical(requirement_name(r)): r for r in project["project"]["dependencies"]}
    distributions = importlib.metadata.packages_distributions()
    dependencies: list[str] = []
    extras: dict[str, list[str]] = {}
    for top, by in sorted(third.items()):
        names = distributions.get(top)
        if not names:
            fail(f"{top} (imported by {', '.join(sorted(by))}): no installed distribution provides it")
        requirement = next((bounds[canonical(n)] for n in names if canonical(n) in bounds), None)
        if requirement is None:
            fail(f"{top} (imported by {', '.join(sorted(by))}) is not a dependency in pyproject.toml")
        if top in EXTRAS:
            if not all(by.values()):
                fail(f"{top} is imported at module level by {', '.join(m for m, n in by.items() if not n)}")
            extras.setdefault(EXTRAS[top], []).append(requirement)
        else:
            dependencies.append(requirement)

    for module, path in staged.items():
        target = stage / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    shutil.copy2(repo / "LICENSE", stage / "LICENSE")
    packages = sorted(m for m, p in staged.items() if p.name == "__init__.py")
    meta = project["project"]
    version = meta["version"]
    (stage / "README.md").write_text(
        "# kubectl-sampledb\n\n`kubectl sampledb`, the kubectl plugin of sampledb-operator, installed alone:"
        " commands to operate the SampleDB PostgreSQL databases of a cluster (status, backup, restore, recover,"
        " psql, upgrade, switchover, logs, report, ...). `kubectl sampledb --help` lists them.\n")
    extras_toml = "".join(f"{json.dumps(k)} = {json.dumps(v)}\n" for k, v in sorted(extras.items()))
    (stage / "pyproject.toml").write_text(f"""\
# Generated by hack/build-plugin.sh from the top-level pyproject.toml: do not edit.
[build-system]
requires = {json.dumps(project["build-system"]["requires"])}
build-backend = {json.dumps(project["build-system"]["build-backend"])}

[project]
name = "kubectl-sampledb"
version = {json.dumps(version)}
description = "kubectl sampledb: the kubectl plugin of sampledb-operator, without the operator"
readme = "README.md"
requires-python = {json.dumps(meta["requires-python"])}
license = {json.dumps(meta["license"])}
dependencies = {json.dumps(dependencies)}

[project.optional-dependencies]
{extras_toml}
[project.scripts]
kubectl-sampledb = "{ENTRY}.cli:main"

[tool.setuptools]
packages = {json.dumps(packages)}
""")
    print(version)


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    if match is None:
        fail(f"cannot read the requirement {requirement!r} of pyproject.toml")
    return match.group(0)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


main()
PYTHON
)

# -- the wheel ----------------------------------------------------------------------------------------
rm -f "$out"/kubectl_sampledb-*.whl
"$PY" -m pip wheel --quiet --no-deps --wheel-dir "$out" "$tmp/src" >&2
wheel=$(echo "$out/kubectl_sampledb-$version-"*.whl)
[[ -f "$wheel" ]] || { echo "build-plugin: no wheel kubectl_sampledb-$version-*.whl in $out" >&2; exit 1; }
echo "built $wheel ($(du -k "$wheel" | cut -f1) KiB)" >&2

# -- the krew archive: the launcher, and the wheel with its dependencies for each Python ------------------
krew=$tmp/krew
mkdir -p "$krew/lib"
for python in $PLUGIN_PYTHONS; do
  tag=cp${python/./}
  "$PY" -m pip install --quiet --disable-pip-version-check --no-compile --target "$krew/lib/$tag" \
    --implementation cp --python-version "$python" --platform manylinux2014_x86_64 --only-binary=:all: \
    "$wheel" >&2
  # Not shipped: pip's console script (for the building Python; the launcher replaces it), and where the
  # wheel came from (a path of this machine).
  rm -rf "$krew/lib/$tag/bin"
  info=$krew/lib/$tag/kubectl_sampledb-$version.dist-info
  rm -f "$info/direct_url.json"
  sed -i -e '/^kubectl_sampledb-[^/]*\.dist-info\/direct_url\.json,/d' -e '/^\.\.\/\.\.\/bin\//d' "$info/RECORD"
done
cp "$repo/LICENSE" "$krew/LICENSE"
cat >"$krew/kubectl-sampledb" <<LAUNCHER
#!/bin/sh
# kubectl-sampledb $version (krew archive): the plugin with its dependencies in lib/cpXY beside this
# file, one folder per CPython version (${tags[*]}). It runs with the first of \$KUBECTL_SAMPLEDB_PYTHON,
# python3, python3.N on PATH that is one of those versions, isolated (-I: no PYTHONPATH, no user
# site-packages, not the current folder) so that nothing else shadows the plugin's modules, and
# nothing is set in the environment of the programs it starts (kubectl, psql, credential plugins).
set -eu
here=\$(dirname "\$(readlink -f "\$0")")
for python in \${KUBECTL_SAMPLEDB_PYTHON:-} python3 ${pythons[*]}; do
  command -v "\$python" >/dev/null 2>&1 || continue
  tag=\$("\$python" -I -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>/dev/null) || continue
  if [ -d "\$here/lib/\$tag" ]; then
    exec "\$python" -I -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from sampledb_operator.plugin.cli import main; sys.exit(main())' "\$here/lib/\$tag" "\$@"
  fi
done
echo "kubectl-sampledb: needs CPython (one of ${PLUGIN_PYTHONS// /, }) on PATH: python3, or \\\$KUBECTL_SAMPLEDB_PYTHON" >&2
exit 1
LAUNCHER
chmod 0755 "$krew/kubectl-sampledb"
# Reproducible: the same sources and dependency versions give the same bytes (names sorted, times and
# owners fixed, no time in the gzip header).
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -C "$krew" -cf - kubectl-sampledb LICENSE lib \
  | gzip -9 -n >"$out/$archive_name"
sha=$(sha256sum "$out/$archive_name" | cut -d' ' -f1)
echo "built $out/$archive_name ($(du -k "$out/$archive_name" | cut -f1) KiB, ${tags[*]})" >&2

# -- the krew manifest ------------------------------------------------------------------------------------
release_url=${PLUGIN_RELEASE_URL:-https://github.com/sampledb/sampledb-operator/releases/download/v$version}
cat >"$out/sampledb.yaml" <<MANIFEST
# Generated by hack/build-plugin.sh: krew's manifest of kubectl-sampledb v$version.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: sampledb
spec:
  version: v$version
  homepage: https://github.com/sampledb/sampledb-operator
  shortDescription: Operate SampleDB PostgreSQL databases
  description: |
    Operates the PostgreSQL databases that sampledb-operator runs (SampleDB resources): status,
    backup, restore, point-in-time recovery, psql, upgrade, pause and resume, switchover, logs
    and a support report.
  caveats: |
    Needs CPython (one of ${PLUGIN_PYTHONS// /, }) on PATH: python3, or \$KUBECTL_SAMPLEDB_PYTHON.
    \`kubectl sampledb psql\` also needs psql on PATH.
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: $release_url/$archive_name
    sha256: $sha
    bin: kubectl-sampledb
    files:
    - from: kubectl-sampledb
      to: .
    - from: lib
      to: .
    - from: LICENSE
      to: .
MANIFEST
echo "built $out/sampledb.yaml" >&2
