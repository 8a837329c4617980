"""The end-of-run report: every fault with its outcome and recovery time, as text or JSON. Pure.

Outcomes: planned (dry run), injected, skipped (nothing to act on, e.g. no running backup Job),
unsupported (the cluster refused the means, e.g. pods/exec), failed (the API refused the write).
An injected fault has recovered=True and recovery_seconds when its database was Ready again (and
what the fault broke was back) within the recovery timeout, else recovered=False.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PLANNED, INJECTED, SKIPPED, UNSUPPORTED, FAILED = "planned", "injected", "skipped", "unsupported", "failed"


@dataclass(slots=True)
class FaultRecord:
    index: int
    at: float  # seconds after the start (planned)
    fault: str
    namespace: str
    database: str
    outcome: str = PLANNED
    target: str = ""  # the object acted on, e.g. "Pod orders-0"
    detail: str = ""
    recovered: bool | None = None
    recovery_seconds: float | None = None


@dataclass(slots=True)
class Report:
    seed: int
    scope: str
    duration: float
    rate: float
    faults: list[str]
    dry_run: bool
    databases: list[str] = field(default_factory=list)
    records: list[FaultRecord] = field(default_factory=list)
    cleanup: list[str] = field(default_factory=list)

    @property
    def injected(self) -> list[FaultRecord]:
        return [r for r in self.records if r.outcome == INJECTED]

    @property
    def unrecovered(self) -> list[FaultRecord]:
        return [r for r in self.injected if not r.recovered]

    def to_json(self) -> dict[str, Any]:
        times = [r.recovery_seconds for r in self.injected if r.recovery_seconds is not None]
        return {
            "seed": self.seed, "scope": self.scope, "durationSeconds": self.duration, "ratePerMinute": self.rate,
            "faultKinds": self.faults, "dryRun": self.dry_run, "databases": self.databases,
            "summary": {
                "planned": len(self.records), "injected": len(self.injected),
                "recovered": len(self.injected) - len(self.unrecovered), "unrecovered": len(self.unrecovered),
                "maxRecoverySeconds": max(times) if times else None,
            },
            "faults": [_camel(asdict(r)) for r in self.records],
            "cleanup": self.cleanup,
        }


def render_text(report: Report) -> str:
    """A table for a terminal, then the totals."""
    head = (f"chaos run: seed {report.seed}, {report.scope}, {report.duration:g}s at {report.rate:g}/min, "
            f"faults {','.join(report.faults)}{' (dry run: nothing touched)' if report.dry_run else ''}")
    lines = [head, f"databases: {', '.join(report.databases) or 'none'}"]
    rows = [("#", "AT", "FAULT", "DATABASE", "OUTCOME", "TARGET", "RECOVERY", "DETAIL")]
    for r in report.records:
        recovery = "" if r.recovered is None else (f"{r.recovery_seconds:.1f}s" if r.recovered else "NOT RECOVERED")
        rows.append((str(r.index), f"{r.at:g}s", r.fault, f"{r.namespace}/{r.database}" if r.database else "-",
                     r.outcome, r.target or "-", recovery or "-", r.detail))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
              for row in rows]
    if report.dry_run:
        lines.append(f"{len(report.records)} faults planned")
    else:
        lines.append(f"{len(report.injected)} of {len(report.records)} faults injected, "
                     f"{len(report.injected) - len(report.unrecovered)} recovered")
    lines += [f"cleanup: {item}" for item in report.cleanup]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _camel(record: dict[str, Any]) -> dict[str, Any]:
    def camel(key: str) -> str:
        first, *rest = key.split("_")
        return first + "".join(p.title() for p in rest)

    return {camel(k): v for k, v in record.items()}
