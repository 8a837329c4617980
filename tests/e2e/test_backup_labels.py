"""A SampleDBBackup made by hand without labels is found by its database's label (issue #11, item 11)."""

from __future__ import annotations

import pytest
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support.kube import kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def test_a_manual_backup_without_labels_is_listed_by_its_database_label(namespace: str,
                                                                        operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("labelled", ns))
    wait_ready("labelled", ns)
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
           "metadata": {"name": "by-hand", "namespace": ns}, "spec": {"database": "labelled"}})

    def listed() -> list[str]:
        items = kubectl_json("get", "sdbb", "-n", ns, "-l", "sampledb.io/database=labelled")["items"]
        return [b["metadata"]["name"] for b in items]

    wait_until(lambda: listed() == ["by-hand"], timeout=60, what="the backup under its database's label")
    wait_until(lambda: (kubectl_json("get", "sdbb", "by-hand", "-n", ns).get("status") or {}).get("phase")
               == "Succeeded", timeout=120, what="the backup to succeed")
