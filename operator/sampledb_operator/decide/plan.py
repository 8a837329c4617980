"""Desired vs observed children -> the writes to make, each with a reason.

Pure. An observed object "matches" a desired one when every field the operator sets has the same
value on the server (fields the server or other managers add are ignored; quantities compare by
value, so "1024Mi" matches "1Gi"; a ConfigMap the cache keeps as a digest of its data, see
decide/cache.py, compares by that digest). A matching child needs no write: steady state costs nothing.
Invariant (tested with Hypothesis): planning against the result of applying a plan yields no action.
A PVC's applied size is never below the size it has (`never_shrink`). A StatefulSet whose pod template was
made without the bucket label keeps it without (`template_as_made`: adding a label to a template restarts
the pods). Only the kinds of PRUNED_KINDS are ever deleted for not being desired (`removals`: the
PodDisruptionBudget of a database scaled down to one instance), and the children of the components of
PRUNED_COMPONENTS (the poolers', once spec.pooler no longer asks for them); every other child leaves only by
the deletion and replication steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sampledb_operator.decide.cache import DATA_DIGEST, data_digest
from sampledb_operator.decide.labels import COMPONENT_LABEL, POOLER_COMPONENT
from sampledb_operator.decide.sharding import BUCKET_LABEL
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.quantity import is_quantity, parse_quantity

Key = tuple[str, str]  # (kind, name)

# Fields the API server never lets a client change after creation; a difference there is not
# "drift" the operator can repair by applying, so it is ignored when comparing.
IMMUTABLE_PATHS: Mapping[str, tuple[tuple[str, ...], ...]] = MappingProxyType({
    "StatefulSet": (("spec", "selector"), ("spec", "serviceName"), ("spec", "podManagementPolicy")),
    "PersistentVolumeClaim": (("spec", "accessModes"), ("spec", "storageClassName")),
    "Job": (("spec",),),
})


# The kinds a pass deletes when it no longer desires them, each with why it stops desiring one
# (decide/children/desired.children drops the PodDisruptionBudget at one instance). Never a kind holding data or one a
# deletion step needs: those leave only by their steps.
PRUNED_KINDS: Mapping[str, str] = MappingProxyType({"PodDisruptionBudget": "the database has one instance"})
# The same, for every kind, by the component label: the pooler's children (decide/children/pooler.py) without
# spec.pooler.
PRUNED_COMPONENTS: Mapping[str, str] = MappingProxyType({POOLER_COMPONENT: "spec.pooler does not ask for it"})


@dataclass(frozen=True, slots=True)
class Action:
    """One write, a server-side apply of the desired fields: the object and why it is needed. (The
    create-only objects, the Secret and the Jobs, are created by their own steps, never planned.)"""

    obj: Obj
    reason: str
    quiet: bool = False  # no Event for the update (bookkeeping only: decide/replicas/operator_rollout.py's stamp)

    @property
    def key(self) -> Key:
        return key_of(self.obj)


def key_of(obj: Mapping[str, Any]) -> Key:
    return (str(obj["kind"]), str(obj["metadata"]["name"]))


_SCALARS = frozenset((str, int, float, bool, type(None)))  # the leaves of a JSON value


def _scalar_equal(want: Any, have: Any) -> bool:
    if want == have:
        return True
    if isinstance(want, (str, int)) and isinstance(have, (str, int)) and not isinstance(want, bool) \
            and not isinstance(have, bool) and is_quantity(want) and is_quantity(have):
        try:
            return parse_quantity(want) == parse_quantity(have)
        except ValueError:
            return False
    return False


def first_difference(want: Any, have: Any, path: tuple[str, ...] = (), *,
                     skip: tuple[tuple[str, ...], ...] = ()) -> str | None:
    """The first path where `have` lacks or differs from a field of `want`, or None if it matches.

    Paths in `skip` are not compared. The path is tracked only as deep as the deepest skipped path; below
    that, the differing path is built on the way back up, only when there is a difference (every pass
    compares every child, and nearly always finds none).
    """
    depth = len(path) + max((len(p) - len(path) for p in skip), default=0)
    below = _difference(want, have, path, skip, depth)
    if below is None:
        return None
    return ".".join((*path, *reversed(below))) or "<root>"


def _difference(want: Any, have: Any, path: tuple[str, ...] | None, skip: tuple[tuple[str, ...], ...],
                depth: int) -> list[str] | None:
    """The keys from here down to the first difference, deepest first ([]: this node differs), or None.

    Every pass compares every child and nearly always finds it the same but for the fields the server added: a
    subtree equal to the observed one matches at once (a C-speed ==, which stops at its first difference, and
    no skipped path can hide a difference where there is none), and JSON's scalars skip the abstract-class
    checks."""
    if path is not None and path in skip:
        return None
    if type(want) in _SCALARS:
        return None if want == have or _scalar_equal(want, have) else []
    if isinstance(want, Mapping):
        if not isinstance(have, Mapping):
            return []
        for k, v in want.items():
            if k not in have:
                return [str(k)]
            h = have[k]
            if v is h or v == h:
                continue
            below = _difference(v, h, _deeper(path, str(k), depth), skip, depth)
            if below is not None:
                below.append(str(k))
                return below
        return None
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return []
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            if w is h or w == h:
                continue
            below = _difference(w, h, _deeper(path, str(i), depth), skip, depth)
            if below is not None:
                below.append(str(i))
                return below
        return None
    return None if _scalar_equal(want, have) else []


def _deeper(path: tuple[str, ...] | None, key: str, depth: int) -> tuple[str, ...] | None:
    """The path one level down while a skipped path can still be reached from it, else None."""
    return (*path, key) if path is not None and len(path) < depth else None


def _pvc_size(obj: Mapping[str, Any]) -> str | None:
    size = obj.get("spec", {}).get("resources", {}).get("requests", {}).get("storage")
    return str(size) if size is not None else None


def pvc_needs_expansion(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> bool:
    """True when the desired size is larger than the PVC's requested size."""
    want, have = _pvc_size(desired), _pvc_size(observed)
    if want is None or have is None:
        return False
    return parse_quantity(want) > parse_quantity(have)


def drift(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> str | None:
    """Why `observed` must be re-applied to become `desired`, or None when it already matches."""
    kind = str(desired["kind"])
    skip = IMMUTABLE_PATHS.get(kind, ())
    if kind == "PersistentVolumeClaim":
        # Only growth is applied: a PVC cannot shrink, and a larger PVC (expanded by hand) is fine.
        skip = (*skip, ("spec", "resources"))
        if pvc_needs_expansion(desired, observed):
            return f"expand storage from {_pvc_size(observed)} to {_pvc_size(desired)}"
    meta_diff = first_difference(_compared_metadata(desired["metadata"]), observed.get("metadata", {}), ("metadata",))
    if meta_diff is not None:
        return f"{meta_diff} differs"
    body = {k: v for k, v in desired.items() if k not in ("apiVersion", "kind", "metadata")}
    if "data" in body and "data" not in observed and DATA_DIGEST in observed:  # a compacted cache entry
        if data_digest(body["data"]) != observed[DATA_DIGEST]:
            return "data differs"
        del body["data"]
    body_diff = first_difference(body, observed, skip=skip)
    if body_diff is None and kind == "StatefulSet":
        return removed_from_template(desired, observed)
    return f"{body_diff} differs" if body_diff is not None else None


# Pod template fields the operator sets only when the spec asks for them, which nothing else (no API server
# default, no admission plugin: those mutate pods, not templates) puts into a StatefulSet's template: when
# the spec stops asking, the observed one still has them, which the comparison of what is wanted (a subset)
# does not see.
OPTIONAL_TEMPLATE_FIELDS = ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints",
                            "priorityClassName")


def removed_from_template(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> str | None:
    """Why a StatefulSet must be re-applied for a field its spec no longer asks for (a scheduling field, a
    container's resource request or limit), or None. Applied server-side by the operator's field manager,
    which set them, the re-apply removes them."""
    want = ((desired.get("spec") or {}).get("template") or {}).get("spec") or {}
    have = ((observed.get("spec") or {}).get("template") or {}).get("spec") or {}
    for key in OPTIONAL_TEMPLATE_FIELDS:
        if key in have and key not in want:
            return f"spec.template.spec.{key} is no longer wanted"
    wanted = {c.get("name"): c for c in want.get("containers") or []}
    for container in have.get("containers") or []:
        mine = wanted.get(container.get("name"))
        if mine is None:
            continue
        for kind in ("requests", "limits"):
            extra = set((container.get("resources") or {}).get(kind) or {}) - set(
                (mine.get("resources") or {}).get(kind) or {})
            if extra:
                return f"container {container.get('name')}: resources.{kind}.{sorted(extra)[0]} is no longer wanted"
    return None


def _compared_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata drift compares: labels, annotations and owners, but not the bucket label, which a child
    made before it gets from the sharded replicas' labelling pass (reconcilers/shard_labels.py), not from one
    re-apply of every child of every database after an upgrade."""
    out = {k: metadata[k] for k in ("labels", "annotations", "ownerReferences") if k in metadata}
    if BUCKET_LABEL in out.get("labels", {}):
        out["labels"] = {k: v for k, v in out["labels"].items() if k != BUCKET_LABEL}
    return out


def plan(desired: list[Obj], observed: Mapping[Key, Obj], *, keep_size: frozenset[Key] = frozenset()) -> list[Action]:
    """The writes that make `observed` match `desired`, in the order of `desired`.

    The PVCs in `keep_size` get their desired size only when they are created: once they exist, their size is
    what it is (a volume whose size merely follows another's, see decide/children/volumes.py).
    """
    actions: list[Action] = []
    for wanted in desired:
        key = key_of(wanted)
        have = observed.get(key)
        size = _pvc_size(have) if have is not None and key in keep_size else None
        obj = with_size(wanted, size) if size is not None else wanted
        if have is not None and key[0] == "StatefulSet":
            obj = template_as_made(obj, have)
        if have is None:
            actions.append(Action(obj, f"{key[0]} {key[1]} is missing"))
            continue
        reason = drift(obj, have)
        if reason is not None:
            actions.append(Action(never_shrink(obj, have), f"{key[0]} {key[1]}: {reason}"))
    return actions


@dataclass(frozen=True, slots=True)
class Removal:
    """One delete: an observed child of PRUNED_KINDS that is no longer desired, and why."""

    key: Key
    reason: str


def removals(desired: list[Obj], observed: Mapping[Key, Obj]) -> list[Removal]:
    """The deletes that make `observed` match `desired`: each observed child of PRUNED_KINDS that `desired`
    does not hold and that is not being deleted already, in (kind, name) order. Planning against the result
    (the child gone) yields none."""
    wanted = {key_of(obj) for obj in desired}
    return [Removal(key, f"{key[0]} {key[1]} is no longer needed: {why}")
            for key in sorted(observed)
            if (why := _pruned_because(key[0], observed[key])) is not None and key not in wanted
            and not (observed[key].get("metadata") or {}).get("deletionTimestamp")]


def _pruned_because(kind: str, obj: Mapping[str, Any]) -> str | None:
    """Why a child of this kind and component goes once no longer desired; None: it never goes so."""
    component = ((obj.get("metadata") or {}).get("labels") or {}).get(COMPONENT_LABEL, "")
    return PRUNED_KINDS.get(kind) or PRUNED_COMPONENTS.get(str(component))


def _template_labels(sts: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((sts.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}


def template_as_made(desired: Obj, observed: Mapping[str, Any]) -> Obj:
    """`desired` (a StatefulSet) without the bucket label in its pod template when `observed`'s template was made
    without it (by a version before the label): adding it would be a template change, which restarts every
    pod; those pods stay cached by the replicas' watch of unlabelled pods (app.build_caches)."""
    if BUCKET_LABEL not in _template_labels(desired) or BUCKET_LABEL in _template_labels(observed):
        return desired
    template = desired["spec"]["template"]
    labels = {k: v for k, v in template["metadata"]["labels"].items() if k != BUCKET_LABEL}
    return {**desired, "spec": {**desired["spec"], "template": {
        **template, "metadata": {**template["metadata"], "labels": labels}}}}


def with_size(pvc: Obj, size: str) -> Obj:
    """`pvc` (a new dict) asking for `size` of storage."""
    spec = pvc["spec"]
    resources = spec["resources"]
    return {**pvc, "spec": {**spec, "resources": {**resources, "requests": {**resources["requests"],
                                                                             "storage": size}}}}


def never_shrink(desired: Obj, observed: Mapping[str, Any]) -> Obj:
    """`desired`, but a PVC never asks for less storage than it has: a volume expanded by hand (or past
    a size the spec no longer asks for) keeps its size when another field of it is applied."""
    if desired.get("kind") != "PersistentVolumeClaim":
        return desired
    want, have = _pvc_size(desired), _pvc_size(observed)
    if want is None or have is None or parse_quantity(have) <= parse_quantity(want):
        return desired
    return with_size(desired, have)
