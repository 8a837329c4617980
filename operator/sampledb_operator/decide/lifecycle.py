"""Lifecycle constants and pure steps: the finalizer and the deletion policies.

Pure: no I/O. The reconciler asks `deletion_step` what to do next for a SampleDB being deleted and
does exactly that one thing, so a restart at any point resumes at the right step.
"""

from __future__ import annotations

FINALIZER = "sampledb.io/finalizer"
