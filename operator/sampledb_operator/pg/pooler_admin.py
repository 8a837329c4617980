"""PgBouncer's admin console: PAUSE and RESUME on one pooler pod (decide/replicas/pooler_pause.py says when).

The operator logs in to the pod's PgBouncer (port 5432, the virtual database `pgbouncer`) as the pooler's role,
PgBouncer's admin user, with its password from the pooler's Secret (pg/client.connect: libpq's sslmode prefer, so
over TLS when PgBouncer serves it; the pod's IP is not a name its certificate holds). PAUSE waits until the
transactions under way have finished and PgBouncer has let its server connections go; a client holding a session
(session mode) keeps it, so the wait is bounded by `within` and PgBouncer goes on pausing after it. "already
paused" and "not paused" answers are success: both commands are idempotent. Never logs the password.
"""

from __future__ import annotations

import asyncio

from sampledb_operator.model import names
from sampledb_operator.model.roles import POOLER_ROLE
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.pg import client as pg

log = get_logger(__name__)
DONE_ALREADY = ("already", "not paused", "not suspended")


async def command(host: str, password: str, statement: str, within: float = 3.0) -> bool:
    """Send PAUSE or RESUME to the PgBouncer at `host`: True when it took it (or had already), False otherwise."""
    assert statement in ("PAUSE", "RESUME")
    psycopg = await pg.driver()

    async def go() -> None:
        conn = await pg.connect(psycopg, pg.Target(host, names.POSTGRES_PORT, POOLER_ROLE, password), within,
                                dbname="pgbouncer")
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    try:
        await asyncio.wait_for(go(), within)
        return True
    except TimeoutError:
        log.info("pooler admin command still running", host=host, command=statement)
        return statement == "PAUSE"  # PgBouncer goes on pausing: sessions still held keep their servers until then
    except (psycopg.Error, OSError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if any(word in text.lower() for word in DONE_ALREADY):
            return True
        log.info("pooler admin command failed", host=host, command=statement, error=text[:200])
        return False
