"""observability/verification_metrics.py: the per-database verification counter on the operator's registry."""

from __future__ import annotations

from prometheus_client import generate_latest

from sampledb_operator.observability import verification_metrics
from sampledb_operator.observability.metrics import REGISTRY

NAME = "sampledb_backup_verifications_total"


def _value(ns: str, db: str, result: str) -> float | None:
    return REGISTRY.get_sample_value(NAME, {"namespace": ns, "database": db, "result": result})


def test_a_database_series_exist_at_zero_once_initialised() -> None:
    assert _value("m-ns", "never-seen", "failed") is None

    verification_metrics.init_database("m-ns", "orders")
    verification_metrics.init_database("m-ns", "orders")  # idempotent

    assert _value("m-ns", "orders", "succeeded") == 0
    assert _value("m-ns", "orders", "failed") == 0


def test_observe_counts_by_result() -> None:
    verification_metrics.init_database("m-ns", "ledger")

    verification_metrics.observe("m-ns", "ledger", succeeded=True)
    verification_metrics.observe("m-ns", "ledger", succeeded=False)
    verification_metrics.observe("m-ns", "ledger", succeeded=False)

    assert (_value("m-ns", "ledger", "succeeded"), _value("m-ns", "ledger", "failed")) == (1, 2)


def test_exposed_as_a_counter_with_help() -> None:
    verification_metrics.init_database("m-ns", "shown")

    text = generate_latest(REGISTRY).decode()

    assert f"# TYPE {NAME} counter\n" in text
    assert f"# HELP {NAME} Backup verifications finished" in text
    assert f'{NAME}{{database="shown",namespace="m-ns",result="failed"}} 0.0' in text
