"""Waiting inside asyncio unit tests: yield to the loop until a condition holds, with a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(condition: Callable[[], bool], limit: float = 2.0) -> None:
    """Yield to the loop until `condition()` holds; fail after `limit` real seconds."""
    async with asyncio.timeout(limit):
        while True:
            if condition():
                return
            await asyncio.sleep(0)
