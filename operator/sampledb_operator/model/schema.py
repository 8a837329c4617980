"""Building blocks of the CRD models: base classes, schema markers and shared field types.

Invariants: everything a CRD schema needs beyond plain Python types is declared here as annotation
metadata (`Rule`, `IntOrString`, `OneOf`) or as pydantic constraints, so that model/crd.py reads a
single source. Times are timezone-aware UTC with whole seconds (metav1.Time precision), so a value
survives model -> API server -> model unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from sampledb_operator.model.quantity import BOUNDED_QUANTITY_RE, QUANTITY_RE

GROUP = "sampledb.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# Limits that keep CEL cost estimates small (the API server rejects a CRD whose rules may cost too much).
NAME_MAX = 253  # DNS-1123 subdomain
LABEL_MAX = 63  # DNS-1123 / DNS-1035 label
SHORT_TEXT_MAX = 1024
MESSAGE_MAX = 32768
QUANTITY_MAX = 64

DNS1123_SUBDOMAIN_RE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1035_LABEL_RE = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
CONFIG_KEY_RE = r"^[-._a-zA-Z0-9]+$"
SHA256_RE = r"^[0-9a-f]{64}$"


@dataclass(frozen=True, slots=True)
class Rule:
    """One CEL rule of `x-kubernetes-validations` (a transition rule when it mentions oldSelf)."""

    rule: str
    message: str
    message_expression: str | None = None
    reason: str | None = None  # FieldValueInvalid (default), FieldValueForbidden, FieldValueRequired, ...
    field_path: str | None = None

    def as_schema(self) -> dict[str, str]:
        out = {"rule": self.rule, "message": self.message}
        if self.message_expression is not None:
            out["messageExpression"] = self.message_expression
        if self.reason is not None:
            out["reason"] = self.reason
        if self.field_path is not None:
            out["fieldPath"] = self.field_path
        return out


def cel_string(text: str) -> str:
    """`text` as a CEL string literal (for a regex with backslashes: CEL unescapes them once)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True, slots=True)
class IntOrString:
    """Marker: the field is `x-kubernetes-int-or-string`; strings at most max_length long."""

    max_length: int


@dataclass(frozen=True, slots=True)
class OneOf:
    """Marker: the schema lists these enum values, while Python reads any string (forward compatible)."""

    values: tuple[str, ...]

    @classmethod
    def of(cls, enum: type[Enum]) -> OneOf:
        return cls(tuple(str(m.value) for m in enum))


class SpecModel(BaseModel):
    """Base of every spec-side model (what users write).

    extra="ignore", not "forbid": the API server is the validator for user input and prunes fields
    its schema does not know, so a field unknown to this code can only come from a newer CRD than
    this operator. Ignoring it lets an older operator keep reconciling instead of failing every
    parse. Frozen: a spec is read, never modified by the operator.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)
    cel_rules: ClassVar[tuple[Rule, ...]] = ()


class StatusModel(BaseModel):
    """Base of every status-side model (what the operator writes).

    extra="allow": fields written by a newer operator version are kept on read and written back
    unchanged by a read-modify-write, instead of being silently dropped.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")
    cel_rules: ClassVar[tuple[Rule, ...]] = ()


def to_time(value: datetime) -> datetime:
    """A timezone-aware datetime as metav1.Time holds it: UTC, whole seconds."""
    if value.tzinfo is None:
        raise ValueError("a naive datetime has no defined instant; use an aware one")
    return value.astimezone(UTC).replace(microsecond=0)


Time = Annotated[AwareDatetime, AfterValidator(to_time)]
"""metav1.Time: RFC 3339, UTC, whole seconds."""


def _check_quantity(value: int | str) -> int | str:
    if isinstance(value, str) and (len(value) > QUANTITY_MAX or not re.fullmatch(QUANTITY_RE, value)):
        raise ValueError(f"{value!r} is not a Kubernetes quantity such as 10Gi or 500m")
    if isinstance(value, int) and value < 0:
        raise ValueError("a quantity must not be negative")
    return value


def cel_quantity(expr: str) -> str:
    """CEL that is true when `expr` (a quantity field) is a quantity the CRD admits.

    The bounded-format match comes first and CEL's `&&` stops at it: isQuantity() and quantity()
    take time in proportion to the exponent ("1e-2147483648" keeps the API server busy for minutes).
    Every rule that calls quantity() is guarded by this.
    """
    return f"string({expr}).matches('{BOUNDED_QUANTITY_RE}') && isQuantity(string({expr}))"


QUANTITY_RULE = Rule(
    cel_quantity("self"),
    "must be a Kubernetes quantity such as 10Gi, 512Mi or 500m (a decimal exponent, as in 5e3, has at"
    " most two digits)",
)


Quantity = Annotated[
    int | str, IntOrString(max_length=QUANTITY_MAX), QUANTITY_RULE, AfterValidator(_check_quantity)
]
"""A Kubernetes resource.Quantity: an integer or a string such as "10Gi"."""


SUBDOMAIN_RULE = Rule(
    f"self.matches('{DNS1123_SUBDOMAIN_RE}')",
    "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending alphanumeric",
)
LABEL_RULE = Rule(
    f"self.matches('{DNS1035_LABEL_RE}')",
    "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter",
)

SubdomainName = Annotated[str, Field(min_length=1, max_length=NAME_MAX), SUBDOMAIN_RULE]
"""The name of a Kubernetes object (DNS-1123 subdomain)."""

LabelName = Annotated[str, Field(min_length=1, max_length=LABEL_MAX), LABEL_RULE]
"""A name that must also be a DNS-1035 label (Services, and the SampleDB itself)."""


class KeyRef(SpecModel):
    """A key of a ConfigMap or Secret in the SampleDB's namespace."""

    name: SubdomainName = Field(
        description="Name of the ConfigMap or Secret, in the same namespace as the SampleDB."
    )
    key: str = Field(
        min_length=1, max_length=NAME_MAX, pattern=CONFIG_KEY_RE, description="Key whose value is used."
    )


class ObjectMeta(BaseModel):
    """The parts of metav1.ObjectMeta the operator reads; everything else is kept as-is."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    name: str
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)


def dump(model: BaseModel) -> dict[str, Any]:
    """The JSON form the API server stores: camelCase keys, enums as strings, no null fields."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
