"""The StorageClasses' binding modes, read on demand and remembered for a while (decide/children/binding.py's input).

StorageClasses are not watched (a handful of cluster-scoped objects the operator reads for two decisions);
a class's volumeBindingMode cannot change once it is made (the API server refuses the edit), so a mode read
once holds until the class is deleted and made again: each answer is kept for TTL_SECONDS, so creating
databases by the thousand reads each class once a period, not once a database. A class that cannot be read
(missing, forbidden, an error) has mode None: decide/children/binding.py then holds nothing, as before the binding
wait existed; an absent class's answer is kept MISSING_TTL_SECONDS, so it is not asked for on every pass and
its creation is seen soon (decide/lifecycle/stuck.py's StorageClassNotFound clears). expansion_problem reads a volume's
class live before the children step asks it to grow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sampledb_operator.decide.children import volumes as vol
from sampledb_operator.decide.children.binding import binding_mode
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.errors import ApiError, NotFound
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.runtime.clock import Clock

log = get_logger(__name__)
TTL_SECONDS = 300.0
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
MISSING_TTL_SECONDS = 15.0  # an absent class is asked for again this soon: its creation clears StorageClassNotFound


class BindingModes:
    """volumeBindingMode by StorageClass name, each answer kept TTL_SECONDS (on `clock`); `api` gives the
    StorageClasses' API when a class is read (the context's, which tests may replace)."""

    def __init__(self, api: Callable[[], ResourceApi], clock: Clock, ttl: float = TTL_SECONDS) -> None:
        self._api = api
        self._clock = clock
        self._ttl = ttl
        self._known: dict[str, tuple[str | None, float]] = {}  # name -> (mode, read at)
        self._missing: set[str] = set()  # the classes the last read found absent
        self._default: tuple[bool | None, float] | None = None  # whether there is a default class, read at

    async def modes(self, classes: Iterable[str]) -> dict[str, str | None]:
        """The binding mode of each class (None: it could not be read)."""
        return {name: await self.mode(name) for name in sorted(set(classes))}

    async def mode(self, name: str) -> str | None:
        known = self._known.get(name)
        now = self._clock.monotonic()
        if known is not None and now - known[1] < (self._ttl if name not in self._missing else MISSING_TTL_SECONDS):
            return known[0]
        mode: str | None
        self._missing.discard(name)
        try:
            mode = binding_mode(await self._api().get(name))
        except NotFound:
            mode = None
            self._missing.add(name)
        except ApiError as exc:
            log.info("StorageClass not readable; its claims' StatefulSets do not wait for them to bind",
                     storage_class=name, status=exc.status, error=exc.message)
            mode = None
        self._known[name] = (mode, now)
        return mode

    async def has_default(self) -> bool | None:
        """Whether the cluster has a default StorageClass (None: the classes cannot be listed), read live at most
        once every MISSING_TTL_SECONDS."""
        now = self._clock.monotonic()
        if self._default is not None and now - self._default[1] < MISSING_TTL_SECONDS:
            return self._default[0]
        try:
            listed = await self._api().list(None)
        except ApiError:
            answer: bool | None = None
        else:
            answer = any(((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"
                         for c in listed.items)
        self._default = (answer, now)
        return answer

    async def missing(self, name: str) -> bool:
        """Whether the class does not exist, as last read (a read that failed otherwise says no)."""
        await self.mode(name)
        return name in self._missing


async def expansion_problem(api: ResourceApi, db: SampleDB, pvc: Obj) -> Problem | None:
    """Why the PVC's StorageClass cannot expand it, or None when it can; the message names the volume."""
    volume, field = vol.what(db, str(pvc.get("metadata", {}).get("name", "")))
    cls_name = pvc.get("spec", {}).get("storageClassName")
    if not cls_name:
        return Problem("StorageExpansionUnsupported", f"{volume} has no StorageClass; it cannot be expanded", field)
    try:
        sc = await api.get(cls_name)
    except NotFound:
        return Problem("StorageExpansionUnsupported", f"{volume}: StorageClass {cls_name} does not exist", field)
    if not sc.get("allowVolumeExpansion"):
        return Problem("StorageExpansionUnsupported",
                       f"{volume}: StorageClass {cls_name} does not allow volume expansion"
                       " (allowVolumeExpansion is not true); the volume keeps its size", field)
    return None
