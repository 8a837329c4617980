"""What the caches keep of a child: large fields that no decision reads are replaced by a digest.

Pure, with no module-level state (the memos of digests are held by the objects that own them: a DigestedData, a
Compactor); a Compactor is each store's transform (runtime/store.py, like client-go's SetTransform).
The shared scripts ConfigMap's data (the data-plane scripts, ~180 KB, one ConfigMap per namespace) is
replaced by DATA_DIGEST, the SHA-256 of the data's canonical JSON; plan.drift compares a desired
ConfigMap's data with that digest, so an edit of the scripts on the server is still drift and is
repaired. DATA_DIGEST is a key only cached objects carry: a cached object is never sent back to the
API server as a body (writes are built from the desired objects). managedFields are dropped too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from sampledb_operator.decide.labels import COMPONENT_LABEL
from sampledb_operator.model.objects import Obj

DATA_DIGEST = "sampledb.io/dataDigest"
COMPACTED_COMPONENTS = frozenset({"scripts"})
POD_SPEC_KEPT = frozenset({"nodeName"})  # of a cached Pod's spec; the containers, volumes and env go


DIGESTS_KEPT = 8


class DigestedData(dict[str, str]):
    """A ConfigMap's data that carries its digest, computed once when it is made: the data-plane scripts, the same
    mapping in every pass's desired scripts ConfigMap (made once by the reconciler). Never changed after it is made
    (decide/'s objects are read-only), so the digest stays right."""

    __slots__ = ("digest",)

    def __init__(self, data: Mapping[str, str]) -> None:
        super().__init__(data)
        self.digest = _digest(self)


def data_digest(data: Mapping[str, Any]) -> str:
    """SHA-256 of a ConfigMap's data, independent of key order (a DigestedData's own, computed when it was made)."""
    return data.digest if isinstance(data, DigestedData) else _digest(data)


def _digest(data: Mapping[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class Compactor:
    """`compact` for one cache, as its store's transform, with the digests of the last DIGESTS_KEPT data contents
    kept by content (the sorted items, compared in full on a hit): every database's scripts ConfigMap holds the
    same ~180 KB of data, so a watch event of one is digested once, not each time (1.5 ms a digest). The memo is
    this object's; the result is what `compact` gives."""

    def __init__(self) -> None:
        self._by_content: dict[tuple[tuple[str, Any], ...], str] = {}

    def __call__(self, obj: Obj) -> Obj:
        return compact(obj, self._digest)

    def _digest(self, data: Mapping[str, Any]) -> str:
        items = sorted(data.items())
        if not all(isinstance(v, str) for _, v in items):  # not a ConfigMap's data: not hashable
            return data_digest(data)
        content = tuple(items)
        digest = self._by_content.get(content)
        if digest is None:
            digest = data_digest(data)
            if len(self._by_content) >= DIGESTS_KEPT:
                self._by_content.pop(next(iter(self._by_content)))
            self._by_content[content] = digest
        return digest


def compact(obj: Obj, digest: Callable[[Mapping[str, Any]], str] = data_digest) -> Obj:
    """The object as a cache keeps it: without managedFields; a scripts ConfigMap's data as its digest; a Pod
    without its spec (but nodeName): the operator reads a database pod's labels, deletion and status only.
    The argument is not changed (a new dict when something is dropped). A cache's store uses a Compactor."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(COMPONENT_LABEL) in COMPACTED_COMPONENTS and isinstance(obj.get("data"), Mapping):
        out = {k: v for k, v in obj.items() if k != "data"}
        out[DATA_DIGEST] = digest(obj["data"])
        obj = out
    if obj.get("kind") == "Pod" and isinstance(obj.get("spec"), Mapping):  # its metadata and status are read
        obj = {**obj, "spec": {k: v for k, v in obj["spec"].items() if k in POD_SPEC_KEPT}}
    if "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj
