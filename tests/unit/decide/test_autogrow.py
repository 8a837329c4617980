"""decide/lifecycle/autogrow.py: when the data volumes grow, to what, and when they cannot, without a server."""

from __future__ import annotations

from typing import Any

from sampledb_operator.decide.lifecycle import autogrow
from sampledb_operator.model.autogrow import AutoGrowSpec

MI = 1024 * 1024
SPEC = AutoGrowSpec(threshold_percent=80, step_percent=25, maximum="200Mi")


def claim(request: str, capacity: str | None = None, name: str = "data-orders-0") -> dict[str, Any]:
    return {"kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"resources": {"requests": {"storage": request}}},
            "status": {"phase": "Bound", "capacity": {"storage": capacity or request}}}


def full_pod(uid: str, name: str = "orders-0") -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid}}


def test_df_is_read_from_its_portable_output() -> None:
    text = ("Filesystem      1-blocks     Used Available Capacity Mounted on\n"
            "sampledb-volume 134217728 100663296  33554432      75% /var/lib/postgresql/data\n")
    usage = autogrow.parse_df(text)
    assert usage == autogrow.Usage(134217728, 100663296) and round(usage.percent) == 75
    assert autogrow.parse_df("") is None and autogrow.parse_df("header\nfs x y z") is None


def test_past_the_threshold_every_claim_grows_by_the_step_rounded_to_a_mib() -> None:
    claims = [claim("100Mi"), claim("100Mi", name="data-orders-1")]
    assert autogrow.decide(SPEC, claims, autogrow.Usage(100 * MI, 79 * MI)) == autogrow.Growth()
    grown = autogrow.decide(SPEC, claims, autogrow.Usage(100 * MI, 81 * MI))
    assert grown.size == 125 * MI and grown.problem is None
    assert grown.reason == "81% of the data file system is used (threshold 80%): growing from 100Mi to 125Mi"
    assert autogrow.quantity(grown.size) == "125Mi"
    odd = autogrow.decide(SPEC, [claim("101Mi")], autogrow.Usage(101 * MI, 100 * MI))
    assert odd.size == 127 * MI  # 126.25 MiB rounded up


def test_a_full_volume_grows_without_a_measurement_and_the_maximum_caps_the_step() -> None:
    grown = autogrow.decide(SPEC, [claim("180Mi")], None, [full_pod("uid-1")])
    assert grown.size == 200 * MI and grown.reason.startswith("the server stops: its volume is full")
    assert grown.full_pods == ("uid-1",)


def test_at_the_maximum_a_volume_past_the_threshold_is_a_problem_not_a_growth() -> None:
    at_max = autogrow.decide(SPEC, [claim("200Mi")], autogrow.Usage(200 * MI, 190 * MI))
    assert at_max.size is None and at_max.problem is not None
    assert at_max.problem.reason == "StorageAutoGrowLimit" and at_max.problem.field == "spec.storage.autoGrow.maximum"
    assert autogrow.decide(SPEC, [claim("200Mi")], autogrow.Usage(200 * MI, 10 * MI)) == autogrow.Growth()


def test_nothing_is_asked_while_a_claim_still_grows() -> None:
    claims = [claim("125Mi", capacity="100Mi"), claim("125Mi", name="data-orders-1")]
    assert autogrow.growing(claims)
    assert autogrow.decide(SPEC, claims, autogrow.Usage(100 * MI, 99 * MI), [full_pod("u")]) == autogrow.Growth()
    assert autogrow.decide(SPEC, [], autogrow.Usage(100 * MI, 99 * MI)) == autogrow.Growth()


def test_a_data_claim_made_after_a_growth_asks_for_what_the_largest_holds() -> None:
    grown = {("PersistentVolumeClaim", "data-orders-0"): claim("192Mi")}
    desired = [claim("128Mi", name="data-orders-0"), claim("128Mi", name="data-orders-1"),
               claim("1Gi", name="orders-backups")]
    out = autogrow.new_claims_sized(desired, grown, ["data-orders-0", "data-orders-1"])
    assert [autogrow.request_of(c) for c in out] == [128 * MI, 192 * MI, 1024 * MI]  # the existing one is the plan's
    assert autogrow.new_claims_sized(desired, {}, ["data-orders-0", "data-orders-1"]) == desired


def test_a_full_pod_is_evidence_for_one_growth_then_restarted_once_the_claims_have_grown() -> None:
    pod = full_pod("uid-1")
    grown = autogrow.decide(SPEC, [claim("100Mi")], None, [pod])
    assert grown.size == 125 * MI and grown.full_pods == ("uid-1",)
    asked = {"metadata": {"name": "data-orders-0", "annotations": {autogrow.GROWN_FOR_ANNOTATION: "uid-1"}},
             "spec": {"resources": {"requests": {"storage": "125Mi"}}}, "status": {"capacity": {"storage": "100Mi"}}}
    assert autogrow.grown_for([asked]) == {"uid-1"}
    assert autogrow.restarts([asked], [pod]) == []  # still growing: its pod waits
    done = {**asked, "status": {"capacity": {"storage": "125Mi"}}}
    # the same crash's words, still in the pod's status through the back-off, grow nothing again
    assert autogrow.decide(SPEC, [done], None, [pod]) == autogrow.Growth()
    assert autogrow.restarts([done], [pod]) == ["orders-0"]
    # the pod made again stops on the grown volume too: new evidence, the next step
    again = autogrow.decide(SPEC, [done], None, [full_pod("uid-2")])
    assert again.size == 157 * MI and again.full_pods == ("uid-2",)
    assert autogrow.restarts([done], [full_pod("uid-2")]) == []
