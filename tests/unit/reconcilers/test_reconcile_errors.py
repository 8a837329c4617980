"""A SampleDB whose passes keep failing says so (issue #11, item 7).

A 403 reading the StorageClass (RBAC without storageclasses) made every pass raise before it wrote
the status, which kept saying Running/Reconciled/Degraded=False. After a few failures in a row the
controller calls reconcilers/errors.py: Degraded=True with the error's message (reason OperatorForbidden for the
operator's own RBAC, ReconcileError for an error the API server did not refuse), a Warning Event; the first
pass that gets through clears it.
"""

from __future__ import annotations

import pytest
from tests.support.fake_cluster import NS, FakeCluster, condition, running_database

from sampledb_operator.kube.errors import Forbidden, ServerError
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.reconcilers.errors import error_text, reason_of, report_reconcile_error

DENIED = Forbidden(403, "Forbidden", 'storageclasses.storage.k8s.io "fast" is forbidden: User'
                   ' "system:serviceaccount:sampledb-system:sampledb-operator" cannot get resource "storageclasses"')


async def test_persistent_errors_show_in_the_status_and_an_event_until_a_pass_gets_through() -> None:
    cluster = FakeCluster()
    await running_database(cluster, storage={"size": "1Gi", "storageClassName": "fast"},
                           backup={"storage": {"size": "1Gi"}})
    cluster.put("StorageClass", {"metadata": {"name": "fast"}, "allowVolumeExpansion": True})
    cluster.fail("StorageClass", "get", DENIED)
    cluster.patch("SampleDB", "orders", {"spec": {"storage": {"size": "2Gi"}}})
    with pytest.raises(Forbidden):
        await cluster.reconcile("orders")
    assert condition(cluster.get("SampleDB", "orders"), "Degraded")["status"] == "False"  # the silent state

    await report_reconcile_error(cluster.ctx, ObjectRef(NS, "orders"), DENIED, 3)
    db = cluster.get("SampleDB", "orders")
    degraded = condition(db, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "OperatorForbidden")
    assert "403 Forbidden" in degraded["message"] and "storageclasses" in degraded["message"]
    assert condition(db, "Progressing")["reason"] == "OperatorForbidden"
    assert db is not None and db["status"]["phase"] == "Degraded"
    assert cluster.recorder.events[-1][:2] == ("Warning", "OperatorForbidden")

    writes, events = len(cluster.writes), len(cluster.recorder.events)
    await report_reconcile_error(cluster.ctx, ObjectRef(NS, "orders"), DENIED, 4)  # the same error again
    assert (len(cluster.writes), len(cluster.recorder.events)) == (writes, events)

    cluster.fail("StorageClass", "get", None)  # RBAC fixed
    await cluster.reconcile("orders")
    db = cluster.get("SampleDB", "orders")
    assert condition(db, "Degraded")["status"] == "False"
    assert db is not None and db["status"]["phase"] == "Running"


def test_errors_the_api_server_did_not_refuse_are_reconcile_errors() -> None:
    assert reason_of(ServerError(500, "InternalError", "etcdserver: request timed out")) == "ReconcileError"
    assert reason_of(RuntimeError("boom")) == "ReconcileError"
    assert reason_of(Forbidden(403, "Forbidden", 'jobs.batch "x" is forbidden: exceeded quota: q')) == "QuotaExceeded"


def test_the_error_text_has_no_credentials_and_is_bounded() -> None:
    text = error_text(RuntimeError("connect postgresql://app:s3cret@db:5432/app failed; password=hunter2 " + "x" * 900))
    assert "s3cret" not in text and "hunter2" not in text
    assert text.startswith("RuntimeError: ") and len(text) <= 400
