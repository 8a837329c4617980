"""Reconcile errors that keep coming back, shown where users look: the SampleDB's status and Events.

The controller calls `report_reconcile_error` once a SampleDB's pass has failed a few times in a row
(runtime/controller.py, on_error). It writes Degraded=True/ReconcileError (or, for the API server's refusal, its
cause: OperatorForbidden, QuotaExceeded, PodSecurityRefused, AdmissionRefused) with the error's text (the
API server's answer, or the exception's type and text, with credentials redacted and cut to a few
hundred characters) and a Warning Event, once per distinct message: the same error again writes
nothing. The write carries the resourceVersion read from the cache, like every status write.
"""

from __future__ import annotations

from pydantic import ValidationError

from sampledb_operator.decide import status as st
from sampledb_operator.decide.lifecycle import stuck
from sampledb_operator.kube.errors import ApiError, Conflict, KubeError, NotFound
from sampledb_operator.model.conditions import get_condition
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION, dump
from sampledb_operator.observability.logging import get_logger, redact_text
from sampledb_operator.reconcilers.context import Context

log = get_logger(__name__)
ERROR_TEXT_LIMIT = 400


def error_text(err: BaseException) -> str:
    """What an error says, for a condition: no secrets, one line, bounded."""
    if isinstance(err, ApiError):
        text = f"{err.status} {err.reason}: {err.message}"
    elif isinstance(err, KubeError):
        text = str(err)
    else:
        text = f"{type(err).__name__}: {err}"
    text = " ".join(redact_text(text).split())
    return text if len(text) <= ERROR_TEXT_LIMIT else text[:ERROR_TEXT_LIMIT - 3] + "..."


def reason_of(err: BaseException) -> str:
    """The Degraded reason of a pass that keeps failing: the API server's refusal named (OperatorForbidden for the
    operator's own RBAC, QuotaExceeded, PodSecurityRefused, AdmissionRefused), else ReconcileError."""
    if isinstance(err, ApiError) and err.status in (403, 422):
        reason = stuck.refusal_reason(err.message)
        if reason != "CreateRefused":
            return reason
    return "ReconcileError"


async def report_reconcile_error(ctx: Context, ref: ObjectRef, err: Exception, failures: int) -> None:
    """Degraded=True/ReconcileError and a Warning Event for a SampleDB whose passes keep failing."""
    obj = ctx.caches.sampledbs.get(ref)
    if obj is None:
        return
    try:
        db = SampleDB.model_validate(obj)
    except ValidationError:
        return  # an unreadable object has its own status (UnreadableSpec)
    message = (f"reconciling failed {failures} times in a row; the operator keeps retrying with backoff."
               f" Last error: {error_text(err)}")
    reason = reason_of(err)
    old = get_condition(db.status.conditions, "Degraded")
    if old is not None and old.reason == reason and old.status == "True" \
            and old.message.split(" Last error: ", 1)[-1] == message.split(" Last error: ", 1)[-1]:
        return  # said already; the count in the message is not worth a write per retry
    new = st.with_reconcile_error(db, message, ctx.clock.now(), reason)
    body = {"metadata": {"resourceVersion": db.metadata.resource_version}, "status": dump(new)}
    try:
        await ctx.apis["SampleDB"].patch(db.metadata.name, body, namespace=db.metadata.namespace,
                                         subresource="status")
    except (NotFound, Conflict):
        return
    except KubeError as write_err:  # the API server may be what fails: the log still says it
        log.warning("could not report the reconcile error in the status", namespace=ref.namespace, name=ref.name,
                    error=str(write_err))
        return
    await ctx.event(db.metadata, API_VERSION, "SampleDB", "Warning", reason, message)
