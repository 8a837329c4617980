"""`kubectl sampledb psql`: the commands it builds, and where the password goes (psql's environment only)."""

from __future__ import annotations

import base64
import shlex
import sys
from pathlib import Path

import pytest

from sampledb_operator.plugin.actions import ActionError
from sampledb_operator.plugin.psql import Credentials, credentials_from_secret, describe, plan, run
from sampledb_operator.plugin.session import Target

PASSWORD = "s3cret-Pa55-word"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


SECRET = {"metadata": {"name": "orders-credentials"},
          "data": {"username": b64("app"), "password": b64(PASSWORD), "database": b64("app")}}


def test_credentials_come_from_the_secret_and_the_password_stays_out_of_repr() -> None:
    creds = credentials_from_secret(SECRET)
    assert (creds.username, creds.database, creds.password) == ("app", "app", PASSWORD)
    assert PASSWORD not in repr(creds)


def test_a_secret_without_a_key_is_a_clear_error() -> None:
    with pytest.raises(ActionError, match="no key 'password'"):
        credentials_from_secret({"metadata": {"name": "x"}, "data": {"username": b64("app"), "database": b64("a")}})


def test_the_superusers_secret_has_no_database_and_is_given_one() -> None:
    superuser = {"metadata": {"name": "orders-superuser"}, "data": {"username": b64("postgres"), "password": b64("s")}}
    assert credentials_from_secret(superuser, database="app") == Credentials("postgres", "app", "s")
    with pytest.raises(ActionError, match="no key 'database'"):
        credentials_from_secret(superuser)


def test_the_plan_forwards_the_client_service_and_runs_psql_through_it() -> None:
    p = plan(["kubectl"], Target(kubeconfig="/k", context="c"), "shop", "orders", credentials_from_secret(SECRET),
             extra=["-c", "select 1"])
    assert p.port_forward == ["kubectl", "port-forward", "--namespace", "shop", "--kubeconfig", "/k", "--context",
                              "c", "--address", "127.0.0.1", "service/orders", ":5432"]
    assert p.psql_argv(41234) == ["psql", "--host", "127.0.0.1", "--port", "41234", "--username", "app",
                                  "--dbname", "app", "-c", "select 1"]
    assert p.psql_env({"HOME": "/h"}) == {"HOME": "/h", "PGPASSWORD": PASSWORD}
    fixed = plan(["testcluster", "kubectl"], Target(), "shop", "orders", credentials_from_secret(SECRET),
                 local_port=15432)
    assert fixed.port_forward[:2] == ["testcluster", "kubectl"] and fixed.port_forward[-1] == "15432:5432"


def test_no_argv_and_no_printed_line_holds_the_password() -> None:
    p = plan(["kubectl"], Target(), "shop", "orders", credentials_from_secret(SECRET))
    assert all(PASSWORD not in arg for arg in [*p.port_forward, *p.psql_argv(1)])
    text = describe(p, "orders-credentials")
    assert PASSWORD not in text
    assert "PGPASSWORD=<password from Secret orders-credentials> psql --host 127.0.0.1" in text


def fake(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return str(path)


def test_run_waits_for_the_forward_runs_psql_with_the_password_in_its_environment_and_stops_the_forward(
        tmp_path: Path) -> None:
    kubectl = fake(tmp_path, "kubectl", f"""
import signal, sys, time
def stop(*_):
    open({str(tmp_path / "stopped")!r}, "w").write("yes")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("Forwarding from 127.0.0.1:45678 -> 5432", flush=True)
print("Forwarding from [::1]:45678 -> 5432", flush=True)
time.sleep(60)
""")
    psql = fake(tmp_path, "psql", f"""
import json, os, sys
json.dump({{"argv": sys.argv[1:], "pgpassword": os.environ.get("PGPASSWORD")}},
          open({str(tmp_path / "psql.json")!r}, "w"))
sys.exit(3)
""")
    p = plan([kubectl], Target(), "shop", "orders", Credentials("app", "app", PASSWORD), psql=psql)
    assert run(p, timeout=20) == 3                       # psql's exit code
    import json
    seen = json.loads((tmp_path / "psql.json").read_text())
    assert seen["argv"] == shlex.split("--host 127.0.0.1 --port 45678 --username app --dbname app")
    assert seen["pgpassword"] == PASSWORD
    assert (tmp_path / "stopped").read_text() == "yes"


def test_a_forward_that_fails_is_reported_with_kubectls_error(tmp_path: Path) -> None:
    kubectl = fake(tmp_path, "kubectl", "import sys\nprint('error: services \"orders\" not found', file=sys.stderr)\n"
                                        "sys.exit(1)\n")
    p = plan([kubectl], Target(), "shop", "orders", Credentials("app", "app", PASSWORD), psql="/bin/false")
    with pytest.raises(ActionError, match='port-forward failed: error: services "orders" not found'):
        run(p, timeout=20)
