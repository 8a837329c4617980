"""The database superuser's credentials, read from the database's superuser Secret in the cache, for the
operator's SQL, and the ready instances to send it to.

Never logged: the password goes to the driver only (pg/client.Target hides it from repr).
"""

from __future__ import annotations

import base64

from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj, condition_true
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.pg.client import Target
from sampledb_operator.reconcilers.context import Context


def decoded(secret: Obj | None, key: str) -> str | None:
    """A Secret's key as text (its `data` is base64); None when the Secret, the key or a valid encoding is missing."""
    raw = ((secret or {}).get("data") or {}).get(key)
    try:
        return base64.b64decode(raw).decode() if raw is not None else None
    except ValueError:
        return None


def credentials(ctx: Context, db: SampleDB) -> tuple[str, str] | None:
    """(user, password) from the database's superuser Secret, or None when the Secret or a key is missing."""
    secret = ctx.cached("Secret", db.metadata.namespace, names.superuser_secret_name(db.metadata.name))
    user, password = decoded(secret, d.SECRET_USERNAME_KEY), decoded(secret, d.SECRET_PASSWORD_KEY)
    return (user, password) if user is not None and password is not None else None


def ready_instances(ctx: Context, db: SampleDB) -> list[Target]:
    """Every ready instance of the database (its pods in the cache), as the operator connects to it; [] without
    credentials."""
    creds = credentials(ctx, db)
    if creds is None:
        return []
    pods = ctx.caches.pods.list(db.metadata.namespace or "", {DATABASE_LABEL: db.metadata.name,
                                                               COMPONENT_LABEL: "database"})
    return [Target(str(ip), names.POSTGRES_PORT, *creds) for pod in pods
            if (ip := (pod.get("status") or {}).get("podIP")) and condition_true(pod, "Ready")]
