"""kube.kubeconfig, kube.tls and the endpoints kube.credentials builds from them, without kubernetes_asyncio.

Pure parts (paths, merge, select, parsing, in-cluster host, expiry) on literal documents; files,
TLS contexts and credentials on temporary files, with a real CA and client certificate made by the
openssl command line; one handshake against a local HTTPS server that asks for client certificates.
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import stat
import subprocess
import sys
import tempfile
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from sampledb_operator.kube import credentials
from sampledb_operator.kube import kubeconfig as kc
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import KubeError
from sampledb_operator.kube.tls import tls_context

REPO = Path(__file__).resolve().parents[3]
# --- fixtures and helpers ----------------------------------------------------------------------------

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _config(*, current: str | None = "ctx", clusters: dict[str, Any] | None = None,
            users: dict[str, Any] | None = None, contexts: dict[str, Any] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    if current is not None:
        document["current-context"] = current
    for section, key, entries in (("clusters", "cluster", clusters), ("users", "user", users),
                                  ("contexts", "context", contexts)):
        if entries is not None:
            document[section] = [{"name": name, key: value} for name, value in entries.items()]
    return document


def _simple(user: dict[str, Any], *, server: str = "https://127.0.0.1:6443", **cluster: Any) -> dict[str, Any]:
    return _config(clusters={"c": {"server": server, **cluster}}, users={"u": user},
                   contexts={"ctx": {"cluster": "c", "user": "u"}})


def _write(path: Path, document: Any) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return str(path)


def _plugin(tmp_path: Path, status: dict[str, Any], *, api_version: str = "client.authentication.k8s.io/v1") -> Path:
    """A plugin script printing an ExecCredential with `status`, recording its argv, env and input."""
    script = tmp_path / "plugin.py"
    script.write_text(textwrap.dedent(f"""\
        import json, os, pathlib, sys
        pathlib.Path({str(tmp_path / 'seen.json')!r}).write_text(json.dumps({{
            "argv": sys.argv[1:], "greeting": os.environ.get("GREETING"),
            "info": json.loads(os.environ["KUBERNETES_EXEC_INFO"])}}))
        print(json.dumps({{"apiVersion": {api_version!r}, "kind": "ExecCredential", "status": {status!r}}}))
        """))
    return script


async def _authorization(endpoint: credentials.Endpoint) -> str | None:
    assert endpoint.authorization is not None
    return await endpoint.authorization()


# --- pure: paths, merge, contexts --------------------------------------------------------------------

def test_paths_come_from_the_argument_else_the_environment_else_the_default() -> None:
    sep = os.pathsep
    assert kc.kubeconfig_paths("/a", "/env", "/default") == ("/a",)
    assert kc.kubeconfig_paths(None, f"/x{sep}{sep}/y{sep}/x", "/default") == ("/x", "/y")
    assert kc.kubeconfig_paths(None, None, "/default") == ("/default",)
    assert kc.kubeconfig_paths("", "", "/default") == ("/default",)


def test_merge_first_file_defining_a_name_wins_and_the_first_current_context() -> None:
    first = _config(current=None, clusters={"c": {"server": "https://first"}}, users={"u": {"token": "first"}},
                    contexts={"ctx": {"cluster": "c", "user": "u", "namespace": "one"}})
    second = _config(current="ctx", clusters={"c": {"server": "https://second"}, "d": {"server": "https://d"}},
                     users={"u": {"token": "second"}, "v": {"token": "v"}},
                     contexts={"ctx": {"cluster": "d", "user": "v"}, "other": {"cluster": "d", "user": "v"}})
    third = _config(current="other")
    merged = kc.merge([("/one", first), ("/empty", None), ("/two", second), ("/three", third)])
    assert merged.current_context == "ctx"
    assert sorted(merged.contexts) == ["ctx", "other"] and sorted(merged.clusters) == ["c", "d"]
    assert (merged.clusters["c"].origin, merged.users["u"].origin, merged.clusters["d"].origin) == ("/one", "/one",
                                                                                                      "/two")
    chosen = kc.select(merged, None)
    assert (chosen.cluster.server, chosen.user.token, chosen.namespace) == ("https://first", "first", "one")
    assert kc.select(merged, "other").user.token == "v"
    assert merged.files == ("/one", "/empty", "/two", "/three")


def test_a_file_naming_an_entry_twice_differently_is_an_error_identically_is_not() -> None:
    same = {"name": "c", "cluster": {"server": "https://a"}}
    assert list(kc.merge([("/f", {"clusters": [same, dict(same)]})]).clusters) == ["c"]
    with pytest.raises(KubeError, match=r"kubeconfig /f: clusters names 'c' twice"):
        kc.merge([("/f", {"clusters": [same, {"name": "c", "cluster": {"server": "https://b"}}]})])


@pytest.mark.parametrize(("document", "message"), [
    (["a", "list"], r"kubeconfig /f: not a kubeconfig"),
    ({"clusters": {"c": {}}}, r"kubeconfig /f: clusters must be a list"),
    ({"users": [{"user": {"token": "t"}}]}, r"kubeconfig /f: every entry of users needs a name"),
    ({"contexts": [{"name": "x", "context": "text"}]}, r"kubeconfig /f: context 'x': context must be a mapping"),
    ({"current-context": ["x"]}, r"kubeconfig /f: current-context must be a string"),
])
def test_malformed_documents_are_errors_naming_the_file(document: Any, message: str) -> None:
    with pytest.raises(KubeError, match=message):
        kc.merge([("/f", document)])


def test_context_errors_name_the_context_and_what_is_missing() -> None:
    document = _config(current=None, clusters={"c": {"server": "https://a"}}, users={"u": {}},
                       contexts={"good": {"cluster": "c", "user": "u"}, "no-cluster": {"user": "u"},
                                 "lost-cluster": {"cluster": "gone", "user": "u"},
                                 "lost-user": {"cluster": "c", "user": "nobody"}, "anonymous": {"cluster": "c"}})
    merged = kc.merge([("/f", document)])
    with pytest.raises(KubeError, match=r"kubeconfig /f: no context given and no current-context set"):
        kc.select(merged, None)
    with pytest.raises(KubeError, match=r"context 'nope' not found \(contexts: anonymous, good, lost-cluster"):
        kc.select(merged, "nope")
    with pytest.raises(KubeError, match=r"kubeconfig /f: context 'no-cluster' names no cluster"):
        kc.select(merged, "no-cluster")
    with pytest.raises(KubeError, match=r"context 'lost-cluster' names cluster 'gone', which kubeconfig /f does not"):
        kc.select(merged, "lost-cluster")
    with pytest.raises(KubeError, match=r"context 'lost-user' names user 'nobody', which kubeconfig /f does not"):
        kc.select(merged, "lost-user")
    assert kc.select(merged, "anonymous").user == kc.User()
    assert kc.select(merged, "good").context == "good"


def test_context_namespace_of_the_current_or_a_named_context() -> None:
    merged = kc.merge([("/f", _config(current="a", contexts={"a": {"cluster": "c", "namespace": "shop"},
                                                              "b": {"cluster": "c"}}))])
    assert [kc.context_namespace(merged, name) for name in (None, "a", "b", "zzz")] == ["shop", "shop", None, None]


# --- pure: clusters, users, exec ---------------------------------------------------------------------

def test_cluster_fields() -> None:
    cluster = kc.parse_cluster(kc.Named("c", {
        "server": "https://api.example:6443/", "insecure-skip-tls-verify": True, "tls-server-name": "kubernetes",
        "proxy-url": "http://proxy:3128"}, "/f"))
    assert cluster == kc.Cluster("c", "https://api.example:6443", None, True, "kubernetes", "http://proxy:3128")
    with pytest.raises(KubeError, match=r"kubeconfig /f: cluster 'c' has no server"):
        kc.parse_cluster(kc.Named("c", {}, "/f"))
    with pytest.raises(KubeError, match=r"cluster 'c': insecure-skip-tls-verify must be true or false"):
        kc.parse_cluster(kc.Named("c", {"server": "https://a", "insecure-skip-tls-verify": "yes"}, "/f"))


def test_relative_paths_resolve_against_the_file_that_defined_the_entry(tmp_path: Path) -> None:
    one, two = tmp_path / "one" / "config", tmp_path / "two" / "sub" / "config"
    _write(one, _config(clusters={"c": {"server": "https://a", "certificate-authority": "pki/ca.crt"}},
                        contexts={"ctx": {"cluster": "c", "user": "u"}}))
    _write(two, _config(current=None, users={"u": {
        "client-certificate": "../certs/admin.crt", "client-key": "/abs/admin.key", "tokenFile": "token",
        "exec": {"apiVersion": "v1", "command": "./bin/plugin"}}, "path-plugin": {
        "exec": {"apiVersion": "v1", "command": "gke-gcloud-auth-plugin"}}}))
    chosen = kc.load(f"{one}{os.pathsep}{two}", None)
    assert chosen.cluster.certificate_authority is not None
    assert chosen.cluster.certificate_authority.path == str(tmp_path / "one" / "pki" / "ca.crt")
    user = chosen.user
    assert user.client_certificate is not None and user.client_key is not None and user.exec is not None
    assert user.client_certificate.path == str(tmp_path / "two" / "certs" / "admin.crt")
    assert user.client_key.path == "/abs/admin.key"
    assert user.token_file == str(tmp_path / "two" / "sub" / "token")
    assert user.exec.command == str(tmp_path / "two" / "sub" / "bin" / "plugin")
    merged = kc.merge(kc.read_kubeconfigs([str(two)]))
    assert kc.parse_user(merged.users["path-plugin"]).exec == kc.ExecConfig("gke-gcloud-auth-plugin", api_version="v1")


def test_data_fields_are_base64_and_win_over_files() -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    encoded = _b64(pem)
    user = kc.parse_user(kc.Named("u", {"client-certificate-data": f"{encoded[:10]}\n  {encoded[10:]}",
                                        "client-certificate": "ignored.crt",
                                        "client-key-data": _b64(b"key")}, "/dir/f"))
    assert user.client_certificate == kc.Material("kubeconfig /dir/f: user 'u': client-certificate-data", data=pem)
    assert user.client_key is not None and user.client_key.data == b"key"
    with pytest.raises(KubeError, match=r"kubeconfig /dir/f: user 'u': client-key-data is not valid base64"):
        kc.parse_user(kc.Named("u", {"client-key-data": "not*base64"}, "/dir/f"))
    with pytest.raises(KubeError, match=r"cluster 'c': certificate-authority-data is not valid base64"):
        kc.parse_cluster(kc.Named("c", {"server": "https://a", "certificate-authority-data": "abc"}, "/dir/f"))


def test_user_credential_fields_and_auth_provider() -> None:
    user = kc.parse_user(kc.Named("u", {"token": "t", "username": "admin", "password": 1234,
                                        "auth-provider": {"name": "oidc", "config": {}}}, "/f"))
    assert (user.token, user.username, user.password, user.auth_provider) == ("t", "admin", "1234", "oidc")
    with pytest.raises(KubeError, match=r"user 'u': token must be a string"):
        kc.parse_user(kc.Named("u", {"token": ["t"]}, "/f"))


def test_exec_sections() -> None:
    config = kc.parse_exec({"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                            "args": ["eks", "get-token", 7], "env": [{"name": "AWS_PROFILE", "value": "prod"}],
                            "interactiveMode": "Never"}, "u", "/dir")
    assert config == kc.ExecConfig("aws", ("eks", "get-token", "7"), (("AWS_PROFILE", "prod"),),
                                   "client.authentication.k8s.io/v1beta1")
    for bad, message in (({"command": "x"}, "command and apiVersion are required"),
                         ({"command": "x", "apiVersion": "v1", "args": "a b"}, "args must be a list"),
                         ({"command": "x", "apiVersion": "v1", "env": [{"value": "v"}]}, "env must be a list")):
        with pytest.raises(KubeError, match=f"user 'u': exec: {message}"):
            kc.parse_user(kc.Named("u", {"exec": bad}, "/f"))


def test_in_cluster_host_from_the_service_environment() -> None:
    env = {kc.SERVICE_HOST_ENV: "10.96.0.1", kc.SERVICE_PORT_ENV: "443"}
    assert kc.in_cluster_host(env) == "https://10.96.0.1:443"
    assert kc.in_cluster_host({**env, kc.SERVICE_HOST_ENV: "fd00:10:96::1"}) == "https://[fd00:10:96::1]:443"
    for missing in ({}, {kc.SERVICE_HOST_ENV: "10.96.0.1"}, {**env, kc.SERVICE_PORT_ENV: ""}):
        with pytest.raises(KubeError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"):
            kc.in_cluster_host(missing)


def test_expiry_timestamps() -> None:
    assert kc.parse_expiry("2030-01-02T03:04:05Z") == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert kc.parse_expiry("2030-01-02T04:04:05.123456789+01:00") == datetime(2030, 1, 2, 3, 4, 5, 123456,
                                                                               tzinfo=UTC)
    assert kc.parse_expiry("2030-01-02T03:04:05") == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    with pytest.raises(ValueError):
        kc.parse_expiry("tomorrow")


# --- files ---------------------------------------------------------------------------------------------

def test_missing_files_are_skipped_none_existing_or_broken_is_an_error(tmp_path: Path) -> None:
    good = _write(tmp_path / "good", _simple({"token": "t"}))
    assert kc.load(f"{tmp_path / 'missing'}{os.pathsep}{good}", None).user.token == "t"
    with pytest.raises(KubeError, match=re.escape(f"no kubeconfig: none of {tmp_path / 'missing'} exists")):
        kc.load(str(tmp_path / "missing"), None)
    (tmp_path / "broken").write_text("clusters: [\n")
    with pytest.raises(KubeError, match=re.escape(f"kubeconfig {tmp_path / 'broken'}: not valid YAML")):
        kc.load(str(tmp_path / "broken"), None)


def test_kubeconfig_from_the_environment_else_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "home" / ".kube" / "config", _simple({"token": "home"}))
    env_file = _write(tmp_path / "env", _simple({"token": "env"}))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert kc.load(None, None, {"KUBECONFIG": env_file}).user.token == "env"
    assert kc.load(None, None, {}).user.token == "home"


# --- TLS -----------------------------------------------------------------------------------------------

def test_tls_context_from_ca_data_and_client_certificate_data_leaves_no_files(
    pki: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    seen: list[tuple[int, int, int, bytes]] = []
    original = ssl.SSLContext.load_cert_chain

    def recording(self: ssl.SSLContext, certfile: str, keyfile: str | None = None, password: Any = None) -> None:
        assert keyfile is not None
        directory = os.path.dirname(certfile)
        seen.append((stat.S_IMODE(os.stat(directory).st_mode), stat.S_IMODE(os.stat(certfile).st_mode),
                     stat.S_IMODE(os.stat(keyfile).st_mode), Path(certfile).read_bytes()))
        original(self, certfile, keyfile)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", recording)
    chosen = kc.select(kc.merge([(str(tmp_path / "config"), _simple(
        {"client-certificate-data": _b64((pki / "admin.crt").read_bytes()),
         "client-key-data": _b64((pki / "admin.key").read_bytes())},
        **{"certificate-authority-data": _b64((pki / "ca.crt").read_bytes())}))]), None)
    context = tls_context(chosen.cluster.certificate_authority, chosen.user.client_certificate,
                          chosen.user.client_key)
    assert seen == [(0o700, 0o600, 0o600, (pki / "admin.crt").read_bytes())]
    assert list(scratch.iterdir()) == []  # the private copies are gone
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "test-ca"),),)]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_tls_context_from_files_without_copies_and_insecure(pki: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **_: pytest.fail("files need no private copies"))
    ca = kc.Material("ca", path=str(pki / "ca.crt"))
    cert, key = kc.Material("crt", path=str(pki / "admin.crt")), kc.Material("key", path=str(pki / "admin.key"))
    context = tls_context(ca, cert, key, insecure=True)
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
    der = ssl.PEM_cert_to_DER_cert((pki / "ca.crt").read_text())
    assert len(tls_context(kc.Material("der", data=der), None, None).get_ca_certs()) == 1


def test_tls_errors_name_the_field(pki: Path, tmp_path: Path) -> None:
    with pytest.raises(KubeError, match=r"cluster 'c': certificate-authority-data"):
        tls_context(kc.Material("kubeconfig /f: cluster 'c': certificate-authority-data", data=b"junk"),
                    None, None)
    with pytest.raises(KubeError, match=r"certificate-authority /nowhere/ca.crt"):
        tls_context(kc.Material("certificate-authority /nowhere/ca.crt", path="/nowhere/ca.crt"), None, None)
    wrong_key = kc.Material("user 'u': client-key-data", data=(pki / "server.key").read_bytes())
    with pytest.raises(KubeError, match=r"user 'u': client-certificate-data, user 'u': client-key-data: cannot load"):
        tls_context(None, kc.Material("user 'u': client-certificate-data", data=(pki / "admin.crt").read_bytes()),
                    wrong_key)


# --- endpoints: credentials, in-cluster, fallback ------------------------------------------------------

async def test_token_basic_and_token_file_credentials(tmp_path: Path) -> None:
    path = _write(tmp_path / "config", _config(
        clusters={"c": {"server": "http://127.0.0.1:8080", "proxy-url": "http://proxy:3128",
                        "tls-server-name": "kubernetes"}},
        users={"token": {"token": "t0k", "username": "ignored", "password": "x"},
               "basic": {"username": "admin", "password": "s3cr3t"},
               "file": {"tokenFile": "token"}, "empty-file": {"tokenFile": "empty"},
               "missing-file": {"tokenFile": "no"}, "nobody": {}},
        contexts={name: {"cluster": "c", "user": name}
                  for name in ("token", "basic", "file", "empty-file", "missing-file", "nobody")}))
    (tmp_path / "token").write_text("from-file\n")
    (tmp_path / "empty").write_text("")
    endpoint = await credentials.kubeconfig_endpoint(path, "token")
    assert (endpoint.host, endpoint.ssl_context, endpoint.server_hostname, endpoint.proxy) == (
        "http://127.0.0.1:8080", None, "kubernetes", "http://proxy:3128")
    assert await _authorization(endpoint) == "Bearer t0k"
    assert await _authorization(await credentials.kubeconfig_endpoint(path, "basic")) == \
        f"Basic {_b64(b'admin:s3cr3t')}"
    assert await _authorization(await credentials.kubeconfig_endpoint(path, "file")) == "Bearer from-file"
    assert (await credentials.kubeconfig_endpoint(path, "nobody")).authorization is None
    with pytest.raises(KubeError, match=re.escape(f"user 'empty-file': tokenFile {tmp_path / 'empty'} is empty")):
        await credentials.kubeconfig_endpoint(path, "empty-file")
    missing = re.escape(str(tmp_path / "no"))
    with pytest.raises(KubeError, match=f"cannot read user 'missing-file' tokenFile: .*{missing}"):
        await credentials.kubeconfig_endpoint(path, "missing-file")


async def test_exec_plugin_gets_args_env_and_exec_info_and_its_token_is_used(tmp_path: Path) -> None:
    later = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    script = _plugin(tmp_path, {"token": "exec-token", "expirationTimestamp": later},
                     api_version="client.authentication.k8s.io/v1beta1")
    path = _write(tmp_path / "config", _simple({"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
        "args": [str(script), "--flag"], "env": [{"name": "GREETING", "value": "hello"}]}}, server="http://a"))
    endpoint = await credentials.kubeconfig_endpoint(path, None)
    assert await _authorization(endpoint) == "Bearer exec-token"
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"argv": ["--flag"], "greeting": "hello", "info": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "spec": {"interactive": False}}}
    (tmp_path / "seen.json").unlink()
    assert await _authorization(endpoint) == "Bearer exec-token"
    assert not (tmp_path / "seen.json").exists()  # an hour from expiry: not run again


@pytest.mark.parametrize(("status", "message"), [
    ({}, "answered neither a token nor clientCertificateData"),
    ({"clientCertificateData": "pem"}, "clientCertificateData without clientKeyData"),
    ({"token": "t", "expirationTimestamp": "soon"}, "bad expirationTimestamp 'soon'"),
])
async def test_exec_plugin_answers_without_a_usable_credential_fail_connect(
    tmp_path: Path, status: dict[str, Any], message: str
) -> None:
    script = _plugin(tmp_path, status)
    path = _write(tmp_path / "config", _simple({"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(script)]}}))
    with pytest.raises(KubeError, match=message):
        await KubeClient.connect(path)


async def test_exec_plugin_client_certificate_is_presented(tmp_path: Path, pki: Path, apiserver: int) -> None:
    script = _plugin(tmp_path, {"clientCertificateData": (pki / "admin.crt").read_text(),
                                "clientKeyData": (pki / "admin.key").read_text()})
    path = _write(tmp_path / "config", _simple(
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(script)]}},
        server=f"https://127.0.0.1:{apiserver}", **{"certificate-authority": str(pki / "ca.crt")}))
    client = await KubeClient.connect(path)
    try:
        assert await client.request("GET", "/whoami", timeout=10) == {"cn": "admin", "authorization": None}
    finally:
        await client.close()


async def test_tls_server_name_is_used_to_verify_the_server(tmp_path: Path, pki: Path, apiserver: int) -> None:
    """The server certificate names 127.0.0.1 only: a wrong tls-server-name fails, the right one works."""
    for name, works in (("kubernetes.default", False), ("127.0.0.1", True)):
        path = _write(tmp_path / name / "config", _simple(
            {"token": "t"}, server=f"https://127.0.0.1:{apiserver}",
            **{"certificate-authority-data": _b64((pki / "ca.crt").read_bytes()), "tls-server-name": name}))
        client = await KubeClient.connect(path)
        try:
            if works:
                assert (await client.request("GET", "/whoami", timeout=10))["authorization"] == "Bearer t"
            else:
                with pytest.raises(KubeError):
                    await client.request("GET", "/whoami", timeout=10)
        finally:
            await client.close()


async def test_in_cluster_needs_a_token_and_a_ca(tmp_path: Path, pki: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    monkeypatch.setattr(credentials, "SERVICE_ACCOUNT_DIR", str(account))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    with pytest.raises(KubeError, match="cannot read service account token"):
        await KubeClient.connect()
    (account / "token").write_text("")
    with pytest.raises(KubeError, match=r"service account token .* is empty"):
        await KubeClient.connect()
    (account / "token").write_text("sa")
    with pytest.raises(KubeError, match=r"ca\.crt is missing or empty"):
        await KubeClient.connect()
    (account / "ca.crt").write_bytes((pki / "ca.crt").read_bytes())
    client = await KubeClient.connect()
    assert client.host == "https://[fd00::1]:6443"
    await client.close()
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT")
    with pytest.raises(KubeError, match="KUBERNETES_SERVICE_PORT must be set"):
        await KubeClient.connect(in_cluster=True)


async def test_a_user_with_an_auth_provider_is_loaded_by_kubernetes_asyncio(tmp_path: Path) -> None:
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 4_102_444_800}).encode()).decode().rstrip("=")
    id_token = f"eyJhbGciOiJub25lIn0.{claims}.sig"
    oidc = {"auth-provider": {"name": "oidc", "config": {"id-token": id_token, "client-id": "k"}}}
    # the current-context of the first file that sets one is used, on this path as on the other
    first = _write(tmp_path / "first", _config(
        current="oidc", clusters={"c": {"server": "http://127.0.0.1:1"}}, users={"oidc": oidc, "plain": {"token": "p"}},
        contexts={"oidc": {"cluster": "c", "user": "oidc"}, "plain": {"cluster": "c", "user": "plain"}}))
    second = _write(tmp_path / "second", _config(current="plain"))
    endpoint = await credentials.kubeconfig_endpoint(f"{first}{os.pathsep}{second}", None)
    assert isinstance(endpoint.authorization, credentials.KubeconfigAuthorization)
    assert await _authorization(endpoint) == f"Bearer {id_token}"
    assert endpoint.host == "http://127.0.0.1:1"


def test_loading_and_connecting_never_import_kubernetes_asyncio(tmp_path: Path, pki: Path) -> None:
    path = _write(tmp_path / "config", _simple(
        {"client-certificate": str(pki / "admin.crt"), "client-key-data": _b64((pki / "admin.key").read_bytes()),
         "token": "t"}, **{"certificate-authority-data": _b64((pki / "ca.crt").read_bytes())}))
    script = textwrap.dedent(f"""\
        import asyncio, sys
        import sampledb_operator.app
        from sampledb_operator.kube import kubeconfig
        from sampledb_operator.kube.client import KubeClient
        from sampledb_operator.kube.credentials import kubeconfig_namespace
        from sampledb_operator.kube.tls import tls_context

        chosen = kubeconfig.load({path!r}, None)
        tls_context(chosen.cluster.certificate_authority, chosen.user.client_certificate, chosen.user.client_key)
        assert kubeconfig_namespace({path!r}) is None

        async def main():
            client = await KubeClient.connect({path!r})
            assert client.host == "https://127.0.0.1:6443"
            await client.close()

        asyncio.run(main())
        print(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes_asyncio"))
        """)
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
