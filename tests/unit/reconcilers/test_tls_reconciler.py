"""The TLS step on a fake cluster: the database's CA made once, its server certificate issued, published, mounted,
issued again when asked; a certificate of the user's read and refused with a reason; TLS off leaves no trace."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from tests.support.fake_cluster import NS, FakeCluster, condition, sampledb

from sampledb_operator.decide.children import tls
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.pki import certs

DB = "orders"


def data(cluster: FakeCluster, name: str) -> dict[str, str]:
    secret = cluster.get("Secret", name)
    assert secret is not None, name
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def pod_spec(cluster: FakeCluster) -> dict[str, Any]:
    sts = cluster.get("StatefulSet", names.statefulset_name(DB))
    assert sts is not None
    return dict(sts["spec"]["template"]["spec"])


def config(cluster: FakeCluster) -> dict[str, str]:
    cm = cluster.get("ConfigMap", names.configmap_name(DB))
    assert cm is not None
    return dict(cm["data"])


async def passes(cluster: FakeCluster, n: int = 2) -> None:
    for _ in range(n):
        await cluster.reconcile(DB)


async def test_a_new_database_gets_its_own_ca_a_certificate_for_its_names_published_and_mounted() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb())
    await passes(cluster)
    ca = data(cluster, names.ca_secret_name(DB))
    server = data(cluster, names.tls_secret_name(DB))
    assert certs.key_matches(ca["ca.crt"], ca["ca.key"])
    assert certs.signed_by(server["tls.crt"], ca["ca.crt"]) and certs.key_matches(server["tls.crt"], server["tls.key"])
    info = certs.read(server["tls.crt"])
    assert info is not None and set(tls.dns_names(DB, NS)) <= info.dns_names
    assert config(cluster)["ca.crt"] == ca["ca.crt"] and config(cluster)["sslmode"] == "verify-full"
    assert "PRIVATE KEY" not in str(config(cluster))
    spec = pod_spec(cluster)
    volume = next(v for v in spec["volumes"] if v["name"] == tls.TLS_VOLUME)
    assert volume["secret"]["secretName"] == names.tls_secret_name(DB)
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["SAMPLEDB_TLS_DIR"] == tls.TLS_DIR
    assert cluster.recorder.reasons().count("CertificateAuthorityCreated") == 1
    assert cluster.recorder.reasons().count("CertificateIssued") == 1
    assert all("PRIVATE KEY" not in message for _t, _r, message in cluster.recorder.events)

    writes = len(cluster.written(kind="Secret"))
    await passes(cluster)  # in shape: nothing issued again
    assert len(cluster.written(kind="Secret")) == writes


async def test_the_rotate_annotation_issues_a_new_certificate_from_the_same_ca_and_checks_the_reload() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb())
    await passes(cluster)
    ca_before = data(cluster, names.ca_secret_name(DB))["ca.crt"]
    before = certs.read(data(cluster, names.tls_secret_name(DB))["tls.crt"])
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {tls.ROTATE_ANNOTATION: "2026-12"}}})
    result = await cluster.reconcile(DB)
    after = certs.read(data(cluster, names.tls_secret_name(DB))["tls.crt"])
    assert before is not None and after is not None and after.serial != before.serial
    assert data(cluster, names.ca_secret_name(DB))["ca.crt"] == ca_before  # clients keep trusting it
    issued = [m for _t, r, m in cluster.recorder.events if r == "CertificateIssued"]
    assert len(issued) == 2 and tls.ROTATE_ANNOTATION in issued[-1]
    # the instances are looked at again until the kubelet has refreshed the files and they have reloaded
    assert result is not None and result.requeue_after is not None
    assert result.requeue_after <= tls.RELOAD_CHECK_SECONDS
    await passes(cluster)
    assert len([r for r in cluster.recorder.reasons() if r == "CertificateIssued"]) == 2  # once per value


async def test_tls_off_makes_no_secret_mounts_nothing_and_publishes_no_ca() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(tls={"enabled": False}))
    await passes(cluster)
    assert cluster.get("Secret", names.ca_secret_name(DB)) is None
    assert cluster.get("Secret", names.tls_secret_name(DB)) is None
    assert all(v["name"] != tls.TLS_VOLUME for v in pod_spec(cluster)["volumes"])
    assert "ca.crt" not in config(cluster)
    assert "hostssl" not in config(cluster)["pg_hba.conf"]


async def test_required_tls_admits_only_encrypted_tcp_connections() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(tls={"required": True}))
    await passes(cluster)
    hba = config(cluster)["pg_hba.conf"]
    tcp = [line.split()[0] for line in hba.splitlines() if line and not line.startswith(("#", "local"))]
    assert tcp == ["hostssl", "hostssl"]


async def test_a_users_certificate_is_read_refused_with_a_reason_and_served_once_usable() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(tls={"secretName": "orders-cert"}))
    await passes(cluster)
    degraded = condition(cluster.get("SampleDB", DB), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "TLSSecretInvalid")
    assert "orders-cert" in degraded["message"] and "does not exist" in degraded["message"]

    ca = certs.issue_ca("users-ca", cluster.clock.now())
    other = certs.issue_ca("other", cluster.clock.now())
    server = certs.issue_server(ca, DB, tls.dns_names(DB, NS), cluster.clock.now())
    cluster.put("Secret", {"metadata": {"name": "orders-cert"}, "type": "kubernetes.io/tls",
                           "stringData": {"tls.crt": server.cert, "tls.key": other.key, "ca.crt": ca.cert}})
    await passes(cluster)
    degraded = condition(cluster.get("SampleDB", DB), "Degraded")
    assert degraded["reason"] == "TLSSecretInvalid" and "tls.key is not the key of its tls.crt" in degraded["message"]
    assert "PRIVATE KEY" not in degraded["message"]

    cluster.patch("Secret", "orders-cert", {"stringData": {"tls.key": server.key}})
    await passes(cluster)
    assert condition(cluster.get("SampleDB", DB), "Degraded")["status"] == "False"
    assert config(cluster)["ca.crt"] == ca.cert
    volume = next(v for v in pod_spec(cluster)["volumes"] if v["name"] == tls.TLS_VOLUME)
    assert volume["secret"]["secretName"] == "orders-cert"
    assert cluster.get("Secret", names.ca_secret_name(DB)) is None  # the operator issues nothing


async def test_a_long_namespace_and_name_still_get_a_ca() -> None:
    cluster = FakeCluster()
    name = "o" * 40
    cluster.put("SampleDB", sampledb(name))
    for _ in range(2):
        await cluster.reconcile(name)
    assert cluster.get("Secret", names.ca_secret_name(name)) is not None
    assert cluster.get("Secret", names.tls_secret_name(name)) is not None


async def test_the_connection_uri_follows_whether_the_server_serves_tls() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb())
    await passes(cluster)
    secret = names.secret_name(DB)
    password = data(cluster, secret)["password"]
    assert data(cluster, secret)["uri"].endswith("/app?sslmode=require")  # made for a server expected to serve it
    # the server turns out to run without SSL (an image built without it): the uri stops asking for it
    cluster.patch("SampleDB", DB, {"status": {"conditions": [
        {"type": "Encrypted", "status": "False", "reason": "ImageWithoutSSL", "message": "no SSL",
         "lastTransitionTime": "2026-12-05T00:00:00Z"}]}})
    await cluster.reconcile(DB)
    assert data(cluster, secret)["uri"] == f"postgresql://app:{password}@{DB}.{NS}.svc:5432/app"
    updated = [m for _t, r, m in cluster.recorder.events if r == "ConnectionURIUpdated"]
    assert len(updated) == 1 and "ImageWithoutSSL" in updated[0] and password not in updated[0]
    writes = len(cluster.written(kind="Secret"))
    await passes(cluster)
    assert len(cluster.written(kind="Secret")) == writes  # in step: not written again
    # and back once it serves TLS (a new image)
    cluster.patch("SampleDB", DB, {"status": {"conditions": [
        {"type": "Encrypted", "status": "True", "reason": "Served", "message": "served",
         "lastTransitionTime": "2026-12-05T00:00:00Z"}]}})
    await cluster.reconcile(DB)
    assert data(cluster, secret)["uri"].endswith("?sslmode=require")
    assert data(cluster, secret)["password"] == password  # only the uri is ever rewritten


async def test_tls_off_gives_a_uri_without_sslmode() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(tls={"enabled": False}))
    await passes(cluster)
    assert "sslmode" not in data(cluster, names.secret_name(DB))["uri"]
    assert "ConnectionURIUpdated" not in cluster.recorder.reasons()


async def test_a_primary_that_does_not_answer_is_asked_again_after_a_growing_delay_not_every_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sampledb_operator.pg import client as pg
    from sampledb_operator.reconcilers import tls as tls_step

    asked: list[float] = []
    answer: list[bool | None] = [None]

    async def ssl_on(target: pg.Target, within: float = 3.0) -> bool | None:
        asked.append(cluster.clock.monotonic())
        return answer[0]

    monkeypatch.setattr(pg, "ssl_on", ssl_on)
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb())
    await passes(cluster)  # the credentials Secret and the certificates
    db = SampleDB.model_validate(cluster.get("SampleDB", DB))
    pod = {"status": {"podIP": "10.0.0.9"}}

    async def check() -> tls_step.TLSOutcome:
        return await tls_step.reconcile_tls(cluster.ctx, db, db_ready=True, primary_pod=pod)

    first = await check()
    assert len(asked) == 1 and first.condition is None and first.recheck_after == tls.SSL_RETRY_FIRST
    for _ in range(5):  # passes in between ask nothing
        assert (await check()).condition is None
    assert len(asked) == 1
    cluster.clock.advance(tls.SSL_RETRY_FIRST)
    second = await check()
    assert len(asked) == 2 and second.recheck_after == 2 * tls.SSL_RETRY_FIRST  # doubled
    assert [tls.ssl_retry_delay(n) for n in (1, 2, 3)] == [5.0, 10.0, 20.0] and tls.ssl_retry_delay(99) == 300.0
    cluster.clock.advance(2 * tls.SSL_RETRY_FIRST)
    assert (await check()).recheck_after == 4 * tls.SSL_RETRY_FIRST and len(asked) == 3
    cluster.clock.advance(4 * tls.SSL_RETRY_FIRST)
    fourth = await check()  # past SSL_RETRY_REQUEUES: asked when the database's next pass comes, no pass of its own
    assert len(asked) == 4 and fourth.recheck_after in (tls_step.RENEWAL_RECHECK, tls.RELOAD_CHECK_SECONDS)
    cluster.clock.advance(8 * tls.SSL_RETRY_FIRST)
    answer[0] = True
    served = await check()
    assert served.condition is not None and served.condition.reason == "Served" and len(asked) == 5
    assert cluster.ctx.unanswered_tls.due(db.metadata.uid or "", cluster.clock.monotonic())  # forgotten


async def test_a_role_that_logs_in_by_certificate_gets_one_and_it_goes_when_the_role_stops_asking() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(roles=[{"name": "read_only", "certificate": True}, {"name": "plain"}]))
    await passes(cluster)
    secret_name = names.client_secret_name(DB, "read_only")
    client = data(cluster, secret_name)
    ca = data(cluster, names.ca_secret_name(DB))
    info = certs.read(client["tls.crt"])
    assert info is not None and info.subject == "CN=read_only" and client["ca.crt"] == ca["ca.crt"]
    assert certs.signed_by(client["tls.crt"], ca["ca.crt"]) and certs.key_matches(client["tls.crt"], client["tls.key"])
    secret = cluster.get("Secret", secret_name)
    assert secret is not None and secret["metadata"]["ownerReferences"][0]["kind"] == "SampleDB"
    assert cluster.get("Secret", names.client_secret_name(DB, "plain")) is None
    issued = [m for _t, r, m in cluster.recorder.events if r == "ClientCertificateIssued"]
    assert len(issued) == 1 and "PRIVATE KEY" not in issued[0]
    writes = len(cluster.written(kind="Secret"))
    await passes(cluster)
    assert len(cluster.written(kind="Secret")) == writes  # valid: not issued again
    cluster.patch("SampleDB", DB, {"spec": {"roles": [{"name": "read_only"}, {"name": "plain"}]}})
    await passes(cluster)
    assert cluster.get("Secret", secret_name) is None


async def test_a_users_secret_renewed_in_place_is_loaded_by_every_ready_instance(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sampledb_operator.pg import client as pg
    from sampledb_operator.reconcilers import tls as tls_step

    reloads: list[str] = []

    async def reload_if_newer(target: pg.Target, path: str, within: float = 5.0) -> bool | None:
        reloads.append(target.host)
        return False

    monkeypatch.setattr(pg, "reload_if_newer", reload_if_newer)
    cluster = FakeCluster()
    ca = certs.issue_ca("users-ca", cluster.clock.now())
    server = certs.issue_server(ca, DB, tls.dns_names(DB, NS), cluster.clock.now())
    cluster.put("Secret", {"metadata": {"name": "orders-cert"}, "type": "kubernetes.io/tls",
                           "stringData": {"tls.crt": server.cert, "tls.key": server.key, "ca.crt": ca.cert}})
    cluster.put("SampleDB", sampledb(tls={"secretName": "orders-cert"}))
    await passes(cluster)
    cluster.put("Pod", {"metadata": {"name": f"{DB}-0", "labels": {
        "sampledb.io/database": DB, "app.kubernetes.io/component": "database",
        "app.kubernetes.io/managed-by": "sampledb-operator"}},
        "status": {"podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": "True"}]}})
    db = SampleDB.model_validate(cluster.get("SampleDB", DB))

    async def step() -> tls_step.TLSOutcome:
        return await tls_step.reconcile_tls(cluster.ctx, db, db_ready=True, primary_pod=None)

    assert (await step()).recheck_after == tls_step.PROVIDED_RECHECK and reloads == []  # seen, unchanged
    cluster.ctx.tls_secret_versions.clear()  # as after the operator's restart: the first sight looks once
    first = await step()
    assert reloads == ["10.0.0.7"] and first.recheck_after == tls_step.PROVIDED_RECHECK
    assert (await step()).recheck_after == tls_step.PROVIDED_RECHECK and len(reloads) == 1
    renewed = certs.issue_server(ca, DB, tls.dns_names(DB, NS), cluster.clock.now())
    cluster.patch("Secret", "orders-cert", {"stringData": {"tls.crt": renewed.cert, "tls.key": renewed.key}})
    during = await step()  # renewed in place: every ready instance reloads, looked at again soon
    assert len(reloads) == 2 and during.recheck_after == tls.RELOAD_CHECK_SECONDS
    cluster.clock.advance(tls.RELOAD_WINDOW.total_seconds())
    after = await step()
    assert after.recheck_after == tls_step.PROVIDED_RECHECK and len(reloads) == 2
