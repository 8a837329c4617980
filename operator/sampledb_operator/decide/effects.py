"""A step's plan: the writes and Events one pass of a step makes, and when to come back.

Pure data. A function in decide/ computes a `Plan` from what the caches hold (and from facts the
step read live), and reconcilers/effects.py applies it in order; no decision is left to the code
that writes. All effects concern one subject, the object the pass reconciles (its namespace is the
namespace of every effect, its metadata the Events' subject).

How each effect treats the API server's answers (the step's idempotence rests on them):
- `Create`: AlreadyExists means an earlier pass made it (names are derived from the work, so a
  second object for the same work is never made); its `announce` Event goes out only when this pass
  created it.
- `Delete`: NotFound means it is gone already; `announce` only when this pass deleted it.
- `Patch`: NotFound is ignored (the object went away), unless the patched object is the subject itself:
  then the plan ends there (its Events and writes are about an object that no longer exists). A
  Conflict on a patch that carries a resourceVersion precondition ends the plan: the effects after it
  are not applied, and the outcome says `stale` (a newer object exists, and its pass decides again).
- `Emit`: an Event about the subject; never fails the pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide.events import EventSpec
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result, combine


@dataclass(frozen=True, slots=True)
class Create:
    """Create `obj` (never overwrite): an existing object of its name is left as it is."""

    obj: Obj
    announce: EventSpec | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete the object `kind`/`name` in the subject's namespace."""

    kind: str
    name: str
    announce: EventSpec | None = None


@dataclass(frozen=True, slots=True)
class Patch:
    """A JSON merge patch of `kind`/`name` (of its `subresource` when set, e.g. "status")."""

    kind: str
    name: str
    patch: Obj
    subresource: str | None = None


@dataclass(frozen=True, slots=True)
class Emit:
    """An Event about the subject."""

    event: EventSpec


Effect = Create | Delete | Patch | Emit


@dataclass(frozen=True)
class Plan:
    """Everything one pass of a step does, in order, and when the step wants to look again."""

    effects: tuple[Effect, ...] = ()
    result: Result | None = None

    def __add__(self, other: Plan) -> Plan:
        """Both plans' effects in order, and the earlier of their results."""
        return Plan((*self.effects, *other.effects), combine(self.result, other.result))
