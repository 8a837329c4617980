"""Child-object names: valid for Kubernetes for every SampleDB name the CRD accepts."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sampledb_operator.model import names
from sampledb_operator.model.backup import BackupReason

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

LONGEST = "d" + "b" * (names.MAX_NAME_LENGTH - 2) + "z"
UID = "6f1b3c1e-2f44-4a8e-9a53-9d3f7f1b2c3d"

# Names Kubernetes also uses as a DNS label (a Service name, a pod hostname, a label value).
LABEL_BOUND: dict[str, Callable[[str], str]] = {
    "statefulset": names.statefulset_name,
    "pod": names.pod_name,
    "headless service": names.headless_service_name,
    "client service": names.client_service_name,
    "init job": lambda db: names.init_job_name(db, UID),
    "backup job": lambda db: names.backup_job_name(db, "x" * 253),
    "snapshot job": lambda db: names.snapshot_job_name(db, UID),
    "restore job": lambda db: names.restore_job_name(db, "x" * 253),
    "upgrade job": lambda db: names.upgrade_job_name(db, "16.4", "17.2"),
    "migration job": lambda db: names.migration_job_name(db, "f" * 64),
    "controller-revision-hash label": lambda db: f"{names.statefulset_name(db)}-{'h' * 10}",
}
SUBDOMAIN_ONLY: dict[str, Callable[[str], str]] = {
    "data pvc": names.data_pvc_name,
    "backup pvc": names.backup_pvc_name,
    "secret": names.secret_name,
    "configmap": names.configmap_name,
    "backup": lambda db: names.backup_name(db, BackupReason.PRE_MIGRATION.value, datetime(2026, 1, 1, tzinfo=UTC)),
}

db_names = st.from_regex(DNS1035_LABEL, fullmatch=True).filter(lambda n: len(n) <= names.MAX_NAME_LENGTH)


def test_max_name_length_is_a_full_dns_label() -> None:
    assert names.MAX_NAME_LENGTH == 63


@pytest.mark.parametrize("what", sorted(LABEL_BOUND))
def test_longest_allowed_name_gives_label_bound_names_within_63(what: str) -> None:
    child = LABEL_BOUND[what](LONGEST)
    assert len(child) <= 63, f"{what}: {child} has {len(child)} characters"
    assert DNS1123_LABEL.match(child), child


@pytest.mark.parametrize("what", ["headless service", "client service"])
def test_service_names_are_dns1035_labels(what: str) -> None:
    assert DNS1035_LABEL.match(LABEL_BOUND[what](LONGEST))


@pytest.mark.parametrize("what", sorted(SUBDOMAIN_ONLY))
def test_longest_allowed_name_gives_valid_subdomain_names(what: str) -> None:
    child = SUBDOMAIN_ONLY[what](LONGEST)
    assert len(child) <= 253 and DNS1123_SUBDOMAIN.match(child), child


def test_long_names_are_shortened_with_a_hash_and_stay_distinct() -> None:
    a, b = "a" * 62 + "x", "a" * 62 + "y"
    assert len(a) == 63
    for what in ("statefulset", "headless service", "init job", "upgrade job"):
        ca, cb = LABEL_BOUND[what](a), LABEL_BOUND[what](b)
        assert ca != cb, what
        assert len(ca) <= 63 and DNS1123_LABEL.match(ca), ca
    assert names.statefulset_name("short") == "short"
    assert names.headless_service_name("short") == "short-headless"


@given(db_names)
def test_every_accepted_name_gives_valid_child_names(db: str) -> None:
    for f in LABEL_BOUND.values():
        child = f(db)
        assert len(child) <= 63 and DNS1123_LABEL.match(child)
    for f in SUBDOMAIN_ONLY.values():
        assert DNS1123_SUBDOMAIN.match(f(db))


def test_children_of_one_database_have_distinct_names_per_kind() -> None:
    services = {names.headless_service_name("db"), names.client_service_name("db")}
    jobs = {f("db") for k, f in LABEL_BOUND.items() if k.endswith("job")}
    assert len(services) == 2
    assert len(jobs) == 6


def test_job_names_are_deterministic_and_change_with_the_work() -> None:
    assert names.backup_job_name("db", "b1") == names.backup_job_name("db", "b1")
    assert names.backup_job_name("db", "b1") != names.backup_job_name("db", "b2")
    assert names.upgrade_job_name("db", "16.4", "17.0") != names.upgrade_job_name("db", "16.4", "17.1")
    assert re.fullmatch(r"db-backup-[0-9a-f]{8}", names.backup_job_name("db", "b1"))


def test_short_hash_separates_parts() -> None:
    assert names.short_hash("a", "b") != names.short_hash("ab")
    assert len(names.short_hash("x")) == names.HASH_LENGTH


def test_statefulset_children_follow_the_statefulset_controller_pattern() -> None:
    assert names.pod_name("db") == "db-0"
    assert names.data_pvc_name("db") == f"{names.DATA_VOLUME}-db-0"
    assert names.data_pvc_name("db", 2) == "data-db-2"


def test_endpoint_is_service_dns_name_and_port() -> None:
    assert names.endpoint("db", "ns") == "db.ns.svc:5432"


def test_backup_name_uses_utc_time() -> None:
    at = datetime(2026, 1, 1, 2, 30, 0, tzinfo=timezone(timedelta(hours=2)))
    assert names.backup_name("db", "scheduled", at) == "db-scheduled-20260101003000"
