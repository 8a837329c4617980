"""pg/client.py imports psycopg only when the operator first speaks SQL, off the event loop."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_operator_imports_psycopg_only_for_its_first_sql_call_and_that_call_still_answers() -> None:
    script = textwrap.dedent("""
        import asyncio, socket, sys
        import sampledb_operator.app
        from sampledb_operator.pg import client as pg

        print("before", "psycopg" in sys.modules)

        async def main():
            with socket.socket() as s:  # a port nobody listens on: the call fails, as documented, with None
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            target = pg.Target("127.0.0.1", port, "postgres", "not-a-password")
            states = await asyncio.gather(pg.server_state(target, within=5), pg.server_state(target, within=5))
            print("states", states)
            print("driver", (await pg.driver()).AsyncConnection.__name__)

        asyncio.run(main())
        print("after", "psycopg" in sys.modules)
        """)
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    printed = [ln for ln in done.stdout.splitlines() if ln.split(" ")[0] in ("before", "states", "driver", "after")]
    assert printed == ["before False", "states [None, None]", "driver AsyncConnection", "after True"]
