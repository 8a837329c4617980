"""A database pod's PostgreSQL log through the API server (the pods/log subresource): read once, or followed.

Role: the I/O of `logs` and of the instance logs in `report`; which pod to read is chosen elsewhere
(plugin/instances.py).

Invariants:
- only the PostgreSQL container (`postgres`, decide/children/desired_statefulset.py) is read;
- a read (not followed) has a total timeout and is bounded in lines and bytes when asked;
- a followed log has a connect timeout but no read timeout (aiohttp's sock_read 0: a quiet server may
  write nothing for hours); it ends when the API server ends it (the container stopped, the pod went
  away) or when the caller is cancelled (Ctrl-C), and the connection is closed either way;
- lines are written as they arrive, each flushed; a followed log leaves out empty lines (the client's
  line reader skips them).
"""

from __future__ import annotations

from typing import TextIO

from sampledb_operator.kube.client import QueryValue
from sampledb_operator.kube.resources import POD
from sampledb_operator.plugin.session import Session

POSTGRES_CONTAINER = "postgres"
READ_TIMEOUT = 60.0       # seconds for one log read (not followed), connection included
CONNECT_TIMEOUT = 10.0    # seconds to open the followed stream
NO_READ_TIMEOUT = 0.0     # aiohttp: a sock_read of 0 is no read timeout


def log_query(*, previous: bool = False, tail: int | None = None, limit_bytes: int | None = None,
              follow: bool = False) -> dict[str, QueryValue]:
    """The pods/log query: the PostgreSQL container, its last run's log with `previous`, the last `tail`
    lines (all when None or negative), at most `limit_bytes`, followed with `follow`."""
    query: dict[str, QueryValue] = {"container": POSTGRES_CONTAINER}
    if previous:
        query["previous"] = True
    if tail is not None and tail >= 0:
        query["tailLines"] = tail
    if limit_bytes is not None:
        query["limitBytes"] = limit_bytes
    if follow:
        query["follow"] = True
    return query


async def read_log(session: Session, pod: str, *, previous: bool = False, tail: int | None = None,
                   limit_bytes: int | None = None, timeout: float = READ_TIMEOUT) -> str:  # noqa: ASYNC109
    """The log of `pod`'s PostgreSQL container as text (undecodable bytes replaced); kube.errors on failure."""
    answer = await session.client.request("GET", POD.path(session.namespace, pod, "log"),
                                          query=log_query(previous=previous, tail=tail, limit_bytes=limit_bytes),
                                          timeout=timeout, text=True)
    return str(answer or "")


async def follow_log(session: Session, pod: str, out: TextIO, *, previous: bool = False,
                     tail: int | None = None) -> None:
    """Write `pod`'s PostgreSQL log to `out` as it grows, until the API server ends the stream."""
    query = log_query(previous=previous, tail=tail, follow=True)
    stream = session.client.stream(POD.path(session.namespace, pod, "log"), query=query,
                                   connect_timeout=CONNECT_TIMEOUT, read_timeout=NO_READ_TIMEOUT)
    async with stream as lines:
        async for line in lines:
            out.write(line.decode("utf-8", "replace"))
            out.flush()
