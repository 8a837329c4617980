"""SampleDB / SampleDBBackup models: parsing, defaults, dumping, round trips, validate_spec."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from pydantic import ValidationError
from tests.unit.model.sampledb_strategies import specs

from sampledb_operator.model.backup import (
    BackupPhase,
    BackupReason,
    SampleDBBackup,
    SampleDBBackupSpec,
    SampleDBBackupStatus,
)
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.quantity import PARSED_KEPT, is_quantity, parse_quantity
from sampledb_operator.model.sampledb import (
    DeletionPolicy,
    ResourceRequirements,
    SampleDB,
    SampleDBSpec,
    image_for,
    major_of,
)
from sampledb_operator.model.sampledb_status import AppliedMigration, BackupRecord, Phase, SampleDBStatus
from sampledb_operator.model.schema import dump
from sampledb_operator.model.validation import validate_spec

SAMPLES = Path(__file__).resolve().parents[3] / "manifests" / "samples"


def _spec(**overrides: Any) -> SampleDBSpec:
    base: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}}
    return SampleDBSpec.model_validate({**base, **overrides})


def _sample_docs(kind: str) -> list[dict[str, Any]]:
    docs = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == kind]
    return docs


def _is_subset(small: Any, big: Any) -> bool:
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and _is_subset(v, big[k]) for k, v in small.items())
    return bool(small == big)


# ------------------------------------------------------------------------------------ parsing


def test_minimal_spec_gets_the_documented_defaults() -> None:
    spec = _spec()
    assert spec.deletion_policy is DeletionPolicy.SNAPSHOT
    assert spec.paused is False
    assert spec.backup.retention == 7
    assert spec.backup.schedule is None
    assert spec.upgrade.backup_before_minor is True
    assert spec.restore is None and spec.init is None and spec.migrations is None


def test_spec_reads_camel_case_and_accepts_python_names() -> None:
    by_alias = SampleDBSpec.model_validate(
        {"version": "16.4", "storage": {"size": "1Gi", "storageClassName": "fast"}, "deletionPolicy": "Retain"}
    )
    by_name = SampleDBSpec.model_validate(
        {"version": "16.4", "storage": {"size": "1Gi", "storage_class_name": "fast"}, "deletion_policy": "Retain"}
    )
    assert by_alias == by_name
    assert by_alias.storage.storage_class_name == "fast"


def test_dump_uses_camel_case_strings_and_omits_unset_optionals() -> None:
    out = dump(_spec(deletionPolicy="Delete", upgrade={"backupBeforeMinor": False}))
    assert out["deletionPolicy"] == "Delete"
    assert out["upgrade"] == {"backupBeforeMinor": False, "method": "Link"}
    assert "restore" not in out and "image" not in out and "init" not in out


def test_unknown_spec_field_from_a_newer_crd_is_ignored_not_fatal() -> None:
    spec = SampleDBSpec.model_validate({"version": "16.4", "storage": {"size": "1Gi"}, "hibernation": {"on": True}})
    assert "hibernation" not in dump(spec)


def test_unknown_status_field_survives_a_read_modify_write() -> None:
    status = SampleDBStatus.model_validate({"phase": "Ready", "futureField": {"a": 1}})
    updated = status.model_copy(update={"observed_generation": 4})
    assert dump(updated)["futureField"] == {"a": 1}
    assert dump(updated)["observedGeneration"] == 4


def test_status_reads_a_phase_this_version_does_not_know() -> None:
    assert SampleDBStatus.model_validate({"phase": "Hibernating"}).phase == "Hibernating"


def test_spec_is_frozen() -> None:
    spec = _spec()
    with pytest.raises(ValidationError):
        spec.version = "17.0"


@pytest.mark.parametrize("size", ["ten", "10 Gi", "1.5.5Gi", "10GB", -1])
def test_malformed_quantity_is_rejected_in_python_too(size: Any) -> None:
    with pytest.raises(ValidationError):
        _spec(storage={"size": size})


def test_quantity_keeps_int_and_string_forms() -> None:
    assert _spec(storage={"size": 2**30}).storage.size == 2**30
    assert _spec(storage={"size": "1Gi"}).storage.size == "1Gi"


def test_whole_object_parses_with_metadata_and_without_status() -> None:
    obj = {
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "db", "namespace": "ns", "uid": "u-1", "generation": 3,
                     "creationTimestamp": "2026-01-02T03:04:05Z", "finalizers": ["sampledb.io/snapshot"],
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
    }
    db = SampleDB.model_validate(obj)
    assert db.metadata.generation == 3
    assert db.metadata.creation_timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert db.metadata.finalizers == ["sampledb.io/snapshot"]
    assert db.status == SampleDBStatus()
    assert db.status.conditions == []


def test_status_round_trips_with_conditions_and_times() -> None:
    status = SampleDBStatus(
        phase=Phase.RUNNING,
        conditions=[Condition(type="Ready", status="True", reason="DatabaseReady",
                              last_transition_time=datetime(2026, 1, 1, tzinfo=UTC), observed_generation=2)],
        observed_generation=2, current_version="16.4", endpoint="db.ns.svc:5432", secret_name="db-credentials",
        last_backup=BackupRecord(name="db-scheduled-20260101030000",
                                 completed_at=datetime(2026, 1, 1, 3, 0, 10, tzinfo=UTC)),
        applied_migrations=[AppliedMigration(name="0001_a.sql", checksum="a" * 64)],
    )
    out = dump(status)
    assert out["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert out["lastBackup"]["completedAt"] == "2026-01-01T03:00:10Z"
    assert SampleDBStatus.model_validate(out) == status


def test_times_are_normalised_to_utc_whole_seconds() -> None:
    plus_two = timezone(timedelta(hours=2))
    cond = Condition(type="Ready", status="True", reason="R",
                     last_transition_time=datetime(2026, 1, 1, 2, 0, 0, 999_999, tzinfo=plus_two))
    assert cond.last_transition_time == datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
    assert dump(cond)["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_naive_time_is_rejected() -> None:
    with pytest.raises(ValidationError):
        Condition(type="Ready", status="True", reason="R", last_transition_time=datetime(2026, 1, 1))


@given(specs)
def test_spec_round_trips_through_its_dict_form(spec: SampleDBSpec) -> None:
    assert SampleDBSpec.model_validate(dump(spec)) == spec
    assert dump(SampleDBSpec.model_validate(dump(spec))) == dump(spec)


# ------------------------------------------------------------------------------------ samples


@pytest.mark.parametrize("doc", _sample_docs("SampleDB"), ids=lambda d: d["metadata"]["name"])
def test_every_sample_sampledb_parses_and_uses_only_known_fields(doc: dict[str, Any]) -> None:
    db = SampleDB.model_validate(doc)
    assert _is_subset(doc["spec"], dump(db.spec)), "a sample uses a field the model does not know"
    assert validate_spec(db.spec) == []


@pytest.mark.parametrize("doc", _sample_docs("SampleDBBackup"), ids=lambda d: d["metadata"]["name"])
def test_every_sample_backup_parses_and_uses_only_known_fields(doc: dict[str, Any]) -> None:
    backup = SampleDBBackup.model_validate(doc)
    assert _is_subset(doc["spec"], dump(backup.spec))


def test_samples_include_the_example_database_of_the_docs() -> None:
    assert "example-database" in {d["metadata"]["name"] for d in _sample_docs("SampleDB")}


# ------------------------------------------------------------------------------------ helpers


def test_image_defaults_to_the_docker_library_postgres_image_of_the_version() -> None:
    assert image_for(_spec(version="17.2")) == "postgres:17.2"


def test_image_override_wins() -> None:
    assert image_for(_spec(image="registry.local/pg:16")) == "registry.local/pg:16"


def test_major_of_reads_the_major_version() -> None:
    assert major_of("16.4") == 16
    assert major_of("9") == 9


def test_quantities_parse_to_exact_values() -> None:
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("500m") == Decimal("0.5")
    assert parse_quantity("1.5G") == 1_500_000_000
    assert parse_quantity("1e3") == 1000
    assert parse_quantity(64) == 64
    assert parse_quantity("64Mi") < parse_quantity("1Gi")
    assert not is_quantity("10GB")
    with pytest.raises(ValueError):
        parse_quantity("1Gi ")


def test_a_parsed_quantity_is_kept_and_a_malformed_one_raises_every_time() -> None:
    parse_quantity.cache_clear()
    first = parse_quantity("20Gi")
    assert parse_quantity("20Gi") is first and first == 20 * 2**30
    assert parse_quantity("20G") == 20 * 10**9 and parse_quantity(20) == 20  # other values, other entries
    for _ in range(2):
        with pytest.raises(ValueError):
            parse_quantity("20 Gi")
    kept = parse_quantity.cache_info()
    assert (kept.hits, kept.currsize, kept.maxsize) == (1, 3, PARSED_KEPT)


# ------------------------------------------------------------------------------------ validate_spec


def test_a_valid_spec_has_no_problems() -> None:
    assert validate_spec(_spec(backup={"schedule": "0 3 * * *"})) == []


def test_schedule_with_an_out_of_range_field_is_a_problem() -> None:
    (problem,) = validate_spec(_spec(backup={"schedule": "99 * * * *"}))
    assert problem.reason == "InvalidBackupSchedule"
    assert problem.field == "spec.backup.schedule"
    assert "99 * * * *" in problem.message


def test_request_above_limit_is_a_problem() -> None:
    spec = _spec(resources={"requests": {"memory": "2Gi", "cpu": "100m"}, "limits": {"memory": "1Gi", "cpu": 1}})
    (problem,) = validate_spec(spec)
    assert problem.reason == "InvalidResources"
    assert "requests.memory (2Gi) exceeds resources.limits.memory (1Gi)" in problem.message


def test_request_equal_to_limit_is_fine() -> None:
    spec = _spec(resources=ResourceRequirements(requests={"memory": "1024Mi"}, limits={"memory": "1Gi"}))
    assert validate_spec(spec) == []


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        ("postgres:15.2", "ImageVersionMismatch"),
        ("docker.io/library/postgres:15-alpine", "ImageVersionMismatch"),
        ("bitnami/postgresql:17.0.0", "ImageVersionMismatch"),
        ("postgres:16.4-bookworm", None),
        ("postgres:16@sha256:" + "0" * 64, None),
        ("timescale/timescaledb:2.14.2-pg16", None),
        ("registry:5000/postgres@sha256:" + "0" * 64, None),  # the port is not a tag
        ("postgres:latest", None),
        ("postgres:16.2", "ImageVersionMismatch"),  # another minor: the pod would not run spec.version
        ("postgres:16.2-alpine@sha256:" + "0" * 64, "ImageVersionMismatch"),
        ("bitnami/postgresql:16.4.0", None),
        ("postgres:16", None),
    ],
)
def test_image_whose_tag_names_another_version_is_a_problem(image: str, reason: str | None) -> None:
    problems = validate_spec(_spec(image=image))
    assert [p.reason for p in problems] == ([reason] if reason else [])


def test_unsupported_major_stored_before_a_rule_change_is_a_problem() -> None:
    (problem,) = validate_spec(_spec(version="12.9"))
    assert problem.reason == "UnsupportedVersion"
    assert "13, 14, 15, 16, 17, 18" in problem.message


# ------------------------------------------------------------------------------------ backups


def test_backup_defaults_to_a_manual_reason() -> None:
    spec = SampleDBBackupSpec.model_validate({"database": "db"})
    assert spec.reason is BackupReason.MANUAL
    assert dump(spec) == {"database": "db", "reason": "manual"}


def test_backup_reasons_and_phases_are_the_documented_values() -> None:
    assert [r.value for r in BackupReason] == ["scheduled", "manual", "pre-delete", "pre-upgrade", "pre-migration"]
    assert [p.value for p in BackupPhase] == ["Pending", "Running", "Succeeded", "Failed"]


def test_backup_status_round_trips() -> None:
    status = SampleDBBackupStatus.model_validate({
        "phase": "Succeeded", "startedAt": "2026-01-01T03:00:00Z", "completedAt": "2026-01-01T03:00:09Z",
        "sizeBytes": 123456, "checksum": "0" * 64, "location": {"pvcName": "db-backups", "path": "/b/x.dump"},
        "version": "16.4", "message": "ok",
    })
    assert status.location is not None and status.location.pvc_name == "db-backups"
    assert SampleDBBackupStatus.model_validate(dump(status)) == status


def test_backup_checksum_must_be_sha256_hex() -> None:
    with pytest.raises(ValidationError):
        SampleDBBackupStatus(checksum="md5:abc")
