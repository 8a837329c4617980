"""hack/image.sh, the one command that builds the operator's image and loads it into kind, k3s or minikube, or pushes
it to a registry, then prints the kustomize and Helm overrides that point an install at it. Run with PATH limited to
a few system tools and stand-in `docker`, `podman`, `buildah`, `kind`, `k3s`, `minikube` and `skopeo` commands
that record their arguments (and write the archives they are asked for): no cluster, registry or network is used."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "image.sh"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
DEFAULT = f"ghcr.io/sampledb/sampledb-operator:{VERSION}"
# What the script needs from the system; nothing else of /usr/bin (where a real buildah may be) is on PATH.
SYSTEM_TOOLS = ("awk", "cat", "dirname", "git", "mkdir", "mktemp", "rm", "sed", "tail", "tar")

# The stand-ins: each call appends "NAME<TAB>ARG<TAB>ARG..." to $CALLS.
RECORD = 'n=${0##*/}; { printf "%s" "$n"; for a in "$@"; do printf "\\t%s" "$a"; done; printf "\\n"; } >> "$CALLS"'
# The build context (the last argument of `build`) must hold the Dockerfile and the package.
CONTEXT = ('for a in "$@"; do last=$a; done; '
           '[ -f "$last/Dockerfile" ] && [ -f "$last/operator/sampledb_operator/__init__.py" ] && '
           '[ ! -e "$last/.venv" ] && echo "context ok" >> "$CALLS"')
DOCKER = f"""{RECORD}
case $1 in
  info) exit ${{DOCKER_INFO_EXIT:-0}} ;;
  build) {CONTEXT} ;;
  save) [ "$2" = -o ] && echo archive > "$3" ;;
esac"""
PODMAN = f"""{RECORD}
case $1 in
  build) {CONTEXT} ;;
  save) [ "$4" = -o ] && echo archive > "$5" ;;
esac"""
BUILDAH = f"""{RECORD}
case $1 in
  build) {CONTEXT} ;;
  push)
    case $3 in
      docker-archive:*) p=${{3#docker-archive:}}; [ -n "$BUILDAH_NO_ARCHIVE" ] || echo archive > "${{p%%:*}}" ;;
    esac ;;
esac"""
# hack/build-images.sh's stand-in: the operator's archive in images.list, among the other images' lines.
BUILD_IMAGES = f"""{RECORD}
echo "SAMPLEDB_IMAGES=$SAMPLEDB_IMAGES" >> "$CALLS"
out=$SAMPLEDB_CACHE/images
mkdir -p "$out"
echo oci > "$out/operator-0123abcd.tar"
echo pause > "$out/pause-99.tar"
printf '%s\\n' "$out/pause-99.tar localhost/sampledb/pause:v1" \\
  "$out/operator-0123abcd.tar localhost/sampledb/sampledb-operator:0123abcd" > "$out/images.list"
echo "images: ready in 0s" >&2
echo "$out\""""


@dataclass
class World:
    root: Path
    bin: Path
    calls: Path
    cache: Path

    def stand_in(self, name: str, script: str = RECORD) -> None:
        path = self.bin / name
        path.write_text(f"#!/bin/sh\n{script}\n")
        path.chmod(0o755)

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        environment = {"PATH": f"{self.bin}:{self.root / 'tools'}", "HOME": str(self.root / "home"),
                       "LANG": "C.UTF-8", "CALLS": str(self.calls), "SAMPLEDB_CACHE": str(self.cache),
                       "TMPDIR": str(self.root), **env}
        return subprocess.run(["/bin/bash", str(SCRIPT), *args], env=environment, capture_output=True, text=True,
                              timeout=30, check=False)

    def recorded(self) -> list[list[str]]:
        if not self.calls.exists():
            return []
        return [line.split("\t") for line in self.calls.read_text().splitlines()]

    def calls_of(self, name: str) -> list[list[str]]:
        return [call[1:] for call in self.recorded() if call[0] == name]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    (tmp_path / "bin").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "home").mkdir()
    for tool in SYSTEM_TOOLS:
        found = shutil.which(tool, path="/usr/bin:/bin")
        assert found, f"{tool} is not installed"
        (tmp_path / "tools" / tool).symlink_to(found)
    yield World(tmp_path, tmp_path / "bin", tmp_path / "calls", tmp_path / "cache")


def stdout_field(out: subprocess.CompletedProcess[str], name: str) -> str:
    [value] = [line.split(": ", 1)[1] for line in out.stdout.splitlines() if line.startswith(f"{name}: ")]
    return value


def deployment_repository() -> str:
    docs = yaml.safe_load_all((REPO / "manifests" / "operator" / "deployment.yaml").read_text())
    [deployment] = [d for d in docs if d and d["kind"] == "Deployment"]
    return str(deployment["spec"]["template"]["spec"]["containers"][0]["image"]).rpartition(":")[0]


def assert_overrides(out: subprocess.CompletedProcess[str], repository: str, tag: str) -> None:
    """The kustomize `images:` entry (parsed as YAML) and the Helm flags for REPOSITORY:TAG."""
    lines = out.stdout.splitlines()
    start = lines.index("images:")
    entry = yaml.safe_load("\n".join(lines[start:start + 4]))
    assert entry == {"images": [{"name": deployment_repository(), "newName": repository, "newTag": tag}]}
    assert f"--set image.repository={repository} --set image.tag={tag}" in lines
    values = yaml.safe_load((REPO / "charts" / "sampledb-operator" / "values.yaml").read_text())
    assert {"repository", "tag"} <= set(values["image"])  # the chart's real value names


def test_build_uses_docker_when_its_daemon_answers_and_saves_the_archive(world: World) -> None:
    world.stand_in("docker", DOCKER)
    world.stand_in("buildah", BUILDAH)
    out = world.run("build")
    assert out.returncode == 0, out.stderr
    archive = stdout_field(out, "archive")
    assert stdout_field(out, "image") == DEFAULT
    assert Path(archive).read_text() == "archive\n" and Path(archive).is_relative_to(world.cache / "images")
    docker = world.calls_of("docker")
    assert [call[0] for call in docker] == ["info", "build", "save"]
    build = docker[1]
    context = build[-1]
    assert build[:-1] == ["build", "-f", f"{context}/Dockerfile",
                          "--build-arg", "BASE=docker.io/library/python:3.11-slim",  # the Dockerfile's, qualified
                          "-t", DEFAULT]
    assert ["context ok"] in world.recorded()
    assert not Path(context).exists()  # the temporary context is removed
    assert docker[2] == ["save", "-o", archive, DEFAULT]
    assert world.calls_of("buildah") == []


def test_no_arguments_is_build_and_docker_without_a_daemon_falls_back_to_buildah(world: World) -> None:
    world.stand_in("docker", DOCKER)
    world.stand_in("buildah", BUILDAH)
    out = world.run(DOCKER_INFO_EXIT="1")
    assert out.returncode == 0, out.stderr
    assert "daemon does not answer" in out.stderr
    assert [call[0] for call in world.calls_of("docker")] == ["info"]
    archive = stdout_field(out, "archive")
    [build, push] = world.calls_of("buildah")
    assert build[0] == "build" and build[build.index("-t") + 1] == DEFAULT
    assert "BASE=docker.io/library/python:3.11-slim" in build
    assert push == ["push", DEFAULT, f"docker-archive:{archive}:{DEFAULT}"]
    assert Path(archive).is_file()


def test_build_with_podman_passes_tag_and_base(world: World) -> None:
    world.stand_in("podman", PODMAN)
    world.stand_in("buildah", BUILDAH)
    out = world.run("build", "--tag", "registry.example.com/team/op:dev",
                    "--base", "registry.example.com/python:3.12-slim")
    assert out.returncode == 0, out.stderr
    [build, save] = world.calls_of("podman")
    assert build[1:-1] == ["-f", f"{build[-1]}/Dockerfile",
                           "--build-arg", "BASE=registry.example.com/python:3.12-slim",
                           "-t", "registry.example.com/team/op:dev"]
    assert save == ["save", "--format", "docker-archive", "-o", stdout_field(out, "archive"),
                    "registry.example.com/team/op:dev"]
    assert stdout_field(out, "image") == "registry.example.com/team/op:dev"


def test_a_tag_without_a_tag_gets_the_version_and_a_short_base_is_docker_hubs(world: World) -> None:
    world.stand_in("buildah", BUILDAH)
    out = world.run("build", "--tag", "localhost:5000/sampledb-operator", "--base", "me/python:3.13")
    assert out.returncode == 0, out.stderr
    assert stdout_field(out, "image") == f"localhost:5000/sampledb-operator:{VERSION}"
    assert "BASE=docker.io/me/python:3.13" in world.calls_of("buildah")[0]


def test_load_kind_loads_the_archive_the_build_made_and_prints_the_overrides(world: World) -> None:
    world.stand_in("docker", DOCKER)
    world.stand_in("kind")
    out = world.run("load", "kind", "--name", "dev")
    assert out.returncode == 0, out.stderr
    archive = stdout_field(out, "archive")
    assert world.calls_of("kind") == [["load", "image-archive", archive, "--name", "dev"]]
    assert [call[0] for call in world.recorded() if call[0] in ("docker", "kind")][-1] == "kind"  # after the build
    assert_overrides(out, "ghcr.io/sampledb/sampledb-operator", VERSION)
    assert "This is the install's default image" in out.stdout  # kind's nodes have it under the default name


def test_load_kind_defaults_to_kinds_cluster_name(world: World) -> None:
    world.stand_in("docker", DOCKER)
    world.stand_in("kind")
    assert world.run("load", "kind").returncode == 0
    assert world.calls_of("kind")[0][-2:] == ["--name", "kind"]
    world.calls.unlink()
    assert world.run("load", "kind", KIND_CLUSTER_NAME="other").returncode == 0
    assert world.calls_of("kind")[0][-2:] == ["--name", "other"]


def test_load_k3s_imports_with_ctr(world: World) -> None:
    world.stand_in("buildah", BUILDAH)
    world.stand_in("k3s")
    world.stand_in("sudo", f'{RECORD}\nexec "$@"')
    out = world.run("load", "k3s", "--tag", "example.org/op:1.2.3")
    assert out.returncode == 0, out.stderr
    assert world.calls_of("k3s") == [["ctr", "images", "import", stdout_field(out, "archive")]]
    assert world.calls_of("sudo") == ([] if os.geteuid() == 0 else [["k3s", "ctr", "images", "import",
                                                                     stdout_field(out, "archive")]])
    assert_overrides(out, "example.org/op", "1.2.3")


def test_load_minikube_with_a_profile(world: World) -> None:
    world.stand_in("buildah", BUILDAH)
    world.stand_in("minikube")
    out = world.run("load", "minikube", "--name", "prof")
    assert out.returncode == 0, out.stderr
    assert world.calls_of("minikube") == [["image", "load", stdout_field(out, "archive"), "-p", "prof"]]


def test_push_builds_as_the_ref_and_pushes_with_the_builder(world: World) -> None:
    world.stand_in("docker", DOCKER)
    world.stand_in("skopeo")  # the builder pushes what it built, with its own registry login
    out = world.run("push", "registry.example.com/sampledb/sampledb-operator:0.9.0")
    assert out.returncode == 0, out.stderr
    ref = "registry.example.com/sampledb/sampledb-operator:0.9.0"
    docker = world.calls_of("docker")
    assert docker[1][docker[1].index("-t") + 1] == ref
    assert docker[-1] == ["push", ref]
    assert world.calls_of("skopeo") == []
    assert stdout_field(out, "pushed") == ref
    assert "default image" not in out.stdout
    assert_overrides(out, "registry.example.com/sampledb/sampledb-operator", "0.9.0")


def test_push_with_buildah_names_the_registry(world: World) -> None:
    world.stand_in("buildah", BUILDAH)
    out = world.run("push", "registry.example.com/op")
    assert out.returncode == 0, out.stderr
    ref = f"registry.example.com/op:{VERSION}"
    assert world.calls_of("buildah")[-1] == ["push", ref, f"docker://{ref}"]
    assert_overrides(out, "registry.example.com/op", VERSION)


def test_local_base_takes_the_operator_archive_of_build_images(world: World) -> None:
    world.stand_in("buildah", BUILDAH)
    world.stand_in("docker", DOCKER)
    world.stand_in("kind")
    world.stand_in("build-images.sh", BUILD_IMAGES)
    out = world.run("load", "kind", "--local-base", SAMPLEDB_BUILD_IMAGES=str(world.bin / "build-images.sh"))
    assert out.returncode == 0, out.stderr
    archive = str(world.cache / "images" / "operator-0123abcd.tar")
    assert stdout_field(out, "archive") == archive
    assert stdout_field(out, "image") == "localhost/sampledb/sampledb-operator:0123abcd"
    assert ["SAMPLEDB_IMAGES=python operator"] in world.recorded()
    assert world.calls_of("buildah") == [] and world.calls_of("docker") == []  # build-images.sh built it
    assert world.calls_of("kind") == [["load", "image-archive", archive, "--name", "kind"]]
    assert_overrides(out, "localhost/sampledb/sampledb-operator", "0123abcd")


def test_local_base_push_copies_the_oci_archive_with_skopeo(world: World) -> None:
    world.stand_in("buildah", BUILDAH)
    world.stand_in("skopeo")
    world.stand_in("build-images.sh", BUILD_IMAGES)
    out = world.run("push", "registry.example.com/op:1.0.0", "--local-base",
                    SAMPLEDB_BUILD_IMAGES=str(world.bin / "build-images.sh"))
    assert out.returncode == 0, out.stderr
    archive = world.cache / "images" / "operator-0123abcd.tar"
    assert world.calls_of("skopeo") == [["copy", f"oci-archive:{archive}", "docker://registry.example.com/op:1.0.0"]]
    assert_overrides(out, "registry.example.com/op", "1.0.0")


def test_local_base_refuses_a_tag(world: World) -> None:
    world.stand_in("buildah", BUILDAH)
    out = world.run("build", "--local-base", "--tag", "x/y:1")
    assert out.returncode == 2 and "--local-base names its own image" in out.stderr
    assert world.recorded() == []


def test_no_builder_says_what_to_install(world: World) -> None:
    world.stand_in("kind")
    out = world.run("load", "kind")
    assert out.returncode == 1
    assert "no image builder found" in out.stderr
    assert all(tool in out.stderr for tool in ("docker", "podman", "buildah"))
    assert out.stdout == "" and world.recorded() == []


def test_a_missing_kind_stops_before_the_build(world: World) -> None:
    world.stand_in("docker", DOCKER)
    out = world.run("load", "kind")
    assert out.returncode == 1
    assert "kind is not installed" in out.stderr and "kind.sigs.k8s.io" in out.stderr
    assert world.calls_of("docker") == []  # no minutes spent building for nothing


def test_a_missing_k3s_stops_before_the_build(world: World) -> None:
    world.stand_in("docker", DOCKER)
    out = world.run("load", "k3s")
    assert out.returncode == 1 and "k3s is not installed" in out.stderr
    assert world.calls_of("docker") == []


def test_unknown_target_command_and_option_are_usage_errors(world: World) -> None:
    world.stand_in("docker", DOCKER)
    world.stand_in("kind")
    for args, message in ((("load", "microk8s"), "unknown load target 'microk8s' (kind, k3s or minikube)"),
                          (("load",), "load needs a target"),
                          (("deploy",), "unknown command 'deploy'"),
                          (("build", "--frob"), "unknown argument '--frob'"),
                          (("push",), "push needs the image's name"),
                          (("build", "--builder", "kaniko"), "unknown builder 'kaniko'")):
        out = world.run(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr and "usage: hack/image.sh" in out.stderr, (args, out.stderr)
    assert world.recorded() == []  # refused before any tool runs


def test_a_builder_that_writes_no_archive_fails(world: World) -> None:
    world.stand_in("buildah", BUILDAH)
    out = world.run("build", BUILDAH_NO_ARCHIVE="1")
    assert out.returncode == 1 and "wrote no archive" in out.stderr
    assert "archive:" not in out.stdout


def test_a_failing_build_fails_the_command(world: World) -> None:
    world.stand_in("podman", f'{RECORD}\n[ "$1" = build ] && exit 3\nexit 0')
    world.stand_in("kind")
    out = world.run("load", "kind")
    assert out.returncode == 3
    assert "podman build failed (exit 3)" in out.stderr and "--local-base" in out.stderr
    assert world.calls_of("kind") == [] and [call[0] for call in world.calls_of("podman")] == ["build"]


def test_help_exits_0(world: World) -> None:
    out = world.run("--help")
    assert out.returncode == 0 and out.stdout.startswith("usage: hack/image.sh")

