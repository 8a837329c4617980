"""The tests never touch a cluster the user chose by surprise: $KUBECONFIG is used only with
SAMPLEDB_TEST_USE_KUBECONFIG=1 (tests/support/cluster.external_cluster, hack/test.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support import cluster


def test_a_kubeconfig_of_the_users_own_is_ignored_without_the_opt_in(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    theirs = tmp_path / "prod.kubeconfig"
    theirs.write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(theirs))
    monkeypatch.setenv("SAMPLEDB_KUBECTL", "/bin/true")
    monkeypatch.delenv(cluster.OPT_IN, raising=False)
    assert cluster.external_cluster() is None
    monkeypatch.setenv(cluster.OPT_IN, "1")
    chosen = cluster.external_cluster()
    assert chosen is not None and chosen.kubeconfig == str(theirs) and not chosen.local

