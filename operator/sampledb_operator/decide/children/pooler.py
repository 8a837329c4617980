"""spec.pooler -> the PgBouncer children: its pgbouncer.ini (a ConfigMap), Deployment and Service.

Pure. PgBouncer listens on the Service `<name>-pooler` at port 5432 and sends every database's connections to the
primary (the client Service), over TLS checked against the database's CA (verify-full) when the server serves TLS.
With spec.tls.enabled it serves TLS to clients too, with the server's certificate (which then names the pooler's
Service: decide/children/tls.dns_names), and with spec.tls.required refuses clients without it.
It knows no password but its own role's (POOLER_ROLE, from the Secret `<name>-pooler` that reconcilers/pooler.py
makes, mounted as PgBouncer's auth_file of that one line): a client's role and SCRAM verifier come from
LOOKUP_FUNCTION in the database `postgres` (auth_dbname), which only that role may call. A client then logs in with
its own password, and PgBouncer logs in to the server as that role with the keys of the client's SCRAM exchange.

All its children (and, with two pods or more, a PodDisruptionBudget letting a drain take one pod at a time) are
owned by the SampleDB and carry the component POOLER_COMPONENT; with spec.monitoring each pod runs pgbouncer_exporter
beside PgBouncer (decide/children/exporter.pooler_container): without spec.pooler a pass deletes them
(decide/plan.removals). The pods restart (a rolling update of the Deployment, one pod at a time)
when pgbouncer.ini changes: the template carries its hash.

Invariants: pgbouncer.ini is composed from the spec's closed sets, bounded integers and allow-listed one-word
parameters (model/pooler.py), never from free text; the pods run as the restricted Pod Security Standard asks, with
no service account token.
"""

from __future__ import annotations

import hashlib

from sampledb_operator.decide.children import exporter, tls
from sampledb_operator.decide.children.desired_statefulset import container_resources, container_security, pod_security
from sampledb_operator.decide.labels import COMPONENT_LABEL, POOLER_COMPONENT, db_name, labels, meta, namespace_of
from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition, ConditionType
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.pooler import AUTH_DATABASE, DEFAULT_IMAGE, LOOKUP_FUNCTION, POOLER_ROLE
from sampledb_operator.model.sampledb import SampleDB

INI_KEY = "pgbouncer.ini"
USERLIST_KEY = "userlist.txt"  # in the Secret: `"sampledb_pooler" "<password>"`, PgBouncer's auth_file
PASSWORD_KEY = "password"
CONFIG_DIR = "/etc/pgbouncer"
AUTH_DIR = "/etc/pgbouncer-auth"
CA_DIR = "/etc/pgbouncer-ca"
INI_HASH_ANNOTATION = "sampledb.io/pooler-config"
CERTIFICATE_ANNOTATION = "sampledb.io/pooler-certificate"  # the served certificate's digest (TLS)
CA_KEY = "ca.crt"  # in the database's ConfigMap (decide/children/desired_config.configmap) while it serves TLS


def _name(db: SampleDB, read_only: bool) -> str:
    return names.read_only_pooler_name(db_name(db)) if read_only else names.pooler_name(db_name(db))


def ini(db: SampleDB, *, ca: bool, read_only: bool = False) -> str:
    """pgbouncer.ini; `ca`: the database's CA is published (spec.tls.enabled), so the server is verified;
    `read_only`: the read-only pooler's, whose server is the standbys' Service (its lookups go there too)."""
    assert db.spec.pooler is not None
    pooler = db.spec.pooler
    server = names.replica_service_name(db_name(db)) if read_only else db_name(db)
    host = names.service_host(server, namespace_of(db))
    settings: dict[str, str] = {
        "listen_addr": "*",
        "listen_port": str(names.POSTGRES_PORT),
        "unix_socket_dir": "",
        "auth_type": "scram-sha-256",
        "auth_file": f"{AUTH_DIR}/{USERLIST_KEY}",
        "auth_user": POOLER_ROLE,
        "auth_dbname": AUTH_DATABASE,
        "auth_query": f"SELECT usename, passwd FROM {LOOKUP_FUNCTION}($1)",
        "pool_mode": pooler.mode.value,
        "default_pool_size": str(pooler.default_pool_size),
        "max_client_conn": str(pooler.max_client_connections),
        "ignore_startup_parameters": "extra_float_digits,options",
        # the operator's PAUSE and RESUME around a switchover (decide/replicas/pooler_pause.py)
        "admin_users": POOLER_ROLE,
        "stats_users": POOLER_ROLE,
        "server_login_retry": "1",  # after a switchover, a connection that reached the old server is retried soon
        "server_tls_sslmode": "verify-full" if ca else "disable",
        **({"server_tls_ca_file": f"{CA_DIR}/{CA_KEY}"} if ca else {}),
    }
    # the server's certificate, which names the pooler's Service too (decide/children/tls.dns_names)
    if db.spec.tls.enabled:
        settings.update({"client_tls_sslmode": "require" if db.spec.tls.required else "prefer",
                         "client_tls_cert_file": f"{tls.TLS_DIR}/{tls.CERT_KEY}",
                         "client_tls_key_file": f"{tls.TLS_DIR}/{tls.KEY_KEY}"})
    settings.update(sorted((pooler.parameters or {}).items()))
    lines = ["; Written by sampledb-operator from spec.pooler; edit the SampleDB, not this file.",
             "[databases]", f"* = host={host} port={names.POSTGRES_PORT}", "", "[pgbouncer]"]
    lines += [f"{key} = {value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def configmap(db: SampleDB, *, ca: bool, read_only: bool = False) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(db, _name(db, read_only), POOLER_COMPONENT),
            "data": {INI_KEY: ini(db, ca=ca, read_only=read_only)}}


def selector(db: SampleDB, read_only: bool = False) -> dict[str, str]:
    """The pooler pods' selector (immutable once the Deployment exists); the read-only pooler's pods carry another
    label, so neither Service selects the other's pods."""
    return {"app.kubernetes.io/instance": db_name(db), COMPONENT_LABEL: POOLER_COMPONENT,
            ("sampledb.io/pooler-ro" if read_only else "sampledb.io/pooler"): db_name(db)}


def deployment(db: SampleDB, *, ca: bool, certificate: str = "", read_only: bool = False) -> Obj:
    """The PgBouncer Deployment; `certificate`: the served certificate's digest (a new one rolls the pods: PgBouncer
    reads it at its start). Both poolers log in with the pooler's one Secret."""
    assert db.spec.pooler is not None
    pooler = db.spec.pooler
    name = _name(db, read_only)
    secret = names.pooler_name(db_name(db))
    digest = hashlib.sha256(ini(db, ca=ca, read_only=read_only).encode()).hexdigest()[:16]
    volumes: list[Obj] = [
        {"name": "config", "configMap": {"name": name, "items": [{"key": INI_KEY, "path": INI_KEY}]}},
        {"name": "auth", "secret": {"secretName": secret, "items": [{"key": USERLIST_KEY, "path": USERLIST_KEY}]}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}},
    ]
    mounts: list[Obj] = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                         {"name": "auth", "mountPath": AUTH_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}]  # a read-only root: nothing else is written
    if db.spec.tls.enabled:
        tls_volume, tls_mount = tls.volume(db_name(db), db.spec.tls.secret_name)
        volumes.append(tls_volume)
        mounts.append(tls_mount)
    if ca:
        volumes.append({"name": "ca", "configMap": {"name": names.configmap_name(db_name(db)),
                                                    "items": [{"key": CA_KEY, "path": CA_KEY}]}})
        mounts.append({"name": "ca", "mountPath": CA_DIR, "readOnly": True})
    probe = {"tcpSocket": {"port": names.POSTGRES_PORT}, "periodSeconds": 5, "timeoutSeconds": 3}
    container: Obj = {
        "name": "pgbouncer",
        "image": pooler.image or DEFAULT_IMAGE,
        "command": ["pgbouncer", f"{CONFIG_DIR}/{INI_KEY}"],
        "ports": [{"name": "postgresql", "containerPort": names.POSTGRES_PORT, "protocol": "TCP"}],
        "readinessProbe": probe,
        "livenessProbe": {**probe, "failureThreshold": 6},
        "resources": container_resources(pooler.resources) or {"requests": {"cpu": "50m", "memory": "32Mi"}},
        "volumeMounts": mounts,
        "securityContext": container_security(),
    }
    sidecar = exporter.pooler_container(db, secret, PASSWORD_KEY)  # its metrics, with spec.monitoring
    pod_labels = {**labels(db, POOLER_COMPONENT), **selector(db, read_only)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(db, name, POOLER_COMPONENT),
        "spec": {
            "replicas": pooler.read_only_instances if read_only else pooler.instances,
            "selector": {"matchLabels": selector(db, read_only)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": {
                    INI_HASH_ANNOTATION: digest, **({CERTIFICATE_ANNOTATION: certificate} if certificate else {})}},
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": pod_security(),
                    "terminationGracePeriodSeconds": 30,
                    "containers": [container, *([sidecar] if sidecar else [])],
                    "volumes": volumes,
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": selector(db, read_only)}}],
                },
            },
        },
    }


def service(db: SampleDB, read_only: bool = False) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(db, _name(db, read_only), POOLER_COMPONENT),
            "spec": {"type": "ClusterIP", "selector": selector(db, read_only),
                     "ports": [{"name": "postgresql", "port": names.POSTGRES_PORT,
                                "targetPort": names.POSTGRES_PORT, "protocol": "TCP"}]}}


def disruption_budget(db: SampleDB, read_only: bool = False) -> Obj:
    """With two pooler pods or more: a node drain takes one at a time (none for one pod: it would block drains)."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": meta(db, _name(db, read_only), POOLER_COMPONENT),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(db, read_only)}}}


def read_only_wanted(db: SampleDB) -> bool:
    """spec.pooler.readOnlyInstances asks for a read-only pooler and the database has standbys to send it to."""
    return db.spec.pooler is not None and db.spec.pooler.read_only_instances > 0 and db.spec.replicas > 1


def children(db: SampleDB, *, ca: bool, certificate: str = "") -> list[Obj]:
    """The pooler's children, none without spec.pooler; each pooler's PodDisruptionBudget with two pods or more;
    the read-only pooler's with readOnlyInstances and standbys."""
    if db.spec.pooler is None:
        return []
    served = certificate if db.spec.tls.enabled else ""
    out: list[Obj] = []
    poolers = ((False, db.spec.pooler.instances), (True, db.spec.pooler.read_only_instances))
    for read_only, count in poolers if read_only_wanted(db) else poolers[:1]:
        out += [configmap(db, ca=ca, read_only=read_only),
                deployment(db, ca=ca, certificate=served, read_only=read_only), service(db, read_only)]
        out += [disruption_budget(db, read_only)] if count > 1 else []
    return out


NOT_READY, SETUP_PENDING = "PoolerNotReady", "PoolerSetupPending"  # PoolerReady=False reasons the alert watches


def condition(db: SampleDB, deployment: Obj | None, *, applied: bool, had: bool,
              read_only: Obj | None = None) -> Condition | None:
    """PoolerReady: True once the role and function are made (`applied`) and every pod of the current template is
    ready, the read-only pooler's (`read_only`: its Deployment) too when it is wanted; present once a pooler was
    asked for (`had`: the status has the condition), False/NotRequested after."""
    def cond(ok: bool, reason: str, message: str) -> Condition:
        return Condition(type=ConditionType.POOLER_READY.value, status="True" if ok else "False", reason=reason,
                         message=message, observed_generation=db.metadata.generation)
    if db.spec.pooler is None:
        return cond(False, "NotRequested", "spec.pooler is not set") if had else None
    if not applied:
        return cond(False, SETUP_PENDING, f"the pooler's role {POOLER_ROLE} and lookup function are not made yet"
                    " (they are once the database is ready; Degraded says why when the server refuses)")
    poolers = [(names.pooler_name(db_name(db)), deployment, db.spec.pooler.instances)]
    if read_only_wanted(db):
        poolers.append((names.read_only_pooler_name(db_name(db)), read_only, db.spec.pooler.read_only_instances))
    for name, dep, want in poolers:
        ready = _ready_pods(dep)
        if ready is None or ready < want:
            return cond(False, NOT_READY, f"{ready or 0} of {want} pooler pods ready with the current configuration"
                        f" (Deployment {name})")
    return cond(True, "PoolerReady", ", ".join(f"{want} pooler pods ready at Service {name}"
                                                 for name, _dep, want in poolers))


def _ready_pods(deployment: Obj | None) -> int | None:
    """Pods of the Deployment's current template that are ready; None while it is absent or not observed yet."""
    if deployment is None:
        return None
    status = deployment.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int((deployment.get("metadata") or {}).get("generation") or 0):
        return None
    return min(int(status.get("updatedReplicas") or 0), int(status.get("readyReplicas") or 0))


def userlist(password: str) -> str:
    """PgBouncer's auth_file: the pooler role's line only (quotes doubled, as its format asks)."""
    return f'"{POOLER_ROLE}" "{password.replace(chr(34), chr(34) * 2)}"\n'
