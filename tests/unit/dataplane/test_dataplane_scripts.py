"""The packaged data-plane scripts: names, loading, shell syntax and the rules every script follows."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from sampledb_operator import dataplane

PACKAGED = sorted(p.name for p in resources.files("sampledb_operator.dataplane").iterdir() if p.name.endswith(".sh"))
LIBRARIES = ("lib.sh", "store-copy.sh")
SOURCED = ("app-role.sh",)  # sourced by the image's entrypoint after initdb, in its shell (set -Eeuo pipefail there)
# runs beside the server, a child of the postmaster, which takes a child's exit status other than 0 or 1 for a crash:
# no result line, and never a status other than 0
BESIDE_THE_SERVER = ("self-fence.sh",)
ENTRY_POINTS = [name for name in dataplane.SCRIPT_NAMES if name not in LIBRARIES + SOURCED + BESIDE_THE_SERVER]


def test_script_names_are_exactly_the_packaged_scripts() -> None:
    assert sorted(dataplane.SCRIPT_NAMES) == PACKAGED


def test_unknown_script_name_raises_key_error() -> None:
    with pytest.raises(KeyError):
        dataplane.script("rm-rf.sh")


def test_all_scripts_is_the_configmap_data() -> None:
    data = dataplane.all_scripts()

    assert set(data) == set(dataplane.SCRIPT_NAMES)
    assert all(text.startswith(("#!/usr/bin/env bash", "# shellcheck shell=bash")) for text in data.values())


@pytest.mark.parametrize("name", dataplane.SCRIPT_NAMES)
def test_script_is_valid_bash(name: str) -> None:
    proc = subprocess.run(["bash", "-n"], check=False, input=dataplane.script(name), capture_output=True, text=True)

    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_entry_point_is_strict_and_sources_the_library(name: str) -> None:
    text = dataplane.script(name)

    assert "\nset -Eeuo pipefail\n" in text
    assert '/lib.sh}"' in text
    assert f"\nSDB_SCRIPT={name.removesuffix('.sh')}\n" in text


@pytest.mark.parametrize("name", BESIDE_THE_SERVER)
def test_a_script_beside_the_server_exits_0_whatever_ends_it(name: str) -> None:
    text = dataplane.script(name)

    assert "\nset -e" not in text and "set -E" not in text  # a failed command never ends it with its status
    assert "\ntrap 'exit 0' TERM INT HUP QUIT\n" in text
    assert text.rstrip().endswith("\nexit 0")
    assert not re.search(r"\bexit [1-9]", text)


@pytest.mark.parametrize("name", dataplane.SCRIPT_NAMES)
def test_no_script_traces_commands_or_prints_the_password(name: str) -> None:
    text = dataplane.script(name)

    assert not re.search(r"^\s*set -[a-zA-Z]*x", text, flags=re.MULTILINE)
    assert "PGPASSWORD}" not in text and "$PGPASSWORD" not in text


def test_documented_exit_codes_match_the_library() -> None:
    lib = dataplane.script("lib.sh")
    codes = {int(code) for code in re.findall(r"^SDB_EXIT_[A-Z_]+=(\d+)", lib, flags=re.MULTILINE)}

    assert codes == set(dataplane.EXIT_CODES)


def test_every_script_passes_shellcheck() -> None:
    """The data-plane scripts run inside users' pods with `set -Eeuo pipefail`: shellcheck's warnings (quoting,
    unset variables, exec and subshell pitfalls) are bugs there. hack/bootstrap.sh installs shellcheck."""
    tool = shutil.which("shellcheck")
    assert tool is not None, "shellcheck is not installed (hack/bootstrap.sh installs it)"
    folder = Path(dataplane.__file__).parent
    scripts = sorted(str(p) for p in folder.glob("*.sh"))
    done = subprocess.run([tool, "-x", "-P", str(folder), *scripts], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
