"""The kubectl plugin installed alone: hack/build-plugin.sh's wheel, krew archive and krew manifest.

The script is run once into a temporary folder; the wheel must hold the plugin and the modules it imports,
none of the operator's reconcilers, PostgreSQL driver or certificates, and depend on the plugin's
distributions only. It is installed into a fresh venv (its dependencies from PyPI) and the krew archive is
unpacked; both run `--version`, `--help` and one command against a stand-in API server (a 404 for every GET),
which goes through the kube client, and so through the no-op metrics of the plugin installed alone.
No cluster needed; PyPI is (the build backend and the dependencies; pip's cache keeps them).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import tomllib
import zipfile
from collections.abc import Iterator
from email.parser import HeaderParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
ARCHIVE = "kubectl-sampledb-linux-amd64.tar.gz"
BUILD_TIMEOUT = 900  # a cold pip cache downloads the dependencies for four Pythons
INSTALL_TIMEOUT = 600
RUN_TIMEOUT = 60

PLUGIN_DISTRIBUTIONS = {"aiohttp", "orjson", "prometheus-client", "pydantic", "pyyaml", "structlog"}
OPERATOR_ONLY_DISTRIBUTIONS = {"psycopg", "psycopg-binary", "cryptography", "zstandard",
                               "croniter", "kubernetes-asyncio"}
OPERATOR_ONLY_MODULES = {"psycopg", "cryptography", "zstandard", "croniter",
                         "kubernetes_asyncio"}
# What the plugin does not import: the operator's own parts, and the kube client's informers, events and exec.
NOT_IN_THE_WHEEL = ("reconcilers/", "runtime/", "pg/", "pki/", "chaos/", "dataplane/", "app.py", "cli.py",
                    "config.py", "sharded.py", "kube/events.py", "kube/exec.py",
                    "observability/health.py", "observability/database_metrics.py", "decide/plan.py",
                    "decide/children/desired_statefulset.py", "model/crd.py")


def run(*args: str | Path, env: dict[str, str] | None = None,
        timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False,
                          env=env)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plugin-dist")
    done = run(REPO / "hack" / "build-plugin.sh", out, timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"kubectl_sampledb-{VERSION}-py3-none-any.whl", ARCHIVE, "sampledb.yaml"])
    return out


@pytest.fixture(scope="module")
def wheel(built: Path) -> Path:
    return built / f"kubectl_sampledb-{VERSION}-py3-none-any.whl"


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv of the system's python3 with the wheel installed, its dependencies from PyPI."""
    python3 = shutil.which("python3")
    assert python3 is not None
    path = tmp_path_factory.mktemp("plugin-venv") / "venv"
    done = run(python3, "-m", "venv", path, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stderr
    started = time.monotonic()
    done = run(path / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel,
               timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stderr
    print(f"installed {wheel.name} with its dependencies in {time.monotonic() - started:.1f}s")
    return path


@pytest.fixture(scope="module")
def unpacked(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The krew archive unpacked, its launcher linked from another folder as krew links it."""
    root = tmp_path_factory.mktemp("plugin-krew")
    with tarfile.open(built / ARCHIVE) as archive:
        archive.extractall(root / "store", filter="data")
    (root / "bin").mkdir()
    (root / "bin" / "kubectl-sampledb").symlink_to(root / "store" / "kubectl-sampledb")
    return root


class _NotFound(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                           "code": 404, "message": 'sampledbs.sampledb.io "orders" not found'}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """A stand-in API server (plain HTTP, a 404 for every GET) and a kubeconfig for it: (kubeconfig, paths)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    server.paths = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path_factory.mktemp("plugin-kubeconfig") / "config"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "stand-in",
        "clusters": [{"name": "stand-in", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "someone", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "someone",
                                                      "namespace": "shop"}}],
    }))
    try:
        yield kubeconfig, server.paths  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def plugin_env() -> dict[str, str]:
    """The environment without this test run's Python settings (PYTHONPATH would reach the work tree)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "VIRTUAL_ENV"}


def check_runs(command: Path, api_server: tuple[Path, list[str]], env: dict[str, str]) -> None:
    """--version, --help, and `status` against the stand-in API server."""
    done = run(command, "--version", env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"kubectl-sampledb {VERSION}\n", "")
    done = run(command, "--help", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: kubectl sampledb") and "switchover" in done.stdout
    kubeconfig, paths = api_server
    before = len(paths)
    done = run(command, "status", "orders", "--kubeconfig", kubeconfig, env=env)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr == 'Error: sampledbs.sampledb.io "orders" not found (namespace shop)\n'
    assert paths[before:] == ["/apis/sampledb.io/v1alpha1/namespaces/shop/sampledbs/orders"]


# -- the wheel ------------------------------------------------------------------------------------------


def test_the_wheel_holds_the_plugin_and_what_it_imports_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    modules = {n.removeprefix("sampledb_operator/") for n in names if n.startswith("sampledb_operator/")}
    assert {"plugin/cli.py", "plugin/commands.py", "plugin/__main__.py",
            "kube/client.py", "kube/api.py", "model/names.py", "__init__.py"} <= modules
    assert [m for m in modules if m.startswith(NOT_IN_THE_WHEEL)] == []
    # Every module of the package that importing the plugin's command line imports is in it.
    program = ("import sys, sampledb_operator.plugin.cli; print(' '.join(m for m in sys.modules"
               " if m.startswith('sampledb_operator')))")
    imported = run(sys.executable, "-c", program).stdout.split()
    assert imported, "the plugin imports nothing of the package?"
    for module in imported:
        path = module.removeprefix("sampledb_operator").lstrip(".").replace(".", "/")
        assert {f"{path}.py", f"{path}/__init__.py".lstrip("/")} & modules, module
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_wheel_depends_on_the_plugins_distributions_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        metadata_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = HeaderParser().parsestr(archive.read(metadata_name).decode())
        entry_points = archive.read(metadata_name.replace("METADATA", "entry_points.txt")).decode()
    assert (metadata["Name"], metadata["Version"]) == ("kubectl-sampledb", VERSION)
    requires = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    required = {canonicalize_name(r.name): r for r in requires if r.marker is None}
    optional = {canonicalize_name(r.name): r for r in requires if r.marker is not None}
    assert set(required) == PLUGIN_DISTRIBUTIONS
    assert set(optional) == {"kubernetes-asyncio"}
    assert str(optional[canonicalize_name("kubernetes-asyncio")].marker) == 'extra == "auth-provider"'
    assert not set(required) & OPERATOR_ONLY_DISTRIBUTIONS
    top = {canonicalize_name(Requirement(r).name): Requirement(r)
           for r in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    for name, requirement in (required | optional).items():  # the top-level pyproject.toml's bounds
        assert requirement.specifier == top[name].specifier, name
    assert "kubectl-sampledb = sampledb_operator.plugin.cli:main" in entry_points


def test_the_wheel_runs_in_a_fresh_venv(venv: Path, api_server: tuple[Path, list[str]]) -> None:
    listed = run(venv / "bin" / "python", "-m", "pip", "list", "--format", "json", "--disable-pip-version-check")
    installed = {canonicalize_name(d["name"]) for d in json.loads(listed.stdout)}
    assert installed >= PLUGIN_DISTRIBUTIONS
    assert not installed & (OPERATOR_ONLY_DISTRIBUTIONS | {"sampledb-operator"})
    check_runs(venv / "bin" / "kubectl-sampledb", api_server, plugin_env())


# -- the krew archive and manifest --------------------------------------------------------------------------


def test_the_krew_archive_runs_with_the_systems_python3(unpacked: Path, api_server: tuple[Path, list[str]]) -> None:
    lib = unpacked / "store" / "lib"
    assert sorted(p.name for p in lib.iterdir()) == ["cp311", "cp312", "cp313", "cp314"]
    for folder in lib.iterdir():
        tops = {p.name for p in folder.iterdir()}
        assert {"sampledb_operator", "pydantic_core", "aiohttp", "yaml", "orjson"} <= tops, folder
        assert not tops & OPERATOR_ONLY_MODULES, folder
        assert not (folder / "bin").exists()
    assert (unpacked / "store" / "LICENSE").is_file()
    check_runs(unpacked / "bin" / "kubectl-sampledb", api_server, plugin_env())


def test_the_krew_launcher_names_the_pythons_it_needs(unpacked: Path, tmp_path: Path) -> None:
    """A PATH whose only python3 is of a version the archive has no folder for: one line, exit 1."""
    (tmp_path / "python3").write_text("#!/bin/sh\necho cp39\n")
    (tmp_path / "python3").chmod(0o755)
    for tool in ("readlink", "dirname"):
        found = shutil.which(tool)
        assert found is not None
        (tmp_path / tool).symlink_to(found)
    done = run("/bin/sh", unpacked / "bin" / "kubectl-sampledb", "--version", env={"PATH": str(tmp_path)})
    assert done.returncode == 1
    assert done.stderr == ("kubectl-sampledb: needs CPython (one of 3.11, 3.12, 3.13, 3.14) on PATH: python3,"
                           " or $KUBECTL_SAMPLEDB_PYTHON\n")


def test_the_krew_manifest_names_the_archive_and_its_sha256(built: Path, unpacked: Path) -> None:
    manifest = yaml.safe_load((built / "sampledb.yaml").read_text())
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "sampledb"
    assert manifest["spec"]["version"] == f"v{VERSION}"
    [platform] = manifest["spec"]["platforms"]
    assert platform["selector"] == {"matchLabels": {"os": "linux", "arch": "amd64"}}
    assert platform["uri"] == ("https://github.com/sampledb/sampledb-operator/releases/download/"
                               f"v{VERSION}/{ARCHIVE}")
    assert platform["sha256"] == hashlib.sha256((built / ARCHIVE).read_bytes()).hexdigest()
    assert platform["bin"] == "kubectl-sampledb"
    assert sorted(f["from"] for f in platform["files"]) == sorted(p.name for p in (unpacked / "store").iterdir())
    assert {f["to"] for f in platform["files"]} == {"."}
