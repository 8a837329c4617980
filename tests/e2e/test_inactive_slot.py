"""Real PostgreSQL, operator installed in the cluster: a replication slot nothing consumes, on the primary of a
database with a standby, keeps WAL on the primary's volume; once it holds a quarter of the volume's size the
status names it with the WAL it holds and the database is Degraded=True/InactiveSlotRetainingWAL, well before
the volume fills; dropping the slot clears it."""

from __future__ import annotations

import pytest
from tests.e2e.real_data import apply, condition, delete, sampledb, sql, status, unique, wait_ready
from tests.support.kube import wait_until

pytestmark = pytest.mark.cluster

VOLUME = 256 * 2**20  # sampledb()'s storage size
SWITCHES = 6  # WAL segments of 16 MiB each left behind the slot: 96 MiB, over a quarter of the volume


def primary_instance(name: str) -> dict[str, object]:
    return next((i for i in status(name).get("instances") or [] if i.get("role") == "primary"), {})


def test_an_inactive_slot_holding_wal_is_reported_before_it_fills_the_volume(installed: str) -> None:
    name = unique("slot")
    apply(sampledb(name, replicas=2))
    wait_ready(name)
    wait_until(lambda: status(name).get("readyInstances") == "2/2", timeout=300, what="both instances ready")
    assert "inactiveSlot" not in primary_instance(name)  # the standby's slot is active
    sql(name, "SELECT pg_create_physical_replication_slot('cdc_gone', true)", superuser=True)
    sql(name, "CREATE TABLE writes (x text)")
    for _ in range(SWITCHES):
        sql(name, "INSERT INTO writes VALUES (repeat('x', 100)); SELECT pg_switch_wal()", superuser=True)

    def degraded() -> dict[str, object] | None:
        cond = condition(name, "Degraded")
        return cond if cond.get("reason") == "InactiveSlotRetainingWAL" else None

    cond = wait_until(degraded, timeout=120, what="Degraded=True/InactiveSlotRetainingWAL")
    assert "cdc_gone" in str(cond["message"]) and "pg_drop_replication_slot('cdc_gone')" in str(cond["message"])
    held = primary_instance(name)
    assert held.get("inactiveSlot") == "cdc_gone", held
    assert VOLUME // 4 <= int(str(held["inactiveSlotRetainedBytes"])) < VOLUME, held
    sql(name, "SELECT pg_drop_replication_slot('cdc_gone')", superuser=True)
    wait_until(lambda: condition(name, "Degraded").get("status") == "False", timeout=120,
               what="Degraded cleared once the slot is dropped")
    assert "inactiveSlot" not in primary_instance(name)
    delete(name, wait=False)
