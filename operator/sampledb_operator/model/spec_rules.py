"""The constraints of the SampleDB spec: constants, CEL rules and the constrained field types.

Invariants: every CEL rule guards its own preconditions (a malformed value fails one clear rule,
never a runtime evaluation error in another), and everything a rule reads is length-bounded so
the API server's cost estimate stays within its limits.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from sampledb_operator.model.schema import SHORT_TEXT_MAX, Quantity, Rule

SUPPORTED_MAJORS: tuple[int, ...] = (13, 14, 15, 16, 17, 18)
VERSION_RE = r"^[1-9][0-9]?[.](0|[1-9][0-9]?)$"
CRON_FIELD = r"[-0-9A-Za-z*?/,#]+"
CRON_RE = rf"^(@(yearly|annually|monthly|weekly|daily|hourly)|{CRON_FIELD}( +{CRON_FIELD}){{4}})$"
PARAMETER_NAME_RE = r"^[a-z][a-z0-9_]*([.][a-z][a-z0-9_]*)?$"
# postgresql.conf settings the operator sets itself; a user value would break the pod or its probes.
MANAGED_PARAMETERS: tuple[str, ...] = (
    "config_file", "data_directory", "external_pid_file", "hba_file", "ident_file",
    "listen_addresses", "port", "unix_socket_directories",
)
MIN_STORAGE = "64Mi"

MAJORS_TEXT = ", ".join(str(m) for m in SUPPORTED_MAJORS)
_Q = "quantity(string(self))"


def grow_only(what: str) -> Rule:
    old = "quantity(string(oldSelf))"
    return Rule(
        f"!isQuantity(string(self)) || !isQuantity(string(oldSelf)) || {_Q}.compareTo({old}) >= 0",
        f"{what} can only grow: a volume cannot be shrunk",
        message_expression=(
            f"'{what} can only grow: cannot shrink from ' + string(oldSelf) + ' to ' + string(self)"
        ),
    )


MIN_SIZE_RULE = Rule(
    f"!isQuantity(string(self)) || {_Q}.compareTo(quantity('{MIN_STORAGE}')) >= 0",
    f"must be at least {MIN_STORAGE}",
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

ParameterValue = Annotated[
    str,
    Field(max_length=SHORT_TEXT_MAX),
    Rule("!self.contains('\\n') && !self.contains('\\r')", "parameter values must be a single line"),
]

ResourceList = Annotated[
    dict[str, Quantity],
    Field(max_length=8),
    Rule(
        "self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-'))",
        "resource names must be cpu, memory, ephemeral-storage or hugepages-<size>",
    ),
]


Parameters = Annotated[
    dict[str, ParameterValue],
    Field(max_length=64),
    Rule(
        f"self.all(k, k.matches('{PARAMETER_NAME_RE}'))",
        "parameter names must be lowercase postgresql.conf settings, e.g. shared_buffers or"
        " pg_stat_statements.max",
    ),
    Rule(
        f"self.all(k, !(k in [{', '.join(repr(p) for p in MANAGED_PARAMETERS)}]))",
        "these parameters are managed by the operator and cannot be set: "
        + ", ".join(MANAGED_PARAMETERS),
    ),
]
"""postgresql.conf settings: bounded, well-named, single-line, none the operator manages."""
