"""The kube layer's error tree: every non-2xx answer of the API server becomes one of these.

Invariant: callers never see kubernetes_asyncio or aiohttp exceptions; a transport failure
(connection refused, timeout) is KubeTransportError, an HTTP answer is ApiError or a subclass. A
stream that goes quiet for its read timeout is ReadTimeout; one that breaks after it opened is
StreamInterrupted (StreamWentQuiet when it went quiet), so a watcher can tell a dropped connection
from one that could not be made.
A 403 because the namespace is being deleted is NamespaceTerminating (a Forbidden): expected while
a namespace goes away, so callers may treat it apart from a real refusal.
"""

from __future__ import annotations

from collections.abc import Collection

NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"  # metav1.StatusCause reason (corev1.NamespaceTerminatingCause)


class KubeError(Exception):
    """Base of every error raised by sampledb_operator.kube."""


class KubeTransportError(KubeError):
    """The request did not get an HTTP answer (connect error, reset, timeout)."""


class ReadTimeout(KubeTransportError):
    """A streaming response sent nothing for read_timeout seconds (silent connection)."""


class StreamInterrupted(KubeTransportError):
    """A stream that had opened (a 2xx answer) broke while it was read: a reset, a dropped connection."""


class StreamWentQuiet(StreamInterrupted, ReadTimeout):
    """A stream that had opened sent nothing for read_timeout seconds and was dropped."""


class ApiError(KubeError):
    """The API server answered with a non-2xx status."""

    def __init__(self, status: int, reason: str = "", message: str = "", retry_after: float | None = None):
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


class BadRequest(ApiError):
    """400."""


class Unauthorized(ApiError):
    """401."""


class Forbidden(ApiError):
    """403."""


class NamespaceTerminating(Forbidden):
    """403: the namespace is being deleted; nothing new can be created in it."""


class NotFound(ApiError):
    """404."""


class Conflict(ApiError):
    """409: resourceVersion conflict, AlreadyExists, or a server-side apply field conflict."""


class Gone(ApiError):
    """410: the resourceVersion is too old (compacted); the caller must relist."""


class Invalid(ApiError):
    """422: the object failed validation (schema, CEL rule, admission)."""


class TooManyRequests(ApiError):
    """429: honour retry_after."""


class ServerError(ApiError):
    """5xx."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_for(
    status: int, reason: str = "", message: str = "", retry_after: float | None = None, causes: Collection[str] = ()
) -> ApiError:
    """The most specific ApiError subclass for an HTTP status (and the Status's details.causes reasons).

    A 403 is NamespaceTerminating when a cause says so or, as the message of the namespace
    lifecycle admission plugin reads, the namespace "is being terminated".
    """
    if status == 403 and (NAMESPACE_TERMINATING_CAUSE in causes or "is being terminated" in message):
        return NamespaceTerminating(status, reason, message, retry_after)
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, reason, message, retry_after)
