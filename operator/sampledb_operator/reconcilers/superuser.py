"""The database superuser's credentials, read from the database's Secret in the cache, for the operator's SQL.

Never logged: the password goes to the driver only (pg/client.Target hides it from repr).
"""

from __future__ import annotations

import base64

from sampledb_operator.decide import desired as d
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.context import Context


def credentials(ctx: Context, db: SampleDB) -> tuple[str, str] | None:
    """(user, password) from the database's Secret, or None when the Secret or a key is missing."""
    secret = ctx.cached("Secret", db.metadata.namespace, names.secret_name(db.metadata.name))
    data = (secret or {}).get("data") or {}
    try:
        return (base64.b64decode(data[d.SECRET_USERNAME_KEY]).decode(),
                base64.b64decode(data[d.SECRET_PASSWORD_KEY]).decode())
    except (KeyError, ValueError):
        return None
