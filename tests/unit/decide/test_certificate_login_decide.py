"""Roles that log in with a client certificate (spec.roles[].certificate): the certificate the operator issues
(pki/certs.issue_client), when it is issued again (decide/children/tls.client_renewal), the membership that admits the
role (decide/sql/roles), and the pg_hba.conf line and ssl_ca_file that make the server ask for it
(decide/children/pgconfig, decide/children/desired_config)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from tests.support.fake_cluster import sampledb

from sampledb_operator.decide.children import desired_config, pgconfig, tls
from sampledb_operator.decide.sql import roles as r
from sampledb_operator.model import names
from sampledb_operator.model.roles import CERTIFICATE_GROUP, ObservedRole, RoleSpec, RoleState, RoleStatus
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.pki import certs

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
CA = certs.issue_ca("orders CA", NOW - timedelta(days=1), unit="shop")


def spec(name: str, **kw: object) -> RoleSpec:
    return RoleSpec.model_validate({"name": name, **kw})


def test_a_client_certificate_names_the_role_is_for_clients_and_signed_by_the_ca() -> None:
    pair = certs.issue_client(CA, "reporting", NOW)
    cert = x509.load_pem_x509_certificate(pair.cert.encode())
    assert cert.subject.rfc4514_string() == "CN=reporting"
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not any(isinstance(e.value, x509.SubjectAlternativeName) for e in cert.extensions)
    assert certs.signed_by(pair.cert, CA.cert) and certs.key_matches(pair.cert, pair.key)


def test_a_client_certificate_is_issued_again_only_with_a_reason() -> None:
    pair = certs.issue_client(CA, "reporting", NOW)
    good = {tls.CERT_KEY: pair.cert, tls.KEY_KEY: pair.key, tls.CA_KEY: CA.cert}
    assert tls.client_renewal(good, CA.cert, "reporting", now=NOW) is None
    assert "no client certificate" in (tls.client_renewal({}, CA.cert, "reporting", now=NOW) or "")
    assert "not role auditors" in (tls.client_renewal(good, CA.cert, "auditors", now=NOW) or "")
    other = certs.issue_ca("other", NOW)
    assert "not signed" in (tls.client_renewal(good, other.cert, "reporting", now=NOW) or "")
    assert "key" in (tls.client_renewal({**good, tls.KEY_KEY: certs.issue_client(CA, "x", NOW).key}, CA.cert,
                                        "reporting", now=NOW) or "")
    assert "expires" in (tls.client_renewal(good, CA.cert, "reporting", now=NOW + timedelta(days=340)) or "")


def test_a_certificate_role_joins_the_group_made_once_and_leaves_it_when_it_stops_asking() -> None:
    ops = r.plan([spec("reporting", certificate=True)], {}, [], {})
    assert [(o.kind, o.role, o.other) for o in ops] == [
        ("create", CERTIFICATE_GROUP, None), ("create", "reporting", None), ("grant", "reporting", CERTIFICATE_GROUP)]
    assert ops[0].login is False
    out = r.statuses([spec("reporting", certificate=True)], [], {}, {}, {})
    assert out[0].in_roles == [CERTIFICATE_GROUP]
    have = {CERTIFICATE_GROUP: ObservedRole(False, -1),
            "reporting": ObservedRole(True, -1, frozenset({CERTIFICATE_GROUP}))}
    assert r.plan([spec("reporting", certificate=True)], have, out, {}) == []
    last = [RoleStatus(name="reporting", state=RoleState.READY, in_roles=[CERTIFICATE_GROUP])]
    ops = r.plan([spec("reporting")], have, last, {})
    assert [(o.kind, o.role, o.other) for o in ops] == [("revoke", "reporting", CERTIFICATE_GROUP)]


def test_a_certificate_login_without_tls_is_a_problem_and_the_group_name_is_reserved() -> None:
    problems = r.problems([spec("reporting", certificate=True)], tls_enabled=False)
    assert [p.reason for p in problems] == ["InvalidRole"] and "spec.tls.enabled" in problems[0].message
    assert r.problems([spec("reporting", certificate=True)], tls_enabled=True) == []
    group = RoleSpec.model_construct(name=CERTIFICATE_GROUP, in_roles=[], ensure="present", login=True,
                                     connection_limit=-1, password_secret=None, certificate=False)
    assert [p.reason for p in r.problems([group])] == ["InvalidRole"]


def test_the_server_asks_for_certificates_only_when_a_role_logs_in_with_one() -> None:
    hba = pgconfig.hba(certificates=True)
    lines = hba.splitlines()
    cert_line = lines.index(pgconfig.CERTIFICATE_LINE.strip())
    assert cert_line < next(i for i, line in enumerate(lines) if "scram-sha-256" in line)  # before the passwords
    assert f"+{CERTIFICATE_GROUP}" in lines[cert_line] and lines[cert_line].split()[-1] == "cert"

    def files(**spec: object) -> tuple[str, str]:
        data = desired_config.configmap(SampleDB.model_validate(sampledb(**spec)))["data"]
        return data[pgconfig.HBA_KEY], data[pgconfig.CONFIG_KEY]

    plain_hba, plain_conf = files(roles=[{"name": "reporting"}])
    assert plain_hba == pgconfig.hba() and "ssl_ca_file" not in plain_conf  # nothing changes without one
    cert_hba, cert_conf = files(roles=[{"name": "reporting", "certificate": True}])
    assert cert_hba == hba and "ssl_ca_file = '/etc/sampledb-tls/ca.crt'" in cert_conf
    assert f"{tls.TLS_DIR}/{tls.CA_KEY}" == desired_config.CLIENT_CA_FILE  # where the Secret is mounted
    off_hba, off_conf = files(roles=[{"name": "reporting", "certificate": True}], tls={"enabled": False})
    assert off_hba == pgconfig.hba() and "ssl_ca_file" not in off_conf


def test_the_client_secret_name_is_one_per_database_and_role() -> None:
    assert names.client_secret_name("orders", "read_only") == "orders-client.read-only"
    assert names.client_secret_name("a", "client_b") != names.client_secret_name("a-client", "b")
