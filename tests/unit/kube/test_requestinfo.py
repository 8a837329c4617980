"""kube.requestinfo: the RBAC verb and resource of a request, as the API server reads them."""

from __future__ import annotations

import pytest

from sampledb_operator.kube.requestinfo import RequestInfo, request_info
from sampledb_operator.kube.resources import JOB, LEASE, NAMESPACE, SAMPLEDB, STORAGECLASS


@pytest.mark.parametrize(("method", "path", "query", "stream", "want"), [
    ("GET", SAMPLEDB.path("ns", "db"), None, False, RequestInfo("get", "sampledb.io", "sampledbs", "")),
    ("GET", SAMPLEDB.path("ns"), {"limit": 500}, False, RequestInfo("list", "sampledb.io", "sampledbs", "")),
    ("GET", SAMPLEDB.path(), None, False, RequestInfo("list", "sampledb.io", "sampledbs", "")),
    ("GET", JOB.path("ns"), None, True, RequestInfo("watch", "batch", "jobs", "")),
    ("GET", JOB.path("ns"), {"watch": True}, False, RequestInfo("watch", "batch", "jobs", "")),
    ("PATCH", SAMPLEDB.path("ns", "db", "status"), None, False,
     RequestInfo("patch", "sampledb.io", "sampledbs", "status")),
    ("PUT", LEASE.path("ns", "l"), None, False, RequestInfo("update", "coordination.k8s.io", "leases", "")),
    ("POST", JOB.path("ns"), None, False, RequestInfo("create", "batch", "jobs", "")),
    ("DELETE", JOB.path("ns", "j"), None, False, RequestInfo("delete", "batch", "jobs", "")),
    ("DELETE", JOB.path("ns"), None, False, RequestInfo("deletecollection", "batch", "jobs", "")),
    ("GET", NAMESPACE.path(name="ns"), None, False, RequestInfo("get", "", "namespaces", "")),
    ("PUT", "/api/v1/namespaces/ns/finalize", None, False, RequestInfo("update", "", "namespaces", "finalize")),
    ("GET", "/api/v1/namespaces/ns/pods", None, False, RequestInfo("list", "", "pods", "")),
    ("GET", "/api/v1/namespaces/ns/pods/p/log", None, False, RequestInfo("get", "", "pods", "log")),
    ("GET", STORAGECLASS.path(), None, True, RequestInfo("watch", "storage.k8s.io", "storageclasses", "")),
    ("GET", "/version", None, False, RequestInfo("get", "", "<other>", "")),
    ("GET", "/apis/batch/v1", None, False, RequestInfo("get", "batch", "<other>", "")),
])
def test_request_info_reads_the_path_as_the_api_server_does(method: str, path: str, query: dict | None,
                                                             stream: bool, want: RequestInfo) -> None:
    assert request_info(method, path, query, stream=stream) == want
