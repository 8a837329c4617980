"""Waiting for recovery: poll until the SampleDB is Ready and what the fault broke is back.

Invariants: every poll is a few GETs, each with the API client's timeout; the wait ends at the
deadline (recovered False) and never sooner than all checks hold at once in one poll; an API
error during a poll counts as "not yet" (the API server may be the thing recovering).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sampledb_operator.chaos.faults import POSTGRES_CONTAINER
from sampledb_operator.chaos.inject import Api, Check, NewLeader, PodBack, Recreated
from sampledb_operator.chaos.plan import Target
from sampledb_operator.kube.errors import KubeError, NotFound
from sampledb_operator.model.objects import Obj, condition_true


class Clock(Protocol):
    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


async def holds(apis: Mapping[str, Api], target: Target | None, checks: Sequence[Check]) -> bool:
    """One poll: the database Ready (when there is one) and every check true."""
    try:
        if target is not None:
            db = await apis["SampleDB"].get(target.name, target.namespace)
            if not condition_true(db, "Ready"):
                return False
        for check in checks:
            if not await _holds(apis, check):
                return False
    except KubeError:
        return False
    return True


async def _holds(apis: Mapping[str, Api], check: Check) -> bool:
    if isinstance(check, Recreated):
        obj = await _get(apis, check.kind, check.name, check.namespace)
        return obj is not None and (obj.get("metadata") or {}).get("uid") != check.old_uid
    if isinstance(check, PodBack):
        pod = await _get(apis, "Pod", check.name, check.namespace)
        if pod is None or not condition_true(pod, "Ready"):
            return False
        if (pod.get("metadata") or {}).get("uid") != check.old_uid:
            return True
        if check.restarts_before is None:
            return False
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        return any(s.get("name") == POSTGRES_CONTAINER and int(s.get("restartCount") or 0) > check.restarts_before
                   for s in statuses)
    if isinstance(check, NewLeader):
        lease = await _get(apis, "Lease", check.name, check.namespace)
        holder = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
        return bool(holder) and holder != check.old_holder
    raise AssertionError(f"unknown check {check!r}")  # pragma: no cover


async def wait_recovered(apis: Mapping[str, Api], target: Target | None, checks: Sequence[Check], clock: Clock, *,
                         timeout: float, poll: float = 1.0) -> float | None:  # noqa: ASYNC109 - a deadline on polls
    """Seconds from now until recovery, or None when it did not happen within `timeout`."""
    start = clock.monotonic()
    while True:
        if await holds(apis, target, checks):
            return clock.monotonic() - start
        left = start + timeout - clock.monotonic()
        if left <= 0:
            return None
        await clock.sleep(min(poll, left))


async def _get(apis: Mapping[str, Api], kind: str, name: str, namespace: str) -> Obj | None:
    try:
        return await apis[kind].get(name, namespace)
    except NotFound:
        return None
