"""spec.tls: which certificate a database serves, when the operator issues it again, and what the server reads.

Pure: no I/O, no clock (the caller passes `now`). The operator's certificate authority for a database is the Secret
<name>-ca (ca.crt, ca.key), made once; the server certificate it signs is the Secret <name>-tls (tls.crt, tls.key,
ca.crt) for the names of the database's Services (`dns_names`). A Secret of spec.tls.secretName replaces both: the
operator only reads it. The server reads the certificate from the Secret mounted at TLS_DIR (instance.sh turns ssl on
when it is there), replication checks the primary's with ca.crt (sslmode=verify-ca), and applications get ca.crt from
the ConfigMap <name>-config.

Invariants: a certificate is issued again (`renewal` says why) when it is missing, unreadable, not for the key it is
stored with, not signed by the database's CA, lacking a name of `dns_names`, within RENEW_BEFORE of its end, or when
the SampleDB's ROTATE_ANNOTATION has a value the certificate was not issued for; the CA is never replaced while it
is valid (clients trust it). Nothing here ever reads or returns a private key's text into a message.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from sampledb_operator.model import names, timestamps
from sampledb_operator.model.conditions import Condition, ConditionType
from sampledb_operator.model.objects import Obj
from sampledb_operator.pki import certs

TLS_DIR = "/etc/sampledb-tls"  # the server certificate's Secret, mounted read-only in the database container
TLS_VOLUME = "tls"
TLS_MODE = 0o640  # root:postgres, group-readable: PostgreSQL accepts a root-owned key so
CERT_KEY, KEY_KEY, CA_KEY, CA_PRIVATE_KEY = "tls.crt", "tls.key", "ca.crt", "ca.key"
RENEW_BEFORE = timedelta(days=30)
EXPIRY_WARNING = timedelta(days=14)  # a certificate of the user's this close to its end is a Problem (Degraded)
ROTATE_ANNOTATION = "sampledb.io/rotate-certificate"  # on the SampleDB: a new value issues the certificate again
ISSUED_FOR_ANNOTATION = "sampledb.io/issued-for-rotation"  # on <name>-tls: the ROTATE_ANNOTATION value it is for
RELOAD_WINDOW = timedelta(minutes=5)  # after a new certificate, how long the instances are checked every RELOAD_CHECK
SERVED, IMAGE_WITHOUT_SSL = "Served", "ImageWithoutSSL"  # the Encrypted condition's answers from the primary
RELOAD_CHECK_SECONDS = 10.0  # (the kubelet refreshes a mounted Secret within about a minute)


def dns_names(db: str, namespace: str, *, pooler: bool = False, read_only_pooler: bool = False) -> list[str]:
    """The names clients and standbys reach the database by: its Services, short and qualified, and its pods'; with
    `pooler` (spec.pooler) the pooler's Service too (PgBouncer serves the same certificate), and with
    `read_only_pooler` the read-only pooler's."""
    out: list[str] = []
    services = (names.client_service_name(db), names.replica_service_name(db),
                *((names.pooler_name(db),) if pooler else ()),
                *((names.read_only_pooler_name(db),) if pooler and read_only_pooler else ()))
    for service in services:
        out += [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
                f"{service}.{namespace}.svc.cluster.local"]
    headless = names.headless_service_name(db)
    out += [f"*.{headless}.{namespace}.svc", f"*.{headless}.{namespace}.svc.cluster.local"]
    return out


def certificate_digest(cert: str) -> str:
    """A short digest of a certificate's PEM ("" for none): the pooler's pod template carries it (PgBouncer reads its
    certificate at its start only), so a new certificate rolls its pods."""
    return hashlib.sha256(cert.encode()).hexdigest()[:16] if cert else ""


def secret_data(secret: Obj | None) -> dict[str, str]:
    """A Secret's data as text (its values decoded); empty for none."""
    out = {}
    for key, value in ((secret or {}).get("data") or {}).items():
        try:
            out[str(key)] = base64.b64decode(str(value)).decode()
        except (ValueError, UnicodeDecodeError):
            continue
    return out


def renewal(server: Mapping[str, str], annotations: Mapping[str, str], ca_cert: str, dns: Sequence[str], *,
            now: datetime, rotate: str) -> str | None:
    """Why the server certificate (`server`: the Secret's data as text, `annotations`: its annotations) must be
    issued again now, or None when it serves as it is."""
    cert, key = server.get(CERT_KEY, ""), server.get(KEY_KEY, "")
    info = certs.read(cert) if cert else None
    if info is None:
        return "there is no server certificate yet"
    if not key or not certs.key_matches(cert, key):
        return "the server certificate's key is not the one stored with it"
    if not certs.signed_by(cert, ca_cert) or server.get(CA_KEY) != ca_cert:
        return "the server certificate is not signed by the database's certificate authority"
    missing = sorted(set(dns) - info.dns_names)
    if missing:
        return f"the server certificate does not name {', '.join(missing)}"
    if info.not_after - now <= RENEW_BEFORE:
        return f"the server certificate expires at {info.not_after:%Y-%m-%dT%H:%M:%SZ}"
    if rotate and annotations.get(ISSUED_FOR_ANNOTATION, "") != rotate:
        return f"{ROTATE_ANNOTATION} asks for a new certificate ({rotate!r})"
    return None


def client_renewal(client: Mapping[str, str], ca_cert: str, role: str, *, now: datetime) -> str | None:
    """Why a role's client certificate (`client`: its Secret's data as text) must be issued again now, or None."""
    cert, key = client.get(CERT_KEY, ""), client.get(KEY_KEY, "")
    info = certs.read(cert) if cert else None
    if info is None:
        return f"role {role} has no client certificate yet"
    if not key or not certs.key_matches(cert, key):
        return f"the client certificate of role {role} is not for the key stored with it"
    if not certs.signed_by(cert, ca_cert) or client.get(CA_KEY) != ca_cert:
        return f"the client certificate of role {role} is not signed by the database's certificate authority"
    if info.subject != f"CN={role}":
        return f"the client certificate is for {info.subject}, not role {role}"
    if info.not_after - now <= RENEW_BEFORE:
        return f"the client certificate of role {role} expires at {info.not_after:%Y-%m-%dT%H:%M:%SZ}"
    return None


def provided_problem(data: Mapping[str, str]) -> str | None:
    """What is wrong with a Secret of spec.tls.secretName (its data as text), or None when it can be served."""
    missing = [k for k in (CERT_KEY, KEY_KEY, CA_KEY) if not data.get(k)]
    if missing:
        return f"it lacks {', '.join(missing)}"
    if certs.read(data[CERT_KEY]) is None:
        return f"its {CERT_KEY} is not a PEM certificate"
    if not certs.key_matches(data[CERT_KEY], data[KEY_KEY]):
        return f"its {KEY_KEY} is not the key of its {CERT_KEY}"
    return None


def expiring(cert: str, now: datetime) -> str | None:
    """Why a certificate the operator does not renew (the user's) needs the user now: expired, or ending within
    EXPIRY_WARNING; None otherwise."""
    info = certs.read(cert)
    if info is None:
        return None
    if info.not_after <= now:
        return f"it expired at {info.not_after:%Y-%m-%dT%H:%M:%SZ}: clients that verify it refuse to connect"
    if info.not_after - now <= EXPIRY_WARNING:
        return f"it expires at {info.not_after:%Y-%m-%dT%H:%M:%SZ} and the operator does not renew it"
    return None


def secret(db_meta: Obj, name: str, data: Mapping[str, str], annotations: Mapping[str, str] | None = None) -> Obj:
    """A TLS Secret of the database (`db_meta`: the metadata decide/labels.meta gives it)."""
    meta = {**db_meta, "name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta,
            "type": "kubernetes.io/tls" if CERT_KEY in data else "Opaque", "stringData": dict(data)}


def served_secret(db: str, secret_name: str | None) -> str:
    """The Secret the server's certificate is mounted from."""
    return secret_name or names.tls_secret_name(db)


def volume(db: str, secret_name: str | None) -> tuple[Obj, Obj]:
    """The pod's volume of the served Secret and the database container's mount of it."""
    return ({"name": TLS_VOLUME, "secret": {"secretName": served_secret(db, secret_name), "defaultMode": TLS_MODE,
                                             "items": [{"key": k, "path": k} for k in (CERT_KEY, KEY_KEY, CA_KEY)]}},
            {"name": TLS_VOLUME, "mountPath": TLS_DIR, "readOnly": True})


SSL_RETRY_FIRST = 5.0  # a primary that did not answer the TLS question is asked again after this, doubling
SSL_RETRY_MAX = 300.0  # up to this
SSL_RETRY_REQUEUES = 3  # the first unanswered questions bring the pass back (5, 10, 20 s); later ones wait for the
# database's next pass (and are asked at most every ssl_retry_delay), so a server that never answers costs no passes


def ssl_check_needed(previous: Condition | None, primary_pod: Obj | None) -> bool:
    """Whether to ask the primary whether it serves TLS (SQL): not answered yet (or TLS was off), or its server
    started after the last answer (a new pod, a restart, a new image). An answer either way (Served,
    ImageWithoutSSL) holds for the server that gave it."""
    if previous is None or previous.reason not in (SERVED, IMAGE_WITHOUT_SSL):
        return True
    started = None
    for cs in ((primary_pod or {}).get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == "postgres":  # the server's container, not the exporter beside it
            started = timestamps.parse(((cs.get("state") or {}).get("running") or {}).get("startedAt")) or started
    answered = previous.last_transition_time
    return started is None or answered is None or started >= answered


def ssl_retry_delay(unanswered: int) -> float:
    """How long to wait before asking again a primary that has not answered `unanswered` times in a row (its
    server not listening yet, or no server at all): SSL_RETRY_FIRST, doubling, at most SSL_RETRY_MAX, so a
    database whose server never answers costs a connection attempt every few minutes, not one per pass."""
    return min(SSL_RETRY_FIRST * (1 << max(0, min(unanswered - 1, 16))), SSL_RETRY_MAX)


def encrypted(enabled: bool, served: bool | None, secret_name: str, generation: int | None) -> Condition | None:
    """The Encrypted condition: TLS off, served, or asked for but not served (`served`: the primary's `ssl`
    setting; None when it was not asked: the condition stays as it was)."""
    def cond(ok: bool, reason: str, message: str) -> Condition:
        return Condition(type=ConditionType.ENCRYPTED.value, status="True" if ok else "False", reason=reason,
                         message=message, observed_generation=generation)
    if not enabled:
        return cond(False, "Disabled", "spec.tls.enabled is false: connections are not encrypted")
    if served is None:
        return None
    if served:
        return cond(True, SERVED, f"the server serves TLS with the certificate of Secret {secret_name}")
    return cond(False, IMAGE_WITHOUT_SSL, (
        "TLS is asked for but the server runs with ssl off: its image's PostgreSQL is built without SSL support;"
        " connections are not encrypted. Use an image built with OpenSSL (the official postgres images are), or"
        " set spec.tls.enabled: false"))
