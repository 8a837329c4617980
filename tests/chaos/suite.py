"""The chaos suite (issue #14): many SampleDBs, hundreds of faults, then the end-state proof.

A run is a seeded plan (`make_plan`: the same seed and sizes give the same events, kinds, targets
and times) executed against one or two Worlds (tests/chaos/world.py): the chaos command's faults
(through its own Injector: sampledb_operator.chaos.inject), operator processes SIGKILLed at random
points and restarted, the leader killed, kube-apiserver restarted (own cluster only), SampleDBs
deleted with each deletionPolicy, manual backups for the Job faults to hit; all the while the
fault proxy cuts watches and answers 409 and 429. Then the faults stop, everything settles, and
`World.check` lists what does not hold. Events are paced by the plan's clock; the outcomes of
faults that race the operator depend on timing, which the report records.
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.chaos.world import World

from sampledb_operator.chaos.faults import Fault
from sampledb_operator.chaos.inject import Cleanup, Injection
from sampledb_operator.chaos.plan import Target
from sampledb_operator.chaos.report import INJECTED, SKIPPED, UNSUPPORTED
from sampledb_operator.kube.errors import KubeError, KubeTransportError, ServerError

POLICIES = ("Snapshot", "Retain", "Delete")
KWOK_FAULTS = (Fault.DELETE_POD, Fault.DELETE_SERVICE, Fault.DELETE_CONFIGMAP, Fault.DELETE_STATEFULSET,
               Fault.DELETE_JOB, Fault.FAIL_BACKUP_JOB)
# A real database gets each of these once (kill-postgres twice): kubelet's restart back-off grows with
# every crash (10 s, 20 s, 40 s ...), so more would measure kubelet, not the operator.
REAL_FAULTS = (Fault.KILL_POSTGRES, Fault.KILL_POSTGRES, Fault.FILL_VOLUME, Fault.DELETE_POD, Fault.DELETE_SERVICE,
               Fault.DELETE_CONFIGMAP, Fault.DELETE_STATEFULSET, Fault.DELETE_JOB, Fault.FAIL_BACKUP_JOB)
JOB_FAULTS = (Fault.DELETE_JOB, Fault.FAIL_BACKUP_JOB)
# Faults that exec into the database pod: one planned right after a delete-pod, a delete-statefulset or a
# kill-postgres finds no pod, or a container kubelet has not restarted yet (its back-off grows to 40 s).
# They wait for one (polling, up to EXEC_PATIENCE s), as a user would, instead of being lost as skipped.
EXEC_FAULTS = (Fault.KILL_POSTGRES, Fault.FILL_VOLUME)
EXEC_PATIENCE = 120.0


@dataclass(frozen=True)
class Sizes:
    kwok_dbs: int = 56
    real_dbs: int = 3
    faults: int = 520  # chaos-command faults, kill-leader included
    seconds: float = 420.0  # the fault phase
    operator_kills: int = 12
    apiserver_restarts: int = 3
    deletions: int = 12  # spread evenly over the three policies
    namespaces: int = 4
    settle_timeout: float = 300.0


@dataclass(frozen=True)
class Event:
    at: float
    kind: str  # a Fault value, or operator-kill, apiserver-restart, delete
    world: str
    target: Target | None = None
    arg: float = 0.0  # operator-kill: which process (fraction); restart delay for kills


@dataclass
class Result:
    seed: int
    sizes: dict[str, Any]
    events: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    findings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    proxy: dict[str, dict[str, int]] = field(default_factory=dict)
    rss: dict[str, Any] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures and not self.problems()

    def problems(self) -> list[str]:
        """Every end-state finding, as "world/check: finding"."""
        out = []
        for world, findings in self.findings.items():
            items = findings.items() if isinstance(findings, dict) else [("", findings)]
            out += [f"{world}/{check}: {f}" for check, found in items for f in found]
        return out


def layout(prefix: str, sizes: Sizes, kwok_world: str, real_world: str) -> list[tuple[str, Target, bool, str]]:
    """(world, target, real, policy) of every SampleDB; kwok ones cycle through the policies."""
    dbs = []
    for i in range(sizes.kwok_dbs):
        ns = f"{prefix}-k{i % sizes.namespaces}"
        dbs.append((kwok_world, Target(ns, f"db-{i:03d}"), False, POLICIES[i % 3]))
    for i in range(sizes.real_dbs):
        dbs.append((real_world, Target(f"{prefix}-real", f"real-{i}"), True, "Delete"))
    return dbs


def make_plan(seed: int, sizes: Sizes, dbs: list[tuple[str, Target, bool, str]], *,
              restart_world: str | None, operator_worlds: list[str]) -> list[Event]:
    """The run's events, sorted by time; a function of its arguments only."""
    rng = random.Random(seed)
    kwok = sorted((w, t, p) for w, t, real, p in dbs if not real)
    real = sorted((w, t) for w, t, r, _ in dbs if r)
    span = sizes.seconds
    events: list[Event] = []
    by_policy = {p: [(w, t) for w, t, pol in kwok if pol == p] for p in POLICIES}
    doomed: set[Target] = set()
    for i in range(sizes.deletions):
        w, t = rng.choice([x for x in by_policy[POLICIES[i % 3]] if x[1] not in doomed])
        doomed.add(t)
        events.append(Event(rng.uniform(0.1, 0.8) * span, "delete", w, t))
    for w, t in real:
        for fault in REAL_FAULTS:
            events.append(Event(rng.uniform(0.05, 0.7) * span, fault.value, w, t))
    leader_kills = max(1, sizes.faults // 60)
    for _ in range(leader_kills):
        events.append(Event(rng.uniform(0, 0.9) * span, Fault.KILL_LEADER.value, rng.choice(operator_worlds),
                            arg=rng.uniform(0.5, 8)))
    for _ in range(max(0, sizes.faults - len(real) * len(REAL_FAULTS) - leader_kills)):
        fault = rng.choice(KWOK_FAULTS)
        w, t, _p = rng.choice(kwok)
        events.append(Event(rng.uniform(0, 1) * span, fault.value, w, t))
    for _ in range(sizes.operator_kills):
        events.append(Event(rng.uniform(0, 0.9) * span, "operator-kill", rng.choice(operator_worlds),
                            arg=rng.uniform(0.5, 8) + 100 * rng.randrange(2)))
    if restart_world is not None:
        for i in range(sizes.apiserver_restarts):
            events.append(Event((i + 0.5) / sizes.apiserver_restarts * 0.9 * span, "apiserver-restart", restart_world))
    return sorted(events, key=lambda e: (e.at, e.kind, str(e.target)))


class Runner:
    def __init__(self, seed: int, sizes: Sizes, worlds: dict[str, World], events: list[Event]) -> None:
        self.seed, self.sizes, self.worlds, self.events = seed, sizes, worlds, events
        self.result = Result(seed, asdict(sizes))
        self.cleanups: list[tuple[World, Cleanup]] = []
        self.background: set[asyncio.Task[None]] = set()
        self.log: list[str] = []
        self.slots = asyncio.Semaphore(8)  # events in flight at once: the plan's pace holds under a slow API

    def note(self, text: str) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} {text}")
        print(f"chaos: {text}", flush=True)

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def run(self) -> Result:
        start = time.monotonic()
        stop = asyncio.Event()
        samplers = [asyncio.ensure_future(s) for w in self.worlds.values()
                    for s in (w.sample_jobs(stop), w.sample_rss(stop))]
        for w in self.worlds.values():
            w.proxy.active = True
        t0 = time.monotonic()
        try:
            for event in self.events:
                delay = t0 + event.at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)  # pacing: the plan's clock, not a wait for the cluster
                else:
                    self.result.timings["max_lag_s"] = max(self.result.timings.get("max_lag_s", 0), round(-delay, 1))
                await self.slots.acquire()
                self.spawn(self.execute(event))
            self.result.timings["fault_phase_s"] = round(time.monotonic() - t0, 1)
            for w in self.worlds.values():
                w.proxy.active = False
            if self.background:
                await asyncio.wait(self.background, timeout=300)
            for world, cleanup in dict.fromkeys(self.cleanups):
                assert world.injector is not None
                self.note(await world.injector.remove_fill(cleanup))
            settle_start = time.monotonic()
            await self.settle()
            self.result.timings["settle_s"] = round(time.monotonic() - settle_start, 1)
        finally:
            stop.set()
            await asyncio.gather(*samplers, return_exceptions=True)
        for name, w in self.worlds.items():
            try:
                self.result.findings[name] = await w.check()
            except KubeError as exc:  # the cluster itself went away (e.g. torn down by someone else)
                self.result.failures.append(f"{name}: end-state checks impossible: {exc}")
            self.result.proxy[name] = w.proxy.summary()
            self.result.rss[name] = rss_summary(w.rss)
            self.result.timings[f"job_samples_{name}"] = w.job_samples
        self.result.findings["rss"] = [f"{op}: {s}" for w in self.result.rss.values() for op, s in w.items()
                                       if not s["stable"]]
        self.result.timings["total_s"] = round(time.monotonic() - start, 1)
        return self.result

    async def execute(self, e: Event) -> None:
        try:
            await self._execute(e)
        finally:
            self.slots.release()

    async def _execute(self, e: Event) -> None:
        world = self.worlds[e.world]
        self.result.events[e.kind] += 1
        try:
            if e.kind == "delete":
                assert e.target is not None
                db = world.dbs[e.target]
                await self.delete(world, e.target)
                db.deleted_at = time.monotonic()
                self.result.outcomes[f"delete/{db.policy}"] += 1
            elif e.kind == "operator-kill":
                index = int(e.arg // 100) % world.n_operators
                await self.kill_and_restart(world, index, delay=e.arg % 100)
            elif e.kind == Fault.KILL_LEADER.value:
                leader = await world.leader_index()
                if leader is None:
                    self.result.outcomes["kill-leader/skipped"] += 1
                    return
                await self.kill_and_restart(world, leader, delay=e.arg)
                self.result.outcomes["kill-leader/injected"] += 1
            elif e.kind == "apiserver-restart":
                self.note("restarting kube-apiserver")
                self.spawn(self.restart_apiserver(world))
            else:
                await self.fault(world, Fault(e.kind), e.target)  # type: ignore[arg-type]
        except (KubeError, AssertionError, RuntimeError) as exc:
            self.result.outcomes[f"{e.kind}/error"] += 1
            self.note(f"{e.kind} {e.target}: {exc}")

    async def delete(self, world: World, target: Target) -> None:
        """Delete a SampleDB; an API server that does not answer or answers 5xx (restarting) is asked again
        for up to 60 s."""
        deadline = time.monotonic() + 60
        while True:
            try:
                await world.apis["SampleDB"].delete(target.name, target.namespace)
                return
            except (KubeTransportError, ServerError):
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(1)  # poll interval while the API server is away

    async def fault(self, world: World, fault: Fault, target: Target) -> None:
        if fault in JOB_FAULTS and world.dbs[target].deleted_at is None:
            # a manual backup first, so that there is a running Job to delete or fail
            body = {"metadata": {"generateName": f"{target.name}-chaos-", "namespace": target.namespace},
                    "spec": {"database": target.name}}
            with contextlib.suppress(KubeError):
                await world.apis["SampleDBBackup"].create(body)
                self.result.outcomes["manual-backup"] += 1
        assert world.injector is not None
        injector = world.injector

        async def until(done: Callable[[Injection], bool], patience: float, every: float) -> Injection:
            """Inject, and again every `every` s (polling the cluster, not a sleep) until `done` or `patience` s."""
            deadline = time.monotonic() + patience
            injection = await injector.inject(fault, target)
            while not done(injection) and time.monotonic() < deadline:
                await asyncio.sleep(every)
                injection = await injector.inject(fault, target)
            return injection

        if fault in JOB_FAULTS:  # give the Job a moment to exist
            injection = await until(lambda i: i.outcome == INJECTED, 5, 0.5)
        elif fault in EXEC_FAULTS and injector.executor:  # no pod, or its container down: wait for one
            began = time.monotonic()
            injection = await until(lambda i: i.outcome not in (SKIPPED, UNSUPPORTED), EXEC_PATIENCE, 2)
            if time.monotonic() - began > 1:
                self.note(f"{fault.value} {target}: {injection.outcome} after waiting {time.monotonic() - began:.0f} s "
                          f"for a pod to exec in")
        else:
            injection = await injector.inject(fault, target)
        if injection.cleanup is not None:
            self.cleanups.append((world, injection.cleanup))
        self.result.outcomes[f"{fault.value}/{injection.outcome}"] += 1

    async def kill_and_restart(self, world: World, index: int, *, delay: float) -> None:
        if not world.operators[index].running:
            self.result.outcomes["operator-kill/already-down"] += 1
            return
        world.kill(index)
        self.result.outcomes["operator-kill/sigkill"] += 1

        async def later() -> None:
            await asyncio.sleep(delay)  # pacing: how long the process stays dead (drawn by the plan)
            try:
                await world.restart(index)
            except AssertionError as exc:
                proc = world.operators[index].proc
                if proc is not None and proc.returncode == -9:
                    # SIGKILLed by another event while it was starting: that event restarts it
                    self.result.outcomes["operator-kill/while-starting"] += 1
                    return
                self.result.failures.append(f"{world.name} operator {index} did not restart: {exc}")

        self.spawn(later())

    async def restart_apiserver(self, world: World) -> None:
        t = time.monotonic()
        try:
            await world.restart_apiserver()
            self.result.outcomes["apiserver-restart/done"] += 1
            self.result.timings["apiserver_restart_max_s"] = max(self.result.timings.get("apiserver_restart_max_s", 0),
                                                                 round(time.monotonic() - t, 1))
        except RuntimeError as exc:
            self.result.failures.append(str(exc))

    async def settle(self) -> None:
        for w in self.worlds.values():
            for i, op in enumerate(w.operators):
                if not op.running:
                    await w.restart(i)
        deadline = time.monotonic() + self.sizes.settle_timeout
        while True:
            bad: list[str] = []
            for w in self.worlds.values():
                try:
                    bad += await w.live_not_ready()
                except KubeError as exc:
                    bad.append(f"{w.name}: {exc}")
            if not bad:
                return
            if time.monotonic() > deadline:
                self.result.failures.append(f"not settled after {self.sizes.settle_timeout}s: {bad[:20]}")
                for w in self.worlds.values():
                    with contextlib.suppress(KubeError):
                        if pods := await w.pods_in_trouble():
                            self.result.failures.append(f"{w.name}: {len(pods)} pods not running: {pods[:20]}")
                return
            await asyncio.sleep(2)  # poll interval of a wait loop


def rss_summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per operator: first/peak/last VmRSS (MiB) of its longest-lived instance, from 30 s after its
    start (the caches filled); stable when last <= 1.5 x first + 20 MiB and peak < 600 MiB."""
    out: dict[str, Any] = {}
    by_instance: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for s in samples:
        by_instance.setdefault((s["op"], s["instance"]), []).append(s)
    for op in sorted({k[0] for k in by_instance}):
        mine = {k: v for k, v in by_instance.items() if k[0] == op}
        key = max(mine, key=lambda k: mine[k][-1]["age"])
        warm = [s for s in mine[key] if s["age"] >= 30] or mine[key]
        first, last = warm[0]["kb"] / 1024, warm[-1]["kb"] / 1024
        peak = max(s["kb"] for ss in mine.values() for s in ss) / 1024
        out[op] = {"instances": len(mine), "longest_s": mine[key][-1]["age"], "first_mib": round(first, 1),
                   "peak_mib": round(peak, 1), "last_mib": round(last, 1),
                   "stable": last <= 1.5 * first + 20 and peak < 600}
    return out


def machine() -> dict[str, Any]:
    import os

    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpus": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()], "python": platform.python_version(),
            "kernel": platform.release()}


async def setup(worlds: dict[str, World], dbs: list[tuple[str, Target, bool, str]], *, deadline_s: float) -> float:
    """Namespaces, SampleDBs, operators; wait until all are Ready; seed the real ones. Seconds taken."""
    start = time.monotonic()
    for w in worlds.values():
        await w.connect()
    made: set[tuple[str, str]] = set()
    for world, target, real, _policy in dbs:
        if (world, target.namespace) not in made:
            await worlds[world].create_namespace(target.namespace, kwok=not real)
            made.add((world, target.namespace))
    for world, target, real, policy in dbs:
        await worlds[world].create_db(target.namespace, target.name, real=real, policy=policy)
    for w in worlds.values():
        await w.start_operators()
    deadline = time.monotonic() + deadline_s
    while True:
        bad: list[str] = []
        for w in worlds.values():
            bad += await w.live_not_ready()
        if not bad:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"setup: not Ready after {deadline_s}s: {bad[:10]}")
        await asyncio.sleep(2)  # poll interval of a wait loop
    for w in worlds.values():
        await w.seed_real()
        await w.record_credentials()
    return round(time.monotonic() - start, 1)
