"""Replication slots that hold WAL for nobody: the problem they become before the data volume fills, as a pure function.

A physical slot keeps every WAL segment from its restart LSN until its consumer confirms it; a standby that no longer
streams (down, removed by hand) or a logical consumer gone away leaves it holding WAL until the volume is full and the
primary stops. The replication step reads each primary's inactive slot holding the oldest WAL (pg/client.STATE_SQL).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from sampledb_operator.model import names
from sampledb_operator.model.sampledb import Problem
from sampledb_operator.model.sampledb_status import InstanceStatus

SLOT_WARN_FRACTION = 0.25  # of the data volume's size: an inactive slot holding more is a problem


def slot_problems(statuses: Sequence[InstanceStatus], volume_bytes: int) -> tuple[Problem, ...]:
    """InactiveSlotRetainingWAL for a primary whose inactive replication slot holds at least SLOT_WARN_FRACTION of
    the data volume's size in WAL: PostgreSQL keeps every segment from the slot's restart LSN until its consumer
    comes back or the slot is dropped, and a full volume stops the server."""
    out = []
    for inst in statuses:
        held, slot = inst.inactive_slot_retained_bytes, inst.inactive_slot
        if slot is None or held is None or held < SLOT_WARN_FRACTION * volume_bytes:
            continue
        whose = ("the slot of a standby that does not stream (is it down?)" if slot.startswith(names.SLOT_PREFIX)
                 else "nothing consumes it")
        share = 100 * held / volume_bytes
        out.append(Problem("InactiveSlotRetainingWAL", f"replication slot {slot} on {inst.name} is inactive and"
                           f" holds {held / 2**20:.0f} MiB of WAL ({share:.0f}% of the data volume's size):"
                           f" {whose}; the volume fills unless its consumer comes back or the slot is dropped"
                           f" (SELECT pg_drop_replication_slot('{slot}'))", "status.instances"))
    return tuple(out)
