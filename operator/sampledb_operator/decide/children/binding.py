"""Which new StatefulSets wait for their data volume's claim to be bound before they are created.

Pure. A StatefulSet made while its pod's claim is still Pending, under a StorageClass that binds claims at
once (volumeBindingMode Immediate, the API's default), gets a pod the scheduler refuses until the claim is
bound ("pod has unbound immediate PersistentVolumeClaims"): each refusal is a `FailedScheduling` Event and a
pod status write, and the pod then waits out the scheduler's backoff. At 10,000 databases every pod was
refused twice (docs/benchmarks.md, "Decisions"). So a StatefulSet that does not exist yet is created once its
claim is Bound, when the claim's class binds immediately; the claim's binding wakes the database
(decide/urgency.py).

Never held: a StatefulSet that exists (only a creation waits), one whose claim does not exist (a lost volume
is reported by decide/children/volumes.py; the pod waits for it as before), a claim being deleted, a claim under
WaitForFirstConsumer (it binds only once a pod uses it: holding its StatefulSet would wait forever), a claim
without a class name or whose class the operator could not read (`modes` has None for it): the StatefulSet is
then created as before and the scheduler waits for the claim.

The claim's binding is what wakes a waiting database; the look again after `recheck_after` only bounds the wait
should the class's remembered mode be out of date (a class deleted and made again with another mode). It grows
with the wait (as long as the oldest claim has existed, between a least and a most), so a database whose claims
take long to bind looks a few times, not once every least: at 10,000 databases claims took up to 50 minutes to
bind here, and a fixed 300 s recheck cost ~2 idle passes a database (docs/benchmarks.md, "Decisions").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sampledb_operator.model import names, timestamps
from sampledb_operator.model.objects import Obj

IMMEDIATE = "Immediate"  # a StorageClass's volumeBindingMode when it does not say (the API's default)
BOUND = "Bound"


def binding_mode(storage_class: Mapping[str, Any]) -> str:
    """A StorageClass's volumeBindingMode (Immediate when the object does not say)."""
    return str(storage_class.get("volumeBindingMode") or IMMEDIATE)


def claim_of(statefulset: Obj) -> str | None:
    """The claim name of the StatefulSet's data volume (its pod template's `data` volume), None without one."""
    template_spec = ((statefulset.get("spec") or {}).get("template") or {}).get("spec") or {}
    for volume in template_spec.get("volumes") or ():
        if volume.get("name") == names.DATA_VOLUME:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            return str(claim) if claim else None
    return None


def class_of(claim: Obj) -> str | None:
    """The claim's StorageClass name (the admission's default filled in on the server), None without one."""
    name = (claim.get("spec") or {}).get("storageClassName")
    return str(name) if name else None


def _unbound(claim: Obj | None) -> bool:
    """The claim exists, is not being deleted, and is not Bound yet."""
    if claim is None or (claim.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (claim.get("status") or {}).get("phase") != BOUND


def waits_for_binding(claim: Obj | None, modes: Mapping[str, str | None]) -> bool:
    """The StatefulSet whose pod uses `claim` waits before it is created: the claim exists, is not being
    deleted, is not Bound, and its class binds immediately (`modes`: volumeBindingMode by class name; None or
    absent: unknown, not held)."""
    cls = class_of(claim) if claim is not None and _unbound(claim) else None
    return cls is not None and modes.get(cls) == IMMEDIATE


def classes_to_read(creates: Iterable[Obj], claims: Mapping[str, Obj | None]) -> frozenset[str]:
    """The StorageClasses whose binding mode `held` needs: those of the unbound claims of the StatefulSets
    about to be created (`creates`), by `claims` (by name, as observed after the pass's other writes)."""
    unbound = (claims.get(claim_of(sts) or "") for sts in creates)
    return frozenset(cls for claim in unbound if claim is not None and _unbound(claim)
                     and (cls := class_of(claim)) is not None)


def held(creates: Iterable[Obj], claims: Mapping[str, Obj | None],
         modes: Mapping[str, str | None]) -> dict[str, str]:
    """The StatefulSets of `creates` (desired, none of which exists yet) that wait for their claim, by name,
    with the claim each waits for."""
    out = {}
    for sts in creates:
        claim_name = claim_of(sts)
        if claim_name is not None and waits_for_binding(claims.get(claim_name), modes):
            out[str(sts["metadata"]["name"])] = claim_name
    return out


def recheck_after(claims: Iterable[Obj | None], now: datetime, *, least: float, most: float) -> float:
    """Seconds until a database whose StatefulSets wait for `claims` looks again without an event: as long as the
    oldest of them has existed (by its creationTimestamp), at least `least`, at most `most` (`least` for claims
    without a readable timestamp)."""
    created = [stamp for claim in claims if claim is not None
               and (stamp := timestamps.parse((claim.get("metadata") or {}).get("creationTimestamp"))) is not None]
    waited = max(((now - stamp).total_seconds() for stamp in created), default=0.0)
    return min(max(waited, least), most)
