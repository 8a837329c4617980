"""pki/certs: a database's certificate authority and the server certificates it signs (names, validity,
extensions, the signature and the key), and reading certificates back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from sampledb_operator.pki import certs

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
DNS = ["orders", "orders.shop", "orders.shop.svc", "*.orders-headless.shop.svc"]
CA = certs.issue_ca("orders", NOW, unit="shop")
SERVER = certs.issue_server(CA, "orders", DNS, NOW)


def load(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def attribute(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> str:
    (value,) = [str(a.value) for a in cert.subject.get_attributes_for_oid(oid)]
    return value


def test_a_server_certificate_verifies_against_the_ca_that_issued_it() -> None:
    assert certs.signed_by(SERVER.cert, CA.cert)


def test_a_server_certificate_does_not_verify_against_another_ca() -> None:
    other = certs.issue_ca("inventory", NOW, unit="shop")
    assert not certs.signed_by(SERVER.cert, other.cert)


def test_a_ca_of_the_same_name_but_another_key_does_not_verify_the_certificate() -> None:
    twin = certs.issue_ca("orders", NOW, unit="shop")
    assert load(twin.cert).subject == load(CA.cert).subject
    assert not certs.signed_by(SERVER.cert, twin.cert)


@pytest.mark.parametrize(("cert", "ca"), [("garbage", CA.cert), (SERVER.cert, "garbage"), ("", "")])
def test_signed_by_is_false_for_text_that_is_not_a_certificate(cert: str, ca: str) -> None:
    assert not certs.signed_by(cert, ca)


def test_the_server_certificate_names_exactly_the_dns_names_asked_for() -> None:
    sans = load(SERVER.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == DNS
    info = certs.read(SERVER.cert)
    assert info is not None and info.dns_names == frozenset(DNS)


def test_the_server_certificate_is_valid_from_a_minute_before_now_for_the_days_asked() -> None:
    info = certs.read(certs.issue_server(CA, "orders", DNS, NOW, days=40).cert)
    assert info is not None
    assert info.not_before == NOW - timedelta(minutes=1)
    assert info.not_after == NOW + timedelta(days=40)


def test_the_server_certificate_is_valid_for_server_days_by_default() -> None:
    info = certs.read(SERVER.cert)
    assert info is not None and info.not_after == NOW + timedelta(days=certs.SERVER_DAYS)


def test_the_ca_is_valid_from_a_minute_before_now_for_ca_days() -> None:
    info = certs.read(CA.cert)
    assert info is not None
    assert (info.not_before, info.not_after) == (NOW - timedelta(minutes=1), NOW + timedelta(days=certs.CA_DAYS))


def test_the_server_certificate_is_issued_by_the_ca_subject() -> None:
    ca, server = certs.read(CA.cert), certs.read(SERVER.cert)
    assert ca is not None and server is not None
    assert server.issuer == ca.subject == ca.issuer
    assert server.subject == "CN=orders"
    assert ca.subject == "CN=orders,OU=shop,O=sampledb-operator"


def test_key_matches_its_own_certificate_only() -> None:
    other = certs.issue_server(CA, "orders", DNS, NOW)
    assert certs.key_matches(SERVER.cert, SERVER.key)
    assert certs.key_matches(CA.cert, CA.key)
    assert not certs.key_matches(SERVER.cert, other.key)
    assert not certs.key_matches(SERVER.cert, CA.key)


@pytest.mark.parametrize(("cert", "key"), [(SERVER.cert, "garbage"), ("garbage", SERVER.key), (SERVER.cert, "")])
def test_key_matches_is_false_for_text_that_is_not_a_certificate_or_key(cert: str, key: str) -> None:
    assert not certs.key_matches(cert, key)


def test_keys_are_unencrypted_pkcs8_ecdsa_p256() -> None:
    for pair in (CA, SERVER):
        assert pair.key.startswith("-----BEGIN PRIVATE KEY-----")
        key = serialization.load_pem_private_key(pair.key.encode(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)


@pytest.mark.parametrize("text", ["", "garbage", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                                  SERVER.key])
def test_read_returns_none_for_what_is_not_a_certificate(text: str) -> None:
    assert certs.read(text) is None


def test_read_returns_the_first_certificate_of_a_bundle() -> None:
    info = certs.read(SERVER.cert + CA.cert)
    assert info is not None and info.serial == load(SERVER.cert).serial_number


def test_a_ca_has_no_dns_names() -> None:
    info = certs.read(CA.cert)
    assert info is not None and info.dns_names == frozenset()


def test_every_certificate_gets_its_own_serial_and_key() -> None:
    again = certs.issue_server(CA, "orders", DNS, NOW)
    assert load(again.cert).serial_number != load(SERVER.cert).serial_number
    assert again.key != SERVER.key


def test_a_ca_common_name_and_unit_longer_than_64_characters_are_cut() -> None:
    ca = load(certs.issue_ca("n" * 100, NOW, unit="u" * 100).cert)
    assert attribute(ca, NameOID.COMMON_NAME) == "n" * 64
    assert attribute(ca, NameOID.ORGANIZATIONAL_UNIT_NAME) == "u" * 64


def test_a_server_common_name_longer_than_64_characters_is_cut() -> None:
    server = load(certs.issue_server(CA, "s" * 100, DNS, NOW).cert)
    assert attribute(server, NameOID.COMMON_NAME) == "s" * 64


def test_a_ca_without_a_unit_has_no_organizational_unit() -> None:
    ca = load(certs.issue_ca("orders", NOW).cert)
    assert ca.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME) == []
    assert attribute(ca, NameOID.ORGANIZATION_NAME) == "sampledb-operator"


def test_the_ca_may_sign_only_end_entity_certificates() -> None:
    ext = load(CA.cert).extensions.get_extension_for_class(x509.BasicConstraints)
    assert ext.critical
    assert ext.value.ca is True and ext.value.path_length == 0
    usage = load(CA.cert).extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign


def test_the_server_certificate_is_for_server_authentication_and_no_ca() -> None:
    cert = load(SERVER.cert)
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert not cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign


def test_issuing_from_a_ca_whose_key_is_not_ecdsa_is_refused() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    with pytest.raises(ValueError, match="not an ECDSA key"):
        certs.issue_server(certs.Pair(CA.cert, pem), "orders", DNS, NOW)
