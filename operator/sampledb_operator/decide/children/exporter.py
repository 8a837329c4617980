"""The exporter containers (spec.monitoring): postgres_exporter beside each instance on port EXPORTER_PORT, and
pgbouncer_exporter beside each pooler pod on port POOLER_EXPORTER_PORT.

Pure: no I/O. It reaches the server only over the pod's socket directory (mounted read-only), as MONITOR_ROLE
(reconcilers/monitoring.py makes the role), to the application's database `app` (server-wide statistics from
there, and that database's tables); it never reads the data volume or the
database's Secret. It has no readiness probe and no memory limit, so that an exporter in trouble (a slow custom
query, a server that refuses it) never takes the instance out of its Service: it answers pg_up 0 instead. It runs
as nobody (65534), not as the server's uid, on a read-only root filesystem.

The pooler's exporter reads PgBouncer's admin console (SHOW POOLS, STATS, ...) over the pod's loopback as
POOLER_ROLE, PgBouncer's stats (and admin) user, with that role's password from the pooler's Secret in PGPASSWORD
(never in its arguments); over TLS when PgBouncer serves it.

Invariants: no container when monitoring is off, so a database with it off keeps its pod template; the arguments
work with the upstream image (its entrypoint is the exporter); the custom-queries ConfigMap is optional in the
pod, so a missing one never keeps an instance from starting (the exporter logs it and serves the rest).
"""

from __future__ import annotations

from sampledb_operator.decide.children import pgconfig
from sampledb_operator.decide.children.desired_config import DEFAULT_DATABASE
from sampledb_operator.model import names
from sampledb_operator.model.monitoring import (
    DEFAULT_EXPORTER_IMAGE,
    DEFAULT_POOLER_EXPORTER_IMAGE,
    EXPORTER_PORT,
    MONITOR_ROLE,
    POOLER_EXPORTER_PORT,
)
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.roles import POOLER_ROLE
from sampledb_operator.model.sampledb import SampleDB

CONTAINER = "exporter"
PORT_NAME = "metrics"
NOBODY = 65534
QUERIES_DIR = "/etc/sampledb-exporter"
QUERIES_FILE = "queries.yaml"
QUERIES_VOLUME = "exporter-queries"
# Beyond postgres_exporter's defaults: transaction-ID wraparound, the oldest transaction, a standby's WAL receiver
# and the server's start time.
COLLECTORS = ("database_wraparound", "long_running_transactions", "stat_wal_receiver", "postmaster")
REQUESTS = (("cpu", "10m"), ("memory", "32Mi"))  # measured: docs/benchmarks.md, "The exporter"


def _security() -> Obj:
    """The restricted Pod Security Standard's container fields, as nobody (not the server's uid)."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True,
            "runAsUser": NOBODY, "runAsGroup": NOBODY}


def data_source() -> str:
    """libpq keywords of the exporter's connection: the pod's socket, as the monitoring role, no password."""
    return (f"host={pgconfig.RUN_DIR} port={names.POSTGRES_PORT} user={MONITOR_ROLE} dbname={DEFAULT_DATABASE}"
            " sslmode=disable application_name=sampledb-exporter connect_timeout=5")


def container(db: SampleDB) -> Obj | None:
    """The exporter's container for an instance's pod; None with monitoring off."""
    spec = db.spec.monitoring
    if not spec.enabled:
        return None
    args = [f"--web.listen-address=:{EXPORTER_PORT}", "--log.level=warn",
            *(f"--collector.{c}" for c in COLLECTORS)]
    mounts: list[Obj] = [{"name": "run", "mountPath": pgconfig.RUN_DIR, "readOnly": True}]
    if spec.custom_queries is not None:
        args.append(f"--extend.query-path={QUERIES_DIR}/{QUERIES_FILE}")
        mounts.append({"name": QUERIES_VOLUME, "mountPath": QUERIES_DIR, "readOnly": True})
    return {
        "name": CONTAINER,
        "image": spec.image or DEFAULT_EXPORTER_IMAGE,
        "args": args,
        "env": [{"name": "DATA_SOURCE_NAME", "value": data_source()}],
        "ports": [{"name": PORT_NAME, "containerPort": EXPORTER_PORT, "protocol": "TCP"}],
        "resources": {"requests": dict(REQUESTS)},
        "securityContext": _security(),
        "volumeMounts": mounts,
    }


def volumes(db: SampleDB) -> list[Obj]:
    """The pod volumes the exporter adds (the custom queries' ConfigMap key, optional)."""
    queries = db.spec.monitoring.custom_queries
    if not db.spec.monitoring.enabled or queries is None:
        return []
    return [{"name": QUERIES_VOLUME, "configMap": {"name": queries.name, "optional": True,
                                                   "items": [{"key": queries.key, "path": QUERIES_FILE}]}}]


def pooler_container(db: SampleDB, secret: str, key: str) -> Obj | None:
    """The pooler exporter's container for a PgBouncer pod; `secret`/`key`: the pooler role's password. None with
    monitoring off."""
    spec = db.spec.monitoring
    if not spec.enabled:
        return None
    ssl = "require" if db.spec.tls.enabled else "disable"  # PgBouncer serves TLS to clients with the server
    url = f"postgres://{POOLER_ROLE}@127.0.0.1:{names.POSTGRES_PORT}/pgbouncer?sslmode={ssl}&connect_timeout=5"
    return {
        "name": CONTAINER,
        "image": spec.pooler_image or DEFAULT_POOLER_EXPORTER_IMAGE,
        "args": [f"--web.listen-address=:{POOLER_EXPORTER_PORT}", "--log.level=warn",
                 f"--pgBouncer.connectionString={url}", "--pgBouncer.pid-file="],
        "env": [{"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}],
        "ports": [{"name": PORT_NAME, "containerPort": POOLER_EXPORTER_PORT, "protocol": "TCP"}],
        "resources": {"requests": dict(REQUESTS)},
        "securityContext": _security(),
    }
