"""The object stores' access keys come only from a Secret its owner opted in, on the fake cluster.

Without the label sampledb.io/object-store-credentials="true" (or without the Secret, or a key) the SampleDB
reports SpecValid=False with the reason and makes no child, so no pod ever gets the Secret's values in its
environment (and so to the endpoint the spec names); once the label is set, the database is made with the
store's settings by reference.
"""

from __future__ import annotations

from tests.support.fake_cluster import FakeCluster, condition, sampledb

from sampledb_operator.model.archive import CREDENTIALS_OPT_IN_LABEL

STORE = {"endpoint": "https://s3.example:9000", "bucket": "pg-archive", "credentials": {"secretName": "s3-keys"}}
KEYS = {"accessKeyId": "QUtJQQ==", "secretAccessKey": "c2VjcmV0"}


async def test_a_secret_without_the_opt_in_label_is_never_referenced_by_a_pod() -> None:
    cluster = FakeCluster()
    cluster.put("Secret", {"metadata": {"name": "s3-keys"}, "data": KEYS})
    cluster.put("SampleDB", sampledb(backup={"objectStore": STORE}))
    await cluster.reconcile("orders")

    cond = condition(cluster.get("SampleDB", "orders"), "SpecValid")
    assert (cond["status"], cond["reason"]) == ("False", "ObjectStoreCredentialsNotOptedIn")
    assert f'{CREDENTIALS_OPT_IN_LABEL}="true"' in cond["message"] and "s3-keys" in cond["message"]
    assert cluster.of_kind("StatefulSet") == []
    assert "c2VjcmV0" not in str(cluster.get("SampleDB", "orders")["status"])

    cluster.patch("Secret", "s3-keys", {"metadata": {"labels": {CREDENTIALS_OPT_IN_LABEL: "true"}}})
    for _ in range(3):
        await cluster.reconcile("orders")
    for pvc in cluster.of_kind("PersistentVolumeClaim"):
        cluster.bind(pvc["metadata"]["name"])
    await cluster.reconcile("orders")
    assert condition(cluster.get("SampleDB", "orders"), "SpecValid")["status"] == "True"
    [sts] = cluster.of_kind("StatefulSet")
    env = {e["name"]: e for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"] == {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {
        "secretKeyRef": {"name": "s3-keys", "key": "secretAccessKey"}}}


async def test_a_missing_secret_or_key_is_named() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(backup={"objectStore": STORE}))
    await cluster.reconcile("orders")
    cond = condition(cluster.get("SampleDB", "orders"), "SpecValid")
    assert (cond["reason"], "Secret s3-keys does not exist" in cond["message"]) == ("ObjectStoreCredentialsMissing",
                                                                                     True)
    cluster.put("Secret", {"metadata": {"name": "s3-keys", "labels": {CREDENTIALS_OPT_IN_LABEL: "true"}},
                           "data": {"accessKeyId": "QUtJQQ=="}})
    await cluster.reconcile("orders")
    assert "no key 'secretAccessKey'" in condition(cluster.get("SampleDB", "orders"), "SpecValid")["message"]
