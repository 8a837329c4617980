"""Storage that grows before it fills (spec.storage.autoGrow): when the data volume's file system is used past a
threshold, or the server stops because it is full, the operator asks for a bigger volume, by a step, up to a maximum.

Pure data, no I/O. The growth is the operator's request on the instances' data claims (spec.storage.size stays
what the user wrote: the smallest size); the StorageClass must allow volume expansion.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from sampledb_operator.model.schema import Quantity, SpecModel
from sampledb_operator.model.spec_rules import MAX_SIZE_RULE, MIN_SIZE_RULE


class AutoGrowSpec(SpecModel):
    """When and how far the data volume grows by itself."""

    threshold_percent: int = Field(
        default=80, ge=50, le=95,
        description="Grow when the data volume's file system is used at least this much (percent of its size,"
        " measured on the primary every 30 s); also when the server stops because the volume is full.")
    step_percent: int = Field(
        default=25, ge=10, le=100,
        description="Each growth adds this much of the current size (rounded up to a whole MiB), never past"
        " maximum.")
    maximum: Annotated[Quantity, MIN_SIZE_RULE, MAX_SIZE_RULE] = Field(
        description="The largest size it grows to, e.g. 100Gi. Reaching it is said (Degraded"
        " StorageAutoGrowLimit once the threshold is passed again) and alerted.")
