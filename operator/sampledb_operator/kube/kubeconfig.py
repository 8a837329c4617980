"""Kubeconfig and in-cluster settings read without kubernetes_asyncio: files, merge, context.

Role: turn kubeconfig files (or the pod's service-account environment) into what KubeClient needs
(server, TLS material, the user's credential settings), importing neither kubernetes_asyncio nor its
generated client (issue #18: that import alone is ~33 MiB resident). kube.tls turns the TLS material
into an ssl.SSLContext.

Pure (no I/O): kubeconfig_paths, merge, select, context_namespace, parse_cluster, parse_user,
parse_exec, in_cluster_host, parse_expiry. I/O: read_kubeconfigs and load (files).

Invariants:
- several files are merged as kubectl merges them: for clusters, users and contexts the first file
  that defines a name wins; current-context comes from the first file that sets it; listed files
  that do not exist are skipped, and none existing is an error; one file naming the same entry
  twice with different contents is an error;
- relative paths (certificate-authority, client-certificate, client-key, tokenFile, and an exec
  command that contains a path separator) resolve against the directory of the file that defined
  the entry, as kubectl resolves them;
- `*-data` fields are base64 (strict, whitespace ignored) and win over the matching file field;
- every problem is a KubeError whose message names the file(s), the context, cluster or user, and
  the field (a Material's label carries them on to kube.tls);
- a user with an `auth-provider` is parsed (auth_provider is its name) but not interpreted here:
  the caller hands such users to kubernetes_asyncio.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sampledb_operator.kube.errors import KubeError

SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
SERVICE_PORT_ENV = "KUBERNETES_SERVICE_PORT"
_SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))


class KubeconfigError(KubeError):
    """A kubeconfig (or the in-cluster environment) cannot be read or does not say what is needed."""


@dataclass(frozen=True, slots=True)
class Named:
    """One entry of a clusters/users/contexts list and the file that defined it."""

    name: str
    value: Mapping[str, Any]
    origin: str

    def where(self, kind: str) -> str:
        return f"kubeconfig {self.origin}: {kind} {self.name!r}"


@dataclass(frozen=True, slots=True)
class Merged:
    """The merged view of one or more kubeconfig files (kubectl's rules, see the module docstring)."""

    files: tuple[str, ...]
    clusters: Mapping[str, Named] = field(default_factory=dict)
    users: Mapping[str, Named] = field(default_factory=dict)
    contexts: Mapping[str, Named] = field(default_factory=dict)
    current_context: str | None = None

    def describe(self) -> str:
        return f"kubeconfig {os.pathsep.join(self.files)}"


@dataclass(frozen=True, slots=True)
class Material:
    """PEM (or DER) bytes given inline, or the path of a file holding them; `label` names the field."""

    label: str
    path: str | None = None
    data: bytes | None = None


@dataclass(frozen=True, slots=True)
class ExecConfig:
    """A credential exec plugin: argv, extra environment and the ExecCredential apiVersion it speaks."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = "client.authentication.k8s.io/v1"


@dataclass(frozen=True, slots=True)
class Cluster:
    """A kubeconfig cluster: the server and how to trust it."""

    name: str
    server: str
    certificate_authority: Material | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None


@dataclass(frozen=True, slots=True)
class User:
    """A kubeconfig user (name "" when the context names none): its credential settings, unresolved."""

    name: str = ""
    client_certificate: Material | None = None
    client_key: Material | None = None
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    exec: ExecConfig | None = None
    auth_provider: str | None = None  # the legacy auth-provider's name; left to kubernetes_asyncio


@dataclass(frozen=True, slots=True)
class Selection:
    """The chosen context with its cluster and user."""

    context: str
    cluster: Cluster
    user: User
    namespace: str | None
    files: tuple[str, ...]


# --- pure: which files, merge, select -------------------------------------------------------------------

def kubeconfig_paths(argument: str | None, env_value: str | None, default: str) -> tuple[str, ...]:
    """The kubeconfig files to read, in order: `argument`, else $KUBECONFIG, else `default`.

    The argument is read like $KUBECONFIG (a list separated by os.pathsep), as it always was here;
    empty items and repeats are dropped.
    """
    listed = argument or env_value or default
    return tuple(dict.fromkeys(p for p in listed.split(os.pathsep) if p))


def merge(documents: Sequence[tuple[str, Any]]) -> Merged:
    """Merge parsed kubeconfig documents (path, YAML value) in order, as kubectl does."""
    sections: dict[str, dict[str, Named]] = {"clusters": {}, "users": {}, "contexts": {}}
    current: str | None = None
    for path, document in documents:
        if document is None:  # an empty file
            continue
        if not isinstance(document, Mapping):
            raise KubeconfigError(f"kubeconfig {path}: not a kubeconfig (a YAML mapping is expected)")
        for section, key in _SECTIONS:
            for entry in _entries(path, document, section, key):
                sections[section].setdefault(entry.name, entry)
        if current is None:
            current = _text(document.get("current-context"), f"kubeconfig {path}: current-context")
    return Merged(tuple(path for path, _ in documents), sections["clusters"], sections["users"],
                  sections["contexts"], current)


def _entries(path: str, document: Mapping[str, Any], section: str, key: str) -> list[Named]:
    items = document.get(section) or []
    if not isinstance(items, list):
        raise KubeconfigError(f"kubeconfig {path}: {section} must be a list")
    found: dict[str, Named] = {}
    for item in items:
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name:
            raise KubeconfigError(f"kubeconfig {path}: every entry of {section} needs a name")
        value = item.get(key) or {}
        if not isinstance(value, Mapping):
            raise KubeconfigError(f"kubeconfig {path}: {key} {name!r}: {key} must be a mapping")
        if name in found and found[name].value != value:
            raise KubeconfigError(f"kubeconfig {path}: {section} names {name!r} twice, differently")
        found.setdefault(name, Named(name, value, path))
    return list(found.values())


def context_namespace(merged: Merged, context: str | None) -> str | None:
    """The namespace the context (the current one unless given) sets; None if it sets none or is unknown."""
    chosen = merged.contexts.get(context or merged.current_context or "")
    namespace = chosen.value.get("namespace") if chosen else None
    return str(namespace) if namespace else None


def select(merged: Merged, context: str | None) -> Selection:
    """The context `context` (else the current one) with its cluster and user, parsed."""
    name = context or merged.current_context
    if not name:
        raise KubeconfigError(f"{merged.describe()}: no context given and no current-context set")
    chosen = merged.contexts.get(name)
    if chosen is None:
        known = ", ".join(sorted(merged.contexts)) or "none"
        raise KubeconfigError(f"{merged.describe()}: context {name!r} not found (contexts: {known})")
    where = chosen.where("context")
    cluster_name = _text(chosen.value.get("cluster"), f"{where}: cluster")
    if not cluster_name:
        raise KubeconfigError(f"{where} names no cluster")
    if cluster_name not in merged.clusters:
        raise KubeconfigError(f"{where} names cluster {cluster_name!r}, which {merged.describe()} does not define")
    user_name = _text(chosen.value.get("user"), f"{where}: user")
    if user_name and user_name not in merged.users:
        raise KubeconfigError(f"{where} names user {user_name!r}, which {merged.describe()} does not define")
    return Selection(
        context=name,
        cluster=parse_cluster(merged.clusters[cluster_name]),
        user=parse_user(merged.users[user_name]) if user_name else User(),
        namespace=_text(chosen.value.get("namespace"), f"{where}: namespace"),
        files=merged.files,
    )


def parse_cluster(entry: Named) -> Cluster:
    """A cluster entry: server (required), CA, insecure-skip-tls-verify, tls-server-name, proxy-url."""
    where = entry.where("cluster")
    value = entry.value
    server = _text(value.get("server"), f"{where}: server")
    if not server:
        raise KubeconfigError(f"{where} has no server")
    insecure = value.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise KubeconfigError(f"{where}: insecure-skip-tls-verify must be true or false")
    return Cluster(
        name=entry.name,
        server=server.rstrip("/"),
        certificate_authority=_material(entry, where, "certificate-authority"),
        insecure_skip_tls_verify=insecure,
        tls_server_name=_text(value.get("tls-server-name"), f"{where}: tls-server-name"),
        proxy_url=_text(value.get("proxy-url"), f"{where}: proxy-url"),
    )


def parse_user(entry: Named) -> User:
    """A user entry: client certificate and key, token or tokenFile, username/password, exec, auth-provider."""
    where = entry.where("user")
    value = entry.value
    token_file = _text(value.get("tokenFile"), f"{where}: tokenFile")
    provider = value.get("auth-provider")
    if provider is not None and not isinstance(provider, Mapping):
        raise KubeconfigError(f"{where}: auth-provider must be a mapping")
    exec_value = value.get("exec")
    if exec_value is not None and not isinstance(exec_value, Mapping):
        raise KubeconfigError(f"{where}: exec must be a mapping")
    return User(
        name=entry.name,
        client_certificate=_material(entry, where, "client-certificate"),
        client_key=_material(entry, where, "client-key"),
        token=_text(value.get("token"), f"{where}: token"),
        token_file=_resolve(entry.origin, token_file) if token_file else None,
        username=_text(value.get("username"), f"{where}: username"),
        password=_text(value.get("password"), f"{where}: password"),
        exec=parse_exec(exec_value, where, os.path.dirname(os.path.abspath(entry.origin))) if exec_value else None,
        auth_provider=(str(provider.get("name") or "unnamed") if provider is not None else None),
    )


def parse_exec(value: Mapping[str, Any], where: str, base_dir: str | None) -> ExecConfig:
    """A user's `exec` section: command and apiVersion required, args a list, env a list of name/value.

    A command containing a path separator is resolved against `base_dir` (the kubeconfig's
    directory) when relative; a bare name is looked up on PATH when run.
    """
    where = f"{where}: exec"
    command = _text(value.get("command"), f"{where}: command")
    api_version = _text(value.get("apiVersion"), f"{where}: apiVersion")
    if not command or not api_version:
        raise KubeconfigError(f"{where}: command and apiVersion are required")
    if base_dir is not None and os.sep in command and not os.path.isabs(command):
        command = os.path.normpath(os.path.join(base_dir, command))
    args = value.get("args") or []
    if not isinstance(args, list):
        raise KubeconfigError(f"{where}: args must be a list")
    env = value.get("env") or []
    if not isinstance(env, list) or not all(isinstance(e, Mapping) and isinstance(e.get("name"), str) for e in env):
        raise KubeconfigError(f"{where}: env must be a list of name/value pairs")
    return ExecConfig(
        command=command,
        args=tuple(_text(a, f"{where}: args") or "" for a in args),
        env=tuple((e["name"], _text(e.get("value"), f"{where}: env {e['name']}") or "") for e in env),
        api_version=api_version,
    )


def in_cluster_host(environ: Mapping[str, str]) -> str:
    """https://host:port of the API server from the service environment (an IPv6 host in brackets)."""
    host, port = environ.get(SERVICE_HOST_ENV, ""), environ.get(SERVICE_PORT_ENV, "")
    if not host or not port:
        raise KubeconfigError(f"in-cluster configuration: {SERVICE_HOST_ENV} and {SERVICE_PORT_ENV} must be set")
    if (":" in host or "%" in host) and not host.startswith("["):
        host = f"[{host}]"
    return f"https://{host}:{port}"


def parse_expiry(value: str) -> datetime:
    """An RFC 3339 timestamp (an ExecCredential's expirationTimestamp) as an aware datetime (naive: UTC)."""
    text = value.strip()
    if text[-1:] in ("z", "Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _text(value: Any, where: str) -> str | None:
    """A string field (numbers are taken as their text, as YAML may type them); None when empty."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise KubeconfigError(f"{where} must be a string")
    return str(value)


def _material(entry: Named, where: str, name: str) -> Material | None:
    data_field = f"{name}-data"
    data = _text(entry.value.get(data_field), f"{where}: {data_field}")
    if data:
        try:
            decoded = base64.b64decode("".join(data.split()), validate=True)
        except (binascii.Error, ValueError):
            raise KubeconfigError(f"{where}: {data_field} is not valid base64") from None
        return Material(f"{where}: {data_field}", data=decoded)
    path = _text(entry.value.get(name), f"{where}: {name}")
    return Material(f"{where}: {name} {_resolve(entry.origin, path)}", path=_resolve(entry.origin, path)) \
        if path else None


def _resolve(origin: str, path: str) -> str:
    if os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(origin)), path))


# --- I/O: files -----------------------------------------------------------------------------------------

def read_kubeconfigs(paths: Sequence[str]) -> list[tuple[str, Any]]:
    """(path, parsed YAML) of each listed file that exists (~ expanded); KubeconfigError if none does."""
    import yaml  # here, not at import: only connecting reads a kubeconfig

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    documents: list[tuple[str, Any]] = []
    for listed in paths:
        path = os.path.expanduser(listed)
        if not os.path.exists(path):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                documents.append((path, yaml.load(handle, Loader=loader)))  # a safe loader (C if built)
        except OSError as exc:
            raise KubeconfigError(f"kubeconfig {path}: cannot read: {exc}") from exc
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise KubeconfigError(f"kubeconfig {path}: not valid YAML: {exc}") from exc
    if not documents:
        raise KubeconfigError(f"no kubeconfig: none of {os.pathsep.join(paths) or '(no path)'} exists")
    return documents


def default_paths(kubeconfig: str | None, environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The files kubectl would read: `kubeconfig`, else $KUBECONFIG, else ~/.kube/config."""
    return kubeconfig_paths(kubeconfig, environ.get("KUBECONFIG"), os.path.join("~", ".kube", "config"))


def load(kubeconfig: str | None, context: str | None, environ: Mapping[str, str] = os.environ) -> Selection:
    """Read, merge and select: the context `context` (else the current one) of the kubeconfig files."""
    return select(merge(read_kubeconfigs(default_paths(kubeconfig, environ))), context)

