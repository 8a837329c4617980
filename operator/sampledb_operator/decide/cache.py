"""What the caches keep of a child: large fields that no decision reads are replaced by a digest.

Pure; used as the ConfigMap store's transform (runtime/store.py, like client-go's SetTransform).
The shared scripts ConfigMap's data (the data-plane scripts, ~80 KB, one ConfigMap per namespace) is
replaced by DATA_DIGEST, the SHA-256 of the data's canonical JSON; plan.drift compares a desired
ConfigMap's data with that digest, so an edit of the scripts on the server is still drift and is
repaired. DATA_DIGEST is a key only cached objects carry: a cached object is never sent back to the
API server as a body (writes are built from the desired objects). managedFields are dropped too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from sampledb_operator.decide.labels import COMPONENT_LABEL
from sampledb_operator.model.objects import Obj

DATA_DIGEST = "sampledb.io/dataDigest"
COMPACTED_COMPONENTS = frozenset({"scripts"})
POD_SPEC_KEPT = frozenset({"nodeName"})  # of a cached Pod's spec; the containers, volumes and env go


_DIGESTS: dict[int, tuple[Mapping[str, Any], str]] = {}  # id -> (the very mapping, its digest)
_BY_CONTENT: dict[tuple[tuple[str, Any], ...], str] = {}  # the sorted items -> their digest
_DIGESTS_KEPT = 8


def data_digest(data: Mapping[str, Any]) -> str:
    """SHA-256 of a ConfigMap's data, independent of key order.

    The digests of the last few mappings are kept by identity: the desired scripts (one mapping, the same
    every pass) are digested once, not on every pass. The entry holds the mapping itself, so its id cannot be
    reused by another object while it is kept; a mapping is never changed after it is built (the caches' and
    decide/'s objects are read-only), so its digest stays right. And the digests of the last few contents
    are kept by content (the sorted items, compared in full on a hit): every database's scripts ConfigMap
    holds the same data, so its watch events are digested once, not once each.
    """
    kept = _DIGESTS.get(id(data))
    if kept is not None and kept[0] is data:
        return kept[1]
    content = _content(data)
    digest = _BY_CONTENT.get(content) if content is not None else None
    if digest is None:
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        if content is not None:
            _keep(_BY_CONTENT, content, digest)
    _keep(_DIGESTS, id(data), (data, digest))
    return digest


def _content(data: Mapping[str, Any]) -> tuple[tuple[str, Any], ...] | None:
    """The sorted items, when every value is a string (a ConfigMap's data), else None (not hashable)."""
    items = sorted(data.items())
    return tuple(items) if all(isinstance(v, str) for _, v in items) else None


def _keep(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _DIGESTS_KEPT:
        memo.pop(next(iter(memo)))
    memo[key] = value


def compact(obj: Obj) -> Obj:
    """The object as a cache keeps it: without managedFields; a scripts ConfigMap's data as its digest; a Pod
    without its spec (but nodeName): the operator reads a database pod's labels, deletion and status only.
    The argument is not changed (a new dict when something is dropped)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(COMPONENT_LABEL) in COMPACTED_COMPONENTS and isinstance(obj.get("data"), Mapping):
        out = {k: v for k, v in obj.items() if k != "data"}
        out[DATA_DIGEST] = data_digest(obj["data"])
        obj = out
    if obj.get("kind") == "Pod" and isinstance(obj.get("spec"), Mapping):  # its metadata and status are read
        obj = {**obj, "spec": {k: v for k, v in obj["spec"].items() if k in POD_SPEC_KEPT}}
    if "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj
