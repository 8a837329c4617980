"""hack/progress.sh: a long build step says it is still going; a quick one stays quiet and is not slowed; the step's
exit status, its errexit and its stdout are kept."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

HELPER = Path(__file__).resolve().parents[2] / "hack" / "progress.sh"


def bash(script: str, interval: int = 1) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f"set -euo pipefail; shopt -s inherit_errexit; . {HELPER}; {script}"],
                          capture_output=True, text=True, timeout=30, check=False,
                          env={"PATH": "/usr/bin:/bin", "SAMPLEDB_PROGRESS_SECONDS": str(interval)})


def test_a_long_step_reports_while_it_runs_and_how_long_it_took() -> None:
    out = bash('line=$(progress "image demo" sleep 2.4); echo "captured=[$line]"')
    assert out.returncode == 0
    assert out.stdout == "captured=[]\n"  # reminders never reach a captured stdout
    assert "image demo: 1s so far" in out.stderr and "image demo: done in " in out.stderr


def test_a_quick_step_is_quiet_and_not_slowed() -> None:
    started = time.monotonic()
    out = bash('x=$(progress quick echo hi); echo "x=$x"', interval=10)
    assert out.returncode == 0 and out.stdout == "x=hi\n" and out.stderr == ""
    assert time.monotonic() - started < 5  # not held back until the reminder's sleep ends


def test_a_failing_function_stops_at_its_failing_line_and_the_caller_stops_too() -> None:
    out = bash('f() { false; echo SHOULD-NOT-RUN; }; x=$(progress step f); echo "caller went on: $x"')
    assert out.returncode == 1
    assert "SHOULD-NOT-RUN" not in out.stdout and "caller went on" not in out.stdout
    assert "step: failed after 0s (exit 1)" in out.stderr
