"""The TLS step: the database's certificate authority, server and client certificates, their reload
(decide/children/tls.py).

With spec.tls on and no secretName: makes the Secret <name>-ca once (a new CA; Event CertificateAuthorityCreated),
keeps the Secret <name>-tls issued from it (created or replaced when decide/children/tls.renewal says why; Event
CertificateIssued with that reason and the new end of validity, never a key), and the client certificates of the
roles that log in with one (Secrets <name>-client.<role>). With secretName: reads that Secret live every
PROVIDED_RECHECK (it is the user's, outside the label-selected cache) and says what is wrong with it (Degraded
TLSSecretInvalid), changing nothing; when its resourceVersion changes (a renewal in place, as cert-manager's) the
instances reload as after the operator's own renewal. Either way it returns the CA to publish in the ConfigMap and,
for a while after a new certificate (RELOAD_WINDOW), has every ready instance reload once the kubelet has refreshed
its mounted files (pg.reload_if_newer: the file newer than the server's last load), so a certificate changes without
a restart and without dropping a connection. The condition Encrypted says whether the primary serves TLS (asked over
SQL once per server start: decide/children/tls.ssl_check_needed; a primary that does not answer is asked again after a
growing delay, UnansweredChecks, not on every pass); a server whose build lacks SSL starts without it
(dataplane/instance.sh) and is Encrypted=False/ImageWithoutSSL. The credentials Secret's uri follows that condition
(`sync_connection_uri`: sslmode=require while the server serves TLS, none while it does not, so a client of the uri
neither goes unencrypted nor fails against a server without SSL). Issuing runs in a worker thread (a key pair and a
signature: milliseconds).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
from dataclasses import dataclass
from datetime import datetime

from sampledb_operator.decide.children import desired_config, tls
from sampledb_operator.decide.children import pooler as dp
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL, meta
from sampledb_operator.decide.sql import roles
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.conditions import Condition, ConditionType, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.pg import client as pg
from sampledb_operator.pki import certs
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.superuser import credentials, ready_instances

REPLACED_AT_ANNOTATION = "sampledb.io/replaced-at"  # on <name>-tls: when the operator last replaced the certificate
# the instances were serving (RFC 3339); a first certificate needs no reload (the server starts with it)
# Both Secrets are unowned, like the database's other long-lived children: the deletion steps remove them
# (reconcilers/children.unowned_children), after the final snapshot.
CLIENT_COMPONENT = "client-certificate"  # the component label of the roles' client certificate Secrets
RECHECK_SECONDS = 15.0  # a missing or unusable Secret of spec.tls.secretName is read again this soon
RENEWAL_RECHECK = 86400.0  # the operator's own certificate is looked at at least daily (renewed 30 days ahead)
PROVIDED_RECHECK = 60.0  # a user's Secret is not watched: read again this often, so a renewal is loaded within minutes


@dataclass(frozen=True, slots=True)
class TLSOutcome:
    """The CA to publish ("" with TLS off or no usable certificate), problems for Degraded, and when to look again."""

    ca_cert: str = ""
    problems: tuple[Problem, ...] = ()
    recheck_after: float | None = None
    condition: Condition | None = None  # Encrypted (None: as it was)
    served: str = ""  # a digest of the served certificate ("" while none): the pooler's pods restart on a new one


async def reconcile_tls(ctx: Context, db: SampleDB, *, db_ready: bool, primary_pod: Obj | None) -> TLSOutcome:
    """One pass of spec.tls (see the module's docstring)."""
    spec = db.spec.tls
    outcome = await _certificates(ctx, db, db_ready=db_ready)
    served = None
    uid = db.metadata.uid or f"{db.metadata.namespace}/{db.metadata.name}"
    target = _target(ctx, db, primary_pod) if spec.enabled and db_ready else None
    if target is not None and tls.ssl_check_needed(
            get_condition(db.status.conditions, ConditionType.ENCRYPTED.value), primary_pod):
        now = ctx.clock.monotonic()
        if not ctx.unanswered_tls.due(uid, now):
            return outcome  # asked a moment ago without an answer: the recheck of that question comes back
        served = await pg.ssl_on(target)
        if served is None:
            tries, again = ctx.unanswered_tls.unanswered(uid, now)
            if tries > tls.SSL_RETRY_REQUEUES:
                return outcome
            return dataclasses.replace(outcome, recheck_after=min(outcome.recheck_after or again, again))
        ctx.unanswered_tls.answered(uid)
    condition = tls.encrypted(spec.enabled, served, tls.served_secret(db.metadata.name, spec.secret_name),
                              db.metadata.generation)
    return dataclasses.replace(outcome, condition=condition)


async def sync_connection_uri(ctx: Context, db: SampleDB, encrypted: Condition | None) -> bool:
    """Keep the credentials Secret's uri in step with `encrypted` (this pass's Encrypted condition, or the status's);
    returns whether it was rewritten (an Event ConnectionURIUpdated says how, never with the password)."""
    if encrypted is None or encrypted.status not in ("True", "False"):
        return False
    name = names.secret_name(db.metadata.name)
    secret = ctx.cached("Secret", db.metadata.namespace, name)
    if secret is None:
        return False
    uri = desired_config.uri_update(tls.secret_data(secret), encrypted.status == "True")
    if uri is None:
        return False
    try:
        encoded = base64.b64encode(uri.encode()).decode()
        await ctx.apis["Secret"].patch(name, {"data": {desired_config.URI_KEY: encoded}},
                                       namespace=db.metadata.namespace or "")
    except NotFound:
        return False
    how = (f"asks for sslmode={desired_config.URI_SSLMODE}: the server serves TLS" if encrypted.status == "True"
           else f"asks for no sslmode: the server does not serve TLS ({encrypted.reason})")
    await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "ConnectionURIUpdated",
                    f"the uri in Secret {name} {how}")
    return True


def _target(ctx: Context, db: SampleDB, primary_pod: Obj | None) -> pg.Target | None:
    """The primary to ask, as the operator (None: no address or no credentials yet)."""
    ip = ((primary_pod or {}).get("status") or {}).get("podIP")
    creds = credentials(ctx, db)
    return pg.Target(str(ip), names.POSTGRES_PORT, *creds) if ip and creds is not None else None


async def _certificates(ctx: Context, db: SampleDB, *, db_ready: bool) -> TLSOutcome:
    spec = db.spec.tls
    if not spec.enabled:
        return TLSOutcome()
    ns, name = db.metadata.namespace or "", db.metadata.name
    now = ctx.clock.now()
    if spec.secret_name:
        return await _provided(ctx, db, spec.secret_name, now, db_ready=db_ready)
    ca = ctx.cached("Secret", ns, names.ca_secret_name(name))
    ca_data = tls.secret_data(ca)
    if ca is None:
        ca_pair = await asyncio.to_thread(certs.issue_ca, f"{name} CA", now, certs.CA_DAYS, ns)
        ca_data = {tls.CA_KEY: ca_pair.cert, tls.CA_PRIVATE_KEY: ca_pair.key}
        try:
            await ctx.apis["Secret"].create(tls.secret(meta(db, names.ca_secret_name(name), "tls", owned=False),
                                                       names.ca_secret_name(name), ca_data))
        except Conflict:
            return TLSOutcome(recheck_after=1.0)  # made by an earlier pass whose watch event has not arrived yet
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "CertificateAuthorityCreated", (
            f"the database's certificate authority is in Secret {names.ca_secret_name(name)}; its certificate is"
            f" published as ca.crt in ConfigMap {names.configmap_name(name)}"))
    elif certs.read(ca_data.get(tls.CA_KEY, "")) is None or not certs.key_matches(
            ca_data.get(tls.CA_KEY, ""), ca_data.get(tls.CA_PRIVATE_KEY, "")):
        return TLSOutcome(problems=(Problem("TLSAuthorityInvalid", (
            f"Secret {names.ca_secret_name(name)} does not hold a certificate authority with its key (ca.crt,"
            " ca.key): delete it to have a new one made (clients must then trust the new ca.crt)"),
            "spec.tls"),), recheck_after=RECHECK_SECONDS)
    ca_cert = ca_data[tls.CA_KEY]
    server_name = names.tls_secret_name(name)
    server = ctx.cached("Secret", ns, server_name)
    annotations = dict(((server or {}).get("metadata") or {}).get("annotations") or {})
    rotate = str((db.metadata.annotations or {}).get(tls.ROTATE_ANNOTATION) or "")
    dns = tls.dns_names(name, ns, pooler=db.spec.pooler is not None, read_only_pooler=dp.read_only_wanted(db))
    why = tls.renewal(tls.secret_data(server), annotations, ca_cert, dns, now=now, rotate=rotate)
    if why is not None:
        await _issue(ctx, db, server, certs.Pair(ca_cert, ca_data[tls.CA_PRIVATE_KEY]), dns, now, rotate, why)
        replaced_at: datetime | None = now if server is not None else None
    else:
        replaced_at = timestamps.parse(annotations.get(REPLACED_AT_ANNOTATION))
    await _client_certificates(ctx, db, certs.Pair(ca_cert, ca_data[tls.CA_PRIVATE_KEY]), now)
    recheck = RENEWAL_RECHECK  # its renewal is never left to the resync of every object (which may be off)
    if replaced_at is not None and now - replaced_at < tls.RELOAD_WINDOW:
        if db_ready:
            await _reload(ctx, db)
        recheck = tls.RELOAD_CHECK_SECONDS
    return TLSOutcome(ca_cert=ca_cert, recheck_after=recheck,
                      served=tls.certificate_digest(tls.secret_data(server).get(tls.CERT_KEY, "")))


async def _issue(ctx: Context, db: SampleDB, server: Obj | None, ca: certs.Pair, dns: list[str],  # noqa: PLR0917
                 now: datetime, rotate: str, why: str) -> None:
    ns, name = db.metadata.namespace or "", db.metadata.name
    server_name = names.tls_secret_name(name)
    pair = await asyncio.to_thread(certs.issue_server, ca, dns[0], dns, now)
    data = {tls.CERT_KEY: pair.cert, tls.KEY_KEY: pair.key, tls.CA_KEY: ca.cert}
    if server is None:
        await ctx.apis["Secret"].create(tls.secret(meta(db, server_name, "tls", owned=False), server_name, data,
                                                   {tls.ISSUED_FOR_ANNOTATION: rotate}))
    else:
        notes = {tls.ISSUED_FOR_ANNOTATION: rotate, REPLACED_AT_ANNOTATION: timestamps.format(now)}
        await ctx.apis["Secret"].patch(server_name, {
            "metadata": {"annotations": notes},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}, namespace=ns)
    until = certs.read(pair.cert)
    await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "CertificateIssued", (
        f"{why}: a new server certificate is in Secret {server_name}"
        + (f", valid until {until.not_after:%Y-%m-%dT%H:%M:%SZ}" if until else "")
        + "; the instances load it without a restart"))


async def _client_certificates(ctx: Context, db: SampleDB, ca: certs.Pair, now: datetime) -> None:
    """The client certificates of the roles that log in by certificate (Secrets <name>-client.<role>, owned by the
    SampleDB): issued, renewed (decide/children/tls.client_renewal), and deleted once their role no longer asks for
    one."""
    ns, name = db.metadata.namespace or "", db.metadata.name
    wanted = {names.client_secret_name(name, role): role for role in roles.certificate_roles(db.spec.roles or [])}
    for secret_name, role in wanted.items():
        secret = ctx.cached("Secret", ns, secret_name)
        why = tls.client_renewal(tls.secret_data(secret), ca.cert, role, now=now)
        if why is None:
            continue
        pair = await asyncio.to_thread(certs.issue_client, ca, role, now)
        data = {tls.CERT_KEY: pair.cert, tls.KEY_KEY: pair.key, tls.CA_KEY: ca.cert}
        try:
            if secret is None:
                await ctx.apis["Secret"].create(tls.secret(meta(db, secret_name, CLIENT_COMPONENT), secret_name, data))
            else:
                await ctx.apis["Secret"].patch(secret_name, {"data": {
                    k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}, namespace=ns)
        except (Conflict, NotFound):
            continue  # made or deleted since the cache was read: the next pass looks again
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "ClientCertificateIssued",
                        f"{why}: a new client certificate for role {role} is in Secret {secret_name}")
    for secret in ctx.caches.secrets.list(ns, {DATABASE_LABEL: name, COMPONENT_LABEL: CLIENT_COMPONENT}):
        if secret["metadata"]["name"] not in wanted:
            with contextlib.suppress(NotFound):
                await ctx.apis["Secret"].delete(secret["metadata"]["name"], ns)


async def _reload(ctx: Context, db: SampleDB) -> None:
    """Every ready instance whose mounted certificate is newer than its configuration reloads."""
    for target in ready_instances(ctx, db):
        await pg.reload_if_newer(target, f"{tls.TLS_DIR}/{tls.CERT_KEY}")


async def _provided(ctx: Context, db: SampleDB, secret_name: str, now: datetime, *, db_ready: bool) -> TLSOutcome:
    ns = db.metadata.namespace or ""
    try:
        secret = await ctx.apis["Secret"].get(secret_name, ns)
    except NotFound:
        why: str | None = "it does not exist"
        data: dict[str, str] = {}
    else:
        data = tls.secret_data(secret)
        why = tls.provided_problem(data)
    if why is not None:
        return TLSOutcome(problems=(Problem("TLSSecretInvalid", (
            f"Secret {secret_name} of spec.tls.secretName cannot be served: {why} (a kubernetes.io/tls Secret with"
            " tls.crt, tls.key and ca.crt, as cert-manager writes it)"), "spec.tls.secretName"),),
            recheck_after=RECHECK_SECONDS)
    recheck = await _reload_provided(ctx, db, str(secret["metadata"].get("resourceVersion") or ""), db_ready=db_ready)
    ending = tls.expiring(data[tls.CERT_KEY], now)
    if ending is not None:
        return TLSOutcome(ca_cert=data[tls.CA_KEY], served=tls.certificate_digest(data[tls.CERT_KEY]),
                          problems=(Problem("TLSCertificateExpiring", (
            f"the certificate in Secret {secret_name} of spec.tls.secretName: {ending}; renew it there (the"
            " instances load a new one without a restart)"), "spec.tls.secretName"),), recheck_after=recheck)
    return TLSOutcome(ca_cert=data[tls.CA_KEY], recheck_after=recheck,
                      served=tls.certificate_digest(data[tls.CERT_KEY]))


async def _reload_provided(ctx: Context, db: SampleDB, version: str, *, db_ready: bool) -> float:
    """A user's Secret (cert-manager renews it in place) changed since this operator last saw it (read every
    PROVIDED_RECHECK): for RELOAD_WINDOW every ready instance reloads once the kubelet has refreshed its copy (as
    after the operator's own renewal). The first sight of it after the operator starts looks once. Returns when to
    look again."""
    key = db.metadata.uid or f"{db.metadata.namespace}/{db.metadata.name}"
    seen = ctx.tls_secret_versions.get(key)
    mono = ctx.clock.monotonic()
    if seen is None or seen[0] != version:
        ctx.tls_secret_versions[key] = (version, mono if seen is not None else float("-inf"))
        if seen is None and db_ready:
            await _reload(ctx, db)  # a change while no operator watched is loaded now
    changed_at = ctx.tls_secret_versions[key][1]
    if mono - changed_at < tls.RELOAD_WINDOW.total_seconds():
        if db_ready:
            await _reload(ctx, db)
        return tls.RELOAD_CHECK_SECONDS
    return PROVIDED_RECHECK
