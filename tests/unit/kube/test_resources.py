"""Resource paths and api versions."""

from __future__ import annotations

import pytest

from sampledb_operator.kube import resources as r


def test_core_and_group_api_versions() -> None:
    assert r.POD.api_version == "v1"
    assert r.STATEFULSET.api_version == "apps/v1"
    assert r.SAMPLEDB.api_version == "sampledb.io/v1alpha1"
    assert r.LEASE.api_version == "coordination.k8s.io/v1"


@pytest.mark.parametrize(
    ("resource", "args", "path"),
    [
        (r.STATEFULSET, ("ns", "x", "status"), "/apis/apps/v1/namespaces/ns/statefulsets/x/status"),
        (r.STATEFULSET, ("ns",), "/apis/apps/v1/namespaces/ns/statefulsets"),
        (r.POD, (), "/api/v1/pods"),
        (r.SECRET, ("ns", "s"), "/api/v1/namespaces/ns/secrets/s"),
        (r.JOB, ("ns", "j"), "/apis/batch/v1/namespaces/ns/jobs/j"),
        (r.SAMPLEDBBACKUP, ("ns",), "/apis/sampledb.io/v1alpha1/namespaces/ns/sampledbbackups"),
        (r.NAMESPACE, (None, "ns"), "/api/v1/namespaces/ns"),
        (r.CRD, ("ignored", "sampledbs.sampledb.io"),
         "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/sampledbs.sampledb.io"),
        (r.STORAGECLASS, (), "/apis/storage.k8s.io/v1/storageclasses"),
        (r.PDB, ("ns", "orders"), "/apis/policy/v1/namespaces/ns/poddisruptionbudgets/orders"),
    ],
)
def test_paths(resource: r.Resource, args: tuple[str | None, ...], path: str) -> None:
    assert resource.path(*args) == path


def test_a_subresource_needs_a_name() -> None:
    with pytest.raises(ValueError):
        r.SAMPLEDB.path("ns", subresource="status")


def test_cluster_scoped_resources_are_not_namespaced() -> None:
    assert not any(res.namespaced for res in (r.NAMESPACE, r.STORAGECLASS, r.CRD))
    assert all(res.namespaced for res in (r.SAMPLEDB, r.PVC, r.EVENT, r.LEASE, r.CONFIGMAP, r.SERVICE))


@pytest.mark.parametrize(("api_version", "group"), [("v1", ""), ("apps/v1", "apps"),
                                                    ("sampledb.io/v1alpha1", "sampledb.io")])
def test_api_group(api_version: str, group: str) -> None:
    assert r.api_group(api_version) == group
