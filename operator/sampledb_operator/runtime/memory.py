"""MemoryTrimmer: hands the C heap's free pages back to the system after a burst of work.

glibc's malloc keeps memory that was freed inside its heap: after the caches' first listing or a
burst of creations (JSON pages, watch events, answers: all freed again), the process keeps its peak
size although most of it is free. malloc_trim(0) returns every free page of every arena to the
kernel (madvise(MADV_DONTNEED)), keeping the heap's layout. Measured with 300 databases cached:
resident memory 168 MiB -> 122 MiB (docs/benchmarks.md).

Invariants:
- a C library without malloc_trim (musl, macOS) makes it a no-op that says so once in the log;
- the call runs in a worker thread (ctypes releases the GIL for it), never on the event loop;
- it trims once when started (the caches have just synced: the listing's peak is behind) and then
  every `period` seconds; a failing trim is logged and the next one tried (it never ends the run);
- sampledb_memory_trims_total counts trims; the process's own resident memory is already exported
  by prometheus-client's process collector (process_resident_memory_bytes).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable

from sampledb_operator.observability import metrics
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.runtime.clock import Clock

log = get_logger(__name__)
TRIM_PERIOD_SECONDS = 60.0

Trim = Callable[[], int]


def libc_malloc_trim() -> Trim | None:
    """glibc's malloc_trim(0) as a callable, or None when this C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int

    def trim() -> int:
        return int(function(0))

    return trim


class MemoryTrimmer:
    """A Manager runnable: malloc_trim now and every `period` seconds."""

    def __init__(self, clock: Clock, *, period: float = TRIM_PERIOD_SECONDS,
                 find_trim: Callable[[], Trim | None] = libc_malloc_trim) -> None:
        if period <= 0:
            raise ValueError("period must be > 0")
        self._clock = clock
        self._period = period
        self._find = find_trim

    async def run(self) -> None:
        trim = self._find()
        if trim is None:
            log.info("this C library has no malloc_trim: freed heap memory stays with the process")
            await asyncio.Event().wait()  # nothing to do until cancelled
            return
        while True:
            try:
                await asyncio.to_thread(trim)
                metrics.memory_trims_total.inc()
            except Exception as exc:  # a trim is an optimisation: the next period tries again
                log.warning("malloc_trim failed", error=repr(exc))
            await self._clock.sleep(self._period)

    async def stop(self) -> None:
        """Nothing is held."""
