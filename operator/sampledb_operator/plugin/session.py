"""One plugin run's connection to the API server: the client, the namespace, and the verbs the commands use.

Invariants: the namespace is --namespace, else the kubeconfig context's namespace, else "default"
(as kubectl chooses it); every write carries the field manager `kubectl-sampledb`; the client is
closed when the session ends; errors are kube.errors, never a transport library's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.credentials import kubeconfig_namespace
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.kube.resources import Resource
from sampledb_operator.model.objects import Obj

FIELD_MANAGER = "kubectl-sampledb"
DEFAULT_NAMESPACE = "default"



@dataclass(frozen=True, slots=True)
class Target:
    """Where to connect, from the command line: kubeconfig path, context, namespace (None: the default)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None

    def resolved_namespace(self) -> str:
        return self.namespace or kubeconfig_namespace(self.kubeconfig, self.context) or DEFAULT_NAMESPACE


class Session:
    """The API verbs of the plugin's commands, in one namespace."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def api(self, resource: Resource) -> ResourceApi:
        return ResourceApi(self.client, resource)

    async def get(self, resource: Resource, name: str) -> Obj:
        """One object of the session's namespace; NotFound when absent."""
        return await self.api(resource).get(name, self.namespace)

    async def get_or_none(self, resource: Resource, name: str) -> Obj | None:
        try:
            return await self.get(resource, name)
        except NotFound:
            return None

    async def list(self, resource: Resource, *, label_selector: str | None = None,
                   field_selector: str | None = None) -> list[Obj]:
        result = await self.api(resource).list_all(self.namespace, label_selector=label_selector,
                                                   field_selector=field_selector)
        return result.items

    async def create(self, resource: Resource, obj: Obj) -> Obj:
        return await self.api(resource).create(obj, self.namespace, field_manager=FIELD_MANAGER)

    async def merge_patch(self, resource: Resource, name: str, patch: Obj) -> Obj:
        return await self.api(resource).patch(name, patch, namespace=self.namespace, field_manager=FIELD_MANAGER)


@asynccontextmanager
async def open_session(target: Target) -> AsyncIterator[Session]:
    """A Session for `target`, its client closed on the way out."""
    client = await KubeClient.connect(target.kubeconfig, context=target.context)
    try:
        yield Session(client, target.resolved_namespace())
    finally:
        await client.close()
