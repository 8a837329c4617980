"""Helpers for kube/ unit tests that imitate the API server with a real local aiohttp server.

Answers are shaped like the API server's: metav1.Status bodies for failures, one JSON object
per line on chunked watch streams.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def status_body(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    """A metav1.Status failure body as the API server sends it."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code, **extra}


def respond(
    body: Any = None, *, status: int = 200, text: str | None = None, headers: Mapping[str, str] | None = None
) -> Handler:
    """A handler that always answers the same: a JSON body, a text body, or nothing."""

    async def handler(_request: web.Request) -> web.StreamResponse:
        if text is not None:
            return web.Response(status=status, text=text, headers=headers)
        if body is None:
            return web.Response(status=status, headers=headers)
        return web.json_response(body, status=status, headers=headers)

    return handler


def json_line(obj: dict[str, Any]) -> bytes:
    """One watch-stream line."""
    return json.dumps(obj).encode() + b"\n"


def watch_line(type_: str, obj: dict[str, Any]) -> bytes:
    """One watch event line: {"type": ..., "object": ...}."""
    return json_line({"type": type_, "object": obj})


async def stream_lines(
    request: web.Request, lines: list[bytes], *, hold: asyncio.Event | None = None
) -> web.StreamResponse:
    """A chunked 200 answer with `lines`; then hold the stream open until `hold` is set, or end it."""
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    await response.prepare(request)
    for line in lines:
        await response.write(line)
    if hold is not None:
        await hold.wait()
        return response
    await response.write_eof()
    return response
