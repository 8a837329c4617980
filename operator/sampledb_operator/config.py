"""Operator settings: one pydantic model, filled from flags, then SAMPLEDB_* variables, then defaults.

Invariants: every setting has exactly one flag (`--lease-duration`) and one environment variable
(`SAMPLEDB_LEASE_DURATION`), both derived from the field name; a flag wins over the environment,
the environment over the default. An invalid value raises `ConfigError` with a one-line message
naming the flag and the variable and what is accepted. This module does no I/O beyond reading the
hostname and `sys.stderr.isatty()`.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ENV_PREFIX = "SAMPLEDB_"
DEFAULT_LEASE_NAMESPACE = "sampledb-system"

LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["json", "console", "auto"]

_BIND_RE = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]*):(?P<port>[0-9]{1,5})$")


class ConfigError(ValueError):
    """An invalid setting; the message is one line, meant for the operator's user."""


def default_lease_namespace(environ: Mapping[str, str] | None = None) -> str:
    """$POD_NAMESPACE (set through the downward API) or "sampledb-system"."""
    env = os.environ if environ is None else environ
    return env.get("POD_NAMESPACE") or DEFAULT_LEASE_NAMESPACE


def default_identity() -> str:
    """A leader-election identity unique per process: hostname (the pod name) + "_" + short uuid."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def parse_bind(text: str) -> tuple[str | None, int]:
    """Split "host:port" into (host, port); an empty host (":8080") means every interface (None).

    IPv6 hosts are written in brackets ("[::1]:8080") and returned without them.
    """
    match = _BIND_RE.match(text)
    if match is None:
        raise ValueError(f"not host:port: {text!r}")
    port = int(match["port"])
    if port > 65535:
        raise ValueError(f"port out of range: {port}")
    host = match["host"].strip("[]")
    return (host or None), port


class Settings(BaseModel):
    """Everything the operator process is configured with."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool | None = None
    namespaces: list[str] = Field(default_factory=list)
    workers: int = Field(default=16, ge=1, le=64)  # measured: docs/benchmarks.md, "Scale"
    metrics_bind: str = ":8080"
    health_bind: str = ":8081"
    log_level: LogLevel = "info"
    log_format: LogFormat = "auto"
    leader_elect: bool = True
    lease_name: str = Field(default="sampledb-operator", min_length=1)
    lease_namespace: str = Field(default_factory=default_lease_namespace, min_length=1)
    identity: str = Field(default_factory=default_identity, min_length=1)
    shutdown_timeout: float = Field(default=30.0, gt=0)
    resync_period: float = Field(default=36000.0, ge=0)
    lease_duration: float = Field(default=15.0, ge=1)
    renew_deadline: float = Field(default=10.0, ge=1)
    retry_period: float = Field(default=2.0, ge=1)
    shards: int = Field(default=1, ge=1, le=128)
    shard_caches: bool = True
    field_manager: str = Field(default="sampledb-operator", min_length=1)
    recheck_period: float = Field(default=60.0, ge=1)
    exec_plugin_timeout: float = Field(default=30.0, gt=0)
    streaming_lists: bool = True
    api_connections: int = Field(default=32, ge=1, le=1024)  # = kube.client.DEFAULT_CONNECTIONS (not imported: aiohttp)
    chaos_annotation: bool = False  # off: the sampledb.io/chaos annotation injects nothing (reconcilers/chaos.py)
    test_hooks: bool = False  # off: testing.sampledb.io/ annotations are not copied onto Job pods (decide/jobs.py)
    operator_rollouts: int = Field(default=1, ge=0, le=10000)  # runtime/rollout_slots.py
    node_silent_seconds: float = Field(default=20.0, ge=0)  # decide/replicas/node_silence.py; 0: off

    @field_validator("metrics_bind", "health_bind")
    @classmethod
    def _check_bind(cls, value: str) -> str:
        parse_bind(value)
        return value

    @field_validator("namespaces")
    @classmethod
    def _check_namespaces(cls, value: list[str]) -> list[str]:
        names = [n.strip() for n in value if n.strip()]
        for name in names:
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 63:
                raise ValueError(f"not a namespace name: {name!r}")
        return sorted(set(names))

    @model_validator(mode="after")
    def _check_lease_timings(self) -> Settings:
        if not self.lease_duration > self.renew_deadline > self.retry_period * 1.2:
            raise ValueError(
                "must satisfy lease_duration > renew_deadline > 1.2 * retry_period, got "
                f"{self.lease_duration:g} > {self.renew_deadline:g} > 1.2 * {self.retry_period:g}"
            )
        return self

    @property
    def metrics_address(self) -> tuple[str | None, int]:
        """(host, port) of the metrics endpoint; host None means every interface."""
        return parse_bind(self.metrics_bind)

    @property
    def health_address(self) -> tuple[str | None, int]:
        """(host, port) of the health endpoints; host None means every interface."""
        return parse_bind(self.health_bind)

    @property
    def watch_namespaces(self) -> list[str | None]:
        """The namespaces to watch; [None] means all namespaces."""
        return list(self.namespaces) or [None]

    def effective_log_format(self, stream: TextIO | None = None) -> Literal["json", "console"]:
        """"auto" resolves to console when the stream (stderr) is a terminal, else json."""
        if self.log_format == "json":
            return "json"
        if self.log_format == "console":
            return "console"
        out = sys.stderr if stream is None else stream
        return "console" if out.isatty() else "json"


@dataclass(frozen=True)
class Option:
    """How one setting appears on the command line and in the environment."""

    name: str            # field name
    help: str
    accepts: str         # what a valid value looks like, for error messages
    kind: Literal["str", "int", "float", "bool", "list"] = "str"
    default_text: str | None = None   # shown in --help when the default is computed

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


_SECONDS = "a number of seconds >= 1"
OPTIONS: tuple[Option, ...] = (
    Option("kubeconfig", "path of a kubeconfig file (else $KUBECONFIG or ~/.kube/config)", "a file path"),
    Option("context", "kubeconfig context to use (else the current context)", "a context name"),
    Option("in_cluster", "use the pod's service account; unset: in-cluster when "
           "KUBERNETES_SERVICE_HOST is set and no kubeconfig is given", "true or false", "bool",
           default_text="auto"),
    Option("namespaces", "comma-separated namespaces to watch; empty: all namespaces",
           "comma-separated namespace names", "list", default_text="all namespaces"),
    Option("workers", "concurrent reconciles per controller", "an integer from 1 to 64", "int"),
    Option("metrics_bind", "address of the Prometheus /metrics endpoint",
           "host:port, e.g. :8080 or 127.0.0.1:8080"),
    Option("health_bind", "address of /healthz and /readyz (may equal --metrics-bind)",
           "host:port, e.g. :8081 or 127.0.0.1:8081"),
    Option("log_level", "minimum level of log records: debug, info, warning or error",
           "one of debug, info, warning, error"),
    Option("log_format", "log output: json, console, or auto (console on a terminal, else json)",
           "one of json, console, auto"),
    Option("leader_elect", "run only while holding the leader Lease", "true or false", "bool"),
    Option("lease_name", "name of the leader-election Lease", "a non-empty name"),
    Option("lease_namespace", "namespace of the leader-election Lease", "a non-empty namespace name",
           default_text="$POD_NAMESPACE or sampledb-system"),
    Option("identity", "this process's leader-election identity", "a non-empty string",
           default_text="<hostname>_<random>"),
    Option("shutdown_timeout", "seconds to let in-flight reconciles finish on shutdown",
           "a number of seconds > 0", "float"),
    Option("resync_period", "seconds between replays of every cached object; 0 disables",
           "a number of seconds >= 0", "float"),
    Option("lease_duration", "seconds a standby waits before taking over an unrenewed Lease",
           _SECONDS + " (lease_duration > renew_deadline > 1.2 * retry_period)", "float"),
    Option("renew_deadline", "seconds the leader keeps retrying a renewal before giving up",
           _SECONDS + " (lease_duration > renew_deadline > 1.2 * retry_period)", "float"),
    Option("retry_period", "seconds between leader-election attempts",
           _SECONDS + " (lease_duration > renew_deadline > 1.2 * retry_period)", "float"),
    Option("shards", "number of shards of the SampleDBs; above 1 every replica reconciles a fair share of "
           "them, one Lease <lease-name>-shard-<i> per shard, and the leader election is not used",
           "an integer from 1 to 128", "int"),
    Option("shard_caches", "with --shards dividing 60 (1-6, 10, 12, 15, 20, 30 or 60), cache only the children "
           "of the shards held (watches on their bucket label); else every replica caches every child",
           "true or false", "bool"),
    Option("field_manager", "field manager name of server-side apply", "a non-empty name"),
    Option("recheck_period", "seconds between looks at references nothing watches (the migrations "
           "ConfigMap) while a database waits on them", _SECONDS, "float"),
    Option("exec_plugin_timeout", "seconds a kubeconfig's credential exec plugin may run; then the start, "
           "or the request that renews the token, fails", "a number of seconds > 0", "float"),
    Option("streaming_lists", "fill the caches with streaming lists (watches with sendInitialEvents, served "
           "from the API server's watch cache); a server that refuses them is listed page by page",
           "true or false", "bool"),
    Option("api_connections", "most connections to the API server that requests use at once (each watch has "
           "its own besides); each TLS connection holds a 256 KiB buffer", "an integer from 1 to 1024", "int"),
    Option("chaos_annotation", "inject the one-off fault a SampleDB's sampledb.io/chaos annotation asks for (needs the "
           "grants of manifests/components/chaos: pods/exec get and create, jobs delete); off: the annotation is "
           "removed with a Warning Event ChaosDisabled and nothing is injected", "true or false", "bool"),
    Option("operator_rollouts", "how many databases at once roll their pods for a pod template that the operator"
           " itself changed (a new version's, the spec unchanged), one instance at a time each; 0: only when asked (a"
           " spec change that restarts, or kubectl sampledb restart)", "an integer from 0 to 10000", "int"),
    Option("node_silent_seconds", "seconds without a renewal of a node's heartbeat Lease (kube-node-lease) after"
           " which the primaries on that node fail over, before the node controller marks it NotReady; 0: wait for"
           " the node controller", "a number of seconds >= 0", "float"),
    Option("test_hooks", "copy a SampleDB's testing.sampledb.io/ annotations onto the pods of its Jobs, for a "
           "simulated cluster's stages to select them (the test suite's kwok stages fail such Jobs on purpose); "
           "off: those annotations are ignored", "true or false", "bool"),
)
OPTIONS_BY_NAME = {o.name: o for o in OPTIONS}

_BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
               "off": False}


def default_text(option: Option) -> str:
    """The default of a setting as shown in --help."""
    if option.default_text is not None:
        return option.default_text
    default = Settings.model_fields[option.name].default
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def _from_text(option: Option, text: str) -> Any:
    """Convert an environment variable's text; numbers are left to pydantic."""
    if option.kind == "bool":
        word = text.strip().lower()
        if word not in _BOOL_WORDS:
            raise ValueError(text)
        return _BOOL_WORDS[word]
    if option.kind == "list":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def load_settings(
    flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Build Settings from parsed flags (None = not given), then `environ`, then defaults.

    `flags` maps field names to values already typed by argparse (lists for namespaces, bools for
    switches) or strings. Raises ConfigError naming the offending flag or variable.
    """
    given = dict(flags or {})
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in OPTIONS:
        flag_value = given.get(option.name)
        if flag_value is not None:
            if option.kind == "list" and isinstance(flag_value, str):
                flag_value = _from_text(option, flag_value)
            values[option.name], sources[option.name] = flag_value, option.flag
        elif env.get(option.env, "") != "" or (option.env in env and not _unset_when_empty(option)):
            text = env[option.env]
            try:
                values[option.name] = _from_text(option, text)
            except ValueError:
                raise ConfigError(_message(option, option.env, text)) from None
            sources[option.name] = option.env
    if "lease_namespace" not in values:
        values["lease_namespace"] = default_lease_namespace(env)
    try:
        return Settings(**values)
    except ValidationError as err:
        raise ConfigError(_explain(err, values, sources)) from None


def _unset_when_empty(option: Option) -> bool:
    """An empty variable counts as unset for settings that default to unset (or to a list)."""
    return option.kind == "list" or Settings.model_fields[option.name].default is None


def _message(option: Option, source: str, value: Any) -> str:
    other = option.env if source == option.flag else option.flag
    shown = ",".join(value) if isinstance(value, list) else value
    return f"invalid value {str(shown)!r} for {source} (also {other}): expected {option.accepts}"


def _explain(err: ValidationError, values: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    first = err.errors()[0]
    loc = first["loc"]
    name = str(loc[0]) if loc else ""
    if name in OPTIONS_BY_NAME:
        option = OPTIONS_BY_NAME[name]
        return _message(option, sources.get(name, option.flag), values.get(name, first.get("input")))
    # a cross-field rule (lease timings)
    names = ", ".join(f"{OPTIONS_BY_NAME[n].flag}/{OPTIONS_BY_NAME[n].env}"
                      for n in ("lease_duration", "renew_deadline", "retry_period"))
    reason = str(first["msg"]).removeprefix("Value error, ")
    return f"invalid leader-election timings ({names}): {reason}"
