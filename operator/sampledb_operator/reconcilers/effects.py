"""Applies a decide/effects.Plan: the one place a step's planned writes meet the API server.

The effects are applied in order, one at a time (a later effect may depend on an earlier one, e.g.
a finalizer removed only after the children went). Each write is logged with its kind and name;
how the server's answers are treated is in decide/effects.py. Nothing here decides: what to write,
and what to announce, is in the plan.

A write refused because its resourceVersion precondition failed (Conflict) stops the plan, and is
recorded on the pass it happened in (`one_pass`): that pass then comes back LOOK_AGAIN_AFTER_CONFLICT
seconds later whatever the step did with the refusal. The newer object's watch event normally brings
the key back sooner, but nothing guarantees there is one to wait for (a 409 from something between
the operator and etcd, a watch that is down), and a key left waiting for it is a lost wake-up: a
deletion that never finishes, a backup that never records its end.
"""

from __future__ import annotations

from collections.abc import Awaitable
from contextvars import ContextVar
from dataclasses import dataclass, field

from sampledb_operator.decide.effects import Create, Delete, Effect, Emit, Patch, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result, combine
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context

log = get_logger(__name__)

LOOK_AGAIN_AFTER_CONFLICT = 1.0  # seconds: a pass with a refused write comes back at the latest this much later


@dataclass
class PassRecord:
    """What the writes of one pass met (mutable: the pass's concurrent sub-tasks share it)."""

    refused: bool = False  # a write's resourceVersion precondition failed


_current_pass: ContextVar[PassRecord | None] = ContextVar("sampledb_current_pass", default=None)


def write_refused() -> None:
    """Record, on the pass running now (if any), that one of its writes was refused as stale."""
    record = _current_pass.get()
    if record is not None:
        record.refused = True


async def one_pass(reconcile: Awaitable[Result | None]) -> Result | None:
    """Run one reconcile pass; its Result, looking again within LOOK_AGAIN_AFTER_CONFLICT seconds when any
    of its writes was refused as stale (write_refused), even if the step that met the refusal asked for
    nothing. A Result asking for a rate-limited requeue already brings the key back: it is kept as it is."""
    record = PassRecord()
    token = _current_pass.set(record)
    try:
        result = await reconcile
    finally:
        _current_pass.reset(token)
    if not record.refused or (result is not None and result.requeue):
        return result
    return combine(result, Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT))


@dataclass
class Applied:
    """What applying a plan did: the objects this pass created (by kind and name, with the server's answer),
    the (kind, name) of those it deleted, the
    server's answer to each patch, and whether a precondition failed or the subject was found gone (then the
    rest was not applied)."""

    created: dict[tuple[str, str], Obj] = field(default_factory=dict)  # with the server's answer
    deleted: set[tuple[str, str]] = field(default_factory=set)
    patched: dict[tuple[str, str], Obj] = field(default_factory=dict)
    stale: bool = False
    gone: bool = False  # a patch of the subject found it deleted (the rest was not applied)


def subject_of(db: SampleDB) -> Obj:
    """The subject dict of a SampleDB: what apply_plan needs of its metadata."""
    meta = db.metadata
    return {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid, "resourceVersion": meta.resource_version}


async def apply_plan(ctx: Context, subject: Obj, plan: Plan, *, kind: str = "SampleDB",
                     api_version: str = API_VERSION) -> Applied:
    """Apply `plan` for `subject` (the reconciled object's metadata as a dict: name, namespace, uid,
    resourceVersion), in order."""
    applied = Applied()
    namespace = str(subject.get("namespace") or "") or None
    for effect in plan.effects:
        if not await _apply(ctx, subject, namespace, effect, applied, (kind, api_version)):
            applied.stale = not applied.gone
            break
    return applied


async def _apply(ctx: Context, subject: Obj, namespace: str | None, effect: Effect,  # noqa: PLR0917
                 applied: Applied, about: tuple[str, str]) -> bool:
    """Apply one effect; False when a precondition failed (the plan stops there)."""
    announce: EventSpec | None = None
    if isinstance(effect, Create):
        obj_kind, name = str(effect.obj["kind"]), str(effect.obj["metadata"]["name"])
        try:
            answer = await ctx.apis[obj_kind].create(effect.obj)
        except Conflict:
            return True  # made by an earlier pass: never a second one, never overwritten
        applied.created[(obj_kind, name)] = answer
        log.info("created", kind=obj_kind, object=name, namespace=namespace, subject=subject.get("name"))
        announce = effect.announce
    elif isinstance(effect, Delete):
        try:
            await ctx.apis[effect.kind].delete(effect.name, namespace)
        except NotFound:
            return True
        applied.deleted.add((effect.kind, effect.name))
        log.info("deleted", kind=effect.kind, object=effect.name, namespace=namespace, subject=subject.get("name"))
        announce = effect.announce
    elif isinstance(effect, Patch):
        try:
            answer = await ctx.apis[effect.kind].patch(effect.name, effect.patch, namespace=namespace,
                                                       subresource=effect.subresource)
        except NotFound:
            if (effect.kind, effect.name) == (about[0], subject.get("name")):
                applied.gone = True
                return False  # the subject itself is gone: nothing after this concerns anything that exists
            return True
        except Conflict:
            if (effect.patch.get("metadata") or {}).get("resourceVersion"):
                log.info("not written: the object changed since it was read; looking again", kind=effect.kind,
                         object=effect.name, namespace=namespace)
                write_refused()
                return False
            raise
        applied.patched[(effect.kind, effect.name)] = answer
    elif isinstance(effect, Emit):
        announce = effect.event
    if announce is not None:
        kind, api_version = about
        await ctx.event(subject, api_version, kind, announce.type, announce.reason, announce.message)
    return True
