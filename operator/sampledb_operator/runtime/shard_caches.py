"""ShardCaches: a sharded replica's filtered watchers hold only the objects of the shards it holds.

The owner of the watchers gives, with each watcher, its `selector_of(shards)`: a label selector naming
exactly that watcher's objects of a set of shards (the app: children labelled with a bucket of their
database's hash, selected with `bucket in (...)` added to the kind's own selector), and
`relabel(shards)`, which labels those shards' objects made before the label existed. The ShardOwner
reports the shards held every period (want); this runnable moves the watchers' selectors, so a replica
lists, watches, decodes and keeps about 1/members of those objects.

Invariants:
- ready(shard) only while every filtered watcher's listing (Watcher.listed_selector) covers the shard's
  buckets; sharded.Sharding admits a shard's keys only then, so no pass reads a cache that lacks the shard's
  objects (a missing data volume would read as a lost one, a missing child would be made again).
- A selector that adds shards is set only after a labelling pass that started after those shards were
  wanted has succeeded: every managed child without the bucket label (made before the label existed, or
  by an older replica during a rolling upgrade, which held the shard before us) gets it, so the listing
  misses none of the shard's children. A failed pass is retried after retry_period; the shard stays not
  ready meanwhile. A selector that only removes shards is set at once.
- While a shard is held the labelling pass runs again every relabel_period: an object whose label a
  user removed leaves the filtered watches (the API server sends DELETED for an object that stops
  matching a selector) and comes back, labelled, within that period.
- on_ready(shard) is called each time a shard becomes ready (not again while it stays ready).
- run() is the manager's runnable; its waits are on the injected Clock; every API call has the client's
  timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

import structlog

from sampledb_operator.observability import metrics
from sampledb_operator.runtime.clock import Clock, within

log = structlog.stdlib.get_logger(__name__)

RELABEL_PERIOD = 60.0  # seconds between labelling passes while shards are held


class Selectable(Protocol):
    """What ShardCaches needs of a Watcher."""

    @property
    def listed_selector(self) -> str | None: ...

    def select(self, label_selector: str | None) -> None: ...

    def add_listed_handler(self, handler: Callable[[], None]) -> None: ...


SelectorOf = Callable[[frozenset[int]], str]


class ShardCaches:
    """Moves the filtered watchers' selectors with the shards held (see the module's invariants)."""

    def __init__(self, watchers: Sequence[tuple[Selectable, SelectorOf]], *, clock: Clock,
                 relabel: Callable[[frozenset[int]], Awaitable[int]], on_ready: Callable[[int], None],
                 retry_period: float = 2.0, relabel_period: float = RELABEL_PERIOD) -> None:
        """Each watcher with its selector_of; a watcher starts with its selector_of(frozenset()) (set by its
        owner when it made it)."""
        self._watchers = [watcher for watcher, _ in watchers]
        self._selectors_of = [selector_of for _, selector_of in watchers]
        self._clock = clock
        self._relabel = relabel
        self._on_ready = on_ready
        self._retry_period = retry_period
        self._relabel_period = relabel_period
        self._wanted: frozenset[int] = frozenset()
        self._selected: frozenset[int] = frozenset()
        self._selectors = [of(frozenset()) for of in self._selectors_of]  # each watcher's, for _selected
        self._covers: dict[str, frozenset[int]] = dict.fromkeys(self._selectors, frozenset())
        self._ready: frozenset[int] = frozenset()
        self._changed = asyncio.Event()
        for watcher in self._watchers:
            watcher.add_listed_handler(self._recompute)

    def want(self, shards: Iterable[int]) -> None:
        """The shards whose children the caches should hold (the ShardOwner's held shards)."""
        wanted = frozenset(shards)
        if wanted != self._wanted:
            self._wanted = wanted
            self._changed.set()

    def ready(self, shard: int) -> bool:
        """Every filtered cache holds the listing of `shard`'s children (and goes on watching them)."""
        return shard in self._ready

    async def run(self) -> None:
        """Follow want() until cancelled."""
        while True:
            if not await self._changed_within(self._relabel_period):
                if self._selected:
                    await self._labelled(self._selected)
                continue
            self._changed.clear()
            wanted = self._wanted
            if wanted == self._selected:
                continue
            if wanted - self._selected and not await self._labelled(wanted):
                await self._clock.sleep(self._retry_period)
                self._changed.set()
                continue
            self._select(wanted)

    async def _changed_within(self, seconds: float) -> bool:
        """want() changed the shards within `seconds` (on the clock), else False."""
        return await within(self._clock, self._changed.wait(), seconds) is not None

    async def stop(self) -> None:
        """Nothing to release (the watchers are the manager's)."""

    async def _labelled(self, shards: frozenset[int]) -> bool:
        """Run the labelling pass for `shards`; whether it succeeded."""
        try:
            labelled = await self._relabel(shards)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("labelling the objects for the shard caches failed; retrying", error=repr(err),
                        delay=self._retry_period)
            return False
        if labelled:
            log.info("objects labelled for the shard caches", objects=labelled)
        return True

    def _select(self, shards: frozenset[int]) -> None:
        self._selected = shards
        log.info("shard caches follow the shards held", shards=sorted(shards))
        self._selectors = [of(shards) for of in self._selectors_of]
        for watcher, selector in zip(self._watchers, self._selectors, strict=True):
            self._covers[selector] = shards
            watcher.select(selector)
        self._recompute()

    def _recompute(self) -> None:
        """After a selector change or a listing: the shards every cache covers; on_ready for the new ones."""
        ready: frozenset[int] | None = None
        for watcher in self._watchers:
            covered = self._covers.get(watcher.listed_selector or "", frozenset())
            ready = covered if ready is None else ready & covered
        ready = ready or frozenset()
        current = {w.listed_selector for w in self._watchers} | set(self._selectors)
        self._covers = {sel: shards for sel, shards in self._covers.items() if sel in current}
        new, self._ready = ready - self._ready, ready
        metrics.shards_cached.set(len(ready))
        for shard in sorted(new):
            try:
                self._on_ready(shard)
            except Exception as err:
                log.error("on_ready hook failed", shard=shard, error=repr(err), exc_info=err)
