"""A Kubernetes object as the operator handles it: the API's JSON decoded into plain dicts.

The watchers decode every object into dicts (model objects of kubernetes_asyncio are slow and large);
`Obj` is the one name for that type. Objects read from a cache are shared: never mutate them.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
