"""What the SampleDB schema cannot check, checked by the operator: `validate_spec`.

Pure: no I/O. Each problem has a CamelCase reason and a message for the SpecValid condition; the
API server's CEL rules already reject most bad input at admission, this catches the rest (and old
objects that ratcheting let through).
"""

from __future__ import annotations

import re

from croniter import croniter

from sampledb_operator.model.quantity import parse_quantity
from sampledb_operator.model.sampledb import Problem, SampleDBSpec, major_of
from sampledb_operator.model.spec_rules import MAJORS_TEXT, SUPPORTED_MAJORS, VERSION_RE

_POSTGRES_REPOSITORIES = ("postgres", "postgresql")
_TAG_MAJOR = re.compile(r"^(\d+)(?:[.\-_].*)?$")


def _image_major(image: str) -> int | None:
    """The major version in the tag of a postgres image ("postgres:16.4-alpine" -> 16), else None."""
    name = image.split("@", 1)[0]
    repository, _, tag = name.rpartition(":")
    if not repository or "/" in tag:
        return None
    if repository.rsplit("/", 1)[-1] not in _POSTGRES_REPOSITORIES:
        return None
    match = _TAG_MAJOR.match(tag)
    return int(match.group(1)) if match else None


def validate_spec(spec: SampleDBSpec) -> list[Problem]:
    """Problems the CRD schema cannot catch (or may have let through by ratcheting old objects)."""
    problems: list[Problem] = []
    problems += _check_version(spec)
    problems += _check_schedule(spec)
    problems += _check_resources(spec)
    return problems


def _check_version(spec: SampleDBSpec) -> list[Problem]:
    if not re.fullmatch(VERSION_RE, spec.version):
        return [Problem("InvalidVersion", f"version {spec.version!r} is not MAJOR.MINOR", "spec.version")]
    major = major_of(spec.version)
    if major not in SUPPORTED_MAJORS:
        return [Problem(
            "UnsupportedVersion",
            f"PostgreSQL {major} is not supported; supported majors: {MAJORS_TEXT}", "spec.version",
        )]
    image_major = _image_major(spec.image) if spec.image else None
    if image_major is not None and image_major != major:
        return [Problem(
            "ImageVersionMismatch",
            f"image {spec.image} looks like PostgreSQL {image_major} but version is {spec.version}",
            "spec.image",
        )]
    return []


def _check_schedule(spec: SampleDBSpec) -> list[Problem]:
    schedule = spec.backup.schedule
    if schedule is None or croniter.is_valid(schedule):
        return []
    return [Problem(
        "InvalidBackupSchedule",
        f"backup.schedule {schedule!r} is not a valid cron schedule (a field is out of range?)",
        "spec.backup.schedule",
    )]


def _check_resources(spec: SampleDBSpec) -> list[Problem]:
    if spec.resources is None or not spec.resources.requests or not spec.resources.limits:
        return []
    problems = []
    for name, limit in sorted(spec.resources.limits.items()):
        request = spec.resources.requests.get(name)
        if request is not None and parse_quantity(request) > parse_quantity(limit):
            problems.append(Problem(
                "InvalidResources",
                f"resources.requests.{name} ({request}) exceeds resources.limits.{name} ({limit})",
                f"spec.resources.requests.{name}",
            ))
    return problems

