"""The namespace a reconciler works in: whether it is being deleted (read live: namespaces are not cached)."""

from __future__ import annotations

from sampledb_operator.kube.errors import NotFound
from sampledb_operator.reconcilers.context import Context


async def namespace_terminating(ctx: Context, namespace: str) -> bool:
    """The namespace is being deleted (or gone): nothing new can be created in it."""
    try:
        ns = await ctx.apis["Namespace"].get(namespace)
    except NotFound:
        return True
    return bool(ns.get("metadata", {}).get("deletionTimestamp")) or ns.get("status", {}).get("phase") == "Terminating"
