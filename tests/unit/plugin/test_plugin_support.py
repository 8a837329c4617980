"""The support archive of `kubectl sampledb report`: what it holds, that no Secret value is in it, its bytes."""

from __future__ import annotations

import base64
import io
import tarfile
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from tests.unit.plugin.fakes import FakeSession

from sampledb_operator.kube.errors import Forbidden, ServerError
from sampledb_operator.plugin.support import (
    InstanceLog,
    Masks,
    SupportData,
    archive_bytes,
    archive_root,
    events_about,
    members,
    redact_object,
    redact_string,
    reduce_secret,
    referenced_secrets,
    summary,
)
from sampledb_operator.plugin.support_read import gather_support

NOW = datetime(2026, 11, 30, 14, 11, 19, tzinfo=UTC)
PASSWORD = "Zq9-very-secret-pw"
URI = f"postgresql://app:{PASSWORD}@orders.shop.svc:5432/app"
ACCESS_KEY_ID, SECRET_ACCESS_KEY = "AKIAEXAMPLEKEYID", "wJalrXUtnFEMI/K7MDENG"
INIT_SQL = "CREATE ROLE reporter LOGIN PASSWORD 'reporter-pw-77';"
OTHER_PASSWORD = "other-database-password"
SECRET_VALUES = [PASSWORD, URI, ACCESS_KEY_ID, SECRET_ACCESS_KEY, INIT_SQL, "reporter-pw-77", OTHER_PASSWORD]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def labelled(name: str, component: str | None = None, db: str = "orders") -> dict[str, Any]:
    labels = {"sampledb.io/database": db, "app.kubernetes.io/managed-by": "sampledb-operator"}
    if component:
        labels["app.kubernetes.io/component"] = component
    return {"name": name, "labels": labels, "creationTimestamp": "2026-11-30T14:00:00Z"}


def world() -> list[dict[str, Any]]:
    """A database whose Secrets' values are also pasted where they do not belong: an env value, a ConfigMap,
    a last-applied annotation, an Event, the logs (below)."""
    return [
        {"kind": "SampleDB", "metadata": {"name": "orders", "generation": 2,
                                          "creationTimestamp": "2026-11-30T14:00:00Z"},
         "spec": {"version": "17.2", "storage": {"size": "5Gi"}, "replicas": 1,
                  "init": {"secretKeyRef": {"name": "orders-init", "key": "script"}},
                  "backup": {"objectStore": {"bucket": "b", "endpoint": "https://s3",
                                             "credentials": {"secretName": "s3-keys"}}}},
         "status": {"phase": "Running", "secretName": "orders-credentials", "primary": "orders-0",
                    "endpoint": "orders.shop.svc:5432",
                    "instances": [{"name": "orders-0", "role": "primary", "ready": True}]}},
        {"kind": "Secret", "metadata": labelled("orders-credentials"),
         "data": {"username": b64("app"), "password": b64(PASSWORD), "uri": b64(URI), "database": b64("app"),
                  "host": b64("orders.shop.svc"), "port": b64("5432")}},
        {"kind": "Secret", "metadata": {"name": "s3-keys"},
         "data": {"accessKeyId": b64(ACCESS_KEY_ID), "secretAccessKey": b64(SECRET_ACCESS_KEY)}},
        {"kind": "Secret", "metadata": {"name": "orders-init"}, "data": {"script": b64(INIT_SQL)}},
        {"kind": "Secret", "metadata": labelled("billing-credentials", db="billing"),
         "data": {"password": b64(OTHER_PASSWORD)}},
        {"kind": "Pod", "metadata": labelled("orders-0", "database"),
         "spec": {"nodeName": "n1", "containers": [{"name": "postgres", "env": [
             {"name": "PGPASSWORD", "value": PASSWORD},
             {"name": "S3_KEY", "value": SECRET_ACCESS_KEY},
             {"name": "POSTGRES_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "orders-credentials",
                                                                          "key": "password"}}}]}]},
         "status": {"phase": "Running", "containerStatuses": [{"name": "postgres", "ready": True,
                                                                "restartCount": 1}]}},
        {"kind": "Pod", "metadata": labelled("orders-backup-1-x7", "backup"), "status": {"phase": "Succeeded"}},
        {"kind": "StatefulSet", "metadata": labelled("orders", "database"), "spec": {"replicas": 1}},
        {"kind": "ConfigMap", "metadata": {**labelled("orders-config", "database"), "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": f'{{"data":{{"password":"{PASSWORD}"}}}}'}},
         "data": {"setup.sql": f"ALTER ROLE app PASSWORD 'reporter-pw-77'; -- was {PASSWORD}"}},
        {"kind": "ConfigMap", "metadata": {"name": "sampledb-scripts"}, "data": {"x": "shared"}},
        {"kind": "Service", "metadata": labelled("orders", "database"), "spec": {"clusterIP": "10.0.0.1"}},
        {"kind": "SampleDBBackup", "metadata": {"name": "orders-manual-1"}, "spec": {"database": "orders"},
         "status": {"phase": "Succeeded"}},
        {"kind": "SampleDBBackup", "metadata": {"name": "billing-manual-1"}, "spec": {"database": "billing"}},
        {"kind": "Event", "metadata": {"name": "orders.1"}, "involvedObject": {"kind": "SampleDB", "name": "orders"},
         "reason": "DatabaseReady", "message": f"connect with {URI}", "lastTimestamp": "2026-11-30T14:01:00Z"},
        {"kind": "Event", "metadata": {"name": "orders-0.1"}, "involvedObject": {"kind": "Pod", "name": "orders-0"},
         "reason": "Started", "message": "Started container postgres", "lastTimestamp": "2026-11-30T14:00:30Z"},
        {"kind": "Event", "metadata": {"name": "billing.1"}, "involvedObject": {"kind": "SampleDB",
                                                                               "name": "billing"}},
    ]


LOGS: dict[str, str | Exception] = {
    "orders-0": f"LOG:  statement: ALTER ROLE app PASSWORD '{PASSWORD}'\nLOG:  dialing {URI}\n",
    "orders-0:previous": f"FATAL:  could not access bucket with key {ACCESS_KEY_ID} / {SECRET_ACCESS_KEY}\n",
}


def archive_text(blob: bytes) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        return {m.name: (tar.extractfile(m).read().decode() if m.isfile() else "")  # type: ignore[union-attr]
                for m in tar.getmembers()}


async def build(objects: list[dict[str, Any]], logs: dict[str, str | Exception] | None = None) -> tuple[
        SupportData, Masks, dict[str, str]]:
    session = FakeSession(objects, logs=LOGS if logs is None else logs)
    data, masks = await gather_support(session, "orders", taken_at=NOW, log_lines=200,   # type: ignore[arg-type]
                                       plugin_version="0.1.0")
    files = members(data, masks)
    return data, masks, archive_text(archive_bytes(archive_root("shop", "orders", NOW), files, NOW))


async def test_no_secret_value_ends_up_in_the_archive() -> None:
    data, _, files = await build(world())
    everything = "\n".join(files.values())
    for value in SECRET_VALUES:
        assert value not in everything, f"{value!r} is in the archive"
        assert b64(value) not in everything, f"the base64 of {value!r} is in the archive"
    assert data.problems == []
    root = "sampledb-report-shop-orders-20261130T141119Z"
    secrets = yaml.safe_load(files[f"{root}/secrets.yaml"])
    assert secrets == [
        {"name": "orders-credentials", "keys": ["database", "host", "password", "port", "uri", "username"],
         "created": "2026-11-30T14:00:00Z"},
        {"name": "orders-init", "keys": ["script"], "created": None},
        {"name": "s3-keys", "keys": ["accessKeyId", "secretAccessKey"], "created": None}]
    assert "billing" not in everything   # another database's Secret, backup and Event are not in it
    assert not any("/secrets/" in name for name in files)


async def test_the_archive_holds_the_database_its_backups_children_events_logs_and_status_screen() -> None:
    _, _, files = await build(world())
    root = "sampledb-report-shop-orders-20261130T141119Z"
    assert sorted(files) == sorted([root, *(f"{root}/{p}" for p in (
        "README.txt", "status.txt", "sampledb.yaml", "status.yaml", "backups/orders-manual-1.yaml",
        "configmaps/orders-config.yaml", "pods/orders-0.yaml", "pods/orders-backup-1-x7.yaml",
        "services/orders.yaml", "statefulsets/orders.yaml", "secrets.yaml", "events.yaml",
        "logs/orders-0.log", "logs/orders-0.previous.log"))])
    assert files[f"{root}/status.txt"].startswith("SampleDB shop/orders\n")
    assert "Secret orders-credentials (keys: database, host, password, port, uri, username)" in \
        files[f"{root}/status.txt"]
    assert yaml.safe_load(files[f"{root}/sampledb.yaml"])["status"]["phase"] == "Running"
    assert [e["reason"] for e in yaml.safe_load(files[f"{root}/events.yaml"])] == ["Started", "DatabaseReady"]
    assert files[f"{root}/logs/orders-0.log"] == (
        "LOG:  statement: ALTER ROLE app PASSWORD '[REDACTED]'\n"
        "LOG:  dialing postgresql://app:[REDACTED]@orders.shop.svc:5432/app\n")
    env = yaml.safe_load(files[f"{root}/pods/orders-0.yaml"])["spec"]["containers"][0]["env"]
    assert env[0] == {"name": "PGPASSWORD", "value": "[REDACTED]"}
    assert env[2]["valueFrom"]["secretKeyRef"] == {"name": "orders-credentials", "key": "password"}
    readme = files[f"{root}/README.txt"]
    assert readme.startswith("kubectl sampledb report: SampleDB shop/orders\nTaken:      2026-11-30T14:11:19Z by"
                             " kubectl-sampledb 0.1.0\nKubernetes: v1.33.1\n")
    assert "  logs/orders-0.previous.log" in readme and "previous run" in readme


async def test_what_cannot_be_read_is_listed_and_the_rest_is_still_archived() -> None:
    objects = [o for o in world() if o["metadata"]["name"] != "orders-init"]   # a referenced Secret is gone
    logs: dict[str, str | Exception] = {
        "orders-0": ServerError(500, "InternalError", f"error dialing backend {URI}")}

    class NoSecretLists(FakeSession):
        async def list(self, resource: Any, **kwargs: Any) -> list[dict[str, Any]]:
            if resource.kind == "Secret":
                raise Forbidden(403, "Forbidden", 'secrets is forbidden: User "dev" cannot list resource "secrets"')
            return await super().list(resource, **kwargs)

    session = NoSecretLists(objects, logs=logs)
    data, masks = await gather_support(session, "orders", taken_at=NOW, log_lines=10)   # type: ignore[arg-type]
    assert data.problems == [
        "cannot list secrets: Forbidden: secrets is forbidden: User \"dev\" cannot list resource \"secrets\"",
        f"cannot read the log of orders-0: InternalError: error dialing backend {URI}",
        'cannot read the previous log of orders-0: NotFound: pods "orders-0" not found']
    assert data.missing_secrets == {"orders-init": "spec.init.secretKeyRef"}
    assert sorted(s.name for s in data.secrets) == ["orders-credentials", "s3-keys"]   # read by name instead
    files = archive_text(archive_bytes("r", members(data, masks), NOW))
    assert PASSWORD not in "\n".join(files.values())
    assert "Not included (could not be read)" in files["r/README.txt"]
    assert "error dialing backend postgresql://app:[REDACTED]@" in files["r/README.txt"]
    assert {"name": "orders-init", "missing": True, "namedBy": "spec.init.secretKeyRef"} in \
        yaml.safe_load(files["r/secrets.yaml"])
    text = summary("out.tar.gz", "r", members(data, masks), 2048, problems=data.problems, masks=masks)
    assert text.startswith("wrote out.tar.gz (2.0KiB, ")
    assert "not included (could not be read):\n  cannot list secrets: Forbidden" in text
    assert PASSWORD not in text


def test_a_secret_becomes_its_name_key_names_and_masks() -> None:
    info, masks = reduce_secret({"kind": "Secret", "metadata": {"name": "c", "creationTimestamp": "t"},
                                 "data": {"password": b64(PASSWORD), "host": b64("orders.shop.svc"),
                                          "port": b64("5432"), "tiny": b64("abc"), "blob": "////"},
                                 "stringData": {"token": "plain-token-value"}})
    assert (info.name, info.keys, info.created) == ("c", ("blob", "host", "password", "port", "tiny", "token"), "t")
    assert PASSWORD in masks.values and b64(PASSWORD) in masks.values
    assert "plain-token-value" in masks.values and b64("plain-token-value") in masks.values
    assert not {"orders.shop.svc", "5432", "abc"} & masks.values   # coordinates and short values stay readable
    assert PASSWORD not in repr(masks)


def test_the_secrets_a_database_names_are_found_in_its_spec_and_status() -> None:
    db = world()[0]
    assert referenced_secrets(db) == {"orders-credentials": "status.secretName",
                                      "orders-init": "spec.init.secretKeyRef",
                                      "s3-keys": "spec.backup.objectStore.credentials.secretName"}
    assert referenced_secrets({"metadata": {"name": "x"}}) == {"x-credentials": "status.secretName"}


def test_events_about_the_objects_only_oldest_first() -> None:
    events = [{"metadata": {"name": "b"}, "involvedObject": {"kind": "Pod", "name": "p"}, "lastTimestamp": "2"},
              {"metadata": {"name": "a"}, "involvedObject": {"kind": "Pod", "name": "p"}, "lastTimestamp": "1"},
              {"metadata": {"name": "c"}, "involvedObject": {"kind": "Job", "name": "p"}, "lastTimestamp": "0"}]
    assert [e["metadata"]["name"] for e in events_about(events, [{"kind": "Pod", "metadata": {"name": "p"}}])] == \
        ["a", "b"]


@pytest.mark.parametrize(("text", "redacted"), [
    ("postgresql://app:pw@h/db", "postgresql://app:[REDACTED]@h/db"),
    ("password=hunter2 user=app", "password=[REDACTED] user=app"),
    ("ALTER ROLE app WITH PASSWORD 'it''s-me';", "ALTER ROLE app WITH PASSWORD '[REDACTED]';"),
    ("create user x encrypted password 'y'", "create user x encrypted password '[REDACTED]'"),
    ('{"apiVersion":"v1","stringData":{"password":"pw1","user":"app"}}',
     '{"apiVersion":"v1","stringData":{"password":"[REDACTED]","user":"app"}}'),
    ('{"secretName":"keep-me"}', '{"secretName":"keep-me"}'),
    ("password_encryption = scram-sha-256", "password_encryption = scram-sha-256"),
])
def test_text_redaction(text: str, redacted: str) -> None:
    assert redact_string(text, Masks()) == redacted


def test_object_redaction_masks_keys_env_entries_and_masked_values_at_any_depth() -> None:
    deep: dict[str, Any] = {"value": "the-masked-value"}
    for _ in range(20):
        deep = {"x": deep}
    obj = {"kind": "Pod", "spec": {"env": [{"name": "DB_PASSWORD", "value": "p"}, {"name": "A", "value": "b"}]},
           "token": "t", "secretName": "s", "deep": deep}
    out = redact_object(obj, Masks(frozenset({"the-masked-value"})))
    assert out["spec"]["env"] == [{"name": "DB_PASSWORD", "value": "[REDACTED]"}, {"name": "A", "value": "b"}]
    assert (out["token"], out["secretName"]) == ("[REDACTED]", "s")
    assert "the-masked-value" not in repr(out)
    assert obj["token"] == "t"   # the input is not changed


def test_the_archive_is_a_function_of_its_members() -> None:
    data = SupportData(namespace="shop", name="orders", taken_at=NOW, db={"metadata": {"name": "orders"}},
                       logs=[InstanceLog("orders-0", "LOG: ok\n")], status_screen="SampleDB shop/orders\n")
    first = archive_bytes("root", members(data, Masks()), NOW)
    assert first == archive_bytes("root", members(data, Masks()), NOW)
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos][:3] == ["root", "root/README.txt", "root/status.txt"]
    assert all(i.mtime == int(NOW.timestamp()) for i in infos)
    assert {i.mode for i in infos if i.isfile()} == {0o644}
    assert archive_root("shop", "orders", NOW) == "sampledb-report-shop-orders-20261130T141119Z"
