"""Fixtures of the reconciler tests: `servers`, the SQL layer (pg/client.py) replaced by a script of the servers'
answers (test_replication_reconciler.FakeServers)."""

from __future__ import annotations

import pytest
from tests.unit.reconcilers.test_replication_reconciler import FakeServers

from sampledb_operator.pg import client as pg


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> FakeServers:
    fake = FakeServers()
    for call in ("server_state", "promote", "sync_slots", "reload_config"):
        monkeypatch.setattr(pg, call, getattr(fake, call))
    return fake
