"""steps_may_read_the_change: which status writes make the pass look again at once."""

from __future__ import annotations

from typing import Any

import pytest

from sampledb_operator.decide.status import steps_may_read_the_change
from sampledb_operator.model.sampledb_status import SampleDBStatus


def cond(type_: str, status: str, reason: str, message: str = "m", at: str = "2026-12-01T00:00:00Z") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def status(**fields: Any) -> SampleDBStatus:
    base: dict[str, Any] = {"phase": "Provisioning", "conditions": [
        cond("Ready", "False", "Provisioning"), cond("Progressing", "True", "Provisioning"),
        cond("Initialized", "False", "InitPending")]}
    return SampleDBStatus.model_validate({**base, **fields})


BEFORE = status()


@pytest.mark.parametrize("after", [
    status(phase="Initializing"),
    status(conditions=[cond("Ready", "False", "DatabaseNotReady", "waiting for the pod", "2026-12-01T00:01:00Z"),
                       cond("Progressing", "True", "DatabaseNotReady", "waiting for the pod"),
                       cond("Initialized", "False", "InitPending")]),
])
def test_progress_reports_need_no_second_look(after: SampleDBStatus) -> None:
    assert not steps_may_read_the_change(BEFORE, after)


@pytest.mark.parametrize("after", [
    status(conditions=[cond("Ready", "True", "DatabaseReady"), cond("Progressing", "True", "Provisioning"),
                       cond("Initialized", "False", "InitPending")]),
    status(conditions=[cond("Ready", "False", "Provisioning"), cond("Progressing", "True", "Provisioning"),
                       cond("Initialized", "False", "InitRunning")]),
    status(conditions=[cond("Ready", "False", "Provisioning"), cond("Progressing", "True", "Provisioning"),
                       cond("Initialized", "False", "InitPending"), cond("Degraded", "True", "X")]),
    status(current_version="17"),
    status(primary="db-1"),
])
def test_what_a_step_reads_brings_a_second_look(after: SampleDBStatus) -> None:
    assert steps_may_read_the_change(BEFORE, after)
