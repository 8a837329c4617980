"""Why a database's data claims do not progress, in Kubernetes' own words: Problems for the Degraded condition.

Pure: no I/O, no clock (the caller passes `now`). The claims' part of decide/lifecycle/stuck.py, which it shares the
Events' reading with:

| reason | when | from |
|---|---|---|
| StorageClassNotFound | a claim names a StorageClass that does not exist | the claim, the class read live |
| NoDefaultStorageClass | a claim names no class, the cluster has no default one, Pending past POD_GRACE | the claim |
| ProvisioningFailed | a Pending claim's provisioner recorded a recent ProvisioningFailed Warning | its Event |
| ClaimPending | a claim naming an immediately binding class is Pending for over CLAIM_PENDING_GRACE | the claim |
| StorageExpansionStuck | a claim asked to grow has not past EXPANSION_GRACE, or cannot | its Events, status |

Invariants: as decide/lifecycle/stuck.py's: a Problem is derived from the objects' current state and Events younger than
REFUSAL_FRESH only, so it goes as soon as the cause does; messages carry Kubernetes' words, bounded, and say
since when (a time), never for how long: a message that changed at every pass would write the status at every
pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from sampledb_operator.decide.lifecycle.stuck import POD_GRACE, REFUSAL_FRESH, event_time, newest_warning, short
from sampledb_operator.model import timestamps
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.quantity import parse_quantity
from sampledb_operator.model.sampledb import Problem

CLAIM_PENDING_GRACE = timedelta(seconds=120)
EXPANSION_GRACE = timedelta(seconds=120)  # a claim still smaller than asked after this long is stuck
RESIZE_WAIT_REASONS = ("ExternalExpanding", "Resizing", "FileSystemResizeRequired")  # the resize was asked then
RESIZE_INFEASIBLE = ("ControllerResizeInfeasible", "NodeResizeInfeasible")


def claim_events_needed(claims: Sequence[Obj], now: datetime) -> list[str]:
    """The Pending claims (not being deleted) older than POD_GRACE: their provisioner's Events say why they are not
    bound (read live by the caller, only for these)."""
    out = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        made = timestamps.parse(meta.get("creationTimestamp"))
        if ((claim.get("status") or {}).get("phase") == "Pending" and not meta.get("deletionTimestamp")
                and made is not None and now - made > POD_GRACE):
            out.append(str(meta.get("name")))
    return out


def claim_recheck(claims: Sequence[Obj], now: datetime) -> float | None:
    """Seconds until the youngest Pending claim is past POD_GRACE (then claim_events_needed names it), or None."""
    waits = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        made = timestamps.parse(meta.get("creationTimestamp"))
        if (claim.get("status") or {}).get("phase") == "Pending" and made is not None and now - made <= POD_GRACE:
            waits.append((POD_GRACE - (now - made)).total_seconds() + 1)
    return min(waits) if waits else None


def claim_problems(claims: Sequence[Obj], classes: Mapping[str, str | None], *, default_class: bool | None,
                   now: datetime, events: Mapping[str, Sequence[Obj]] | None = None) -> list[Problem]:
    """The claims' problems. `classes`: each named class's volumeBindingMode, None when it does not exist;
    `default_class`: whether the cluster has a default StorageClass (None: unknown); `events`: the Events of the
    claims of claim_events_needed, by claim name."""
    out = []
    for claim in claims:
        meta, spec = claim.get("metadata") or {}, claim.get("spec") or {}
        if (claim.get("status") or {}).get("phase") != "Pending" or meta.get("deletionTimestamp"):
            continue
        name, wanted = str(meta.get("name")), spec.get("storageClassName")
        if wanted and wanted in classes and classes[wanted] is None:
            out.append(Problem("StorageClassNotFound", (
                f"claim {name} asks for StorageClass {wanted!r}, which does not exist: set spec.storage."
                "storageClassName to an existing class (kubectl get storageclass)"), "spec.storage.storageClassName"))
            continue
        failed = newest_warning((events or {}).get(name, ()), "ProvisioningFailed", now)
        if failed is not None:
            of = f" (StorageClass {wanted!r})" if wanted else ""
            out.append(Problem("ProvisioningFailed", f"claim {name} cannot be provisioned{of}: {short(failed)}",
                               "spec.storage.storageClassName"))
            continue
        pending = now - (timestamps.parse(meta.get("creationTimestamp")) or now)
        if not wanted and default_class is False and pending > POD_GRACE:
            out.append(Problem("NoDefaultStorageClass", (
                f"claim {name} names no StorageClass and the cluster has no default one: set spec.storage."
                "storageClassName"), "spec.storage.storageClassName"))
        elif pending > CLAIM_PENDING_GRACE and wanted and classes.get(wanted) == "Immediate":
            out.append(Problem("ClaimPending", (
                f"claim {name} has been Pending since {meta.get('creationTimestamp')}: its provisioner has not made"
                f" a volume (kubectl describe pvc {name} shows why: quota, capacity, provisioning errors)"),
                "spec.storage"))
    return out


def expanding(claim: Obj) -> bool:
    """A bound claim that asks for more storage than it has (an expansion under way, or stuck)."""
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    want = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    have = (status.get("capacity") or {}).get("storage")
    if status.get("phase") != "Bound" or want is None or have is None:
        return False
    try:
        return parse_quantity(want) > parse_quantity(have)
    except ValueError:
        return False


def expansion_problem(claim: Obj, events: Sequence[Obj], now: datetime, *, volume: str, field: str
                      ) -> tuple[Problem | None, datetime | None]:
    """Why an expanding claim has not grown: its resize refused as infeasible or a Warning Event about it (at
    once), or no growth EXPANSION_GRACE after it was asked (the first resize Event's time); and when it was asked
    (None: unknown). `volume` names it in the message."""
    want = claim["spec"]["resources"]["requests"]["storage"]
    have = claim["status"]["capacity"]["storage"]
    state = ((claim.get("status") or {}).get("allocatedResourceStatuses") or {}).get("storage")
    warnings = sorted((t, str(e.get("message") or "")) for e in events if e.get("type") == "Warning"
                      and (t := event_time(e)) is not None and now - t <= REFUSAL_FRESH)
    asked = min((t for e in events if e.get("reason") in RESIZE_WAIT_REASONS
                 and (t := timestamps.parse(e.get("firstTimestamp")) or event_time(e)) is not None), default=None)
    if state in RESIZE_INFEASIBLE or warnings:
        said = warnings[-1][1] if warnings else str(state)
        return Problem("StorageExpansionStuck", f"{volume} cannot grow from {have} to {want}: {short(said)}",
                       field), asked
    if asked is not None and now - asked > EXPANSION_GRACE:
        waiting = next((str(e.get("message")) for e in events if e.get("reason") in RESIZE_WAIT_REASONS), "")
        message = (f"{volume} asked for {want} at {timestamps.format(asked)} and still has {have}"
                   f"{': ' + short(waiting) if waiting else ''} (its StorageClass's resizer does not act on it)")
        return Problem("StorageExpansionStuck", message, field), asked
    return None, asked
