"""The constraints of the SampleDB spec: constants, CEL rules and the constrained field types.

Invariants: every CEL rule guards its own preconditions (a malformed value fails one clear rule,
never a runtime evaluation error in another), and everything a rule reads is length-bounded so
the API server's cost estimate stays within its limits. A rule that validate_spec must also apply
(to objects stored before the rule existed) has a Python twin here, `*_error`, built on the same
constants and returning that rule's message (for a forbidden parameter, why it is forbidden): the
two cannot drift apart in what they refuse or in what they say.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

from sampledb_operator.model.quantity import is_bounded_quantity, parse_quantity
from sampledb_operator.model.schema import (
    QUANTITY_RULE,
    SHORT_TEXT_MAX,
    Quantity,
    Rule,
    SpecModel,
    cel_quantity,
    cel_string,
)

SUPPORTED_MAJORS: tuple[int, ...] = (13, 14, 15, 16, 17, 18)
VERSION_RE = r"^[1-9][0-9]?[.](0|[1-9][0-9]?)$"
CRON_FIELD = r"[-0-9A-Za-z*?/,#]+"
CRON_RE = rf"^(@(yearly|annually|monthly|weekly|daily|hourly)|{CRON_FIELD}( +{CRON_FIELD}){{4}})$"
PARAMETER_NAME_RE = r"^[a-z][a-z0-9_]*([.][a-z][a-z0-9_]*)?$"
CONTROL_CHAR_RE = r"[\x00-\x1f\x7f-\x9f]"  # Unicode category Cc: C0 controls, DEL, C1 controls

# postgresql.conf settings spec.parameters cannot set (as CloudNativePG's fixed and blocked ones),
# grouped by why. The database runs as the superuser's server: a value here would run a command,
# load code or touch files on its volumes, or break the pod, its probes or the operator's Jobs.
_FORBIDDEN_GROUPS: dict[str, tuple[str, ...]] = {
    "the operator sets it (the pod, its probes and the Jobs depend on it)": (
        "config_file", "data_directory", "external_pid_file", "hba_file", "ident_file", "listen_addresses",
        "port", "unix_socket_directories", "unix_socket_group", "unix_socket_permissions",
    ),
    "it runs a shell command": (
        "archive_cleanup_command", "archive_command", "recovery_end_command", "restore_command",
        "ssl_passphrase_command",
    ),
    "it loads code into the server": (
        "archive_library", "dynamic_library_path", "jit_provider", "local_preload_libraries",
        "session_preload_libraries", "shared_preload_libraries",
    ),
    "it reads or writes files on the server's volumes": (
        "include", "include_dir", "include_if_exists", "krb_server_keyfile", "log_directory", "log_filename",
        "promote_trigger_file", "ssl_ca_file", "ssl_cert_file", "ssl_crl_dir", "ssl_crl_file",
        "ssl_dh_params_file", "ssl_key_file", "stats_temp_directory",
    ),
    "the operator manages TLS (spec.tls)": ("ssl",),
    "the operator manages replication (spec.replicas, spec.replication)": (
        "cluster_name", "primary_conninfo", "primary_slot_name", "synchronous_standby_names", "wal_log_hints",
    ),
}
FORBIDDEN_PARAMETERS: dict[str, str] = dict(
    sorted((name, why) for why, names in _FORBIDDEN_GROUPS.items() for name in names)
)
"""Parameter name -> why spec.parameters cannot set it."""

MIN_STORAGE = "64Mi"
MAX_STORAGE = "64Ti"
STANDARD_RESOURCES: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX = "hugepages-"
HUGEPAGES_SIZE_RE = r"^[1-9][0-9]*([KMGTPE]i|[kMGTPE])?$"

# Image references, after github.com/distribution/reference: [host[:port]/]path[:tag][@digest],
# path components lowercase. Only sha256, sha384 and sha512 digests (what container runtimes verify).
_ALNUM = "[a-z0-9]+"
_PATH_COMPONENT = f"{_ALNUM}(([_.]|__|[-]+){_ALNUM})*"
_HOST_LABEL = "([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = f"({_HOST_LABEL}([.]{_HOST_LABEL})*|\\[[0-9a-fA-F:]+\\])"
_REPOSITORY = f"({_HOST}(:[0-9]+)?/)?{_PATH_COMPONENT}(/{_PATH_COMPONENT})*"
_TAG = "[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}"
_DIGEST = "(sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})"
IMAGE_RE = f"^{_REPOSITORY}(:{_TAG})?(@{_DIGEST})?$"
PINNED_IMAGE_RE = f"^{_REPOSITORY}(:{_TAG}|(:{_TAG})?@{_DIGEST})$"

MAJORS_TEXT = ", ".join(str(m) for m in SUPPORTED_MAJORS)
_Q = "quantity(string(self))"
_SELF_OK = cel_quantity("self")


def grow_only(what: str) -> Rule:
    old = "quantity(string(oldSelf))"
    return Rule(
        f"!({_SELF_OK}) || !({cel_quantity('oldSelf')}) || {_Q}.compareTo({old}) >= 0",
        f"{what} can only grow: a volume cannot be shrunk",
        message_expression=(
            f"'{what} can only grow: cannot shrink from ' + string(oldSelf) + ' to ' + string(self)"
        ),
    )


MIN_SIZE_RULE = Rule(
    f"!({_SELF_OK}) || {_Q}.compareTo(quantity('{MIN_STORAGE}')) >= 0",
    f"must be at least {MIN_STORAGE}",
)
MAX_SIZE_RULE = Rule(
    f"!({_SELF_OK}) || {_Q}.compareTo(quantity('{MAX_STORAGE}')) <= 0",
    f"must be at most {MAX_STORAGE}",
)


def storage_size_error(size: int | str) -> str | None:
    """Why the CRD refuses this volume size (its rule's message), or None."""
    if not is_bounded_quantity(size):
        return QUANTITY_RULE.message
    value = parse_quantity(size)
    if value < parse_quantity(MIN_STORAGE):
        return MIN_SIZE_RULE.message
    if value > parse_quantity(MAX_STORAGE):
        return MAX_SIZE_RULE.message
    return None


AUTO_GROW_MAXIMUM_RULE = Rule(
    "!has(self.autoGrow) || !(" + cel_quantity("self.size") + ") || !(" + cel_quantity("self.autoGrow.maximum")
    + ") || quantity(string(self.autoGrow.maximum)).compareTo(quantity(string(self.size))) >= 0",
    "autoGrow.maximum must be at least size",
    field_path=".autoGrow.maximum",
)
CLASS_IMMUTABLE_RULE = Rule(
    "has(self.storageClassName) == has(oldSelf.storageClassName)"
    " && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
    "storageClassName is immutable: it cannot be set, changed or removed after creation",
    reason="FieldValueForbidden",
    field_path=".storageClassName",
)

Version = Annotated[
    str,
    Field(min_length=1, max_length=16),
    Rule(f"self.matches('{VERSION_RE}')", 'must be MAJOR.MINOR without leading zeros, e.g. "16.4"'),
    Rule(
        f"!self.matches('{VERSION_RE}') || int(self.split('.')[0]) in [{MAJORS_TEXT}]",
        f"the major version must be one of {MAJORS_TEXT}",
        message_expression=(
            f"'PostgreSQL ' + self.split('.')[0] + ' is not supported: the major version must be one of {MAJORS_TEXT}'"
        ),
    ),
    Rule(
        f"!self.matches('{VERSION_RE}') || !oldSelf.matches('{VERSION_RE}')"
        " || int(self.split('.')[0]) >= int(oldSelf.split('.')[0])",
        "a major-version downgrade is not allowed; restore a backup into a new SampleDB instead",
        message_expression=(
            "'major-version downgrade from ' + oldSelf + ' to ' + self + ' is not allowed;"
            " restore a backup into a new SampleDB instead'"
        ),
    ),
]

CronSchedule = Annotated[
    str,
    Field(min_length=1, max_length=128),
    Rule(
        f"self.matches('{CRON_RE}')",
        "must be a cron schedule of 5 fields (minute hour day-of-month month day-of-week), e.g."
        ' "0 3 * * *", or one of @hourly, @daily, @weekly, @monthly, @yearly',
    ),
]

# ---------------------------------------------------------------- image

IMAGE_REFERENCE_RULE = Rule(
    f"self.matches({cel_string(IMAGE_RE)})",
    "must be an image reference: [registry[:port]/]repository[:tag][@digest], the repository in"
    " lowercase, the tag of letters, digits, '_', '.' and '-', e.g. docker.io/library/postgres:16.4",
)
IMAGE_PINNED_RULE = Rule(
    f"!self.matches({cel_string(IMAGE_RE)}) || self.matches({cel_string(PINNED_IMAGE_RE)})",
    "must name a tag or a digest, e.g. postgres:16.4 or postgres@sha256:<64 hex digits>: without one,"
    " each node runs whatever postgres:latest was when it pulled the image",
)

Image = Annotated[str, Field(min_length=1, max_length=512, pattern=r"^\S+$"), IMAGE_REFERENCE_RULE, IMAGE_PINNED_RULE]


def image_error(image: str) -> str | None:
    """Why the CRD refuses this image reference (its rule's message), or None."""
    if not re.fullmatch(IMAGE_RE, image):
        return IMAGE_REFERENCE_RULE.message
    if not re.fullmatch(PINNED_IMAGE_RE, image):
        return IMAGE_PINNED_RULE.message
    return None


# ---------------------------------------------------------------- resources

RESOURCE_NAME_RULE = Rule(
    f"self.all(k, k in [{', '.join(repr(r) for r in STANDARD_RESOURCES)}]"
    f" || (k.startsWith('{HUGEPAGES_PREFIX}') && k.substring({len(HUGEPAGES_PREFIX)}).matches('{HUGEPAGES_SIZE_RE}')))",
    "resource names must be cpu, memory, ephemeral-storage or hugepages-<page size>, e.g. hugepages-2Mi",
)
NON_NEGATIVE_RULE = Rule(f"!({_SELF_OK}) || {_Q}.compareTo(quantity('0')) >= 0", "must not be negative")


def resource_name_error(name: str) -> str | None:
    if name in STANDARD_RESOURCES:
        return None
    size = name.removeprefix(HUGEPAGES_PREFIX)
    if size != name and re.fullmatch(HUGEPAGES_SIZE_RE, size):
        return None
    return RESOURCE_NAME_RULE.message


def resource_quantity_error(value: int | str) -> str | None:
    """Why the CRD refuses this request or limit (its rule's message), or None."""
    if not is_bounded_quantity(value):
        return QUANTITY_RULE.message
    if parse_quantity(value) < 0:
        return NON_NEGATIVE_RULE.message
    return None


def _request_within_limit(k: str) -> str:
    request, limit = f"self.requests[{k}]", f"self.limits[{k}]"
    return (
        f"!({k} in self.requests) || !({cel_quantity(request)}) || !({cel_quantity(limit)})"
        f" || quantity(string({request})).compareTo(quantity(string({limit}))) <= 0"
    )


REQUEST_WITHIN_LIMIT_RULE = Rule(
    f"!has(self.requests) || !has(self.limits) || self.limits.all(k, {_request_within_limit('k')})",
    "each request must be at most the limit of the same resource",
)

ResourceList = Annotated[
    dict[str, Annotated[Quantity, NON_NEGATIVE_RULE]], Field(max_length=8), RESOURCE_NAME_RULE,
]

# ---------------------------------------------------------------- parameters

_FORBIDDEN_LIST = f"[{', '.join(repr(p) for p in FORBIDDEN_PARAMETERS)}]"
PARAMETER_NAME_RULE = Rule(
    f"self.all(k, k.matches('{PARAMETER_NAME_RE}'))",
    "parameter names must be lowercase postgresql.conf settings, e.g. shared_buffers or"
    " pg_stat_statements.max",
)
FORBIDDEN_PARAMETER_RULE = Rule(
    f"self.all(k, !(k in {_FORBIDDEN_LIST}))",
    "these parameters cannot be set (the operator sets them, or they run commands, load code, touch"
    " files or replicate from another server): " + ", ".join(FORBIDDEN_PARAMETERS),
)  # no messageExpression naming the culprits: map keys have no length bound, so its cost estimate fails
PARAMETER_VALUE_RULE = Rule(
    f"!self.matches({cel_string(CONTROL_CHAR_RE)})",
    "parameter values must be a single line without control characters (newline, carriage return,"
    " tab, NUL, ...)",
)


def parameter_error(name: str, value: str) -> str | None:
    """Why the CRD refuses this postgresql.conf setting (its rule's message), or None."""
    if not re.fullmatch(PARAMETER_NAME_RE, name):
        return PARAMETER_NAME_RULE.message
    if name in FORBIDDEN_PARAMETERS:
        return f"cannot be set: {FORBIDDEN_PARAMETERS[name]}"
    if re.search(CONTROL_CHAR_RE, value):
        return PARAMETER_VALUE_RULE.message
    return None


ParameterValue = Annotated[str, Field(max_length=SHORT_TEXT_MAX), PARAMETER_VALUE_RULE]

Parameters = Annotated[
    dict[str, ParameterValue], Field(max_length=64), PARAMETER_NAME_RULE, FORBIDDEN_PARAMETER_RULE,
]
"""postgresql.conf settings: bounded, well-named, single-line, none of the forbidden ones."""


class ResourceRequirements(SpecModel):
    """Compute resources of a container (the database's, or the pooler's)."""

    cel_rules = (REQUEST_WITHIN_LIMIT_RULE,)

    requests: ResourceList | None = Field(
        default=None, description="Minimum resources, e.g. {cpu: 250m, memory: 512Mi}."
    )
    limits: ResourceList | None = Field(
        default=None, description="Maximum resources; each must be at least the matching request."
    )
