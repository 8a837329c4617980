"""hack/prereqs.sh, the checks `make run` and `make test` start with: each missing piece is named with how to get it
(exit 1), nothing is changed on the machine. Run on a copy of the script (so the checkout's .venv does not count),
as an unprivileged user where the suite runs as root (setpriv), with stand-in `go` and `python3` commands."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534


@pytest.fixture
def tree() -> Iterator[Path]:
    """A world-readable directory with a copy of hack/prereqs.sh (as repo/hack/) and a bin/ for stand-ins."""
    root = Path(tempfile.mkdtemp(prefix="prereqs-"))
    try:
        (root / "repo" / "hack").mkdir(parents=True)
        shutil.copy2(REPO / "hack" / "prereqs.sh", root / "repo" / "hack" / "prereqs.sh")
        (root / "bin").mkdir()
        (root / "home").mkdir()
        for path in (root, *root.rglob("*")):
            path.chmod(path.stat().st_mode | stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH
                       | stat.S_IXOTH | (stat.S_IWOTH if path.is_dir() else 0))
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def stand_in(tree: Path, name: str, script: str) -> None:
    path = tree / "bin" / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def run(tree: Path, mode: str, *, as_root: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
    """hack/prereqs.sh MODE with PATH = the stand-ins then the system's own directories (never /usr/local/go)."""
    environment = {"PATH": f"{tree / 'bin'}:/usr/bin:/bin", "HOME": str(tree / "home"), "LANG": "C.UTF-8", **env}
    command = ["bash", str(tree / "repo" / "hack" / "prereqs.sh"), mode]
    if os.geteuid() == 0 and not as_root:
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60, check=False)


def good_tools(tree: Path) -> None:
    stand_in(tree, "go", 'echo go1.26.1')
    stand_in(tree, "python3", 'case "$*" in *version_info*) echo 3.11;; *) exit 0;; esac')


def test_without_root_make_run_says_why_and_what_to_do_instead(tree: Path) -> None:
    good_tools(tree)
    out = run(tree, "run")
    assert out.returncode == 1, out.stderr
    assert "make run cannot start on this machine" in out.stderr
    assert "needs root" in out.stderr and "SAMPLEDB_REAL_NODE=0 make run" in out.stderr
    assert "kind, k3s" in out.stderr  # where databases do run without root


def test_without_root_and_without_the_real_node_make_run_goes_on_and_says_databases_will_not_run(tree: Path) -> None:
    good_tools(tree)
    out = run(tree, "run", SAMPLEDB_REAL_NODE="0")
    assert out.returncode == 0, out.stderr
    assert "fake nodes only" in out.stderr and "never run" in out.stderr
    assert "first run" in out.stderr  # an empty cache: the long first build is announced


def test_without_root_make_test_runs_only_against_a_cluster_the_user_names(tree: Path) -> None:
    good_tools(tree)
    refused = run(tree, "test")
    assert refused.returncode == 1 and "SAMPLEDB_TEST_USE_KUBECONFIG=1" in refused.stderr
    assert run(tree, "test", SAMPLEDB_TEST_USE_KUBECONFIG="1").returncode == 0


def test_go_off_the_path_is_found_and_named_and_an_old_go_is_refused(tree: Path) -> None:
    stand_in(tree, "python3", 'case "$*" in *version_info*) echo 3.11;; *) exit 0;; esac')
    out = run(tree, "run", as_root=True)
    assert out.returncode == 1
    if Path("/usr/local/go/bin/go").exists():
        assert "export PATH=/usr/local/go/bin:$PATH" in out.stderr
    else:
        assert "Go 1.26+: not on PATH" in out.stderr
    stand_in(tree, "go", 'echo go1.22.3')
    old = run(tree, "run", as_root=True)
    assert old.returncode == 1 and "Go 1.26+" in old.stderr and "is 1.22.3" in old.stderr


def test_python_too_old_or_without_venv_is_named(tree: Path) -> None:
    stand_in(tree, "go", 'echo go1.26.0')
    stand_in(tree, "python3", 'case "$*" in *version_info*) echo 3.9;; *) exit 0;; esac')
    old = run(tree, "run", as_root=True)
    assert old.returncode == 1 and "Python 3.11+" in old.stderr and "is 3.9" in old.stderr
    stand_in(tree, "python3", 'case "$*" in *version_info*) echo 3.11;; *ensurepip*) exit 1;; *) exit 0;; esac')
    no_venv = run(tree, "run", as_root=True)
    assert no_venv.returncode == 1 and "python3-venv" in no_venv.stderr


def test_everything_there_as_root_passes_and_changes_nothing(tree: Path) -> None:
    good_tools(tree)
    before = sorted(p.name for p in tree.rglob("*"))
    out = run(tree, "test", as_root=True)
    assert out.returncode == 0, out.stderr
    assert "cannot start" not in out.stderr
    assert sorted(p.name for p in tree.rglob("*")) == before  # nothing made (no cache, no venv)
