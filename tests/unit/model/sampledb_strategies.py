"""Hypothesis strategies for SampleDB specs that the CRD schema (including its CEL rules) accepts."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from pydantic import BaseModel

from sampledb_operator.model.backup_spec import BackupSpec, BackupStorageSpec, RestoreSpec
from sampledb_operator.model.quantity import parse_quantity
from sampledb_operator.model.sampledb import (
    FORBIDDEN_PARAMETERS,
    PARAMETER_NAME_RE,
    SUPPORTED_MAJORS,
    DeletionPolicy,
    InitSpec,
    MigrationsSpec,
    ResourceRequirements,
    SampleDBSpec,
    StorageSpec,
    UpgradeSpec,
)
from sampledb_operator.model.schema import KeyRef


def _model(cls: type[BaseModel], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """cls built from exactly these fields (st.builds would also guess the alias-named parameters)."""
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


versions = st.builds(
    lambda major, minor: f"{major}.{minor}", st.sampled_from(SUPPORTED_MAJORS), st.integers(0, 40)
)

storage_sizes = st.one_of(
    st.builds(lambda n: f"{n}Gi", st.integers(1, 2000)),
    st.builds(lambda n: f"{n}Mi", st.integers(64, 100_000)),
    st.builds(lambda n: f"{n}G", st.integers(1, 500)),
    st.integers(64 * 2**20, 2**40),
)

subdomains = st.from_regex(r"[a-z][a-z0-9]{0,10}(-[a-z0-9]{1,8})?(\.[a-z][a-z0-9]{0,8})?", fullmatch=True)

cpu = st.one_of(st.builds(lambda n: f"{n}m", st.integers(1, 64_000)), st.integers(1, 64))
memory = st.one_of(
    st.builds(lambda n: f"{n}Mi", st.integers(1, 64_000)), st.builds(lambda n: f"{n}Gi", st.integers(1, 64))
)
resource_lists = st.fixed_dictionaries({}, optional={"cpu": cpu, "memory": memory})


def _within_limits(requests: dict[str, Any] | None, limits: dict[str, Any] | None) -> ResourceRequirements:
    """Requests and limits as the CRD accepts them: a request above its limit becomes the limit."""
    if requests and limits:
        requests = {k: limits[k] if k in limits and parse_quantity(v) > parse_quantity(limits[k]) else v
                    for k, v in requests.items()}
    return ResourceRequirements(requests=requests, limits=limits)


resource_requirements = st.builds(_within_limits, _maybe(resource_lists), _maybe(resource_lists))

parameter_names = st.from_regex(PARAMETER_NAME_RE, fullmatch=True).filter(
    lambda k: len(k) <= 40 and k not in FORBIDDEN_PARAMETERS
)
parameter_values = st.text(
    alphabet=st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="\n\r"), max_size=40
)

cron_fields = st.one_of(st.just("*"), st.integers(0, 23).map(str), st.integers(1, 30).map(lambda n: f"*/{n}"))
schedules = st.one_of(
    st.sampled_from(["@hourly", "@daily", "@weekly", "@monthly", "@yearly", "0 3 * * *", "*/15 * * * 1-5"]),
    st.lists(cron_fields, min_size=5, max_size=5).map(" ".join),
)

key_refs = _model(KeyRef, name=subdomains, key=st.from_regex(r"[-._a-zA-Z0-9]{1,20}", fullmatch=True))
inits = st.one_of(
    _model(InitSpec, config_map_key_ref=key_refs),
    _model(InitSpec, secret_key_ref=key_refs),
)


specs = _model(
    SampleDBSpec,
    version=versions,
    image=_maybe(st.builds(lambda v: f"registry.example.com/db/postgres:{v}", versions)),
    storage=_model(StorageSpec, size=storage_sizes, storage_class_name=_maybe(subdomains)),
    resources=_maybe(resource_requirements),
    parameters=_maybe(st.dictionaries(parameter_names, parameter_values, max_size=6)),
    init=_maybe(inits),
    backup=_model(
        BackupSpec,
        schedule=_maybe(schedules),
        retention=st.integers(1, 1000),
        storage=_model(
            BackupStorageSpec, size=_maybe(storage_sizes), storage_class_name=_maybe(subdomains)
        ),
    ),
    deletion_policy=st.sampled_from(DeletionPolicy),
    restore=_maybe(_model(RestoreSpec, backup_name=subdomains)),
    paused=st.booleans(),
    migrations=_maybe(_model(MigrationsSpec, config_map_name=subdomains)),
    upgrade=_model(UpgradeSpec, backup_before_minor=st.booleans()),
)
"""Valid SampleDB specs (creation-time valid: restore may be set)."""
