"""Reading what a Job's script reported: the JSON result line in its pod's termination message.

The data-plane scripts write one JSON object per run to /dev/termination-log (docs/dataplane.md);
the kubelet puts it in the pod's status. The newest pod's last JSON line wins: its containers' first, then its
init containers' (an init container that failed, such as the link upgrade's copy of the old binaries, stops the
pod before its container runs, so its line is the only one and says why); a pod that never ran a script (or a
simulated one) has none, and the answer is {}.
"""

from __future__ import annotations

import json
from typing import Any

from sampledb_operator.reconcilers.context import Context


async def job_result(ctx: Context, namespace: str, job_name: str) -> dict[str, Any]:
    """The JSON result line of the Job's last pod (its termination message), or {}."""
    pods = await ctx.apis["Pod"].list(namespace, label_selector=f"job-name={job_name}")
    for pod in sorted(pods.items, key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True):
        status = pod.get("status") or {}
        for cs in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]:
            message = ((cs.get("state") or {}).get("terminated") or {}).get("message") or ""
            for line in reversed(message.strip().splitlines()):
                try:
                    parsed = json.loads(line)
                except ValueError:
                    continue
                if isinstance(parsed, dict):
                    return parsed
    return {}
