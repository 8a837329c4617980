"""Pod template changes the operator makes on its own (a new operator version's template): which they are, the
generation stamp that tells them apart, and the condition that says where a database stands.

Each instance's StatefulSet carries TEMPLATE_GENERATION_ANNOTATION: the SampleDB generation its pod template
was last written for. A template change is the user's when the spec changed since (a larger generation) or a
restart was asked (a new value of the restart annotation in the template); at the same generation, without a
restart, nothing the user did asks for it: it is the operator's, and rolls only when the operator's limit on
such rolls lets it (reconcilers/rollout.py: at most --operator-rollouts databases at once; 0: only when asked).
A StatefulSet without the stamp (made before it) is taken as asked: nothing tells its changes apart.

The stamp moves with the template, and also on a write that leaves the template as it is, since the template
then reflects the current spec, unless the upgrade step holds the version back (the StatefulSet's version is
not spec.version: the template follows that generation only later, and its change then is the user's).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sampledb_operator.decide import plan
from sampledb_operator.decide.labels import (
    RESTARTED_FOR_ANNOTATION,
    TEMPLATE_GENERATION_ANNOTATION,
    VERSION_ANNOTATION,
)
from sampledb_operator.decide.replicas.rollout import instance_of, keep_annotations
from sampledb_operator.model.conditions import Condition, ConditionType
from sampledb_operator.model.objects import Obj

WAITING_FOR_TURN = "WaitingForTurn"
WAITING_FOR_RESTART = "WaitingForRestart"
ROLLING = "Rolling"
APPLIED = "Applied"
STAMP = frozenset((TEMPLATE_GENERATION_ANNOTATION,))


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _restart_of(sts: Mapping[str, Any]) -> Any:
    template = (sts.get("spec") or {}).get("template") or {}
    return ((template.get("metadata") or {}).get("annotations") or {}).get(RESTARTED_FOR_ANNOTATION)


def operator_made(db: str, generation: int | None, actions: list[plan.Action], observed: Mapping[plan.Key, Obj],
                  restarts: frozenset[int]) -> frozenset[int]:
    """The instances of `restarts` (template changes) that nothing the user did asks for; an instance without a pod
    (0 replicas, before or after: hibernated, fenced) restarts nothing and is left out."""
    out = set()
    for action in actions:
        index = instance_of(db, action.key[1]) if action.key[0] == "StatefulSet" else None
        have = observed.get(action.key)
        if index not in restarts or have is None or generation is None:
            continue
        stamp = _annotations(have).get(TEMPLATE_GENERATION_ANNOTATION)
        stopped = 0 in ((have.get("spec") or {}).get("replicas", 1), action.obj["spec"].get("replicas", 1))
        if stamp == str(generation) and _restart_of(action.obj) == _restart_of(have) and not stopped:
            assert index is not None
            out.add(index)
    return frozenset(out)


def stamped(db: str, version: str, actions: list[plan.Action], observed: Mapping[plan.Key, Obj],
            restarts: frozenset[int]) -> list[plan.Action]:
    """`actions` with each instance StatefulSet's stamp as it should be: the desired one where the template
    changes, or stays and runs `version` (spec.version); the observed one (or none) where the upgrade step holds
    the version back. An update left with nothing to change is dropped."""
    out = []
    for action in actions:
        index = instance_of(db, action.key[1]) if action.key[0] == "StatefulSet" else None
        have = observed.get(action.key)
        if index is None or have is None:
            out.append(action)
            continue
        if index in restarts or _annotations(action.obj).get(VERSION_ANNOTATION) == version:
            quiet = plan.drift(_with_stamp(action.obj, have), have) is None  # only the stamp moves: no Event
            out.append(plan.Action(action.obj, action.reason, quiet=quiet) if quiet else action)
            continue
        obj = _with_stamp(action.obj, have)
        if (reason := plan.drift(obj, have)) is not None:
            out.append(plan.Action(obj, f"{action.key[0]} {action.key[1]}: {reason}"))
    return out


def _with_stamp(obj: Obj, have: Mapping[str, Any]) -> Obj:
    """`obj` with `have`'s stamp (or none, when `have` has none)."""
    return keep_annotations(obj, have, STAMP)


def condition(*, pending: bool, admitted: bool, limit: int, others: list[str], db: str, previous: Condition | None,
              generation: int | None) -> Condition | None:
    """The OperatorUpdate condition: True while an operator-made template change waits or rolls, False (Applied)
    once it is done; None for a database that never had one."""
    def cond(status: bool, reason: str, message: str) -> Condition:
        return Condition(type=ConditionType.OPERATOR_UPDATE.value, status="True" if status else "False",
                         reason=reason, message=message, observed_generation=generation)
    if not pending:
        if previous is None or previous.status == "False":
            return None
        return cond(False, APPLIED, "the operator's new pod template is applied to every instance")
    if admitted:
        return cond(True, ROLLING, "the operator's new version changes the pod template: rolling the instances")
    if limit == 0:
        return cond(True, WAITING_FOR_RESTART, "the operator's new version changes the pod template; it is applied"
                    f" only when asked (--operator-rollouts=0): kubectl sampledb restart {db}, or any spec change that"
                    " restarts the instances")
    return cond(True, WAITING_FOR_TURN, "the operator's new version changes the pod template; waiting for its turn"
                f" (--operator-rollouts={limit} at once; rolling now: {', '.join(others[:5]) or 'none'})")
