"""Fixtures of the reconciler tests: `servers`, the SQL layer (pg/client.py) replaced by a script of the servers'
answers (test_replication_reconciler.FakeServers); and, for every test, the TLS question answered as a server of the
default image does (it serves TLS) instead of a connection attempt to a pod address that does not exist."""

from __future__ import annotations

import pytest
from tests.unit.reconcilers.test_replication_reconciler import FakeServers

from sampledb_operator.pg import client as pg


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> FakeServers:
    fake = FakeServers()
    for call in ("server_state", "promote", "sync_slots", "reload_config", "stop_server", "refused_within",
                 "renew_lease", "disarm_lease"):
        monkeypatch.setattr(pg, call, getattr(fake, call))
    return fake


@pytest.fixture(autouse=True)
def serves_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    async def ssl_on(target: pg.Target, within: float = 3.0) -> bool | None:
        return True
    monkeypatch.setattr(pg, "ssl_on", ssl_on)
