"""Connection settings and credentials: in-cluster, kubeconfig (kube.kubeconfig), and Authorization sources.

Role: from the pod's service account or a kubeconfig, the Endpoint KubeClient.connect needs (host,
TLS context, Authorization source, TLS server name, proxy). kubernetes_asyncio is not imported on
these paths (issue #18: memory); only a kubeconfig user with a legacy `auth-provider` (oidc, gcp, ...)
is still loaded by kubernetes_asyncio (load_kubeconfig, imported lazily), so such users keep working.
Invariants: an Authorization source returns the full header value or None and raises only
KubeTransportError; a token file (the in-cluster token, a kubeconfig tokenFile) is re-read every
60 s off the event loop (projected service-account tokens rotate); an exec-plugin token with an
expiry is renewed once expired (within 5 minutes of it, as kubernetes_asyncio). A credential exec
plugin runs at most `exec_timeout` seconds, at start-up and on renewal: then it is killed and the
caller gets KubeTransportError, so the renewal lock is never held longer than that.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sampledb_operator.kube import kubeconfig as kc
from sampledb_operator.kube import tls
from sampledb_operator.kube.errors import KubeTransportError
from sampledb_operator.observability.logging import get_logger

log = get_logger(__name__)

Authorization = Callable[[], Awaitable[str | None]]
"""Returns the Authorization header value ("Bearer ...", "Basic ..."), or None."""

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_REFRESH_SECONDS = 60.0
EXEC_PLUGIN_TIMEOUT_SECONDS = 30.0
EXPIRY_SKEW = timedelta(minutes=5)  # kubernetes_asyncio's: a token this close to its expiry is renewed


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What a KubeClient needs: the API server, how to trust it, and how to authenticate."""

    host: str
    ssl_context: ssl.SSLContext | None
    authorization: Authorization | None
    server_hostname: str | None = None
    proxy: str | None = None


async def in_cluster_endpoint() -> Endpoint:
    """The pod's service account: KUBERNETES_SERVICE_HOST/PORT, its token (re-read) and ca.crt."""
    host = kc.in_cluster_host(os.environ)
    token_file = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    ca_file = os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt")
    authorization = TokenFile(token_file)
    if await authorization() is None:
        raise kc.KubeconfigError(f"in-cluster configuration: service account token {token_file} is empty")
    if not await asyncio.to_thread(_nonempty, ca_file):
        raise kc.KubeconfigError(f"in-cluster configuration: {ca_file} is missing or empty")
    ca = kc.Material(f"in-cluster configuration: {ca_file}", path=ca_file)
    context = await asyncio.to_thread(tls.tls_context, ca, None, None)
    return Endpoint(host, context, authorization)


async def kubeconfig_endpoint(
    kubeconfig: str | None, context: str | None, exec_timeout: float = EXEC_PLUGIN_TIMEOUT_SECONDS,
) -> Endpoint:
    """The kubeconfig's context (`kubeconfig`, else $KUBECONFIG, else ~/.kube/config; the current
    context unless `context` is given): server, TLS and the user's credential.

    The user's credential, in kubernetes_asyncio's order: exec plugin (its token, renewed on expiry,
    or its client certificate), else token, else tokenFile (re-read), else username/password; a
    client certificate/key is presented as well. A user with an auth-provider goes to kubernetes_asyncio.
    """
    selection = await asyncio.to_thread(kc.load, kubeconfig, context)
    user, cluster = selection.user, selection.cluster
    if user.auth_provider is not None:
        return await _legacy_endpoint(selection, exec_timeout)
    authorization: Authorization | None = None
    if user.exec is not None:
        authorization, user = await _from_exec_plugin(user, user.exec, exec_timeout)
    elif user.token:
        authorization = StaticAuthorization(f"Bearer {user.token}")
    elif user.token_file:
        authorization = TokenFile(user.token_file, label=f"user {user.name!r} tokenFile")
        if await authorization() is None:
            raise kc.KubeconfigError(f"kubeconfig user {user.name!r}: tokenFile {user.token_file} is empty")
    elif user.username is not None and user.password is not None:
        basic = base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
        authorization = StaticAuthorization(f"Basic {basic}")
    ssl_context = None
    if cluster.server.startswith("https"):
        ssl_context = await asyncio.to_thread(
            tls.tls_context, cluster.certificate_authority, user.client_certificate, user.client_key,
            insecure=cluster.insecure_skip_tls_verify,
        )
    return Endpoint(cluster.server, ssl_context, authorization, cluster.tls_server_name, cluster.proxy_url)


async def _from_exec_plugin(
    user: kc.User, config: kc.ExecConfig, timeout: float,  # noqa: ASYNC109 - the plugin's, run_exec_plugin kills it
) -> tuple[Authorization | None, kc.User]:
    """Run the plugin once: its token (an ExecPluginToken) or its client certificate (in the user)."""
    status = await run_exec_plugin(config, timeout)
    if status.get("token"):
        expiry = _expiry(status)
        return ExecPluginToken(config, timeout, str(status["token"]), expiry), user
    if status.get("clientCertificateData"):
        if not status.get("clientKeyData"):
            raise KubeTransportError("credential exec plugin answered clientCertificateData without clientKeyData")
        label = f"user {user.name!r}: credential exec plugin"
        return None, replace(
            user, client_certificate=kc.Material(f"{label} clientCertificateData",
                                                 data=str(status["clientCertificateData"]).encode()),
            client_key=kc.Material(f"{label} clientKeyData", data=str(status["clientKeyData"]).encode()),
        )
    raise KubeTransportError("credential exec plugin answered neither a token nor clientCertificateData")


def kubeconfig_namespace(kubeconfig: str | None, context: str | None = None) -> str | None:
    """The namespace set on a kubeconfig context (the current one unless `context` is given), as
    kubectl reads it (`kubeconfig`, else $KUBECONFIG, possibly several files, else ~/.kube/config);
    None when it sets none or the kubeconfig cannot be read."""
    try:
        merged = kc.merge(kc.read_kubeconfigs(kc.default_paths(kubeconfig)))
    except kc.KubeconfigError:  # a missing or malformed kubeconfig: connecting reports it properly
        return None
    return kc.context_namespace(merged, context)


class StaticAuthorization:
    """A fixed Authorization header value (a kubeconfig token, or username/password as Basic)."""

    def __init__(self, value: str) -> None:
        self._value = value

    async def __call__(self) -> str | None:
        return self._value


class ExecPluginToken:
    """A credential exec plugin's token; one that came with an expiry is renewed (the plugin run
    again, at most `timeout` seconds) on the first call once expired."""

    def __init__(self, config: kc.ExecConfig, timeout: float, token: str, expiry: datetime | None) -> None:
        self._config = config
        self._timeout = timeout
        self._token = token
        self._expiry = expiry
        self._lock = asyncio.Lock()

    async def __call__(self) -> str | None:
        if self._expiry is not None:
            async with self._lock:
                if _expired(self._expiry):
                    await self._renew()
        return f"Bearer {self._token}"

    async def _renew(self) -> None:
        status = await run_exec_plugin(self._config, self._timeout)
        if status.get("expirationTimestamp"):
            self._expiry = _expiry(status)
        if status.get("token"):
            self._token = str(status["token"])


def _expiry(status: dict[str, Any]) -> datetime | None:
    value = status.get("expirationTimestamp")
    if not value:
        return None
    try:
        return kc.parse_expiry(str(value))
    except ValueError as exc:
        raise KubeTransportError(f"credential exec plugin: bad expirationTimestamp {value!r}: {exc}") from exc


# --- legacy: a user with an auth-provider, loaded by kubernetes_asyncio ------------------------------------

async def _legacy_endpoint(selection: kc.Selection, exec_timeout: float) -> Endpoint:
    """The kubernetes_asyncio path, for a user with a legacy auth-provider only (imported here, lazily)."""
    from kubernetes_asyncio.client import Configuration

    configuration = Configuration()
    authorization = await load_kubeconfig(configuration, os.pathsep.join(selection.files), selection.context,
                                          exec_timeout)
    ssl_context = await asyncio.to_thread(tls_context, configuration)
    return Endpoint(str(configuration.host), ssl_context, authorization, configuration.tls_server_name,
                    configuration.proxy)


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


async def load_kubeconfig(
    configuration: Any, kubeconfig: str | None, context: str | None,
    exec_timeout: float = EXEC_PLUGIN_TIMEOUT_SECONDS,
) -> Authorization:
    """Fill a kubernetes_asyncio `configuration` from a kubeconfig (path, else $KUBECONFIG, else
    ~/.kube/config). Only for users with an auth-provider (see _legacy_endpoint).

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


class TokenFile:
    """A bearer token read from a file and re-read every `period` seconds, off the event loop.

    If a re-read fails the previous token is kept (and the failure logged); `label` names the
    token in messages.
    """

    def __init__(self, path: str, period: float = TOKEN_REFRESH_SECONDS, *,
                 label: str = "service account token") -> None:
        self._path = path
        self._period = period
        self._label = label
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
                raise KubeTransportError(f"cannot read {self._label}: {exc}") from exc
            log.warning("token file re-read failed; keeping the previous token", token=self._label, error=str(exc))
        else:
            self._token = text.strip() or self._token
        self._read_at = time.monotonic()


class KubeconfigAuthorization:
    """The credential of a kubeconfig user loaded by kubernetes_asyncio (one with an auth-provider);
    an expiring exec-plugin token is renewed when expired.

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
        try:
            config = kc.parse_exec(dict(self._loader._user["exec"].value), "kubeconfig user", None)
            status = await run_exec_plugin(config, self._exec_timeout)
            if status.get("expirationTimestamp"):
                self._loader.exec_plugin_expiry = kc.parse_expiry(str(status["expirationTimestamp"]))
        except KubeTransportError:
            raise
        except Exception as exc:  # a malformed answer or configuration comes in many types
            raise KubeTransportError(f"credential exec plugin failed: {exc}") from exc
        if status.get("token"):
            self._loader.token = f"Bearer {status['token']}"
            self._configuration.api_key["BearerToken"] = self._loader.token


async def run_exec_plugin(config: kc.ExecConfig, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109 - kills the plugin
    """Run a kubeconfig `exec` credential plugin; the status of its ExecCredential answer.

    The plugin gets this process's environment plus the config's env, and KUBERNETES_EXEC_INFO
    (non-interactive). It is killed (and reaped) after `timeout` seconds or when the caller is
    cancelled; a plugin that fails, hangs or answers something else raises KubeTransportError.
    """
    api_version = config.api_version
    info = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    env = {**os.environ, **dict(config.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}
    try:
        proc = await asyncio.create_subprocess_exec(
            config.command, *config.args, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise KubeTransportError(f"credential exec plugin {config.command} cannot run: {exc}") from exc
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        raise KubeTransportError(
            f"credential exec plugin {config.command}: no answer in {timeout:g} s; killed"
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
    if not (isinstance(answer, dict) and answer.get("apiVersion") == api_version
            and isinstance(answer.get("status"), dict)):
        raise KubeTransportError(f"credential exec plugin answered no {api_version} ExecCredential")
    status: dict[str, Any] = answer["status"]
    return status


def _expired(expiry: datetime) -> bool:
    return expiry - EXPIRY_SKEW <= datetime.now(UTC)


def _nonempty(path: str) -> bool:
    return os.path.isfile(path) and os.path.getsize(path) > 0


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()
