"""ObjectRef: the key of every store and work queue.

Invariant: a ref is immutable and hashable; cluster-scoped objects use namespace "".
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    """Namespace and name of one object."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of(cls, obj: dict[str, Any]) -> ObjectRef:
        """The ref of a decoded Kubernetes object (a plain dict); the namespace interned (a cache holds
        thousands of refs of a few namespaces)."""
        meta = obj.get("metadata") or {}
        return cls(sys.intern(meta.get("namespace") or ""), meta["name"])

    @classmethod
    def parse(cls, text: str) -> ObjectRef:
        """Inverse of str(): "ns/name" or "name"."""
        ns, sep, name = text.partition("/")
        return cls(ns, name) if sep else cls("", ns)
