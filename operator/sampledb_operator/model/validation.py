"""What the operator checks in a spec itself: `validate_spec` (and `validate_backup`).

Pure: no I/O. Each problem has a CamelCase reason and a message for the SpecValid condition. The
API server's CEL rules reject most bad input at admission; this catches what CEL cannot express
(a cron field out of range, an image tag naming another version) and applies again, through the
rules' Python twins in model/spec_rules.py, the rules that protect the pod and the data plane, for
objects stored before a rule existed (the API server keeps them, and ratcheting lets their
unchanged fields through on update).
"""

from __future__ import annotations

import re

from croniter import croniter

from sampledb_operator.model.backup import SampleDBBackup, backup_name_error
from sampledb_operator.model.hba import rule_error
from sampledb_operator.model.pooler import parameter_error as pooler_parameter_error
from sampledb_operator.model.quantity import parse_quantity
from sampledb_operator.model.sampledb import Problem, SampleDBSpec, major_of
from sampledb_operator.model.spec_rules import (
    MAJORS_TEXT,
    REQUEST_WITHIN_LIMIT_RULE,
    SUPPORTED_MAJORS,
    VERSION_RE,
    image_error,
    parameter_error,
    resource_name_error,
    resource_quantity_error,
    storage_size_error,
)

_POSTGRES_REPOSITORIES = ("postgres", "postgresql")
_TAG_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:[.\-_].*)?$")


def _image_version(image: str) -> tuple[int, int | None] | None:
    """The (major, minor) in the tag of a postgres image ("postgres:16.4-alpine" -> (16, 4), "postgres:16" ->
    (16, None), bitnami's "postgresql:16.4.0" -> (16, 4)), else None (another repository, a digest only)."""
    name = image.split("@", 1)[0]
    repository, _, tag = name.rpartition(":")
    if not repository or "/" in tag:
        return None
    if repository.rsplit("/", 1)[-1] not in _POSTGRES_REPOSITORIES:
        return None
    match = _TAG_VERSION.match(tag)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)) if match.group(2) is not None else None


def validate_spec(spec: SampleDBSpec) -> list[Problem]:
    """Problems the CRD schema cannot catch (or may have let through by ratcheting old objects)."""
    problems: list[Problem] = []
    problems += _check_version(spec)
    problems += _check_image(spec)
    problems += _check_storage(spec)
    problems += _check_schedule(spec)
    problems += _check_resources(spec)
    problems += _check_parameters(spec)
    problems += _check_object_store(spec)
    problems += _check_hba(spec)
    problems += _check_pooler(spec)
    return problems


def validate_backup(backup: SampleDBBackup) -> list[Problem]:
    """Problems of a SampleDBBackup the schema refuses today but may have accepted before."""
    error = backup_name_error(backup.metadata.name)
    return [Problem("InvalidName", f"name {backup.metadata.name!r}: {error}", "metadata.name")] if error else []


def _check_version(spec: SampleDBSpec) -> list[Problem]:
    if not re.fullmatch(VERSION_RE, spec.version):
        return [Problem("InvalidVersion", f"version {spec.version!r} is not MAJOR.MINOR", "spec.version")]
    major = major_of(spec.version)
    if major not in SUPPORTED_MAJORS:
        return [Problem(
            "UnsupportedVersion",
            f"PostgreSQL {major} is not supported; supported majors: {MAJORS_TEXT}", "spec.version",
        )]
    tagged = _image_version(spec.image) if spec.image and image_error(spec.image) is None else None
    if tagged is None:
        return []
    image_major, image_minor = tagged
    if image_major != major:
        return [Problem(
            "ImageVersionMismatch",
            f"image {spec.image} looks like PostgreSQL {image_major} but version is {spec.version}",
            "spec.image",
        )]
    minor = int(spec.version.split(".", 1)[1]) if "." in spec.version else None
    if image_minor is not None and minor is not None and image_minor != minor:
        # The StatefulSet would run the pinned image while the status reported spec.version.
        return [Problem(
            "ImageVersionMismatch",
            f"version {spec.version} and the pinned image {spec.image} (PostgreSQL {image_major}.{image_minor})"
            " disagree: change both together, or remove spec.image to run postgres:<version>",
            "spec.image",
        )]
    return []


def _check_image(spec: SampleDBSpec) -> list[Problem]:
    error = image_error(spec.image) if spec.image is not None else None
    return [Problem("InvalidImage", f"image {spec.image!r}: {error}", "spec.image")] if error else []


def _check_storage(spec: SampleDBSpec) -> list[Problem]:
    problems = []
    for field, size in (("storage.size", spec.storage.size), ("backup.storage.size", spec.backup.storage.size)):
        error = storage_size_error(size) if size is not None else None
        if error:
            problems.append(Problem("InvalidStorageSize", f"{field} {size!r}: {error}", f"spec.{field}"))
    return problems


def _check_parameters(spec: SampleDBSpec) -> list[Problem]:
    problems = []
    for name, value in sorted((spec.parameters or {}).items()):
        error = parameter_error(name, value)
        if error:
            problems.append(Problem("InvalidParameter", f"parameter {name!r}: {error}", f"spec.parameters.{name}"))
    return problems


def _check_schedule(spec: SampleDBSpec) -> list[Problem]:
    schedule = spec.backup.schedule
    if schedule is None or croniter.is_valid(schedule):
        return []
    return [Problem(
        "InvalidBackupSchedule",
        f"backup.schedule {schedule!r} is not a valid cron schedule (a field is out of range?)",
        "spec.backup.schedule",
    )]


ARCHIVE_PARAMETERS = ("archive_mode", "archive_timeout")  # set from spec.backup.objectStore when it is set


def _check_object_store(spec: SampleDBSpec) -> list[Problem]:
    """With spec.backup.objectStore: its schedules parse, and spec.parameters leaves archiving to it."""
    archive = spec.backup.object_store
    if archive is None:
        return []
    problems = []
    if not croniter.is_valid(archive.base_backup_schedule):
        problems.append(Problem(
            "InvalidBaseBackupSchedule",
            f"backup.objectStore.baseBackupSchedule {archive.base_backup_schedule!r} is not a valid cron schedule",
            "spec.backup.objectStore.baseBackupSchedule"))
    if archive.verify_schedule is not None and not croniter.is_valid(archive.verify_schedule):
        problems.append(Problem(
            "InvalidVerifySchedule",
            f"backup.objectStore.verifySchedule {archive.verify_schedule!r} is not a valid cron schedule",
            "spec.backup.objectStore.verifySchedule"))
    taken = [p for p in ARCHIVE_PARAMETERS if p in (spec.parameters or {})]
    if taken:
        problems.append(Problem(
            "ParameterManaged",
            f"parameters {', '.join(taken)} are set by spec.backup.objectStore (archive_timeout from its"
            " archiveTimeoutSeconds): remove them from spec.parameters", "spec.parameters"))
    return problems


def _check_resources(spec: SampleDBSpec) -> list[Problem]:
    if spec.resources is None:
        return []
    problems = []
    for kind, quantities in (("requests", spec.resources.requests), ("limits", spec.resources.limits)):
        for name, value in sorted((quantities or {}).items()):
            error = resource_name_error(name) or resource_quantity_error(value)
            if error:
                problems.append(Problem(
                    "InvalidResources", f"resources.{kind}.{name} ({value}): {error}", f"spec.resources.{kind}.{name}",
                ))
    if problems or not spec.resources.requests or not spec.resources.limits:
        return problems
    for name, limit in sorted(spec.resources.limits.items()):
        request = spec.resources.requests.get(name)
        if request is not None and parse_quantity(request) > parse_quantity(limit):
            problems.append(Problem(
                "InvalidResources",
                f"resources.requests.{name} ({request}) exceeds resources.limits.{name} ({limit}):"
                f" {REQUEST_WITHIN_LIMIT_RULE.message}",
                f"spec.resources.requests.{name}",
            ))
    return problems



def _check_hba(spec: SampleDBSpec) -> list[Problem]:
    problems = []
    for i, rule in enumerate(spec.pg_hba or []):
        error = rule_error(rule, tls_enabled=spec.tls.enabled, tls_required=spec.tls.enabled and spec.tls.required)
        if error:
            problems.append(Problem("InvalidAccessRule", f"pgHba[{i}]: {error}", f"spec.pgHba[{i}]"))
    return problems


def _check_pooler(spec: SampleDBSpec) -> list[Problem]:
    problems = []
    for name, value in sorted(((spec.pooler.parameters if spec.pooler else None) or {}).items()):
        error = pooler_parameter_error(name, value)
        if error:
            problems.append(Problem("InvalidPoolerParameter", f"pooler parameter {name!r}: {error}",
                                    f"spec.pooler.parameters.{name}"))
    return problems
