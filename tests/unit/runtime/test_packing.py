"""Packer: what a Store holds is the object, byte for byte as JSON, and far smaller than its JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sampledb_operator.runtime.packing import Packer

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@given(first=JSON, values=st.lists(JSON, max_size=5))
def test_every_value_unpacks_to_what_was_packed_whatever_came_first(first: Any, values: list[Any]) -> None:
    packer = Packer()
    packed = [packer.pack(v) for v in [first, *values]]
    assert [packer.unpack(p) for p in packed] == [first, *values]


def statefulset(i: int) -> dict[str, Any]:
    name = f"db-{i}"
    container = {"name": "postgres", "image": "sampledb/postgres:16", "ports": [{"containerPort": 5432}],
                 "env": [{"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"},
                         {"name": "POSTGRES_PASSWORD", "valueFrom": {"secretKeyRef": {"name": f"{name}-credentials",
                                                                                      "key": "password"}}}],
                 "readinessProbe": {"exec": {"command": ["pg_isready", "-U", "postgres"]}, "periodSeconds": 5},
                 "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "scale", "uid": f"0000-{i:08d}", "resourceVersion": str(1000 + i),
                         "labels": {"app.kubernetes.io/instance": name, "sampledb.io/database": name}},
            "spec": {"replicas": 1, "serviceName": name, "selector": {"matchLabels": {"sampledb.io/database": name}},
                     "template": {"metadata": {"labels": {"sampledb.io/database": name}},
                                  "spec": {"containers": [container]}}},
            "status": {"replicas": 1, "readyReplicas": 1}}


def test_objects_of_one_resource_pack_to_a_small_part_of_their_json() -> None:
    packer = Packer()
    packer.pack(statefulset(0))
    sizes = [(len(packer.pack(statefulset(i))), len(json.dumps(statefulset(i)))) for i in range(1, 20)]
    assert all(packed * 4 < size for packed, size in sizes), sizes


def test_unpack_gives_a_new_object_each_time() -> None:
    packer = Packer()
    data = packer.pack({"a": [1]})
    first = packer.unpack(data)
    first["a"].append(2)
    assert packer.unpack(data) == {"a": [1]}


def test_unpacking_before_anything_was_packed_is_an_error() -> None:
    with pytest.raises(ValueError, match="nothing was packed"):
        Packer().unpack(b"x")


@pytest.mark.parametrize("value", [{"n": 2**70}, {"n": -(2**63) - 1}, {"n": 2**64 - 1}, {"n": -(2**63)},
                                   {"f": 1e16}, {"f": 12345678901234567890.0}, {"s": "1234567890123456789012"}])
def test_integers_beyond_64_bits_and_long_digit_runs_come_back_exactly(value: dict[str, Any]) -> None:
    packer = Packer()
    packer.pack({"first": 1})
    back = packer.unpack(packer.pack(value))
    assert back == value
    assert [type(v) for v in back.values()] == [type(v) for v in value.values()]  # no int read as a float
