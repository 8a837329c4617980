"""switchover (promote), logs and report as commands: their arguments, what they send and print, how they end."""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import tarfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from tests.unit.plugin.fakes import FakeSession
from tests.unit.plugin.test_plugin_instances import PRIMARY, ha, inst
from tests.unit.plugin.test_plugin_support import LOGS, PASSWORD, SECRET_VALUES, world

from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import ReadTimeout, StreamWentQuiet
from sampledb_operator.plugin import cli, commands, podlog
from sampledb_operator.plugin.actions import ActionError
from sampledb_operator.plugin.session import Session, Target

NOW = datetime(2026, 11, 30, 14, 11, 19, tzinfo=UTC)
TARGET = Target(namespace="shop")


def use(monkeypatch: pytest.MonkeyPatch, session: FakeSession) -> FakeSession:
    monkeypatch.setattr(commands, "open_session", session.opener())
    monkeypatch.setattr(commands, "POLL_SECONDS", 0.0)
    return session


# ---------------------------------------------------------------------------------------------- command line


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    seen: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def recorder(name: str) -> Any:
        async def command(target: Target, *args: Any, **kwargs: Any) -> int:
            seen.append((name, args, kwargs))
            return 0
        return command

    for name in ("switchover", "logs", "support_report"):
        monkeypatch.setattr(commands, name, recorder(name))
    monkeypatch.setattr(cli, "_quiet_logging", lambda verbose: None)
    return seen


def test_each_new_command_gets_its_arguments(calls: list[Any]) -> None:
    assert cli.main(["switchover", "ha", "--to", "ha-i1-0", "--wait", "--timeout", "60", "-n", "shop"]) == 0
    assert cli.main(["promote", "ha", "--dry-run"]) == 0
    assert cli.main(["logs", "ha"]) == 0
    assert cli.main(["logs", "ha", "--instance", "ha-i1-0", "-p", "--tail", "20", "-f"]) == 0
    assert cli.main(["logs", "ha", "--primary", "--previous", "--follow"]) == 0
    assert cli.main(["report", "ha", "-o", "/tmp/x.tar.gz", "--log-lines", "50"]) == 0
    assert cli.main(["report", "ha"]) == 0
    assert calls == [
        ("switchover", ("ha",), {"to": "ha-i1-0", "dry_run": False, "wait": True, "wait_seconds": 60.0}),
        ("switchover", ("ha",), {"to": None, "dry_run": True, "wait": False, "wait_seconds": 300.0}),
        ("logs", ("ha",), {"instance": None, "previous": False, "tail": -1, "follow": False}),
        ("logs", ("ha",), {"instance": "ha-i1-0", "previous": True, "tail": 20, "follow": True}),
        ("logs", ("ha",), {"instance": None, "previous": True, "tail": -1, "follow": True}),
        ("support_report", ("ha",), {"output": "/tmp/x.tar.gz", "log_lines": 50}),
        ("support_report", ("ha",), {"output": None, "log_lines": 500}),
    ]


@pytest.mark.parametrize("argv", [
    ["logs", "ha", "--instance", "ha-0", "--primary"],
    ["logs", "ha", "--tail", "-2"],
    ["logs", "ha", "--tail", "many"],
    ["report", "ha", "--log-lines", "0"],
    ["switchover"],
    ["logs", "ha", "--", "-x"],
])
def test_usage_errors_exit_2(calls: list[Any], argv: list[str]) -> None:
    assert cli.main(argv) == 2
    assert not calls


def test_ctrl_c_ends_a_followed_log_quietly_and_any_other_command_with_exit_1(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    async def interrupted(target: Target, *args: Any, **kwargs: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "logs", interrupted)
    monkeypatch.setattr(commands, "switchover", interrupted)
    monkeypatch.setattr(cli, "_quiet_logging", lambda verbose: None)
    assert cli.main(["logs", "ha", "-f"]) == 0
    assert capsys.readouterr().err == ""
    assert cli.main(["logs", "ha"]) == 1
    assert cli.main(["switchover", "ha", "--wait"]) == 1
    assert capsys.readouterr().err == "interrupted\ninterrupted\n"


def test_a_refusal_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    use(monkeypatch, FakeSession([ha(PRIMARY, replicas=1)]))
    monkeypatch.setattr(cli, "_quiet_logging", lambda verbose: None)
    assert cli.main(["switchover", "ha", "-n", "shop"]) == 1
    assert capsys.readouterr().err == ("Error: SampleDB ha has one instance (spec.replicas 1): there is no standby to"
                                       ' switch over to; add one first (spec.replicas: 2, see "Replicas and'
                                       ' failover")\n')


# ---------------------------------------------------------------------------------------------- switchover


async def test_switchover_dry_run_prints_the_patch_and_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    session = use(monkeypatch, FakeSession([ha(PRIMARY, inst("ha-i1-0", lag=70), inst("ha-i2-0", lag=3))]))
    out, err = io.StringIO(), io.StringIO()
    assert await commands.switchover(TARGET, "ha", dry_run=True, out=out, err=err) == 0
    assert json.loads(out.getvalue()) == {"metadata": {"annotations": {"sampledb.io/switchover": "ha-i2-0"}}}
    assert err.getvalue() == "ha-0 -> ha-i2-0 (the ready standby with the least lag, 3B)\n"
    assert not [c for c in session.calls if c[0] == "patch"]


async def test_switchover_annotates_on_the_version_it_chose_on_and_chooses_again_after_a_conflict(
        monkeypatch: pytest.MonkeyPatch) -> None:
    session = use(monkeypatch, FakeSession([ha(PRIMARY, inst("ha-i1-0", lag=70), inst("ha-i2-0", lag=3))]))
    moved = []

    def status_write(s: FakeSession) -> None:   # the operator writes the status once, between read and patch
        if not moved:
            moved.append(True)
            s.bump(s.objects[0])

    session.on_patch = status_write
    out = io.StringIO()
    assert await commands.switchover(TARGET, "ha", to="ha-i1-0", out=out) == 0
    patches = [c[2] for c in session.calls if c[0] == "patch"]
    assert len(patches) == 2 and patches[0]["metadata"]["resourceVersion"] != patches[1]["metadata"]["resourceVersion"]
    assert session.objects[0]["metadata"]["annotations"] == {"sampledb.io/switchover": "ha-i1-0"}
    assert out.getvalue() == ("sampledb.sampledb.io/ha annotated sampledb.io/switchover=ha-i1-0: ha-0 -> ha-i1-0"
                              " (named with --to)\nFollow it with: kubectl sampledb status ha -n shop\n")


class Operator(FakeSession):
    """A FakeSession whose SampleDB goes through `steps` (status changes), one per read after the patch."""

    def __init__(self, objects: list[dict[str, Any]], steps: list[dict[str, Any]]) -> None:
        super().__init__(objects)
        self.steps = steps
        self.patched = False

    async def merge_patch(self, resource: Any, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patched = True
        return await super().merge_patch(resource, name, patch)

    async def get(self, resource: Any, name: str) -> dict[str, Any]:
        if self.patched and self.steps:
            self.objects[0]["status"].update(self.steps.pop(0))
        return await super().get(resource, name)


async def test_switchover_wait_shows_the_progress_until_the_target_is_primary(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pending = {"type": "Degraded", "status": "True", "reason": "SwitchoverPending",
               "message": "sampledb.io/switchover=ha-i1-0: that instance is not a ready standby yet"}
    use(monkeypatch, Operator([ha(PRIMARY, inst("ha-i1-0"))], [
        {"conditions": [pending]}, {"conditions": [pending]}, {"conditions": [], "targetPrimary": "ha-i1-0"},
        {"primary": "ha-i1-0", "targetPrimary": None}]))
    out = io.StringIO()
    assert await commands.switchover(TARGET, "ha", wait=True, wait_seconds=30, out=out) == 0
    assert out.getvalue().splitlines()[1:] == [
        "sampledb.sampledb.io/ha primary ha-0, SwitchoverPending: sampledb.io/switchover=ha-i1-0: that instance is"
        " not a ready standby yet",
        "sampledb.sampledb.io/ha primary ha-0, promoting ha-i1-0",
        "sampledb.sampledb.io/ha primary ha-i1-0",
        "sampledb.sampledb.io/ha switched over: ha-i1-0 is the primary"]


async def test_switchover_wait_gives_up_after_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, FakeSession([ha(PRIMARY, inst("ha-i1-0"))]))
    out = io.StringIO()
    assert await commands.switchover(TARGET, "ha", wait=True, wait_seconds=0, out=out) == 1
    assert out.getvalue().endswith("ha-i1-0 is not the primary after 0s; the switchover goes on without waiting\n")


# ---------------------------------------------------------------------------------------------- logs


async def test_logs_read_the_primarys_postgres_container_with_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    session = use(monkeypatch, FakeSession([ha(inst("ha-0"), inst("ha-i1-0", role="primary"), primary="ha-i1-0")],
                                           logs={"ha-i1-0": "LOG:  ready\n", "ha-0:previous": "FATAL: x\n"}))
    out = io.StringIO()
    assert await commands.logs(TARGET, "ha", tail=5, out=out) == 0
    assert out.getvalue() == "LOG:  ready\n"
    assert await commands.logs(TARGET, "ha", instance="ha-0", previous=True, out=out) == 0
    assert out.getvalue().endswith("FATAL: x\n")
    assert session.client.requests == [
        ("/api/v1/namespaces/shop/pods/ha-i1-0/log", {"container": "postgres", "tailLines": 5}, podlog.READ_TIMEOUT),
        ("/api/v1/namespaces/shop/pods/ha-0/log", {"container": "postgres", "previous": True}, podlog.READ_TIMEOUT)]
    with pytest.raises(ActionError, match="nope-0 is not an instance of ha"):
        await commands.logs(TARGET, "ha", instance="nope-0", out=out)


@pytest.fixture
async def log_server() -> AsyncIterator[tuple[KubeClient, list[dict[str, str]]]]:
    """A server whose pods/log writes a line, says nothing for 1.5 s, writes two more and ends (what a quiet
    PostgreSQL does between statements); the queries it got."""
    seen: list[dict[str, str]] = []

    async def log(request: web.Request) -> web.StreamResponse:
        seen.append(dict(request.query))
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write(b"LOG:  database system is ready\n")
        await asyncio.sleep(1.5)
        await response.write(b"LOG:  checkpoint starting\nLOG:  checkpoint complete\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/shop/pods/{pod}/log", log)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    client = KubeClient(f"http://127.0.0.1:{server.port}")
    yield client, seen
    await client.close()
    await server.close()


async def test_a_followed_log_streams_without_a_read_timeout(
        log_server: tuple[KubeClient, list[dict[str, str]]]) -> None:
    client, seen = log_server
    out = io.StringIO()
    await podlog.follow_log(Session(client, "shop"), "ha-0", out, tail=10)
    assert out.getvalue() == ("LOG:  database system is ready\nLOG:  checkpoint starting\n"
                              "LOG:  checkpoint complete\n")
    assert seen == [{"container": "postgres", "tailLines": "10", "follow": "true"}]
    with pytest.raises(ReadTimeout) as caught:   # the same stream with a read timeout would have been cut
        async with client.stream("/api/v1/namespaces/shop/pods/ha-0/log", read_timeout=0.5) as lines:
            async for _ in lines:
                pass
    assert isinstance(caught.value, StreamWentQuiet)


async def test_a_followed_log_stops_when_cancelled(log_server: tuple[KubeClient, list[dict[str, str]]]) -> None:
    client, _ = log_server
    wrote = asyncio.Event()

    class Out(io.StringIO):
        def write(self, text: str) -> int:
            wrote.set()
            return super().write(text)

    out = Out()
    task = asyncio.create_task(podlog.follow_log(Session(client, "shop"), "ha-0", out))
    await asyncio.wait_for(wrote.wait(), timeout=10)
    task.cancel()   # what Ctrl-C does to the command's task
    with pytest.raises(asyncio.CancelledError):
        await task
    assert out.getvalue() == "LOG:  database system is ready\n"


# ---------------------------------------------------------------------------------------------- report


async def test_report_writes_a_private_archive_and_prints_what_is_in_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use(monkeypatch, FakeSession(world(), logs=LOGS))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert await commands.support_report(TARGET, "orders", out=out, now=lambda: NOW) == 0
    path = tmp_path / "sampledb-report-shop-orders-20261130T141119Z.tar.gz"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("wrote sampledb-report-shop-orders-20261130T141119Z.tar.gz (")
    assert lines[0].endswith(" 14 files in sampledb-report-shop-orders-20261130T141119Z/)")
    assert lines[1].split()[0] == "README.txt"
    assert lines[-1].startswith("Secrets are in it by name and key names only")
    with tarfile.open(path, "r:gz") as tar:
        text = "".join(tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile())  # type: ignore[union-attr]
    assert all(value not in text for value in SECRET_VALUES)
    assert PASSWORD not in out.getvalue()

    elsewhere = tmp_path / "x" / "r.tar.gz"
    with pytest.raises(ActionError, match=r"cannot write .*r\.tar\.gz: No such file or directory"):
        await commands.support_report(TARGET, "orders", output=str(elsewhere), out=out, now=lambda: NOW)
