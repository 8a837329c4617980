"""One version everywhere: pyproject.toml's `version` is the single source; the package reads it from its
installed metadata (`sampledb_operator.__version__`), the command line prints it (`--version`), the Helm
chart's appVersion (and so its default image tag) and the kustomize Deployment's image tag are it, and
the changelog names it. The license is the Apache License 2.0, its text in LICENSE.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import sampledb_operator
from sampledb_operator import cli

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
DEBIAN_APACHE = Path("/usr/share/common-licenses/Apache-2.0")


def test_the_version_is_semver() -> None:
    assert SEMVER.match(VERSION), VERSION


def test_the_package_reads_its_version_from_the_metadata() -> None:
    assert sampledb_operator.__version__ == VERSION


def test_python_m_sampledb_operator_version_prints_it() -> None:
    out = subprocess.run([sys.executable, "-m", "sampledb_operator", "--version"], capture_output=True, text=True,
                         timeout=60, check=True, cwd=REPO)
    assert out.stdout.strip() == f"sampledb-operator {VERSION}"


def test_the_version_flag_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"sampledb-operator {VERSION}"


def test_the_chart_app_version_is_it() -> None:
    chart = yaml.safe_load((REPO / "charts" / "sampledb-operator" / "Chart.yaml").read_text())
    assert chart["appVersion"] == VERSION
    assert SEMVER.match(chart["version"]), chart["version"]


def test_the_kustomize_deployment_runs_the_image_of_this_version() -> None:
    docs = yaml.safe_load_all((REPO / "manifests" / "operator" / "deployment.yaml").read_text())
    [deployment] = [d for d in docs if d and d["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.rpartition(":")[2] == VERSION, image


def test_the_changelog_keeps_a_changelog_and_names_the_version() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    assert "[Keep a Changelog](https://keepachangelog.com/en/1.1.0/)" in text
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings and headings[0] == "[Unreleased]", headings
    for heading in headings[1:]:  # released versions, newest first: [X.Y.Z] - YYYY-MM-DD
        assert re.fullmatch(r"\[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}", heading), heading
    current = [h for h in headings[1:] if h.startswith(f"[{VERSION}]")]
    unreleased = text.split("\n## [Unreleased]\n", 1)[1].split("\n## ", 1)[0]
    assert current or f"version {VERSION}" in unreleased, f"CHANGELOG.md does not name version {VERSION}"
    assert re.search(r"^\[Unreleased\]: \S+$", text, re.M)


def test_the_license_is_apache_2() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text.splitlines()[1] and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    if DEBIAN_APACHE.exists():
        assert text == DEBIAN_APACHE.read_text()
