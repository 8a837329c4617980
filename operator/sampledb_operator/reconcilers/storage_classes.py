"""The StorageClasses' binding modes, read on demand and remembered for a while (decide/binding.py's input).

StorageClasses are not watched (a handful of cluster-scoped objects the operator reads for two decisions);
a class's volumeBindingMode cannot change once it is made (the API server refuses the edit), so a mode read
once holds until the class is deleted and made again: each answer is kept for TTL_SECONDS, so creating
databases by the thousand reads each class once a period, not once a database. A class that cannot be read
(missing, forbidden, an error) has mode None: decide/binding.py then holds nothing, as before the binding
wait existed; that answer is kept as long, so a missing class is not asked for on every pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sampledb_operator.decide.binding import binding_mode
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.errors import ApiError, NotFound
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.runtime.clock import Clock

log = get_logger(__name__)
TTL_SECONDS = 300.0


class BindingModes:
    """volumeBindingMode by StorageClass name, each answer kept TTL_SECONDS (on `clock`); `api` gives the
    StorageClasses' API when a class is read (the context's, which tests may replace)."""

    def __init__(self, api: Callable[[], ResourceApi], clock: Clock, ttl: float = TTL_SECONDS) -> None:
        self._api = api
        self._clock = clock
        self._ttl = ttl
        self._known: dict[str, tuple[str | None, float]] = {}  # name -> (mode, read at)

    async def modes(self, classes: Iterable[str]) -> dict[str, str | None]:
        """The binding mode of each class (None: it could not be read)."""
        return {name: await self.mode(name) for name in sorted(set(classes))}

    async def mode(self, name: str) -> str | None:
        known = self._known.get(name)
        now = self._clock.monotonic()
        if known is not None and now - known[1] < self._ttl:
            return known[0]
        mode: str | None
        try:
            mode = binding_mode(await self._api().get(name))
        except NotFound:
            mode = None
        except ApiError as exc:
            log.info("StorageClass not readable; its claims' StatefulSets do not wait for them to bind",
                     storage_class=name, status=exc.status, error=exc.message)
            mode = None
        self._known[name] = (mode, now)
        return mode
