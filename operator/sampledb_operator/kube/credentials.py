"""Credentials and TLS from kubernetes_asyncio's configuration loaders (kubeconfig, in-cluster).

kubernetes_asyncio is used here for configuration only; requests go through KubeClient.
Invariants: an Authorization source returns the full header value or None and raises only
KubeTransportError; the in-cluster token is re-read every 60 s off the event loop (projected
service-account tokens rotate); an exec-plugin token with an expiry is renewed once expired (within
5 minutes of it, as kubernetes_asyncio). A credential exec plugin runs at most `exec_timeout`
seconds, at start-up and on renewal: then it is killed and the caller gets KubeTransportError, so
the renewal lock is never held longer than that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sampledb_operator.kube.errors import KubeTransportError
from sampledb_operator.observability.logging import get_logger

log = get_logger(__name__)

Authorization = Callable[[], Awaitable[str | None]]
"""Returns the Authorization header value ("Bearer ...", "Basic ..."), or None."""

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_REFRESH_SECONDS = 60.0
EXEC_PLUGIN_TIMEOUT_SECONDS = 30.0
EXPIRY_SKEW = timedelta(minutes=5)  # kubernetes_asyncio's: a token this close to its expiry is renewed


def tls_context(configuration: Any) -> ssl.SSLContext | None:
    """The TLS context for an https host (CA, client certificate, verification), else None."""
    if not str(configuration.host).startswith("https"):
        return None
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


async def load_in_cluster(configuration: Any) -> Authorization:
    """Fill `configuration` from the pod's service account and environment; its token source."""
    from kubernetes_asyncio.config.incluster_config import load_incluster_config

    token_file = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    await asyncio.to_thread(
        load_incluster_config,
        client_configuration=configuration,
        try_refresh_token=False,
        token_filename=token_file,
        cert_filename=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
    )
    return TokenFile(token_file)


async def load_kubeconfig(
    configuration: Any, kubeconfig: str | None, context: str | None,
    exec_timeout: float = EXEC_PLUGIN_TIMEOUT_SECONDS,
) -> Authorization:
    """Fill `configuration` from a kubeconfig (path, else $KUBECONFIG, else ~/.kube/config).

    kubernetes_asyncio runs the user's exec plugin here, out of reach: after `exec_timeout` the
    load fails (a plugin still running is left to the process's exit, which a failed start is).
    """
    from kubernetes_asyncio.config.kube_config import load_kube_config

    # $KUBECONFIG is read here, not at kubernetes_asyncio's import time; it may list several files
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.join("~", ".kube", "config")
    try:
        loader = await asyncio.wait_for(load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        ), exec_timeout)
    except TimeoutError:
        raise KubeTransportError(f"kubeconfig {path}: no answer from the credential exec plugin in "
                                 f"{exec_timeout:g} s") from None
    return KubeconfigAuthorization(configuration, loader, exec_timeout=exec_timeout)


def kubeconfig_namespace(kubeconfig: str | None, context: str | None = None) -> str | None:
    """The namespace set on a kubeconfig context (the current one unless `context` is given), as
    kubectl reads it (`kubeconfig`, else $KUBECONFIG, possibly several files, else ~/.kube/config);
    None when it sets none or the kubeconfig cannot be read."""
    from kubernetes_asyncio.config.kube_config import list_kube_config_contexts

    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.join("~", ".kube", "config")
    if not any(os.path.exists(os.path.expanduser(p)) for p in path.split(os.pathsep) if p):
        return None
    try:
        contexts, current = list_kube_config_contexts(path)
    except Exception:  # a missing or malformed kubeconfig: connecting reports it properly
        return None
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


class TokenFile:
    """A bearer token read from a file and re-read every `period` seconds, off the event loop.

    If a re-read fails the previous token is kept (and the failure logged).
    """

    def __init__(self, path: str, period: float = TOKEN_REFRESH_SECONDS) -> None:
        self._path = path
        self._period = period
        self._token: str | None = None
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def __call__(self) -> str | None:
        if time.monotonic() - self._read_at >= self._period:
            async with self._lock:
                if time.monotonic() - self._read_at >= self._period:
                    await self._reread()
        return f"Bearer {self._token}" if self._token else None

    async def _reread(self) -> None:
        try:
            text = await asyncio.to_thread(_read_text, self._path)
        except OSError as exc:
            if self._token is None:
                raise KubeTransportError(f"cannot read service account token: {exc}") from exc
            log.warning("service account token re-read failed; keeping the previous one", error=str(exc))
        else:
            self._token = text.strip() or self._token
        self._read_at = time.monotonic()


class KubeconfigAuthorization:
    """The kubeconfig user's credential; an expiring exec-plugin token is renewed when expired.

    The renewal runs the plugin itself (run_exec_plugin), not kubernetes_asyncio's ExecProvider,
    which cannot be stopped: a cancelled ExecProvider leaves a hung plugin running.
    """

    def __init__(self, configuration: Any, loader: Any, *, exec_timeout: float = EXEC_PLUGIN_TIMEOUT_SECONDS) -> None:
        self._configuration = configuration
        self._loader = loader
        self._exec_timeout = exec_timeout
        self._lock = asyncio.Lock()

    async def __call__(self) -> str | None:
        if hasattr(self._loader, "exec_plugin_expiry"):  # only exec plugins that gave an expiry
            async with self._lock:
                if _expired(self._loader.exec_plugin_expiry):
                    await self._renew()
        value = await self._configuration.get_api_key_with_prefix("BearerToken")
        return str(value) if value else None

    async def _renew(self) -> None:
        from kubernetes_asyncio.config.dateutil import parse_rfc3339

        try:
            status = await run_exec_plugin(self._loader._user["exec"], self._exec_timeout)
            if status.get("expirationTimestamp"):
                self._loader.exec_plugin_expiry = parse_rfc3339(status["expirationTimestamp"])
        except KubeTransportError:
            raise
        except Exception as exc:  # a malformed answer or configuration comes in many types
            raise KubeTransportError(f"credential exec plugin failed: {exc}") from exc
        if status.get("token"):
            self._loader.token = f"Bearer {status['token']}"
            self._configuration.api_key["BearerToken"] = self._loader.token


async def run_exec_plugin(exec_config: Any, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109 - kills the plugin
    """Run a kubeconfig `exec` credential plugin; the status of its ExecCredential answer.

    The plugin is killed (and reaped) after `timeout` seconds or when the caller is cancelled;
    a plugin that fails, hangs or answers something else raises KubeTransportError.
    """
    from kubernetes_asyncio.config.exec_provider import ExecProvider

    provider = ExecProvider(exec_config)  # command, args and env as kubernetes_asyncio reads them
    info = {"apiVersion": provider.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    try:
        proc = await asyncio.create_subprocess_exec(
            *provider.args, env={**provider.env, "KUBERNETES_EXEC_INFO": json.dumps(info)},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise KubeTransportError(f"credential exec plugin {provider.args[0]} cannot run: {exc}") from exc
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        raise KubeTransportError(
            f"credential exec plugin {provider.args[0]}: no answer in {timeout:g} s; killed"
        ) from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
    if proc.returncode != 0:
        detail = stderr.decode("utf-8", "replace").strip()[:500]
        raise KubeTransportError(f"credential exec plugin failed: exited {proc.returncode}: {detail}")
    try:
        answer = json.loads(stdout)
    except ValueError as exc:
        raise KubeTransportError(f"credential exec plugin answered no JSON: {exc}") from exc
    if not (isinstance(answer, dict) and answer.get("apiVersion") == provider.api_version
            and isinstance(answer.get("status"), dict)):
        raise KubeTransportError(f"credential exec plugin answered no {provider.api_version} ExecCredential")
    status: dict[str, Any] = answer["status"]
    return status


def _expired(expiry: datetime) -> bool:
    return expiry - EXPIRY_SKEW <= datetime.now(UTC)


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()
