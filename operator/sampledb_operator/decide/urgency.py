"""Which child events make their database's next pass urgent (runtime/workqueue.py's two priorities).

Pure. A child's event is urgent when it shows a state that a step of the database's pass acts on, so
that pass goes before the keys waiting for other reasons (first passes of new databases, requeues):

| child            | urgent when                                                              | the step it moves |
|------------------|--------------------------------------------------------------------------|-------------------|
| StatefulSet      | its pods are all ready and updated (status.statefulset_ready)             | init Job, Ready   |
| Job              | finished, succeeded or failed (status.job_state)                          | Ready, next step  |
| Pod              | past Pending: running (ready or not), finished, or being deleted          | roles, failover   |
| data volume      | bound (a MODIFIED event: the claim's binding, not a listing)              | its StatefulSet   |
| any child        | deleted                                                                   | re-create it      |

A PodDisruptionBudget is urgent only when deleted: no step reads its status, which follows the pods'
readiness (the pods' own events bring that). Everything else only changes what the status reports as progress
(the backups volume bound, a pod scheduled, a Job started, the StatefulSet's counters): those events still
wake the database, but plain, so a database waiting in the queue takes them all in one pass. Making every
child event urgent was measured at N=1,000 (docs/benchmarks.md, "Decisions"): the first database Ready after
6 s instead of 267 s, but 20 % more passes and status writes, because a database was passed again for each
burst of progress.
"""

from __future__ import annotations

from sampledb_operator.decide.children.binding import BOUND
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATA_COMPONENT
from sampledb_operator.decide.status import job_state, statefulset_ready
from sampledb_operator.model.objects import Obj


def urgent(kind: str, event_type: str, obj: Obj) -> bool:
    """Whether this event (ADDED, MODIFIED, DELETED) of a child of `kind` makes its database's next pass
    urgent (see the table above)."""
    if event_type == "DELETED":
        return True
    if kind == "StatefulSet":
        return statefulset_ready(obj)
    if kind == "Job":
        state = job_state(obj)
        return state is not None and state.finished
    if kind == "Pod":
        meta = obj.get("metadata") or {}
        phase = (obj.get("status") or {}).get("phase") or "Pending"
        return meta.get("deletionTimestamp") is not None or phase != "Pending"
    if kind == "PersistentVolumeClaim":  # a new StatefulSet waits for it (decide/children/binding.py)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return (event_type == "MODIFIED" and labels.get(COMPONENT_LABEL) == DATA_COMPONENT
                and (obj.get("status") or {}).get("phase") == BOUND)
    return False
