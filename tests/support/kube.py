"""kubectl and waiting helpers for tests that talk to a real cluster.

`kubectl(...)` runs the session's kubectl against the session's cluster; the session fixture in
tests/conftest.py calls `configure()` first. Waiting is always a poll of a condition with a
deadline, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

_KUBECONFIG: str | None = None
_KUBECTL: tuple[str, ...] = ("kubectl",)


def configure(kubeconfig: str, kubectl_argv: tuple[str, ...]) -> None:
    global _KUBECONFIG, _KUBECTL  # noqa: PLW0603 - one session-wide setting
    _KUBECONFIG = kubeconfig
    _KUBECTL = kubectl_argv


def kubeconfig() -> str:
    if _KUBECONFIG is None:
        raise RuntimeError("no cluster configured: use the `kubeconfig` fixture first")
    return _KUBECONFIG


def kubectl_argv() -> tuple[str, ...]:
    return _KUBECTL


def kubectl(
    *args: str, input: str | None = None, check: bool = True, timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run kubectl against the test cluster; raise with stderr on failure when check."""
    full_env = {**os.environ, "KUBECONFIG": kubeconfig(), **(env or {})}
    proc = subprocess.run(
        [*_KUBECTL, *args], input=input, capture_output=True, text=True, timeout=timeout, env=full_env,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def kubectl_json(*args: str) -> Any:
    return json.loads(kubectl(*args, "-o", "json").stdout)


def wait_until(
    predicate: Callable[[], T | None], *, timeout: float = 60.0, interval: float = 0.2, what: str = "condition"
) -> T:
    """Poll predicate until it returns a truthy value; return it, or fail after timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
        time.sleep(interval)  # poll interval of a wait loop, not synchronisation by sleeping


async def async_wait_until(
    predicate: Callable[[], Awaitable[T | None]], *,
    timeout: float = 60.0,  # noqa: ASYNC109 - a polling deadline, not a request timeout
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Async twin of wait_until."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = await predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
        await asyncio.sleep(interval)  # poll interval of a wait loop


def get_or_none(kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    args = ["get", kind, name, "-o", "json", "--ignore-not-found"]
    if namespace:
        args += ["-n", namespace]
    out = kubectl(*args).stdout.strip()
    return json.loads(out) if out else None


# Placement of a test namespace's pods (see docs/development.md, "Which node runs what"). kwok's
# nodes carry the taint kwok.x-k8s.io/node=fake:NoSchedule; the API server's PodNodeSelector and
# PodTolerationRestriction admission plugins add these to every pod of an annotated namespace.
KWOK_PLACEMENT = {
    "scheduler.alpha.kubernetes.io/node-selector": "type=kwok",
    "scheduler.alpha.kubernetes.io/defaultTolerations":
        '[{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]',
}


def create_namespace(name: str, *, kwok: bool = True, labels: dict[str, str] | None = None) -> None:
    """Create a test namespace. kwok=True: its pods go to kwok's fake nodes (they never run: scale
    and orchestration tests); kwok=False: they go where the cluster puts them, on the local cluster
    the real node (real containers, real PostgreSQL)."""
    kubectl("create", "namespace", name)
    all_labels = {"sampledb.io/test": "true", **(labels or {})}
    kubectl("label", "namespace", name, *(f"{k}={v}" for k, v in all_labels.items()), "--overwrite")
    if kwok:
        kubectl("annotate", "namespace", name, *(f"{k}={v}" for k, v in KWOK_PLACEMENT.items()), "--overwrite")


def release_finalizers(namespace: str) -> None:
    """Test cleanup: no operator runs after a test, so drop the operator's finalizers before a test
    namespace goes (otherwise its SampleDBs and SampleDBBackups, and the namespace, would wait for an
    operator forever)."""
    out = kubectl("get", "sampledbs,sampledbbackups", "-n", namespace, "-o", "name", check=False)
    for obj in out.stdout.split():
        kubectl("patch", obj, "-n", namespace, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
