"""Test pods that meet the restricted Pod Security Standard (real-node namespaces enforce it).

`restricted(spec, uid)` sets, in place, what the standard asks of a pod spec the tests build
themselves: a non-root uid (65534 for busybox, 999 for the postgres images), RuntimeDefault seccomp,
and on every container no privilege escalation and all capabilities dropped.
"""

from __future__ import annotations

from typing import Any

BUSYBOX_UID = 65534  # nobody
POSTGRES_UID = 999  # the postgres user of the docker library image


def restricted(spec: dict[str, Any], uid: int) -> dict[str, Any]:
    """Make the pod spec `spec` meet the restricted standard as `uid`; returns `spec`."""
    pod_sc = spec.setdefault("securityContext", {})
    pod_sc.update({"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid,
                   "seccompProfile": {"type": "RuntimeDefault"}})
    pod_sc.setdefault("fsGroup", uid)
    for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        c.setdefault("securityContext", {}).update({"allowPrivilegeEscalation": False,
                                                   "capabilities": {"drop": ["ALL"]}})
    return spec
