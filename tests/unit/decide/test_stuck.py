"""decide/lifecycle/stuck.py: why instances do not progress, in Kubernetes' words, without a server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sampledb_operator.decide.lifecycle import stuck
from sampledb_operator.decide.lifecycle import stuck_claims as sc
from sampledb_operator.decide.status import REVISION_LABEL

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def claim(name: str = "data-orders-0", cls: str | None = None, phase: str = "Pending",
          age: timedelta = timedelta(minutes=5)) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {**({"storageClassName": cls} if cls else {})}, "status": {"phase": phase}}


def pod(name: str = "orders-0", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": status}


def waiting(reason: str, message: str = "", **extra: Any) -> dict[str, Any]:
    return {"name": "postgres", "image": "registry.example/pg:17", "state": {"waiting": {"reason": reason,
                                                                                      "message": message}}, **extra}


def reasons(problems: list[Any]) -> list[str]:
    return [p.reason for p in problems]


def test_a_claim_naming_a_missing_class_says_so_at_once_and_names_the_field() -> None:
    [p] = sc.claim_problems([claim(cls="fast", age=timedelta(0))], {"fast": None}, default_class=True, now=NOW)
    assert p.reason == "StorageClassNotFound" and "'fast'" in p.message and "data-orders-0" in p.message
    assert p.field == "spec.storage.storageClassName"


def test_no_default_class_and_a_claim_pending_too_long_are_said_after_the_grace() -> None:
    young = claim(age=timedelta(seconds=10))
    assert sc.claim_problems([young], {}, default_class=False, now=NOW) == []
    assert reasons(sc.claim_problems([claim(age=timedelta(seconds=11))], {}, default_class=False, now=NOW)) == [
        "NoDefaultStorageClass"]  # said soon: such a claim waits for a default class forever
    [p] = sc.claim_problems([claim(cls="slow")], {"slow": "Immediate"}, default_class=True, now=NOW)
    assert p.reason == "ClaimPending" and "Pending since 20" in p.message
    # the same at every later pass: a message that changed with time would write the status at each pass
    [later] = sc.claim_problems([claim(cls="slow")], {"slow": "Immediate"}, default_class=True,
                                now=NOW + timedelta(seconds=90))
    assert later.message == p.message
    # a class that waits for its first consumer is Pending by design; a bound claim is fine
    assert sc.claim_problems([claim(cls="wffc")], {"wffc": "WaitForFirstConsumer"}, default_class=True,
                                now=NOW) == []
    assert sc.claim_problems([claim(cls="slow", phase="Bound")], {"slow": "Immediate"}, default_class=True,
                                now=NOW) == []


def provisioning_failed(message: str, age: timedelta = timedelta(seconds=5), kind: str = "Warning",
                        reason: str = "ProvisioningFailed") -> dict[str, Any]:
    return {"type": kind, "reason": reason, "message": message,
            "lastTimestamp": (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")}


def test_a_provisioners_failure_is_said_in_its_words_before_the_pending_grace() -> None:
    young = claim(cls="local", age=timedelta(seconds=30))
    events = {"data-orders-0": [provisioning_failed("storage class \"local\": unknown parameter \"type\"")]}
    [p] = sc.claim_problems([young], {"local": "Immediate"}, default_class=True, now=NOW, events=events)
    assert p.reason == "ProvisioningFailed" and p.field == "spec.storage.storageClassName"
    assert p.message == ("claim data-orders-0 cannot be provisioned (StorageClass 'local'): storage class \"local\":"
                         " unknown parameter \"type\"")
    # stale, Normal or other reasons' Events say nothing; the ClaimPending grace still applies to an old claim
    for stale in (provisioning_failed("old", age=timedelta(hours=1)), provisioning_failed("ok", kind="Normal"),
                  provisioning_failed("x", reason="ExternalProvisioning")):
        assert sc.claim_problems([young], {"local": "Immediate"}, default_class=True, now=NOW,
                                    events={"data-orders-0": [stale]}) == []
    old = claim(cls="local")
    assert reasons(sc.claim_problems([old], {"local": "Immediate"}, default_class=True, now=NOW,
                                        events={"data-orders-0": [provisioning_failed("old", age=timedelta(hours=1))]})
                   ) == ["ClaimPending"]
    # a missing class is said first: its claim's Events are about the class
    assert reasons(sc.claim_problems([young], {"local": None}, default_class=True, now=NOW, events=events)) == [
        "StorageClassNotFound"]


def test_only_claims_pending_past_the_grace_have_their_events_read_and_a_young_one_is_looked_at_again() -> None:
    young, old, bound = claim("a", age=timedelta(seconds=4)), claim("b", age=timedelta(seconds=30)), claim(
        "c", phase="Bound")
    assert sc.claim_events_needed([young, old, bound], NOW) == ["b"]
    assert sc.claim_recheck([young, old, bound], NOW) == (stuck.POD_GRACE - timedelta(seconds=4)).total_seconds() + 1
    assert sc.claim_recheck([old, bound], NOW) is None


def test_an_unschedulable_pod_carries_the_schedulers_message() -> None:
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/3 nodes are available: 3 Insufficient cpu."}
    [p] = stuck.pod_problems([pod(conditions=[scheduled])])
    assert p.reason == "Unschedulable" and p.message == "pod orders-0 cannot be scheduled: 0/3 nodes are available:" \
                                                        " 3 Insufficient cpu."


def test_a_pod_waiting_for_its_claim_to_bind_is_no_scheduling_problem() -> None:
    # the scheduler's verdict before the claim binds; the claim says why if it never does (stuck_claims)
    waiting_claim = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
                                " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."}
    assert stuck.pod_problems([pod(conditions=[waiting_claim])]) == []


def test_image_pull_and_config_errors_name_the_image_and_the_kubelets_words() -> None:
    [p] = stuck.pod_problems([pod(containerStatuses=[waiting("ImagePullBackOff", 'Back-off pulling image "x"')])])
    assert p.reason == "ImagePullFailed" and "registry.example/pg:17" in p.message and "Back-off" in p.message
    [p] = stuck.pod_problems([pod(initContainerStatuses=[waiting("CreateContainerConfigError",
                                                                 'secret "orders-credentials" not found')])])
    assert p.reason == "ContainerConfigError" and "orders-credentials" in p.message


def test_data_of_another_major_than_the_image_is_said_as_such_in_both_wordings() -> None:
    ours = ('sampledb-instance: error: role=primary: /var/lib/postgresql/data/pgdata holds a PostgreSQL 15 cluster'
            ' but this image runs PostgreSQL 18: the image must run the data\'s major\n{"script":"instance"}\n')
    theirs = ("FATAL:  database files are incompatible with server\nDETAIL:  The data directory was initialized by"
              " PostgreSQL version 15, which is not compatible with this version 18.1.\n")
    for said in (ours, theirs):
        cs = waiting("CrashLoopBackOff", restartCount=2, lastState={"terminated": {"exitCode": 2, "message": said}})
        [p] = stuck.pod_problems([pod(containerStatuses=[cs])])
        assert p.reason == "ImageMajorMismatch" and p.field == "spec.image", p
        assert "data is of PostgreSQL 15 but the image registry.example/pg:17 runs PostgreSQL 18" in p.message
    # from the previous run's log when there is no termination message
    [p] = stuck.pod_problems([pod(containerStatuses=[waiting("CrashLoopBackOff", restartCount=2)])],
                             {("orders-0", "postgres"): stuck.log_reason(theirs)})
    assert p.reason == "ImageMajorMismatch"


def test_a_full_or_read_only_volume_is_said_as_such_with_the_servers_words() -> None:
    full = 'PANIC:  could not write to file "pg_wal/xlogtemp.71": No space left on device\n'
    ro = 'FATAL:  could not open file "postmaster.pid": Read-only file system\n'
    for said, reason, field in ((full, "VolumeFull", "spec.storage.size"), (ro, "VolumeReadOnly", "spec.storage")):
        cs = waiting("CrashLoopBackOff", restartCount=3, lastState={"terminated": {"exitCode": 1, "message": said}})
        [p] = stuck.pod_problems([pod(containerStatuses=[cs])])
        assert (p.reason, p.field) == (reason, field) and said.strip() in p.message and "orders-0" in p.message


def test_a_crash_loop_says_the_exit_code_and_the_last_lines_bounded() -> None:
    log = "\n".join(f"line {i}" for i in range(50)) + "\nFATAL:  invalid value for parameter \"work_mem\": \"-1\"\n"
    cs = waiting("CrashLoopBackOff", "back-off 40s restarting failed container", restartCount=4,
                 lastState={"terminated": {"exitCode": 1, "reason": "Error", "message": log}})
    [p] = stuck.pod_problems([pod(containerStatuses=[cs])])
    assert p.reason == "CrashLoopBackOff"
    assert "4 restarts, last exit 1, Error" in p.message and p.message.endswith('"work_mem": "-1"')
    assert "line 10" not in p.message and len(p.message) < 600
    long = waiting("CrashLoopBackOff", lastState={"terminated": {"exitCode": 2, "message": "x" * 5000}})
    assert len(stuck.pod_problems([pod(containerStatuses=[long])])[0].message) < 600
    silent = waiting("CrashLoopBackOff", restartCount=1, lastState={"terminated": {"exitCode": 1}})
    assert stuck.pod_problems([pod(containerStatuses=[silent])])[0].message.endswith(
        "last exit 1); kubectl logs orders-0 -c postgres --previous shows why")


def test_running_and_terminating_pods_have_no_problem() -> None:
    running = pod(containerStatuses=[{"name": "postgres", "state": {"running": {}}}],
                  conditions=[{"type": "PodScheduled", "status": "True"}])
    gone = pod(containerStatuses=[waiting("ImagePullBackOff")])
    gone["metadata"]["deletionTimestamp"] = "2026-12-05T11:59:00Z"
    assert stuck.pod_problems([running, gone]) == []


def test_only_stuck_pods_of_an_older_revision_are_recreated() -> None:
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no"}

    def made(name: str, revision: str, **status: Any) -> dict[str, Any]:
        p = pod(name, **status)
        p["metadata"]["labels"] = {REVISION_LABEL: revision}
        return p

    pods = [made("orders-0", "r1", conditions=[unschedulable]),  # stuck, older: recreated
            made("orders-i1-0", "r2", conditions=[unschedulable]),  # stuck, current: waits for the cause
            made("orders-i2-0", "r1", containerStatuses=[{"name": "postgres", "state": {"running": {}}}])]  # rolls
    revisions = {"orders-0": "r2", "orders-i1-0": "r2", "orders-i2-0": "r2"}
    assert stuck.stale_stuck_pods(pods, revisions) == ["orders-0"]
    assert stuck.stale_stuck_pods(pods, {}) == []  # no revision known: nothing


def test_a_job_running_without_a_ready_pod_past_the_grace_is_looked_at_and_named() -> None:
    def job(started: timedelta, **status: Any) -> dict[str, Any]:
        return {"metadata": {"name": "orders-init-1"},
                "status": {"startTime": (NOW - started).strftime("%Y-%m-%dT%H:%M:%SZ"), "active": 1, **status}}

    assert stuck.job_waiting(job(timedelta(minutes=3)), NOW)
    assert not stuck.job_waiting(job(timedelta(seconds=5)), NOW)  # young
    assert not stuck.job_waiting(job(timedelta(minutes=3), ready=1), NOW)  # its pod runs
    done = job(timedelta(minutes=3), conditions=[{"type": "Complete", "status": "True"}])
    assert not stuck.job_waiting(done, NOW)
    [p] = stuck.job_problems(job(timedelta(minutes=3)), [pod("orders-init-1-x", containerStatuses=[
        waiting("ErrImagePull", "pull access denied")])])
    assert p.reason == "ImagePullFailed" and p.message.startswith("Job orders-init-1: pod orders-init-1-x:")


def test_a_job_without_a_ready_pod_is_looked_at_again_at_the_graces_end_and_not_after() -> None:
    def job(started: timedelta, **status: Any) -> dict[str, Any]:
        return {"metadata": {"name": "orders-upgrade-1"},
                "status": {"startTime": (NOW - started).strftime("%Y-%m-%dT%H:%M:%SZ"), "active": 1, **status}}

    # a pod the scheduler cannot place changes no more: without a look at the grace's end it is never said
    assert stuck.job_recheck([job(timedelta(seconds=20))], NOW) == 101.0
    assert stuck.job_recheck([job(timedelta(seconds=20)), job(timedelta(seconds=100))], NOW) == 21.0  # the first due
    assert stuck.job_recheck([job(timedelta(seconds=100), ready=1)], NOW) is None  # its pod runs
    assert stuck.job_recheck([job(timedelta(seconds=100), conditions=[{"type": "Complete", "status": "True"}])],
                             NOW) is None
    assert stuck.job_recheck([job(timedelta(minutes=3))], NOW) is None  # past it: job_waiting names it already
    assert stuck.job_waiting(job(timedelta(minutes=3)), NOW)
    assert stuck.job_recheck([], NOW) is None


QUOTA = ('create Pod orders-0 in StatefulSet orders failed error: pods "orders-0" is forbidden: exceeded quota: q,'
         " requested: pods=1, used: pods=0, limited: pods=0")


def statefulset(name: str = "orders", age: float = 60, replicas: int = 1) -> dict[str, Any]:
    made = (NOW - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": name, "creationTimestamp": made}, "spec": {"replicas": replicas}}


def failed_create(message: str, seconds_ago: float = 5, kind: str = "lastTimestamp") -> dict[str, Any]:
    when = (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": "Warning", "reason": "FailedCreate", "message": message, kind: when}


def test_the_api_servers_refusals_are_named_by_their_cause() -> None:
    assert stuck.refusal_reason(QUOTA) == "QuotaExceeded"
    assert stuck.refusal_reason('pods "x" is forbidden: failed quota: q: must specify limits.cpu') == "QuotaExceeded"
    assert stuck.refusal_reason('pods "x" is forbidden: violates PodSecurity "restricted:latest": privileged'
                                ) == "PodSecurityRefused"
    assert stuck.refusal_reason('admission webhook "deny.example.com" denied the request: no') == "AdmissionRefused"
    assert stuck.refusal_reason("ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed expression"
                                ) == "AdmissionRefused"
    assert stuck.refusal_reason('statefulsets.apps is forbidden: User "system:serviceaccount:x:y" cannot create'
                                ' resource "statefulsets"') == "OperatorForbidden"
    assert stuck.refusal_reason("spec.template: Invalid value") == "CreateRefused"


def test_only_statefulsets_without_their_pod_past_the_grace_are_looked_at() -> None:
    sets = [statefulset("orders"), statefulset("orders-i1", age=3), statefulset("orders-i2", replicas=0),
            statefulset("orders-i3")]
    assert stuck.podless_statefulsets(sets, [pod("orders-i3-0")], NOW) == ["orders"]


def test_the_newest_recent_failed_create_event_is_the_problem() -> None:
    events = [failed_create("old: exceeded quota", seconds_ago=3600),
              failed_create(QUOTA, seconds_ago=30, kind="eventTime"),
              failed_create('admission webhook "w" denied the request: no', seconds_ago=90),
              {**failed_create("normal"), "type": "Normal"}]
    problem = stuck.create_refused("StatefulSet", "orders", events, NOW)
    assert problem is not None and problem.reason == "QuotaExceeded"
    assert problem.message.startswith("StatefulSet orders cannot create its pod: create Pod orders-0")
    assert stuck.create_refused("StatefulSet", "orders", events[:1], NOW) is None
    assert stuck.create_refused("Job", "j", [], NOW) is None


def test_a_young_statefulset_without_its_pod_is_looked_at_again_once_past_the_grace() -> None:
    assert stuck.podless_recheck([statefulset(age=4)], [], NOW) == 7.0
    assert stuck.podless_recheck([statefulset(age=60), statefulset("orders-i1", age=8)], [], NOW) == 3.0
    assert stuck.podless_recheck([statefulset(age=60)], [], NOW) == stuck.POD_GRACE.total_seconds()
    assert stuck.podless_recheck([statefulset(age=4)], [pod("orders-0")], NOW) is None


def test_a_crash_loop_without_a_message_is_explained_by_its_logs_fatal_lines() -> None:
    looping = pod(containerStatuses=[{"name": "postgres", "restartCount": 3, **waiting("CrashLoopBackOff"),
                                      "lastState": {"terminated": {"exitCode": 1}}}])
    told = pod("orders-1", containerStatuses=[{"name": "postgres", **waiting("CrashLoopBackOff"),
                                               "lastState": {"terminated": {"exitCode": 1, "message": "said"}}}])
    assert stuck.crash_logs_needed([looping, told]) == [("orders-0", "postgres")]
    log = ("LOG:  starting PostgreSQL 15\nLOG:  listening on IPv4 address\n"
           'LOG:  64TB is outside the valid range for parameter "shared_buffers" (16 .. 1073741823)\n'
           'FATAL:  configuration file "/etc/sampledb/postgresql.conf" contains errors\n'
           "FATAL:  password authentication failed for user x\n"
           "LOG:  database system is shut down\n")
    reason = stuck.log_reason(log)
    assert reason == ('LOG:  listening on IPv4 address | LOG:  64TB is outside the valid range for parameter'
                      ' "shared_buffers" (16 .. 1073741823) | FATAL:  configuration file'
                      ' "/etc/sampledb/postgresql.conf" contains errors | LOG:  database system is shut down')
    [problem] = stuck.pod_problems([looping], {("orders-0", "postgres"): reason})
    assert problem.message.endswith(f"last exit 1): {reason}")
    assert "kubectl logs" in stuck.pod_problems([looping])[0].message
    assert stuck.log_reason("plain\nlines\n") == "plain | lines"


def test_a_job_without_any_pod_is_timed_from_its_start_and_looked_at_after_the_grace() -> None:
    def job(**status: Any) -> dict[str, Any]:
        return {"metadata": {"name": "j", "creationTimestamp": "2026-12-05T11:59:00Z"}, "status": status}
    started = (NOW - timedelta(seconds=4)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert stuck.job_podless_for(job(), NOW) == timedelta(seconds=60)
    assert stuck.job_podless_for(job(startTime=started), NOW) == timedelta(seconds=4)
    assert stuck.job_podless_for(job(active=1), NOW) is None
    assert stuck.job_podless_for(job(conditions=[{"type": "Failed", "status": "True"}]), NOW) is None
    assert stuck.podless_recheck([], [], NOW, [job(startTime=started)]) == 7.0
    assert stuck.podless_recheck([], [], NOW, [job(active=1)]) is None


def expanding_claim(want: str = "2Gi", have: str = "1Gi", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "data-orders-0"}, "spec": {"resources": {"requests": {"storage": want}}},
            "status": {"phase": "Bound", "capacity": {"storage": have}, **status}}


def test_a_claim_that_does_not_grow_is_stuck_after_the_grace_or_at_once_when_refused() -> None:
    assert sc.expanding(expanding_claim()) and not sc.expanding(expanding_claim("1Gi"))
    assert not sc.expanding({**expanding_claim(), "status": {"phase": "Pending"}})
    asked = (NOW - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    waiting = {"type": "Normal", "reason": "ExternalExpanding", "firstTimestamp": asked, "lastTimestamp": asked,
               "message": "waiting for an external controller to expand this PVC"}
    where = {"volume": "the data volume data-orders-0", "field": "spec.storage.size"}
    problem, when = sc.expansion_problem(expanding_claim(), [waiting], NOW, **where)
    assert problem is None and when == NOW - timedelta(seconds=30)
    problem, _ = sc.expansion_problem(expanding_claim(), [waiting], NOW + timedelta(seconds=100), **where)
    assert problem is not None and problem.reason == "StorageExpansionStuck" and problem.field == "spec.storage.size"
    assert problem.message.startswith("the data volume data-orders-0 asked for 2Gi at 20")
    assert " and still has 1Gi:" in problem.message
    failed = {"type": "Warning", "reason": "VolumeResizeFailed", "lastTimestamp": asked, "message": "quota: no"}
    problem, _ = sc.expansion_problem(expanding_claim(), [failed], NOW, **where)
    assert problem is not None and problem.message.endswith("cannot grow from 1Gi to 2Gi: quota: no")
    infeasible = expanding_claim(allocatedResourceStatuses={"storage": "ControllerResizeInfeasible"})
    problem, _ = sc.expansion_problem(infeasible, [], NOW, **where)
    assert problem is not None and "ControllerResizeInfeasible" in problem.message
