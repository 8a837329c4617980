"""pods/exec: run a command in a container through the API server's WebSocket (channel.k8s.io v4).

The protocol: a GET upgraded to a WebSocket with subprotocol v4.channel.k8s.io; every binary
message starts with its channel byte (1 stdout, 2 stderr, 3 the v4 error channel, whose one JSON
Status says how the command ended: Success, or Failure with reason NonZeroExitCode and the code in
details.causes[ExitCode]); the server closes the socket when the command has ended.

Invariants: the whole exchange has a deadline (`timeout`, connect included); stdin is never
opened; a refused upgrade is error_for(status) (403 without both `get` and `create` on pods/exec:
the upgrade is a GET, and Kubernetes 1.35+ checks `create` too; 404 no such pod, 400 container not
running), a connection that fails is KubeTransportError, and a command that ends
without a Status (the container died under it, e.g. it killed its own PID 1) reports exit_code None.
The socket goes through the KubeClient's connection pool, credentials and proxy.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus

import aiohttp

from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import KubeTransportError, error_for

PROTOCOL = "v4.channel.k8s.io"
STDOUT, STDERR, ERROR = 1, 2, 3
_OUTPUT_LIMIT = 64 * 1024


@dataclass(frozen=True, slots=True)
class ExecResult:
    """How a command ended: its exit code (None when no Status came), stdout and stderr (truncated)."""

    exit_code: int | None
    stdout: str
    stderr: str


def exit_code_of(status: dict[str, object]) -> int | None:
    """The exit code a v4 error-channel Status reports (0 for Success), or None when it names none."""
    if status.get("status") == "Success":
        return 0
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    for cause in causes if isinstance(causes, list) else []:
        if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
            try:
                return int(str(cause.get("message")))
            except ValueError:
                return None
    return None


async def exec_in_pod(
    client: KubeClient, namespace: str, pod: str, container: str, command: Sequence[str], *, timeout: float = 30.0,  # noqa: ASYNC109 - the exchange's deadline
) -> ExecResult:
    """Run `command` in the container; its outcome. Raises kube.errors when the exec cannot start."""
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/exec"
    query = [("container", container), ("stdout", "true"), ("stderr", "true"),
             *(("command", part) for part in command)]
    out, err = bytearray(), bytearray()
    status: dict[str, object] | None = None
    try:
        async with asyncio.timeout(timeout):
            ws = await _connect(client, path, query)
            try:
                async for message in ws:
                    if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                        continue
                    channel, payload = message.data[0], message.data[1:]
                    if channel == STDOUT:
                        out += payload[: max(0, _OUTPUT_LIMIT - len(out))]
                    elif channel == STDERR:
                        err += payload[: max(0, _OUTPUT_LIMIT - len(err))]
                    elif channel == ERROR and payload:
                        decoded = json.loads(payload)
                        status = decoded if isinstance(decoded, dict) else None
            finally:
                await ws.close()
    except TimeoutError as exc:
        raise KubeTransportError(f"exec in {namespace}/{pod}: no end within {timeout:g} s") from exc
    except ValueError as exc:
        raise KubeTransportError(f"exec in {namespace}/{pod}: malformed status: {exc}") from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise KubeTransportError(f"exec in {namespace}/{pod}: {type(exc).__name__}: {exc}") from exc
    code = exit_code_of(status) if status is not None else None
    return ExecResult(code, out.decode(errors="replace"), err.decode(errors="replace"))


async def _connect(client: KubeClient, path: str, query: list[tuple[str, str]]) -> aiohttp.ClientWebSocketResponse:
    # KubeClient has no WebSocket verb yet: its pool, credentials and TLS name are used here directly.
    headers = {"User-Agent": "sampledb-operator"}
    authorization = client._authorization
    if authorization is not None and (value := await authorization()):
        headers["Authorization"] = value
    try:
        return await client._session(streaming=True).ws_connect(  # held open like a watch: the streams' pool
            client.host + path, params=query, protocols=(PROTOCOL,), headers=headers, proxy=client.proxy,
            server_hostname=client._server_hostname,
        )
    except aiohttp.WSServerHandshakeError as exc:
        reason = HTTPStatus(exc.status).phrase.replace(" ", "") if exc.status in HTTPStatus._value2member_map_ else ""
        raise error_for(exc.status, reason, exc.message) from exc
