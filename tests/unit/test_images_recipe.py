"""hack/build-images.sh's PostgreSQL images carry Barman Cloud, pinned by hack/images/barman-requirements.txt.

The file is installed with `pip install --no-deps --require-hashes` (into the images' /opt/barman and
by hack/bootstrap.sh into .venv), so it must be the whole resolved set, every line exactly pinned
and hashed; the dev virtualenv runs the same versions as the images.
"""

from __future__ import annotations

import os
import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO / "hack" / "images" / "barman-requirements.txt"
BUILD_IMAGES = REPO / "hack" / "build-images.sh"
INSTALL_BARMAN = REPO / "hack" / "images" / "install-barman.sh"
# The commands the operator's archiving, backups and restores run in the PostgreSQL containers.
TOOLS = {"wal-archive", "wal-restore", "backup", "backup-list", "backup-delete", "backup-show", "restore",
         "check-wal-archive", "backup-keep"}
# What the images' python is (Debian bookworm's CPython 3.11 on x86_64), for evaluating markers.
TARGET = {"python_version": "3.11", "python_full_version": "3.11.2", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
          "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}


def pins() -> dict[str, tuple[Requirement, list[str]]]:
    """The requirements file's entries by canonical name: the requirement and its hashes."""
    text = REQUIREMENTS.read_text().replace("\\\n", " ")
    entries: dict[str, tuple[Requirement, list[str]]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *options = line.split(" --")
        requirement = Requirement(spec.strip())
        entries[canonicalize_name(requirement.name)] = (requirement, [o.strip() for o in options])
    return entries


def pinned_version(requirement: Requirement) -> str:
    (specifier,) = requirement.specifier
    assert specifier.operator == "==", f"{requirement} is not an exact pin"
    return specifier.version


def test_the_requirements_pin_barman_with_its_cloud_extra_and_hash_every_package() -> None:
    entries = pins()
    barman, _ = entries["barman"]
    assert barman.extras == {"cloud"}
    assert {"barman", "boto3", "psycopg2-binary"} <= entries.keys()
    for requirement, options in entries.values():
        pinned_version(requirement)
        assert options and all(re.fullmatch(r"hash=sha256:[0-9a-f]{64}", o) for o in options), requirement


def test_the_requirements_are_the_whole_set_the_installed_packages_need() -> None:
    """What each pinned package requires (with barman's cloud extra, on the images' python) is pinned
    too: `--no-deps` installs nothing else. barman's `psycopg2` is psycopg2-binary's module."""
    entries = pins()
    provided = set(entries) | {"psycopg2"}
    for name, (requirement, _) in entries.items():
        dist = metadata.distribution(name)
        assert dist.version == pinned_version(requirement), f"the dev virtualenv's {name} is not the pinned one"
        for needed in map(Requirement, dist.requires or []):
            extras = requirement.extras or {""}
            if needed.marker is None or any(needed.marker.evaluate({**TARGET, "extra": e}) for e in extras):
                assert canonicalize_name(needed.name) in provided, f"{name} needs {needed}, which is not pinned"


def test_the_dev_extra_pins_what_the_images_pin() -> None:
    dev = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    entries = pins()
    for requirement in map(Requirement, dev):
        name = canonicalize_name(requirement.name)
        if name in entries:
            assert str(requirement.specifier) == str(entries[name][0].specifier), requirement


def test_both_postgres_recipes_install_barman_cloud_and_rebuild_when_its_pins_change() -> None:
    script = BUILD_IMAGES.read_text()
    assert re.search(r'^BARMAN_REQUIREMENTS=\$here/images/barman-requirements\.txt$', script, re.M)
    assert re.search(r'^BARMAN_INPUTS=\("\$BARMAN_REQUIREMENTS" "\$here/images/install-barman\.sh"\)$', script, re.M)
    assert re.search(r"^BARMAN_PACKAGES=python3,", script, re.M)
    for image in ("postgres15", "postgres18"):
        body = re.search(rf"^build_{image}\(\) \{{\n(.*?)\n\}}$", script, re.M | re.S)
        assert body, f"no build_{image} in {BUILD_IMAGES}"
        key = body[1].split("cached ", 1)[0]
        assert '"${BARMAN_INPUTS[@]}"' in key and "barman_hook" in key, f"{image}'s key misses Barman's inputs"
        assert "$BARMAN_PACKAGES" in body[1] and '"$(barman_hook "$wheels")"' in body[1], image


def test_the_install_hook_links_every_barman_cloud_command_barman_provides() -> None:
    assert os.access(INSTALL_BARMAN, os.X_OK)
    listed = re.search(r"^tools=\((.*)\)$", INSTALL_BARMAN.read_text(), re.M)
    assert listed and set(listed[1].split()) == TOOLS
    scripts = {e.name for e in metadata.distribution("barman").entry_points if e.group == "console_scripts"}
    assert {f"barman-cloud-{tool}" for tool in TOOLS} <= scripts
