"""A Kubernetes object as the operator handles it: the API's JSON decoded into plain dicts.

The watchers decode every object into dicts (model objects of kubernetes_asyncio are slow and large);
`Obj` is the one name for that type. Objects read from a cache are shared: never mutate them.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def condition_true(obj: Obj | None, type_: str) -> bool:
    """Whether the object's status.conditions hold `type_` with status "True" (a Pod's or a SampleDB's Ready)."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)
