"""decide/children/tls: when the server certificate is issued again (each reason `renewal` gives, and none when it
serves), what is wrong with a provided Secret, a Secret's data as text, the names a certificate is for, the served
Secret's volume and mount, and the Secrets the operator writes."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from sampledb_operator.decide.children import tls
from sampledb_operator.model import names
from sampledb_operator.pki import certs

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
DB, NS = "orders", "shop"
DNS = tls.dns_names(DB, NS)
CA = certs.issue_ca(DB, NOW - timedelta(days=1), unit=NS)
OTHER_CA = certs.issue_ca(DB, NOW - timedelta(days=1), unit=NS)  # the same name, another key
SERVER = certs.issue_server(CA, DB, DNS, NOW)
GOOD = {tls.CERT_KEY: SERVER.cert, tls.KEY_KEY: SERVER.key, tls.CA_KEY: CA.cert}


def served(ca: certs.Pair = CA, dns: Sequence[str] = DNS, issued: datetime = NOW,
           days: int = certs.SERVER_DAYS) -> dict[str, str]:
    """A Secret's data as text for a server certificate issued by `ca` at `issued`."""
    pair = certs.issue_server(ca, DB, dns, issued, days)
    return {tls.CERT_KEY: pair.cert, tls.KEY_KEY: pair.key, tls.CA_KEY: ca.cert}


def renewal(server: Mapping[str, str], annotations: Mapping[str, str] | None = None, *, now: datetime = NOW,
            rotate: str = "") -> str | None:
    return tls.renewal(server, annotations or {}, CA.cert, DNS, now=now, rotate=rotate)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


# renewal


def test_a_certificate_in_order_is_not_issued_again() -> None:
    assert renewal(GOOD) is None


@pytest.mark.parametrize("server", [{}, {tls.CERT_KEY: ""}, {tls.KEY_KEY: SERVER.key, tls.CA_KEY: CA.cert},
                                    {**GOOD, tls.CERT_KEY: "garbage"}])
def test_a_missing_or_unreadable_certificate_is_issued(server: dict[str, str]) -> None:
    assert renewal(server) == "there is no server certificate yet"


@pytest.mark.parametrize("key", ["", "garbage", CA.key, certs.issue_server(CA, DB, DNS, NOW).key])
def test_a_certificate_stored_with_another_key_is_issued_again(key: str) -> None:
    assert renewal({**GOOD, tls.KEY_KEY: key}) == "the server certificate's key is not the one stored with it"


def test_a_certificate_without_its_key_is_issued_again() -> None:
    without = {k: v for k, v in GOOD.items() if k != tls.KEY_KEY}
    assert renewal(without) == "the server certificate's key is not the one stored with it"


def test_a_certificate_signed_by_another_ca_is_issued_again() -> None:
    foreign = {**served(OTHER_CA), tls.CA_KEY: CA.cert}  # ca.crt claims the database's CA
    assert renewal(foreign) == "the server certificate is not signed by the database's certificate authority"


def test_a_certificate_stored_with_another_ca_certificate_is_issued_again() -> None:
    assert renewal({**GOOD, tls.CA_KEY: OTHER_CA.cert}) == (
        "the server certificate is not signed by the database's certificate authority")


def test_a_certificate_stored_without_the_ca_certificate_is_issued_again() -> None:
    without = {k: v for k, v in GOOD.items() if k != tls.CA_KEY}
    assert renewal(without) == "the server certificate is not signed by the database's certificate authority"


def test_a_certificate_lacking_a_name_is_issued_again_and_the_message_names_it() -> None:
    missing = f"{names.replica_service_name(DB)}.{NS}.svc"
    assert renewal(served(dns=[n for n in DNS if n != missing])) == f"the server certificate does not name {missing}"


def test_every_missing_name_is_named_in_order() -> None:
    kept = [n for n in DNS if not n.startswith("*.")]
    wildcards = sorted(n for n in DNS if n.startswith("*."))
    assert len(wildcards) == 2
    assert renewal(served(dns=kept)) == f"the server certificate does not name {', '.join(wildcards)}"


def test_a_certificate_naming_more_than_needed_serves() -> None:
    assert renewal(served(dns=[*DNS, "orders.example.com"])) is None


def test_a_certificate_near_its_end_is_issued_again() -> None:
    old = served(issued=NOW - timedelta(days=certs.SERVER_DAYS - 25))
    end = NOW + timedelta(days=25)
    assert renewal(old) == f"the server certificate expires at {end:%Y-%m-%dT%H:%M:%SZ}"
    assert renewal(old) == "the server certificate expires at 2026-12-30T12:00:00Z"


def test_a_certificate_is_issued_again_exactly_renew_before_its_end() -> None:
    short = served(days=tls.RENEW_BEFORE.days + 1)
    assert renewal(short) is None
    assert renewal(short, now=NOW + timedelta(days=1) - timedelta(seconds=1)) is None
    assert renewal(short, now=NOW + timedelta(days=1)) is not None


def test_an_expired_certificate_is_issued_again() -> None:
    assert renewal(GOOD, now=NOW + timedelta(days=certs.SERVER_DAYS + 1)) == (
        f"the server certificate expires at {NOW + timedelta(days=certs.SERVER_DAYS):%Y-%m-%dT%H:%M:%SZ}")


@pytest.mark.parametrize("issued_for", [None, "", "monday"])
def test_a_rotate_value_the_certificate_was_not_issued_for_issues_it_again(issued_for: str | None) -> None:
    annotations = {} if issued_for is None else {tls.ISSUED_FOR_ANNOTATION: issued_for}
    assert renewal(GOOD, annotations, rotate="tuesday") == (
        f"{tls.ROTATE_ANNOTATION} asks for a new certificate ('tuesday')")


def test_the_rotate_value_the_certificate_was_issued_for_serves() -> None:
    assert renewal(GOOD, {tls.ISSUED_FOR_ANNOTATION: "tuesday"}, rotate="tuesday") is None


def test_no_rotate_value_serves_whatever_the_certificate_was_issued_for() -> None:
    assert renewal(GOOD, {tls.ISSUED_FOR_ANNOTATION: "monday"}, rotate="") is None


def test_no_renewal_message_carries_a_private_key() -> None:
    messages = [renewal({**GOOD, tls.KEY_KEY: CA.key}), renewal({**GOOD, tls.CA_KEY: OTHER_CA.cert}),
                renewal(served(dns=DNS[:1])), renewal(GOOD, now=NOW + timedelta(days=certs.SERVER_DAYS)),
                renewal(GOOD, rotate="x")]
    assert all(m is not None and "PRIVATE KEY" not in m and CA.key not in m for m in messages)


# provided_problem


def test_a_provided_secret_in_order_has_no_problem() -> None:
    assert tls.provided_problem(GOOD) is None


def test_a_provided_secret_lacking_keys_names_them() -> None:
    assert tls.provided_problem({}) == "it lacks tls.crt, tls.key, ca.crt"
    assert tls.provided_problem({tls.CERT_KEY: SERVER.cert}) == "it lacks tls.key, ca.crt"
    assert tls.provided_problem({**GOOD, tls.CA_KEY: ""}) == "it lacks ca.crt"


def test_a_provided_certificate_that_is_not_pem_is_a_problem() -> None:
    assert tls.provided_problem({**GOOD, tls.CERT_KEY: "not a certificate"}) == (
        "its tls.crt is not a PEM certificate")


def test_a_provided_key_of_another_certificate_is_a_problem_not_shown() -> None:
    problem = tls.provided_problem({**GOOD, tls.KEY_KEY: CA.key})
    assert problem == "its tls.key is not the key of its tls.crt"
    assert CA.key not in problem and SERVER.key not in problem


def test_a_provided_certificate_of_another_ca_is_served_as_it_is() -> None:
    assert tls.provided_problem({**served(OTHER_CA), tls.CA_KEY: CA.cert}) is None


# secret_data


def test_secret_data_decodes_the_values() -> None:
    secret = {"data": {tls.CERT_KEY: b64(SERVER.cert.encode()), tls.CA_KEY: b64(b"ca")}}
    assert tls.secret_data(secret) == {tls.CERT_KEY: SERVER.cert, tls.CA_KEY: "ca"}


def test_secret_data_skips_values_that_do_not_decode() -> None:
    secret = {"data": {"good": b64(b"text"), "padding": "abc", "binary": b64(b"\xff\xfe\x00")}}
    assert tls.secret_data(secret) == {"good": "text"}


@pytest.mark.parametrize("secret", [None, {}, {"data": None}, {"data": {}}, {"metadata": {"name": "x"}}])
def test_secret_data_of_no_secret_or_no_data_is_empty(secret: dict[str, object] | None) -> None:
    assert tls.secret_data(secret) == {}


# dns_names


def test_dns_names_cover_both_services_and_the_pods() -> None:
    client, ro = names.client_service_name(DB), names.replica_service_name(DB)
    headless = names.headless_service_name(DB)
    expected = {
        client, f"{client}.{NS}", f"{client}.{NS}.svc", f"{client}.{NS}.svc.cluster.local",
        ro, f"{ro}.{NS}", f"{ro}.{NS}.svc", f"{ro}.{NS}.svc.cluster.local",
        f"*.{headless}.{NS}.svc", f"*.{headless}.{NS}.svc.cluster.local",
    }
    assert ro == "orders-ro"
    assert set(DNS) == expected
    assert len(DNS) == len(expected)


def test_dns_names_of_a_longest_name_are_dns_labels() -> None:
    db = "d" * names.MAX_NAME_LENGTH
    out = tls.dns_names(db, "n" * 63)
    assert f"*.{names.headless_service_name(db)}.{'n' * 63}.svc" in out
    assert f"{names.replica_service_name(db)}.{'n' * 63}" in out
    assert all(0 < len(label) <= names.LABEL_LIMIT for name in out for label in name.split("."))


# served_secret and volume


def test_the_served_secret_is_the_provided_one_or_the_operators() -> None:
    assert tls.served_secret(DB, "my-certs") == "my-certs"
    assert tls.served_secret(DB, None) == names.tls_secret_name(DB) == "orders-tls"
    assert tls.served_secret(DB, "") == names.tls_secret_name(DB)


@pytest.mark.parametrize(("secret_name", "expected"), [(None, "orders-tls"), ("my-certs", "my-certs")])
def test_the_volume_mounts_the_served_secret_read_only(secret_name: str | None, expected: str) -> None:
    volume, mount = tls.volume(DB, secret_name)
    assert volume == {"name": tls.TLS_VOLUME, "secret": {
        "secretName": expected, "defaultMode": 0o640,
        "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"},
                  {"key": "ca.crt", "path": "ca.crt"}]}}
    assert mount == {"name": volume["name"], "mountPath": tls.TLS_DIR, "readOnly": True}


# secret


def test_a_secret_with_a_certificate_is_of_type_tls() -> None:
    meta = {"namespace": NS, "labels": {"app": "sampledb"}}
    secret = tls.secret(meta, names.tls_secret_name(DB), GOOD, {tls.ISSUED_FOR_ANNOTATION: "tuesday"})
    assert secret == {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "stringData": GOOD,
                      "metadata": {"namespace": NS, "labels": {"app": "sampledb"}, "name": "orders-tls",
                                   "annotations": {tls.ISSUED_FOR_ANNOTATION: "tuesday"}}}
    assert meta == {"namespace": NS, "labels": {"app": "sampledb"}}


def test_a_secret_without_a_certificate_is_opaque_and_unannotated() -> None:
    data = {tls.CA_KEY: CA.cert, tls.CA_PRIVATE_KEY: CA.key}
    secret = tls.secret({"namespace": NS}, names.ca_secret_name(DB), data)
    assert secret["type"] == "Opaque"
    assert secret["stringData"] == data
    assert secret["metadata"] == {"namespace": NS, "name": "orders-ca"}


def test_encrypted_says_off_served_or_not_served_and_nothing_when_not_asked() -> None:
    off = tls.encrypted(False, None, "orders-tls", 3)
    assert off is not None and (off.status, off.reason, off.observed_generation) == ("False", "Disabled", 3)
    assert tls.encrypted(True, None, "orders-tls", 3) is None  # not asked this pass: the condition stays
    served = tls.encrypted(True, True, "orders-tls", 3)
    assert served is not None and (served.status, served.reason) == ("True", "Served")
    assert "orders-tls" in served.message
    plain = tls.encrypted(True, False, "orders-tls", 3)
    assert plain is not None and (plain.status, plain.reason) == ("False", "ImageWithoutSSL")
    assert "built without SSL support" in plain.message


def test_the_primary_is_asked_until_it_answers_and_again_after_its_server_starts() -> None:
    served = tls.encrypted(True, True, "orders-tls", 1)
    assert served is not None
    answered = served.model_copy(update={"last_transition_time": NOW})
    pod_started = {"status": {"containerStatuses": [
        {"name": "postgres", "state": {"running": {"startedAt": "2026-12-05T11:00:00Z"}}},
        {"name": "exporter", "state": {"running": {"startedAt": "2026-12-05T12:05:00Z"}}}]}}  # not the server
    assert tls.ssl_check_needed(None, pod_started)
    assert not tls.ssl_check_needed(answered, pod_started)  # started before the answer: nothing new
    restarted = {"status": {"containerStatuses": [
        {"name": "postgres", "state": {"running": {"startedAt": "2026-12-05T12:05:00Z"}}}]}}
    assert tls.ssl_check_needed(answered, restarted)
    assert tls.ssl_check_needed(answered, None)  # no running server known: ask
    not_served = tls.encrypted(True, False, "orders-tls", 1)
    assert not_served is not None
    # an image without SSL is asked once per server start too (a new image restarts it)
    assert not tls.ssl_check_needed(not_served.model_copy(update={"last_transition_time": NOW}), pod_started)
    assert tls.ssl_check_needed(not_served.model_copy(update={"last_transition_time": NOW}), restarted)
    disabled = tls.encrypted(False, None, "orders-tls", 1)
    assert disabled is not None and tls.ssl_check_needed(disabled, pod_started)  # turned on since: ask
