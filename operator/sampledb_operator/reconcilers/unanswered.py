"""The primaries that did not answer a question over SQL (the TLS question, reconcilers/tls.py; the monitoring role's
statements, reconcilers/monitoring.py), kept so that one that never answers (its server not listening yet, or no server
at all, as on fake nodes) is asked again after a growing delay (decide/children/tls.ssl_retry_delay) instead of on every
pass of its database.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sampledb_operator.decide.children.tls import ssl_retry_delay


@dataclass
class UnansweredChecks:
    """The primaries that did not answer the TLS question: per database uid, how many times in a row and when to
    ask again (decide/children/tls.ssl_retry_delay). In memory only (a restarted operator asks once more); an answer
    forgets the database; at most MAX_TRACKED are kept (the oldest go first: they are asked again sooner)."""

    MAX_TRACKED = 10000
    _tries: dict[str, tuple[int, float]] = field(default_factory=dict)

    def due(self, uid: str, now: float) -> bool:
        tried = self._tries.get(uid)
        return tried is None or now >= tried[1]

    def answered(self, uid: str) -> None:
        self._tries.pop(uid, None)

    def unanswered(self, uid: str, now: float) -> tuple[int, float]:
        """Record one more unanswered question; returns how many in a row, and the delay before the next."""
        count = self._tries.pop(uid, (0, 0.0))[0] + 1
        delay = ssl_retry_delay(count)
        self._tries[uid] = (count, now + delay)
        while len(self._tries) > self.MAX_TRACKED:
            del self._tries[next(iter(self._tries))]
        return count, delay
