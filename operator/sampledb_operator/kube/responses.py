"""The API server's answers as kube.errors: a non-2xx answer's Status, no answer, a streamed body's lines.

Role: everything KubeClient reads back from aiohttp, mapped so that callers see only kube.errors.

Invariants:
- a non-2xx answer is error_for(status, Status.reason, Status.message, Retry-After, Status.details.causes);
  a body that is not a Status gives its first 512 bytes as the message, a missing reason is the status's
  phrase, and the Retry-After header (delta-seconds or an HTTP date) wins over details.retryAfterSeconds;
- no answer (an exception in TRANSPORT_ERRORS) is KubeTransportError, ReadTimeout when a socket read
  timed out;
- a streamed body is read as lines from StreamReader.readany() (unchanged in every supported aiohttp);
  a failure while it is read is StreamInterrupted (StreamWentQuiet when a read timed out), a line longer
  than MAX_LINE_BYTES is KubeTransportError, a last line without a newline is yielded as it is.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
from datetime import UTC, datetime
from http import HTTPStatus

import aiohttp
from aiohttp.http_exceptions import LineTooLong

from sampledb_operator.kube.errors import (
    ApiError,
    KubeTransportError,
    ReadTimeout,
    StreamInterrupted,
    StreamWentQuiet,
    error_for,
)

MAX_LINE_BYTES = 64 * 2**20  # one watch event; etcd caps objects at 1.5 MiB by default
TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError, LineTooLong)


class Lines:
    """Async iterator over the non-empty lines of a streaming body; errors mapped to kube.errors.

    Lines are split here from StreamReader.readany(), which every supported aiohttp has unchanged
    (readline's keywords and limits differ between versions); a line longer than MAX_LINE_BYTES
    is a KubeTransportError, a last line without a newline is yielded as it is.
    """

    def __init__(self, content: aiohttp.StreamReader, path: str) -> None:
        self._content = content
        self._path = path
        self._buffer = bytearray()

    def __aiter__(self) -> Lines:
        return self

    async def __anext__(self) -> bytes:
        while True:
            line = await self._line()
            if not line:
                raise StopAsyncIteration
            if line.strip():
                return line

    async def _line(self) -> bytes:
        """The next line with its newline; b"" at the end of the body."""
        searched = 0
        while (end := self._buffer.find(b"\n", searched)) < 0 and len(self._buffer) <= MAX_LINE_BYTES:
            searched = len(self._buffer)
            try:
                chunk = await self._content.readany()
            except TRANSPORT_ERRORS as exc:
                text = f"GET {self._path}: {type(exc).__name__}: {exc}"
                if isinstance(exc, aiohttp.SocketTimeoutError):
                    raise StreamWentQuiet(text) from exc
                raise StreamInterrupted(text) from exc
            if not chunk:  # end of the body
                end = len(self._buffer) - 1
                break
            self._buffer += chunk
        if (end < 0 and self._buffer) or end >= MAX_LINE_BYTES:
            raise KubeTransportError(f"GET {self._path}: a line is longer than {MAX_LINE_BYTES} bytes")
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line


def api_error(status: int, payload: bytes, retry_after_header: str | None) -> ApiError:
    """The ApiError for a non-2xx answer: reason and message from its Status body, if any."""
    reason = message = ""
    causes: list[str] = []
    retry_after = parse_retry_after(retry_after_header)
    try:
        decoded = json.loads(payload) if payload else None
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        reason = str(decoded.get("reason") or "")
        message = str(decoded.get("message") or "")
        details = decoded.get("details")
        if isinstance(details, dict):
            causes = [str(c.get("reason")) for c in details.get("causes") or [] if isinstance(c, dict)]
            if retry_after is None and details.get("retryAfterSeconds"):
                retry_after = float(details["retryAfterSeconds"])
    else:
        message = payload[:512].decode("utf-8", "replace").strip()
    if not reason:
        with contextlib.suppress(ValueError):
            reason = HTTPStatus(status).phrase.replace(" ", "")
    return error_for(status, reason, message, retry_after, causes)


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def transport_error(method: str, path: str, exc: BaseException) -> KubeTransportError:
    """The KubeTransportError for a request that got no answer: ReadTimeout when a socket read timed out."""
    text = f"{method} {path}: {type(exc).__name__}: {exc}"
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return ReadTimeout(text)
    return KubeTransportError(text)
