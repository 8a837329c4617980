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
- A selector that adds shards is set at once (the watchers list them while the labels are checked), but an
  added shard is covered only after a labelling pass that started after it was selected has succeeded:
  every managed child without the bucket label (made before the label existed, or by an older replica
  during a rolling upgrade, which held the shard before us) gets it. A pass that labelled nothing proves
  every listing of the selector complete, whenever it began (a child labelled meanwhile by someone else
  enters the running watch as ADDED); after a pass that labelled something, the shards it proved count
  only with listings begun after it (Watcher.relist, listed_generation). A failed pass is retried after
  retry_period; the shard stays not ready meanwhile. A selector that only removes shards is set at once.
- While shards are held the labelling pass runs again every relabel_period: an object whose label a
  user removed leaves the filtered watches (the API server sends DELETED for an object that stops
  matching a selector) and comes back, labelled, within that period.
- `hint()` (the shards whose Leases name this replica: a restart takes them back in the ShardOwner's
  first period) is read once when run() starts, before the ShardOwner's first want(); the manager starts
  run() with the watchers (early), so a restarted replica lists its shards' children while its caches
  fill, not after. A wrong hint costs a listing, never a wrong answer (want() decides). `hinted` is set
  once the hint is taken and its shards selected, or failed, or took HINT_WAIT: the owner of the watchers
  holds their first listing until then (Watcher.start_after), so a restarted replica's first listing is of
  its shards (not one of no shard, then a second with them) and reaches the handlers as it comes.
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
HINT_WAIT = 2.0  # seconds the hint may take before the watchers' first listing starts without it


class Selectable(Protocol):
    """What ShardCaches needs of a Watcher."""

    @property
    def listed_selector(self) -> str | None: ...

    @property
    def listed_generation(self) -> int: ...

    def select(self, label_selector: str | None) -> None: ...

    def relist(self) -> int: ...

    def add_listed_handler(self, handler: Callable[[], None]) -> None: ...


SelectorOf = Callable[[frozenset[int]], str]


class ShardCaches:
    """Moves the filtered watchers' selectors with the shards held (see the module's invariants)."""

    def __init__(self, watchers: Sequence[tuple[Selectable, SelectorOf]], *, clock: Clock,
                 relabel: Callable[[frozenset[int]], Awaitable[int]], on_ready: Callable[[int], None],
                 hint: Callable[[], Awaitable[frozenset[int]]] | None = None,
                 retry_period: float = 2.0, relabel_period: float = RELABEL_PERIOD) -> None:
        """Each watcher with its selector_of; a watcher starts with its selector_of(frozenset()) (set by its
        owner when it made it)."""
        self._watchers = [watcher for watcher, _ in watchers]
        self._selectors_of = [selector_of for _, selector_of in watchers]
        self._clock = clock
        self._relabel = relabel
        self._on_ready = on_ready
        self._hint = hint
        self._retry_period = retry_period
        self._relabel_period = relabel_period
        self._wanted: frozenset[int] = frozenset()
        self._selected: frozenset[int] = frozenset()
        self._unproven: frozenset[int] = frozenset()  # selected, no labelling pass since
        self._relisting: frozenset[int] = frozenset()  # proven by a pass that labelled: need a fresh listing
        self._fresh = [0] * len(self._watchers)  # each watcher's listed_generation that counts for _relisting
        self._selectors = [of(frozenset()) for of in self._selectors_of]  # each watcher's, for _selected
        self._covers: dict[str, frozenset[int]] = dict.fromkeys(self._selectors, frozenset())
        self._ready: frozenset[int] = frozenset()
        self._changed = asyncio.Event()
        self.hinted = asyncio.Event()  # the hint is taken (see the module's invariants)
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
        """Follow want() until cancelled (the hint first)."""
        try:
            await self._take_hint()
            if self._changed.is_set():
                self._follow_wanted()  # the hinted shards selected before the watchers' first listing
        finally:
            self.hinted.set()
        while True:
            if self._changed.is_set():
                self._follow_wanted()
            elif self._unproven:
                if not await self._prove():
                    await self._changed_within(self._retry_period)  # a retry, sooner when the shards change
            elif not await self._changed_within(self._relabel_period) and self._selected:
                await self._labelled(self._selected)

    def _follow_wanted(self) -> None:
        self._changed.clear()
        if self._wanted != self._selected:
            self._select(self._wanted)

    async def _take_hint(self) -> None:
        """want(hint()) unless the shards are wanted already; a failing or slow (HINT_WAIT) hint is only logged."""
        if self._hint is None:
            return
        try:
            hinted = await within(self._clock, self._hint(), HINT_WAIT)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("reading which shards name this replica failed", error=repr(err))
            return
        if hinted is None:
            log.warning("reading which shards name this replica took too long; listing without them",
                        seconds=HINT_WAIT)
            return
        if hinted and not self._wanted:
            log.info("shard caches start with the shards naming this replica", shards=sorted(hinted))
            self.want(hinted)

    async def _changed_within(self, seconds: float) -> bool:
        """want() changed the shards within `seconds` (on the clock), else False."""
        return await within(self._clock, self._changed.wait(), seconds) is not None

    async def stop(self) -> None:
        """Nothing to release (the watchers are the manager's)."""

    async def _prove(self) -> bool:
        """A labelling pass for the selected shards, which proves the unproven ones; whether it succeeded."""
        labelled = await self._labelled(self._selected)
        if labelled is None:
            return False
        if labelled:
            self._relisting |= self._unproven
            self._fresh = [watcher.relist() for watcher in self._watchers]
        self._unproven = frozenset()
        self._recompute()
        return True

    async def _labelled(self, shards: frozenset[int]) -> int | None:
        """Run the labelling pass for `shards`; the objects labelled, None when it failed."""
        try:
            labelled = await self._relabel(shards)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("labelling the objects for the shard caches failed; retrying", error=repr(err),
                        delay=self._retry_period)
            return None
        if labelled:
            log.info("objects labelled for the shard caches", objects=labelled)
        return labelled

    def _select(self, shards: frozenset[int]) -> None:
        self._unproven = (self._unproven | (shards - self._selected)) & shards
        self._relisting &= shards
        self._selected = shards
        log.info("shard caches follow the shards held", shards=sorted(shards))
        self._selectors = [of(shards) for of in self._selectors_of]
        for watcher, selector in zip(self._watchers, self._selectors, strict=True):
            self._covers[selector] = shards
            watcher.select(selector)
        self._recompute()

    def _recompute(self) -> None:
        """After a selector change, a listing or a pass: the shards every cache covers; on_ready for the new
        ones."""
        ready: frozenset[int] | None = None
        for watcher, fresh in zip(self._watchers, self._fresh, strict=True):
            covered = self._covers.get(watcher.listed_selector or "", frozenset()) - self._unproven
            if watcher.listed_generation < fresh:
                covered -= self._relisting
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
