"""decide/cache.py: the scripts ConfigMap is cached as a digest of its data, and drift still compares by value."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from sampledb_operator.decide import cache, plan
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.labels import COMPONENT_LABEL
from sampledb_operator.model.sampledb import SampleDB

SCRIPTS = {"lib.sh": "#!/bin/bash\n" + "# padding\n" * 2000, "init.sh": "#!/bin/bash\necho init\n"}


def make_db() -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "generation": 1},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
    })


def on_server(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].update(uid="cm-uid", resourceVersion="7", managedFields=[{"manager": "sampledb-operator"}])
    return out


def scripts_cm() -> dict[str, Any]:
    return d.scripts_configmap(d.Inputs(make_db(), SCRIPTS))


def test_the_cached_scripts_configmap_keeps_a_digest_not_the_data_nor_managed_fields() -> None:
    served = on_server(scripts_cm())
    cached = cache.compact(served)
    assert "data" not in cached and "managedFields" not in cached["metadata"]
    assert cached[cache.DATA_DIGEST] == cache.data_digest(SCRIPTS)
    assert cached["metadata"]["resourceVersion"] == "7" and cached["metadata"]["labels"] == served["metadata"]["labels"]
    assert "data" in served and "managedFields" in served["metadata"]  # the argument is left as it was
    assert len(repr(cached)) < len(repr(served)) / 10


def test_other_configmaps_keep_their_data() -> None:
    config = on_server(d.configmap(make_db()))
    cached = cache.compact(config)
    assert cached["data"] == config["data"] and cache.DATA_DIGEST not in cached


def test_a_matching_compacted_scripts_configmap_is_no_drift_and_an_edited_one_is_reapplied() -> None:
    want = scripts_cm()
    assert plan.drift(want, cache.compact(on_server(want))) is None
    edited = on_server(want)
    edited["data"]["init.sh"] = "#!/bin/bash\necho tampered\n"
    assert plan.drift(want, cache.compact(edited)) == "data differs"
    removed = on_server(want)
    del removed["data"]["lib.sh"]
    actions = plan.plan([want], {plan.key_of(want): cache.compact(removed)})
    assert [(a.key, a.obj.get("data")) for a in actions] == [(plan.key_of(want), want["data"])]


@given(hs.dictionaries(hs.text(min_size=1, max_size=5), hs.text(max_size=20), max_size=5))
def test_the_digest_ignores_key_order(data: dict[str, str]) -> None:
    assert cache.data_digest(dict(reversed(list(data.items())))) == cache.data_digest(data)


def test_a_cached_pod_keeps_its_metadata_status_and_node_but_not_its_containers() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "db-0", "namespace": "ns", "labels": {"sampledb.io/role": "primary"}},
           "spec": {"nodeName": "n1", "containers": [{"name": "postgres", "env": [{"name": "A", "value": "x" * 500}]}],
                    "volumes": [{"name": "data"}]},
           "status": {"podIP": "10.0.0.5", "conditions": [{"type": "Ready", "status": "True"}]}}
    kept = cache.compact(pod)
    assert kept["spec"] == {"nodeName": "n1"}
    assert kept["metadata"] == pod["metadata"] and kept["status"] == pod["status"]
    assert pod["spec"]["containers"]  # the argument is not changed


def test_equal_data_in_different_objects_is_digested_once_by_a_compactor_and_other_data_gets_its_own_digest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[int] = []
    sha256 = cache.hashlib.sha256
    monkeypatch.setattr(cache.hashlib, "sha256", lambda data: computed.append(1) or sha256(data))
    first = {"a.sh": "echo one " + "x" * 100, "b.sh": "echo two"}
    same = json.loads(json.dumps(first))  # equal content, other objects (as each watch event brings)
    other = {**first, "b.sh": "echo three"}

    def configmap(data: dict[str, str]) -> dict[str, Any]:
        return {"kind": "ConfigMap", "metadata": {"name": "s", "labels": {COMPONENT_LABEL: "scripts"}}, "data": data}
    compactor = cache.Compactor()
    assert compactor(configmap(first))[cache.DATA_DIGEST] == compactor(configmap(same))[cache.DATA_DIGEST] \
        == cache.data_digest(first)
    assert len(computed) == 2  # once by the compactor, once by the direct call
    assert compactor(configmap(other))[cache.DATA_DIGEST] != cache.data_digest(first)
    assert len(computed) == 4


def test_digested_data_is_digested_once_when_made_and_is_the_data() -> None:
    data = {"b.sh": "echo two", "a.sh": "echo one"}
    digested = cache.DigestedData(data)
    assert digested == data and digested.digest == cache.data_digest(data)
    assert cache.data_digest(digested) is digested.digest
