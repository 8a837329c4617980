"""The databases that may roll their pods for an operator-made pod template change, at most `limit` at once.

One per operator process (a sharded replica counts its own databases). A database holds its slot from its
admission until its roll is done (every instance on its template and ready again), so the next one starts only
then: one database at a time with the default limit of 1; but no longer than HOLD_LIMIT seconds, so that one
database that does not come back (broken before, or by the new template) holds the others back for a bounded
time, not forever. A holder that is gone (its SampleDB deleted or no longer this process's) is dropped at the
next admission. Order: first asked, first admitted (a database asks
on every pass while it waits). In memory only: after a restart the slots fill again as the databases' passes
come. Limit 0: none is admitted (the rolls wait until the user asks: reconcilers/rollout.py).
"""

from __future__ import annotations

from collections.abc import Callable

HOLD_LIMIT = 600.0  # seconds a database may hold a slot


class RolloutSlots:
    """Slots by database key ("namespace/name"): admit, release, and who holds one."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._holders: dict[str, float] = {}  # key -> when it was admitted (monotonic seconds)
        self._expired: set[str] = set()  # held a slot past HOLD_LIMIT: not admitted again until released
        self._waiting: dict[str, None] = {}  # in order of their first ask

    def admit(self, key: str, alive: Callable[[str], bool], now: float) -> bool:
        """True when `key` holds a slot (now or already); a key that waits keeps its place in the queue. A key
        that held one past HOLD_LIMIT rolls on without one (True) until it is released."""
        if key in self._expired:
            return True
        for holder in [k for k, since in self._holders.items() if now - since >= HOLD_LIMIT]:
            del self._holders[holder]
            self._expired.add(holder)
        if key in self._expired:
            return True
        if key in self._holders:
            return True
        for holder in [k for k in self._holders if not alive(k)]:
            del self._holders[holder]
        self._waiting.setdefault(key, None)
        for waiter in [k for k in self._waiting if not alive(k)]:
            del self._waiting[waiter]
        first_free = [k for k in self._waiting][: max(0, self.limit - len(self._holders))]
        if key not in first_free:
            return False
        del self._waiting[key]
        self._holders[key] = now
        return True

    def release(self, key: str) -> None:
        """`key`'s roll is done (or it has none): its slot, or its place in the queue, is free."""
        self._holders.pop(key, None)
        self._waiting.pop(key, None)
        self._expired.discard(key)

    def holders(self) -> list[str]:
        """The keys holding a slot now."""
        return list(self._holders)

    def rolling(self, key: str) -> bool:
        """`key` may roll: it holds a slot, or held one past HOLD_LIMIT."""
        return key in self._holders or key in self._expired
