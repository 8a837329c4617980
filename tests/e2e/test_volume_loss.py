"""The data volume of a database that has run is never silently replaced by an empty one (issue #11, item 14).

Real operator and control plane (kwok pods): deleting the data PVC while the pod uses it leaves it
Terminating (the pvc-protection finalizer), which the SampleDB reports; once it is gone the operator
creates no empty volume until the accept-empty-volume annotation says so.
"""

from __future__ import annotations

import pytest
from tests.e2e.conftest import apply, condition, sampledb, wait_ready
from tests.support.kube import get_or_none, kubectl, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def test_a_deleted_data_volume_is_reported_and_not_replaced_until_accepted(namespace: str,
                                                                           operator: OperatorProcess) -> None:
    ns, pvc = namespace, "data-vol-0"
    apply(sampledb("vol", ns))
    wait_ready("vol", ns)
    kubectl("delete", "pvc", pvc, "-n", ns, "--wait=false")
    wait_until(lambda: condition("vol", ns, "Degraded").get("reason") == "DataVolumeTerminating", timeout=60,
               what="Degraded=True DataVolumeTerminating")
    assert (get_or_none("pvc", pvc, ns) or {}).get("metadata", {}).get("deletionTimestamp")

    # Without the pod the claim goes; the StatefulSet's next pod waits for a claim that does not come.
    kubectl("delete", "pod", "vol-0", "-n", ns, "--wait=false")
    wait_until(lambda: condition("vol", ns, "Degraded").get("reason") == "DataVolumeLost", timeout=90,
               what="Degraded=True DataVolumeLost")
    # Passes of the operator, each woken by a no-op annotation and counted by its own metric, the second
    # begun after the first ended, hence wholly after the loss was reported: none creates a claim.
    for poke in ("1", "2"):
        passes = operator.metric("controller_runtime_reconcile_total", controller="sampledb")
        kubectl("annotate", "--overwrite", "sampledb", "vol", "-n", ns, f"example.com/poke={poke}")
        wait_until(lambda passes=passes: operator.metric("controller_runtime_reconcile_total",
                                                         controller="sampledb") > passes,
                   timeout=30, what="a pass of the operator after the annotation")
    assert get_or_none("pvc", pvc, ns) is None
    assert condition("vol", ns, "Degraded").get("reason") == "DataVolumeLost"
    events = kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=vol,type=Warning",
                     "-o", "jsonpath={.items[*].reason}").stdout.split()
    assert {"DataVolumeTerminating", "DataVolumeLost"} <= set(events)

    kubectl("annotate", "sampledb", "vol", "-n", ns, "sampledb.io/accept-empty-volume=data")
    wait_until(lambda: get_or_none("pvc", pvc, ns), timeout=60, what="a new, empty data volume")
    wait_until(lambda: "sampledb.io/accept-empty-volume" not in (
        (get_or_none("sampledb", "vol", ns) or {}).get("metadata", {}).get("annotations") or {}),
        timeout=30, what="the acceptance consumed")


def test_growing_the_data_volume_does_not_grow_the_backups_volume_onto_its_class(namespace: str,
                                                                               operator: OperatorProcess) -> None:
    """Issue #11, item 10: data on an expandable class, backups on the default one (no expansion)."""
    ns = namespace
    apply(sampledb("grow", ns, storage={"size": "1Gi", "storageClassName": "expandable"}))
    wait_ready("grow", ns)
    kubectl("patch", "sampledb", "grow", "-n", ns, "--type=merge", "-p", '{"spec":{"storage":{"size":"2Gi"}}}')
    wait_until(lambda: (get_or_none("pvc", "data-grow-0", ns) or {}).get("spec", {}).get("resources", {})
               .get("requests", {}).get("storage") == "2Gi", timeout=60, what="the data volume to grow")
    wait_until(lambda: condition("grow", ns, "Degraded").get("observedGeneration") == 2, timeout=60,
               what="the status of generation 2")
    assert condition("grow", ns, "Degraded")["status"] == "False"
    backups = get_or_none("pvc", "grow-backups", ns)
    assert backups is not None and backups["spec"]["resources"]["requests"]["storage"] == "1Gi"
