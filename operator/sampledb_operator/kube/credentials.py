"""Credentials and TLS from kubernetes_asyncio's configuration loaders (kubeconfig, in-cluster).

kubernetes_asyncio is used here for configuration only; requests go through KubeClient.
Invariants: an Authorization source returns the full header value or None and raises only
KubeTransportError; the in-cluster token is re-read every 60 s off the event loop (projected
service-account tokens rotate); an exec-plugin token with an expiry is renewed once expired.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sampledb_operator.kube.errors import KubeTransportError
from sampledb_operator.observability.logging import get_logger

log = get_logger(__name__)

Authorization = Callable[[], Awaitable[str | None]]
"""Returns the Authorization header value ("Bearer ...", "Basic ..."), or None."""

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_REFRESH_SECONDS = 60.0


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


async def load_kubeconfig(configuration: Any, kubeconfig: str | None, context: str | None) -> Authorization:
    """Fill `configuration` from a kubeconfig (path, else $KUBECONFIG, else ~/.kube/config)."""
    from kubernetes_asyncio.config.kube_config import load_kube_config

    # $KUBECONFIG is read here, not at kubernetes_asyncio's import time; it may list several files
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.join("~", ".kube", "config")
    loader = await load_kube_config(
        config_file=path, context=context, client_configuration=configuration, persist_config=False
    )
    return KubeconfigAuthorization(configuration, loader)


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
    """The kubeconfig user's credential; an expiring exec-plugin token is renewed when expired."""

    def __init__(self, configuration: Any, loader: Any) -> None:
        self._configuration = configuration
        self._loader = loader
        self._lock = asyncio.Lock()

    async def __call__(self) -> str | None:
        if hasattr(self._loader, "exec_plugin_expiry"):  # only exec plugins that gave an expiry
            async with self._lock:
                try:
                    await self._loader.load_from_exec_plugin()  # no-op until the token has expired
                except Exception as exc:  # the plugin's failures come in many types
                    raise KubeTransportError(f"credential exec plugin failed: {exc}") from exc
                self._configuration.api_key["BearerToken"] = self._loader.token
        value = await self._configuration.get_api_key_with_prefix("BearerToken")
        return str(value) if value else None


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()
