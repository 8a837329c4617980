"""Issuing and reading certificates (the `cryptography` library): a database's own certificate authority, its
server certificate and its roles' client certificates, signed by it.

No I/O and no clock of its own (the caller passes `now`); issuing draws keys from the system's random source.
Keys are ECDSA P-256 (every supported PostgreSQL and libpq accepts them; one is made in well under a millisecond, so
issuing never holds the event loop). PEM in and out: the Secrets hold PEM text.

Invariants: a server certificate carries exactly the DNS names asked for (a client certificate none, and the role
as its common name), is valid from a minute before `now`
(clocks of other machines) to `now + days`, and is signed by the CA it is issued from; a CA is valid for
CA_DAYS and signs end-entity certificates only (path length 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVER_DAYS = 365
CLIENT_DAYS = 365
BACKDATE = timedelta(minutes=1)
NAME_MAX = 64  # X.509's upper bound on a common name (and on an organizational unit)


@dataclass(frozen=True, slots=True)
class Pair:
    """A certificate and its private key, PEM."""

    cert: str
    key: str


@dataclass(frozen=True, slots=True)
class CertInfo:
    """What the operator reads from a certificate: its validity, names, serial and issuer."""

    not_before: datetime
    not_after: datetime
    dns_names: frozenset[str]
    serial: int
    issuer: str
    subject: str


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def issue_ca(common_name: str, now: datetime, days: int = CA_DAYS, unit: str = "") -> Pair:
    """A new certificate authority named `common_name` (of the organizational unit `unit`: its namespace), each cut
    to NAME_MAX characters."""
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sampledb-operator"),
                      *([x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit[:NAME_MAX])] if unit else []),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name[:NAME_MAX])])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return Pair(_pem(cert), _pem_key(key))


def issue_server(ca: Pair, common_name: str, dns_names: Sequence[str], now: datetime,
                 days: int = SERVER_DAYS) -> Pair:
    """A server certificate for `dns_names` (`common_name` cut to NAME_MAX characters), signed by `ca`."""
    return _issue(ca, common_name, dns_names, ExtendedKeyUsageOID.SERVER_AUTH, now, days)


def issue_client(ca: Pair, role: str, now: datetime, days: int = CLIENT_DAYS) -> Pair:
    """A client certificate for the PostgreSQL role `role` (its common name, which pg_hba's `cert` method matches
    with the role), signed by `ca`."""
    return _issue(ca, role, (), ExtendedKeyUsageOID.CLIENT_AUTH, now, days)


def _issue(ca: Pair, common_name: str, dns_names: Sequence[str], usage: x509.ObjectIdentifier,  # noqa: PLR0917
           now: datetime, days: int) -> Pair:
    ca_cert = x509.load_pem_x509_certificate(ca.cert.encode())
    ca_key = serialization.load_pem_private_key(ca.key.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the certificate authority's key is not an ECDSA key")
    key = _key()
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:NAME_MAX])]))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE).not_valid_after(now + timedelta(days=days)))
    if dns_names:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]),
                                        critical=False)
    cert = (builder
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                         crl_sign=False, content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return Pair(_pem(cert), _pem_key(key))


def read(pem: str) -> CertInfo | None:
    """The first certificate of `pem`, or None when it is not one."""
    try:
        cert = x509.load_pem_x509_certificate(pem.encode())
    except ValueError:
        return None
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = frozenset(sans.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        dns = frozenset()
    return CertInfo(cert.not_valid_before_utc, cert.not_valid_after_utc, dns, cert.serial_number,
                    cert.issuer.rfc4514_string(), cert.subject.rfc4514_string())


def signed_by(cert_pem: str, ca_pem: str) -> bool:
    """Whether the first certificate of `cert_pem` was signed by the CA certificate `ca_pem`."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        ca = x509.load_pem_x509_certificate(ca_pem.encode())
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def key_matches(cert_pem: str, key_pem: str) -> bool:
    """Whether `key_pem` is the private key of the first certificate of `cert_pem`."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError):
        return False
    public = cert.public_key().public_bytes(serialization.Encoding.DER,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
    return public == key.public_key().public_bytes(serialization.Encoding.DER,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
