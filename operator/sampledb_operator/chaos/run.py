"""One chaos run: find the SampleDBs in scope, plan, inject each fault at its time, wait for
recovery, clean up, report.

Invariants: a dry run makes only list requests (touches nothing); faults are injected one at a
time, the next not before the previous one recovered or timed out (so each recovery time is one
fault's), and not before its planned time; fill files are removed at the end even when the run is
interrupted or fails; kill-leader is planned only when named in the fault kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sampledb_operator.chaos.faults import DESCRIPTIONS, Fault
from sampledb_operator.chaos.inject import Api, Cleanup, Executor, Injector
from sampledb_operator.chaos.plan import PlannedFault, Scope, Target, plan
from sampledb_operator.chaos.recovery import Clock, wait_recovered
from sampledb_operator.chaos.report import INJECTED, PLANNED, FaultRecord, Report


@dataclass(frozen=True, slots=True)
class Options:
    scope: Scope
    seed: int
    duration: float  # seconds
    rate: float  # faults per minute
    faults: tuple[Fault, ...]
    dry_run: bool = False
    recovery_timeout: float = 300.0
    poll: float = 1.0
    lease: tuple[str, str] | None = None  # (namespace, name) of the operator's leader-election Lease


async def databases_in_scope(apis: Mapping[str, Api], scope: Scope) -> list[Target]:
    """The SampleDBs the scope names (every page of the list), sorted."""
    out: list[Target] = []
    token: str | None = None
    while True:
        page = await apis["SampleDB"].list(scope.namespace, label_selector=scope.selector, continue_token=token)
        for item in page.items:
            meta = item.get("metadata") or {}
            if not meta.get("deletionTimestamp"):
                out.append(Target(str(meta.get("namespace") or ""), str(meta.get("name") or "")))
        token = page.continue_token
        if not token:
            return sorted(out)


async def execute(options: Options, apis: Mapping[str, Api], executor: Executor | None, clock: Clock, *,
                  progress: Callable[[FaultRecord], None] | None = None) -> Report:
    """The run; its report (every planned fault, injected or not)."""
    targets = await databases_in_scope(apis, options.scope)
    report = Report(seed=options.seed, scope=options.scope.describe(), duration=options.duration, rate=options.rate,
                    faults=[f.value for f in options.faults], dry_run=options.dry_run,
                    databases=[str(t) for t in targets])
    if not targets and set(options.faults) != {Fault.KILL_LEADER}:
        return report
    schedule = plan(seed=options.seed, targets=targets, faults=options.faults, rate=options.rate,
                    duration=options.duration)
    if options.dry_run:
        report.records = [_record(p) for p in schedule]
        return report
    injector = Injector(apis, executor, targets, lease=options.lease)
    cleanups: list[Cleanup] = []
    start = clock.monotonic()
    try:
        for planned in schedule:
            wait = start + planned.at - clock.monotonic()
            if wait > 0:
                await clock.sleep(wait)
            record = await _one(options, apis, injector, clock, planned=planned, cleanups=cleanups)
            report.records.append(record)
            if progress:
                progress(record)
    finally:
        for cleanup in dict.fromkeys(cleanups):
            report.cleanup.append(await injector.remove_fill(cleanup))
    return report


async def _one(options: Options, apis: Mapping[str, Api], injector: Injector, clock: Clock, *, planned: PlannedFault,
               cleanups: list[Cleanup]) -> FaultRecord:
    record = _record(planned)
    injection = await injector.inject(planned.fault, planned.target)
    if injection.cleanup is not None:
        cleanups.append(injection.cleanup)
    record.outcome, record.target = injection.outcome, injection.target
    record.detail = injection.detail or record.detail
    if injection.outcome == INJECTED:
        seconds = await wait_recovered(apis, planned.target, injection.checks, clock,
                                       timeout=options.recovery_timeout, poll=options.poll)
        record.recovered = seconds is not None
        record.recovery_seconds = None if seconds is None else round(seconds, 2)
    return record


def _record(planned: PlannedFault) -> FaultRecord:
    target = planned.target
    return FaultRecord(planned.index, planned.at, planned.fault.value, target.namespace if target else "",
                       target.name if target else "", PLANNED, detail=DESCRIPTIONS[planned.fault])


def summary_exit_code(report: Report) -> int:
    """0 when every injected fault recovered, 1 otherwise (or when no SampleDB was in scope)."""
    if not report.databases and report.faults != [Fault.KILL_LEADER.value]:
        return 1
    return 1 if report.unrecovered else 0
