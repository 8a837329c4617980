"""Hostile input (issue #12): each CRD rule and its Python twin in validate_spec agree, case by case.

The API server's side of the same table runs in tests/integration/test_crd_validation.py.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
from datetime import UTC, datetime
from decimal import Decimal
from importlib import resources
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from tests.unit.model.hostile_input import (
    ACCEPTED_BACKUP_NAMES,
    ACCEPTED_SAMPLEDBS,
    BACKUP_NAME_MESSAGE,
    HOSTILE_BACKUP_NAMES,
    HOSTILE_SAMPLEDBS,
    UNREADABLE,
    VALID,
    VALID_BACKUP,
    Case,
    variant,
)
from tests.unit.model.sampledb_strategies import specs

from sampledb_operator.model import crd, names
from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.quantity import BOUNDED_QUANTITY_RE, QUANTITY_RE, is_bounded_quantity, parse_quantity
from sampledb_operator.model.sampledb import SampleDBSpec
from sampledb_operator.model.spec_rules import (
    FORBIDDEN_PARAMETERS,
    IMAGE_RE,
    MAX_STORAGE,
    PINNED_IMAGE_RE,
    parameter_error,
    storage_size_error,
)
from sampledb_operator.model.validation import validate_backup, validate_spec

# The settings issue #12 names; FORBIDDEN_PARAMETERS may hold more.
ISSUE_PARAMETERS = (
    "archive_command", "restore_command", "archive_cleanup_command", "recovery_end_command", "ssl_cert_file",
    "ssl_key_file", "ssl_ca_file", "ssl_crl_file", "ssl_crl_dir", "ssl_passphrase_command", "data_directory",
    "hba_file", "ident_file", "config_file", "external_pid_file", "unix_socket_directories", "unix_socket_group",
    "unix_socket_permissions", "log_directory", "log_filename", "listen_addresses", "port",
    "shared_preload_libraries", "local_preload_libraries", "session_preload_libraries", "dynamic_library_path",
    "include", "include_dir", "include_if_exists", "primary_conninfo", "primary_slot_name", "promote_trigger_file",
)


def _spec_of(changes: dict[str, Any]) -> SampleDBSpec:
    return SampleDBSpec.model_validate(variant(VALID, changes)["spec"])


# ------------------------------------------------------------------------------------ the shared table


@pytest.mark.parametrize("case", HOSTILE_SAMPLEDBS, ids=[c.id for c in HOSTILE_SAMPLEDBS])
def test_hostile_spec_stored_before_the_rule_is_a_spec_problem(case: Case) -> None:
    if case.reason == UNREADABLE:
        with pytest.raises(ValidationError):
            _spec_of(case.changes)
        return
    problems = validate_spec(_spec_of(case.changes))
    assert [p.reason for p in problems] == [case.reason], problems
    assert case.message in problems[0].message
    assert problems[0].field.startswith(case.field)


@pytest.mark.parametrize(("changes"), [c[1] for c in ACCEPTED_SAMPLEDBS], ids=[c[0] for c in ACCEPTED_SAMPLEDBS])
def test_boundary_spec_has_no_problems(changes: dict[str, Any]) -> None:
    assert validate_spec(_spec_of(changes)) == []


def test_every_refused_setting_of_the_issue_is_forbidden() -> None:
    assert set(ISSUE_PARAMETERS) <= set(FORBIDDEN_PARAMETERS)


@pytest.mark.parametrize("name", sorted(FORBIDDEN_PARAMETERS))
def test_every_forbidden_parameter_says_why(name: str) -> None:
    (problem,) = validate_spec(_spec_of({"spec.parameters": {name: "x"}}))
    assert problem.reason == "InvalidParameter"
    assert problem.message == f"parameter {name!r}: cannot be set: {FORBIDDEN_PARAMETERS[name]}"


def test_forbidden_parameters_are_rejected_by_the_crd_rule() -> None:
    node = crd.openapi_schema(crd.SAMPLEDB)["properties"]["spec"]["properties"]["parameters"]
    (rule,) = [r for r in node["x-kubernetes-validations"] if "cannot be set" in r["message"]]
    listed = re.findall(r"'([a-z_]+)'", rule["rule"])
    assert listed == sorted(FORBIDDEN_PARAMETERS)
    assert all(name in rule["message"] for name in FORBIDDEN_PARAMETERS)


@given(st.text(alphabet=st.characters(categories=("Cc",)), min_size=1, max_size=3), st.text(max_size=10))
def test_any_control_character_in_a_value_is_refused(controls: str, text: str) -> None:
    assert parameter_error("application_name", text + controls + text) is not None


TWIN_REASONS = {"InvalidStorageSize", "InvalidParameter", "InvalidImage", "InvalidResources"}


@given(specs)
def test_no_twin_rule_fires_on_a_spec_the_crd_accepts(spec: SampleDBSpec) -> None:
    """`specs` generates what the CRD accepts (checked against the API server in the integration tests)."""
    assert {p.reason for p in validate_spec(spec)}.isdisjoint(TWIN_REASONS)


# ------------------------------------------------------------------------------------ storage sizes


def test_largest_size_is_documented_in_the_field_description() -> None:
    size = crd.openapi_schema(crd.SAMPLEDB)["properties"]["spec"]["properties"]["storage"]["properties"]["size"]
    assert f"to {MAX_STORAGE}" in size["description"]
    assert any(r["message"] == f"must be at most {MAX_STORAGE}" for r in size["x-kubernetes-validations"])


@pytest.mark.parametrize(("size", "ok"), [("64Ti", True), (64 * 2**40, True), ("70368744177664", True),
                                          ("70368744177665", False), ("64.0000001Ti", False), ("1Pi", False),
                                          ("64Mi", True), ("67108863", False), ("0.1Gi", True)])
def test_storage_size_bounds(size: int | str, ok: bool) -> None:
    assert (storage_size_error(size) is None) is ok


# ------------------------------------------------------------------------------------ quantities


@given(st.from_regex(BOUNDED_QUANTITY_RE, fullmatch=True))
def test_a_bounded_quantity_is_a_quantity(text: str) -> None:
    assert re.fullmatch(QUANTITY_RE, text)
    parse_quantity(text)


@pytest.mark.parametrize("text", ["1e2147483647", "1e-2147483648", "1e99999999999999999999", "5E+1000000"])
def test_a_quantity_with_a_huge_exponent_is_unbounded_and_never_crashes_the_parser(text: str) -> None:
    assert not is_bounded_quantity(text)
    with contextlib.suppress(ValueError):
        parse_quantity(text)


def test_long_mantissas_parse_exactly() -> None:
    digits = "1234567890" * 5
    assert parse_quantity(f"{digits}Ei") == int(digits) * 2**60
    assert parse_quantity(f"{digits}.5m") == Decimal(f"{digits[:-3]}.{digits[-3:]}5")


def _quantity_calls(rule: str) -> list[str]:
    return re.findall(r"(?:isQuantity|quantity)\(string\(([^()]+(?:\[[a-z]+\])?)\)\)", rule)


def test_every_cel_quantity_call_is_guarded_by_the_bounded_format() -> None:
    """isQuantity() and quantity() cost time in proportion to the exponent: the match comes first."""
    schemas = [crd.openapi_schema(info) for info in crd.KINDS]
    rules = [r["rule"] for s in schemas for r in _all_rules(s)]
    assert any(_quantity_calls(r) for r in rules)
    for rule in rules:
        for operand in _quantity_calls(rule):
            guard = f"string({operand}).matches('{BOUNDED_QUANTITY_RE}')"
            assert guard in rule, rule
            calls = (rule.find(f"{fn}(string({operand}))") for fn in ("isQuantity", "quantity"))
            assert rule.find(guard) < min(i for i in calls if i >= 0), rule


def _all_rules(node: dict[str, Any]) -> list[dict[str, str]]:
    out = list(node.get("x-kubernetes-validations", []))
    for child in [*node.get("properties", {}).values(), node.get("additionalProperties"), node.get("items")]:
        if isinstance(child, dict):
            out += _all_rules(child)
    return out


# ------------------------------------------------------------------------------------ images

IMAGES = [
    ("postgres", True, False),
    ("postgres:16.4", True, True),
    ("docker.io/library/postgres:16.4", True, True),
    ("localhost/postgres:16", True, True),
    ("registry:5000/postgres", True, False),
    ("registry:5000/postgres:16", True, True),
    ("[::1]:5000/postgres:16", True, True),
    ("postgres@sha256:" + "a" * 64, True, True),
    ("postgres:16@sha512:" + "a" * 128, True, True),
    ("postgres@sha256:" + "A" * 64, False, False),
    ("postgres@md5:" + "a" * 32, False, False),
    ("postgres:16.4;reboot", False, False),
    ("postgres:16.4 && reboot", False, False),
    ("Postgres:16", False, False),
    ("my__org/pg:1", True, True),
    ("my___org/pg:1", False, False),
    ("-pg:1", False, False),
    ("pg-:1", False, False),
    ("pg:.1", False, False),
    ("pg:_1", True, True),
    ("pg::1", False, False),
    ("pg:1:2", False, False),
    ("/pg:1", False, False),
    ("pg:1\n", False, False),
]


@pytest.mark.parametrize(("image", "reference", "pinned"), IMAGES, ids=[i[0][:40] for i in IMAGES])
def test_image_reference_grammar(image: str, reference: bool, pinned: bool) -> None:
    assert bool(re.fullmatch(IMAGE_RE, image)) is reference
    assert bool(re.fullmatch(PINNED_IMAGE_RE, image)) is pinned


def test_default_image_of_every_version_is_pinned() -> None:
    assert validate_spec(_spec_of({"spec.version": "18.0"})) == []
    assert re.fullmatch(PINNED_IMAGE_RE, "postgres:18.0")


# ------------------------------------------------------------------------------------ backup names


@pytest.mark.parametrize("name", [n for _, n in HOSTILE_BACKUP_NAMES], ids=[i for i, _ in HOSTILE_BACKUP_NAMES])
def test_backup_name_the_script_refuses_is_a_problem(name: str) -> None:
    backup = SampleDBBackup.model_validate(variant(VALID_BACKUP, {"metadata.name": name}))
    (problem,) = validate_backup(backup)
    assert problem.reason == "InvalidName" and BACKUP_NAME_MESSAGE in problem.message


@pytest.mark.parametrize("name", [n for _, n in ACCEPTED_BACKUP_NAMES], ids=[i for i, _ in ACCEPTED_BACKUP_NAMES])
def test_backup_name_the_script_accepts_has_no_problem(name: str) -> None:
    assert validate_backup(SampleDBBackup.model_validate(variant(VALID_BACKUP, {"metadata.name": name}))) == []


def test_backup_name_rule_is_the_one_of_the_crd() -> None:
    rules = crd.openapi_schema(crd.SAMPLEDBBACKUP)["x-kubernetes-validations"]
    (rule,) = [r for r in rules if names.BACKUP_NAME_RE in r["rule"]]
    assert rule["rule"] == f"self.metadata.name.matches('{names.BACKUP_NAME_RE}')"
    assert rule["fieldPath"] == ".metadata.name"
    assert rule["message"].startswith(BACKUP_NAME_MESSAGE)
    assert f"at most {names.BACKUP_NAME_MAX} characters" in BACKUP_NAME_MESSAGE


@pytest.mark.parametrize("name", ["b" * 200, "b" * 201, "b" * 202, "db.manual-1", "a" + "." * 200, "Db_1", "-db",
                                  ".db", "db/1", "db 1", "d\nb", "é"])
def test_backup_name_rule_is_the_backup_scripts_check(name: str) -> None:
    lib = resources.files("sampledb_operator.dataplane") / "lib.sh"
    with resources.as_file(lib) as path:
        proc = subprocess.run(["bash", "-c", f'. "{path}"; check_name "$1" BACKUP_NAME', "test", name],
                              check=False, capture_output=True, text=True)
    assert (proc.returncode == 0) is bool(re.fullmatch(names.BACKUP_NAME_RE, name)), proc.stderr


def test_generated_backup_names_fit_the_script() -> None:
    longest_db = "d" * names.MAX_NAME_LENGTH
    name = names.backup_name(longest_db, "pre-migration", datetime(2026, 1, 1, tzinfo=UTC))
    assert re.fullmatch(names.BACKUP_NAME_RE, name)
