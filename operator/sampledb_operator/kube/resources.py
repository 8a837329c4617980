"""Resource: which REST collection a kind lives in, and the URL paths built from it.

Invariant: a Resource is immutable and hashable; `path()` never includes a namespace for a
cluster-scoped resource (a namespace passed for one is ignored), and paths are built only from
the group, version, plural and the given name parts (no query string).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: group ("" for core), version, kind, plural, and its scope."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """The apiVersion of its objects: "apps/v1", or "v1" for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path of the collection, one object, or one object's subresource.

        A namespaced resource without a namespace gives the all-namespaces collection.
        """
        if subresource is not None and name is None:
            raise ValueError("a subresource needs an object name")
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [prefix]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
        if subresource is not None:
            parts.append(subresource)
        return "/".join(parts)


def api_group(api_version: str) -> str:
    """The group part of an apiVersion: "apps" for "apps/v1", "" for "v1"."""
    group, sep, _ = api_version.rpartition("/")
    return group if sep else ""


SAMPLEDB = Resource("sampledb.io", "v1alpha1", "SampleDB", "sampledbs")
SAMPLEDBBACKUP = Resource("sampledb.io", "v1alpha1", "SampleDBBackup", "sampledbbackups")
STATEFULSET = Resource("apps", "v1", "StatefulSet", "statefulsets")
PVC = Resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
JOB = Resource("batch", "v1", "Job", "jobs")
SECRET = Resource("", "v1", "Secret", "secrets")
CONFIGMAP = Resource("", "v1", "ConfigMap", "configmaps")
SERVICE = Resource("", "v1", "Service", "services")
POD = Resource("", "v1", "Pod", "pods")
PDB = Resource("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")
DEPLOYMENT = Resource("apps", "v1", "Deployment", "deployments")
EVENT = Resource("", "v1", "Event", "events")
LEASE = Resource("coordination.k8s.io", "v1", "Lease", "leases")
NAMESPACE = Resource("", "v1", "Namespace", "namespaces", namespaced=False)
STORAGECLASS = Resource("storage.k8s.io", "v1", "StorageClass", "storageclasses", namespaced=False)
NODE = Resource("", "v1", "Node", "nodes", namespaced=False)
CRD = Resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
               namespaced=False)
