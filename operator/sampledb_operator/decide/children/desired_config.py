"""The database's configuration children: the credentials Secret (the application's), the superuser Secret (the
operator's), the connection ConfigMap (with the server's postgresql.conf and pg_hba.conf) and the namespace's shared
scripts ConfigMap.

Pure: no I/O, no randomness (the generated password is an input). The pods and the Jobs read these objects
by the names and keys defined here (SECRET_*_KEY, SCRIPTS_MOUNT, scripts_configmap_name), so
decide/children/desired_statefulset.py and decide/jobs.py take them from this module.

Invariants:
- None of them is owned by the SampleDB (decide/children/desired.py's docstring says why); the Secrets are created
  once and never overwritten, except the credentials' `uri`, which follows whether the server serves TLS
  (`uri_update`), built from the Secret's own other keys.
- The application's role (DEFAULT_USER) is not a superuser and owns its database; the superuser (SUPERUSER) is in a
  Secret of its own (`superuser_secret`), which the pods, the Jobs and the operator's own connections use. A
  database made before that split keeps the application's role as its superuser: its superuser Secret is a copy of
  the credentials (`superuser_secret(..., application=True)`, marked APPLICATION_SUPERUSER_ANNOTATION), so every
  consumer reads the one Secret name either way.
- The connection ConfigMap carries no secret material.
- The scripts ConfigMap is one per namespace, with no database label and no owner, the same body for every
  database in the namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from sampledb_operator.decide.children import archive_config, pgconfig
from sampledb_operator.decide.children.desired_inputs import Inputs
from sampledb_operator.decide.labels import (
    BUCKET_LABEL,
    COMPONENT_LABEL,
    DATABASE_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SHARED_BUCKET,
    db_name,
    labels,
    meta,
    namespace_of,
)
from sampledb_operator.decide.sql import roles
from sampledb_operator.model import hba, names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

SCRIPTS_MOUNT = "/sampledb/scripts"
DATA_MOUNT = "/var/lib/postgresql/data"  # the data volume's mount point: postgresql.conf's data directory is under it
DEFAULT_DATABASE = "app"
DEFAULT_USER = "app"
SUPERUSER = "postgres"  # the bootstrap superuser of a database made with a superuser Secret of its own
# On the credentials Secret: the database's superuser is in this Secret (absent: the application's role is the
# superuser, the layout of earlier versions).
SUPERUSER_SECRET_ANNOTATION = "sampledb.io/superuser-secret"
# On the superuser Secret: it is a copy of the credentials, because the application's role is the superuser.
APPLICATION_SUPERUSER_ANNOTATION = "sampledb.io/application-is-superuser"
SECRET_USERNAME_KEY = "username"
SECRET_PASSWORD_KEY = "password"  # a key name, not a secret
# The mounted ca.crt (decide/children/tls.TLS_DIR; a literal: this module is the plugin's too, and decide/children/tls
# brings pki and the cryptography library): the CA client certificates are checked with.
CLIENT_CA_FILE = "/etc/sampledb-tls/ca.crt"
URI_KEY = "uri"
# The uri's sslmode while the server serves TLS: encrypted, with nothing but the Secret (no CA file to mount);
# verify-full needs the CA, published as ca.crt in the ConfigMap (docs/user-guide.md "Encrypted connections").
URI_SSLMODE = "require"


def connection_uri(user: str, password: str, host: str, port: str, database: str, *, encrypted: bool) -> str:
    """A libpq connection URI (RFC 3986, user, password and database percent-encoded), asking for TLS
    (sslmode=URI_SSLMODE) when the server serves it."""
    def enc(value: str) -> str:
        return quote(value, safe="")
    query = f"?sslmode={URI_SSLMODE}" if encrypted else ""
    return f"postgresql://{enc(user)}:{enc(password)}@{host}:{port}/{enc(database)}{query}"


def uri_update(data: Mapping[str, str], encrypted: bool | None) -> str | None:
    """The uri the credentials Secret (its decoded `data`) should hold now that the server does (True) or does not
    (False) serve TLS; None when it holds it already, when that is not known (`encrypted` None), or when a key it is
    built from is missing (the Secret is then the user's to mend: nothing is guessed)."""
    if encrypted is None:
        return None
    try:
        want = connection_uri(data[SECRET_USERNAME_KEY], data[SECRET_PASSWORD_KEY], data["host"], data["port"],
                              data["database"], encrypted=encrypted)
    except KeyError:
        return None
    return want if data.get(URI_KEY) != want else None


def secret(db: SampleDB, password: str) -> Obj:
    """The credentials Secret (the application's). Created once with a generated password and never overwritten (but
    for its uri: `uri_update`); its uri asks for TLS when spec.tls is on (the server is then expected to serve it).
    It names the superuser Secret (SUPERUSER_SECRET_ANNOTATION): the application's role is not the superuser."""
    name, ns = db_name(db), namespace_of(db)
    host = names.service_host(name, ns)
    uri = connection_uri(DEFAULT_USER, password, host, str(names.POSTGRES_PORT), DEFAULT_DATABASE,
                         encrypted=db.spec.tls.enabled)
    metadata = meta(db, names.secret_name(name), "credentials", owned=False)
    metadata["annotations"] = {SUPERUSER_SECRET_ANNOTATION: names.superuser_secret_name(name)}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": {
            SECRET_USERNAME_KEY: DEFAULT_USER,
            SECRET_PASSWORD_KEY: password,
            "database": DEFAULT_DATABASE,
            "host": host,
            "port": str(names.POSTGRES_PORT),
            URI_KEY: uri,
        },
    }


def superuser_secret(db: SampleDB, password: str, *, user: str = SUPERUSER, application: bool = False) -> Obj:
    """The superuser Secret: `user` and `password`, for the pods (initdb, replication), the Jobs and the operator.
    `application`: a copy of the credentials of a database whose application role is its superuser (made by an
    earlier version), so that every consumer reads this one name."""
    metadata = meta(db, names.superuser_secret_name(db_name(db)), "superuser", owned=False)
    if application:
        metadata["annotations"] = {APPLICATION_SUPERUSER_ANNOTATION: "true"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": {SECRET_USERNAME_KEY: user, SECRET_PASSWORD_KEY: password},
    }


def separate_superuser(credentials: Obj) -> bool:
    """The credentials Secret (as read) is of a database whose superuser is not the application's role."""
    return bool(((credentials.get("metadata") or {}).get("annotations") or {}).get(SUPERUSER_SECRET_ANNOTATION))


def configmap(db: SampleDB, data_dir: str = "pgdata", ca_cert: str = "") -> Obj:
    """Connection details for applications and for the operator's Jobs (no secret material), and the
    server's postgresql.conf (decide/children/pgconfig.py) for the data directory `data_dir`."""
    name, ns = db_name(db), namespace_of(db)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(db, names.configmap_name(name), "connection", owned=False),
        "data": {
            "host": names.service_host(name, ns),
            "port": str(names.POSTGRES_PORT),
            "database": DEFAULT_DATABASE,
            "user": DEFAULT_USER,
            "secretName": names.secret_name(name),
            "endpoint": names.endpoint(name, ns),
            pgconfig.CONFIG_KEY: pgconfig.render(archive_config.server_parameters(db.spec), f"{DATA_MOUNT}/{data_dir}",
                                                 synchronous=synchronous(db),
                                                 client_ca=CLIENT_CA_FILE if certificates(db) else None),
            pgconfig.HBA_KEY: pgconfig.hba(tls_required=db.spec.tls.enabled and db.spec.tls.required,
                                           certificates=certificates(db), rules=hba_rules(db)),
            # TLS: the certificate authority a client verifies the server with (sslmode=verify-full)
            **({"ca.crt": ca_cert, "sslmode": "verify-full"} if db.spec.tls.enabled and ca_cert else {}),
        },
    }


def certificates(db: SampleDB) -> bool:
    """Some declared role logs in with a client certificate (over TLS: with spec.tls.enabled only)."""
    return db.spec.tls.enabled and bool(roles.certificate_roles(db.spec.roles or []))


def hba_rules(db: SampleDB) -> tuple[str, ...]:
    """The pg_hba.conf lines of spec.pgHba, in order (validate_spec has passed them)."""
    return tuple(hba.line(rule) for rule in db.spec.pg_hba or ())


def synchronous(db: SampleDB) -> bool:
    """Synchronous replication is on: asked for, and there are standbys to wait for."""
    return db.spec.replication.synchronous and db.spec.replicas > 1


SCRIPTS_CONFIGMAP = "sampledb-scripts"  # one per namespace, shared by its databases (scripts_configmap)


def scripts_configmap_name(db: SampleDB) -> str:
    """The scripts ConfigMap a database's pods and Jobs mount: its namespace's shared one."""
    return SCRIPTS_CONFIGMAP


def legacy_scripts_configmap_name(db: SampleDB) -> str:
    """The per-database scripts ConfigMap of operator versions before the shared one (removed with the
    database, or once nothing of it mounts it any more: reconcilers/children.py)."""
    return f"{db_name(db)}-scripts"


def scripts_configmap(inputs: Inputs) -> Obj:
    """The data-plane scripts the pods and Jobs run, mounted at SCRIPTS_MOUNT: ONE ConfigMap per namespace,
    shared by every database in it (the scripts, ~80 KB, are the same for all of them; a copy per database
    cost etcd, every apply, watch event and restart 80 KB per database). It carries no database label and
    no owner: every database's pass keeps it as desired (the same body: a write only on drift), and the
    deletion of the namespace's last database removes it."""
    db = inputs.db
    shared_labels = {**{k: v for k, v in labels(db, "scripts").items()
                        if k not in (DATABASE_LABEL, "app.kubernetes.io/instance")}, BUCKET_LABEL: SHARED_BUCKET}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SCRIPTS_CONFIGMAP, "namespace": namespace_of(db), "labels": shared_labels},
        "data": inputs.scripts,  # the same mapping every pass (its digest is computed once, decide/cache.py)
    }


def is_shared_scripts(obj: Obj) -> bool:
    """A namespace's shared scripts ConfigMap (the operator's: its name, component and manager labels)."""
    meta_ = obj.get("metadata") or {}
    got = meta_.get("labels") or {}
    return (obj.get("kind", "ConfigMap") == "ConfigMap" and meta_.get("name") == SCRIPTS_CONFIGMAP
            and got.get(COMPONENT_LABEL) == "scripts" and got.get(MANAGED_BY_LABEL) == MANAGED_BY)
