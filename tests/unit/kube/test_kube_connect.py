"""KubeClient.connect: kubeconfig (CA, client certificate, token, exec plugin) and in-cluster config,
against a local HTTPS server that requires what a real API server requires (TLS, client certs).

The certificates are made with the openssl command line for the module.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import os
import signal
import sys
import time
import warnings
from asyncio import base_subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.aio import eventually

from sampledb_operator.kube import credentials
from sampledb_operator.kube.client import KubeClient, env_proxy
from sampledb_operator.kube.errors import KubeError, KubeTransportError
from sampledb_operator.observability.metrics import REGISTRY


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _kubeconfig(tmp_path: Path, pki: Path, port: int, users: dict[str, dict[str, Any]], *,
                with_ca: bool = True) -> Path:
    cluster: dict[str, Any] = {"server": f"https://127.0.0.1:{port}"}
    if with_ca:
        cluster["certificate-authority-data"] = _b64(pki / "ca.crt")
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": next(iter(users)),
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [{"name": name, "context": {"cluster": "local", "user": name}} for name in users],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def _whoami(client: KubeClient) -> dict[str, Any]:
    try:
        answer: dict[str, Any] = await client.request("GET", "/whoami", timeout=10)
        return answer
    finally:
        await client.close()


async def test_kubeconfig_client_certificate_is_presented_and_server_verified_by_ca(
    tmp_path: Path, pki: Path, apiserver: int
) -> None:
    users = {"token": {"token": "abc"},
             "cert": {"client-certificate-data": _b64(pki / "admin.crt"),
                      "client-key-data": _b64(pki / "admin.key")}}
    path = _kubeconfig(tmp_path, pki, apiserver, users)
    assert await _whoami(await KubeClient.connect(str(path), context="cert")) == {"cn": "admin",
                                                                                  "authorization": None}
    assert await _whoami(await KubeClient.connect(str(path))) == {"cn": None, "authorization": "Bearer abc"}


async def test_kubeconfig_from_env_var_when_no_path_is_given(
    tmp_path: Path, pki: Path, apiserver: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _kubeconfig(tmp_path, pki, apiserver, {"me": {"token": "from-env"}})
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert (await _whoami(await KubeClient.connect()))["authorization"] == "Bearer from-env"


async def test_server_certificate_not_signed_by_a_trusted_ca_is_refused(
    tmp_path: Path, pki: Path, apiserver: int
) -> None:
    path = _kubeconfig(tmp_path, pki, apiserver, {"me": {"token": "abc"}}, with_ca=False)
    with pytest.raises(KubeTransportError):
        await _whoami(await KubeClient.connect(str(path)))


async def test_expiring_exec_plugin_token_is_renewed_before_requests(
    tmp_path: Path, pki: Path, apiserver: int
) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib, datetime\n"
        f"counter = pathlib.Path({str(tmp_path / 'count')!r})\n"
        "n = int(counter.read_text()) + 1 if counter.exists() else 1\n"
        "counter.write_text(str(n))\n"
        "soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)\n"
        "status = {'token': f'tok-{n}', 'expirationTimestamp': soon.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
        "                  'status': status}))\n"
    )
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(plugin)], "interactiveMode": "Never"}}
    client = await KubeClient.connect(str(_kubeconfig(tmp_path, pki, apiserver, {"me": user})))
    try:
        seen = [(await client.request("GET", "/whoami"))["authorization"] for _ in range(2)]
    finally:
        await client.close()
    # a token expiring within the 5-minute skew counts as expired: each request runs the plugin again
    assert seen == ["Bearer tok-2", "Bearer tok-3"]


async def test_a_failing_credential_plugin_makes_requests_fail_as_transport_errors(
    tmp_path: Path, pki: Path, apiserver: int
) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib, sys, datetime\n"
        f"marker = pathlib.Path({str(tmp_path / 'ran')!r})\n"
        "if marker.exists():\n"
        "    sys.exit('identity provider unreachable')\n"
        "marker.touch()\n"
        "soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)\n"
        "status = {'token': 't', 'expirationTimestamp': soon.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
        "                  'status': status}))\n"
    )
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(plugin)], "interactiveMode": "Never"}}
    client = await KubeClient.connect(str(_kubeconfig(tmp_path, pki, apiserver, {"me": user})))
    before = REGISTRY.get_sample_value("rest_client_requests_total", {"code": "<error>", "method": "GET"}) or 0
    with pytest.raises(KubeTransportError, match="identity provider unreachable"):
        await _whoami(client)
    assert REGISTRY.get_sample_value("rest_client_requests_total", {"code": "<error>", "method": "GET"}) == before + 1


def _hanging_plugin(tmp_path: Path, *, answer_first: bool) -> dict[str, Any]:
    """An exec plugin that answers once (if answer_first) with a token inside the expiry skew, then
    hangs: it appends its pid to tmp_path/pids and sleeps for a minute."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, os, pathlib, time, datetime\n"
        f"counter = pathlib.Path({str(tmp_path / 'count')!r})\n"
        "n = int(counter.read_text()) + 1 if counter.exists() else 1\n"
        "counter.write_text(str(n))\n"
        f"if n > {1 if answer_first else 0}:\n"
        f"    with open({str(tmp_path / 'pids')!r}, 'a') as pids:\n"
        "        pids.write(f'{os.getpid()}\\n')\n"
        "    time.sleep(60)\n"
        "soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)\n"
        "status = {'token': f'tok-{n}', 'expirationTimestamp': soon.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
        "                  'status': status}))\n"
    )
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(plugin)], "interactiveMode": "Never"}}


def _plugin_pids(tmp_path: Path) -> list[int]:
    path = tmp_path / "pids"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_hung_credential_plugin_times_out_is_killed_and_does_not_hold_the_lock(
    tmp_path: Path, pki: Path, apiserver: int
) -> None:
    path = _kubeconfig(tmp_path, pki, apiserver, {"me": _hanging_plugin(tmp_path, answer_first=True)})
    client = await KubeClient.connect(str(path), exec_plugin_timeout=0.5)
    try:
        for _ in range(2):  # the second request gets the lock, runs the plugin again, and times out too
            started = time.monotonic()
            with pytest.raises(KubeTransportError, match="no answer"):
                await asyncio.wait_for(client.request("GET", "/whoami"), 10)
            assert time.monotonic() - started < 5
    finally:
        await client.close()
    pids = _plugin_pids(tmp_path)
    assert len(pids) == 2
    assert not any(_running(pid) for pid in pids)


async def test_a_credential_plugin_that_hangs_at_start_fails_connect_in_time(
    tmp_path: Path, pki: Path, apiserver: int
) -> None:
    path = _kubeconfig(tmp_path, pki, apiserver, {"me": _hanging_plugin(tmp_path, answer_first=False)})
    try:
        with pytest.raises(KubeError, match="no answer"):
            await asyncio.wait_for(KubeClient.connect(str(path), exec_plugin_timeout=0.5), 10)
    finally:
        # kubernetes_asyncio ran this one and cannot kill it (the operator exits after a failed start):
        # kill it here and let the loop see it end, so its subprocess transport is closed in this test
        pids = _plugin_pids(tmp_path)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await eventually(lambda: not any(_running(pid) for pid in pids), limit=10)
        transports = [o for o in gc.get_objects() if isinstance(o, base_subprocess.BaseSubprocessTransport)]
        await eventually(lambda: all(t.get_returncode() is not None for t in transports), limit=10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


async def test_in_cluster_config_uses_service_account_token_ca_and_service_env(
    tmp_path: Path, pki: Path, apiserver: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("sa-token")
    (account / "ca.crt").write_bytes((pki / "ca.crt").read_bytes())
    monkeypatch.setattr(credentials, "SERVICE_ACCOUNT_DIR", str(account))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(apiserver))
    client = await KubeClient.connect()
    assert client.host == f"https://127.0.0.1:{apiserver}"
    assert (await _whoami(client))["authorization"] == "Bearer sa-token"


async def test_missing_kubeconfig_is_a_kube_error(tmp_path: Path) -> None:
    with pytest.raises(KubeError):
        await KubeClient.connect(str(tmp_path / "nope"), in_cluster=False)



def test_the_environment_proxy_is_read_once_and_no_proxy_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
                "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    assert env_proxy("https://10.0.0.1:6443") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert env_proxy("https://10.0.0.1:6443") == "http://proxy.example:3128"
    assert env_proxy("http://10.0.0.1:8080") is None  # only HTTPS_PROXY is set
    monkeypatch.setenv("NO_PROXY", "10.0.0.1,.svc")
    assert env_proxy("https://10.0.0.1:6443") is None
    assert env_proxy("https://kubernetes.default.svc:443") is None
    assert env_proxy("https://api.example:6443") == "http://proxy.example:3128"


async def test_a_connected_client_never_asks_aiohttp_to_read_the_environment(
    tmp_path: Path, pki: Path, apiserver: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    path = _kubeconfig(tmp_path, pki, apiserver, {"me": {"token": "abc"}})
    client = await KubeClient.connect(str(path))
    try:
        assert client.proxy is None
        assert (await client.request("GET", "/whoami", timeout=10))["authorization"] == "Bearer abc"
        async with client.stream("/whoami", connect_timeout=5, read_timeout=5) as lines:
            assert [line async for line in lines]
        assert set(client._sessions) == {False, True}  # the requests' pool and the streams'
        assert all(session.trust_env is False for session in client._sessions.values())
    finally:
        await client.close()
