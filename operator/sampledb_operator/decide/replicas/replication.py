"""Who is primary, which instances exist, when to fail over: the election, as pure functions.

PostgreSQL elects nothing; the operator does, and records the result in the SampleDB's status:
`primary` (the instance the Service <db> selects) and, while a failover or switchover runs,
`targetPrimary`. Everything here is a function of that record, what the caches show (pods and their
readiness) and what each server says over SQL, so a restarted operator resumes any step.

Invariants (property-tested):
- Never two writable instances: a standby is promoted only when the old primary is fenced, i.e. its
  StatefulSet is at 0 replicas and no pod of it exists, or its pod's kubelet does not act (kubelet_silent) and
  its server was stopped and its address refuses connections (checked live, `fence_confirmed`); any other
  instance found writable is fenced at once.
- The promoted standby is the most advanced one (by WAL position) among those that answered; with
  synchronous replication every standby must have answered (one of them holds each commit).
- The primary (and the instance being promoted) is never the one removed by a scale-down.
- Only the elected primary carries the role label `primary`, and none does during a failover.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sampledb_operator.decide.children.desired_inputs import Instance
from sampledb_operator.decide.labels import PRIMARY_ROLE, REPLICA_ROLE
from sampledb_operator.model import names
from sampledb_operator.model.instances import ServerState
from sampledb_operator.model.sampledb import Problem

SWITCHOVER_ANNOTATION = "sampledb.io/switchover"  # value: the instance (pod name) to promote
FENCED = "fenced"
FAILOVER_POLL = 2.0  # seconds between looks while a failover runs
HOLD_REQUEUE = 0.2  # a switchover held for its pooler pause's record looks again this soon
STATUS_POLL = 10.0  # seconds between looks at replication positions with standbys
# a fenced pod still there this long past its deletion's deadline: its kubelet does not act (its node does not answer)
KUBELET_SILENT_SECONDS = 10.0
# a fence unconfirmed this long after its pod's deletion was asked is a problem said (Degraded/FenceUnconfirmed)
FENCE_UNCONFIRMED_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class PodView:
    """An instance's pod as the cache shows it."""

    ready: bool
    since: datetime | None  # since when it is unready: its Ready condition's transition, its creation, or when
    # its deletion was asked (a terminating pod counts as unready from then)
    role: str | None  # its role label
    terminating: bool = False
    node: str | None = None  # the node it runs on (spec.nodeName)
    # its node sends no heartbeat (decide/replicas/node_silence.py): counted unready since then, whatever its Ready
    # condition still says, and its kubelet is not waited for once it is asked to stop
    node_silent: bool = False
    # its server stopped itself (dataplane/self-fence.sh: its lease ended with no standby receiving its WAL) and its
    # container will not start it as a primary again; only the pod's deletion clears that
    self_fenced: bool = False


def serving(pod: PodView | None) -> bool:
    """The pod runs, is Ready and is not being deleted."""
    return pod is not None and pod.ready and not pod.terminating


@dataclass(frozen=True, slots=True)
class InstanceView:
    """One existing instance: its StatefulSet (replicas), its pod, and its server's answer."""

    index: int
    replicas: int = 1
    pod: PodView | None = None
    server: ServerState | None = None


@dataclass(frozen=True, slots=True)
class ReplicationInput:
    db: str
    replicas: int
    synchronous: bool
    failover_delay: float
    primary: str | None  # status.primary
    target: str | None  # status.targetPrimary
    switchover_to: str | None  # the switchover annotation
    instances: Mapping[int, InstanceView]
    now: datetime
    fence_confirmed: bool = False  # the old primary's StatefulSet is at 0 and it has no pod (live read)
    has_run: bool = True  # the database has been ready once (a primary still starting up is no failure)
    # a switchover waits one pass for its pooler pause's record (decide/replicas/pooler_pause.py)
    hold_fence: bool = False


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ReplicationPlan:
    """One pass's decision: the instances to keep (replicas 0 = fenced), the record to write, what to do."""

    instances: tuple[Instance, ...]
    primary: str
    target: str | None
    labels: Mapping[str, str] = field(default_factory=dict)  # pod name -> role label to set
    promote: str | None = None  # pg_promote() this instance
    fence_pods: tuple[str, ...] = ()  # delete these pods now (the fenced instances' pods)
    release: tuple[str, ...] = ()  # delete these pods (default grace): a self-fenced primary no standby can replace
    remove: tuple[int, ...] = ()  # instances whose StatefulSet goes (scale-down)
    slots: frozenset[str] | None = None  # the replication slots the primary should have (None: leave them)
    clear_switchover: bool = False  # the switchover annotation is done (or names the primary): remove it
    events: tuple[Event, ...] = ()
    problems: tuple[Problem, ...] = ()
    requeue_after: float | None = None

    def role_of(self, index: int, db: str) -> str:
        """primary, replica, or fenced (its StatefulSet is at 0)."""
        if any(i.index == index and i.replicas == 0 for i in self.instances):
            return FENCED
        return PRIMARY_ROLE if self.target is None and names.instance_pod_name(db, index) == self.primary \
            else REPLICA_ROLE


def kubelet_silent(deadline: datetime | None, now: datetime, *, node_silent: bool = False) -> bool:
    """A pod asked to stop whose deletion deadline (its deletionTimestamp: when asked plus its grace period) passed
    KUBELET_SILENT_SECONDS ago, or at once when its node sends no heartbeat: its kubelet, which would have stopped
    it and let the API server remove it, does not act. The fence is then confirmed only by its server itself:
    stopped over SQL, its address refusing connections (reconcilers/replication.py); a server that does not answer
    either keeps the failover waiting."""
    return deadline is not None and (node_silent or (now - deadline).total_seconds() >= KUBELET_SILENT_SECONDS)


def index_of(db: str, pod: str | None) -> int | None:
    """The instance index of pod name `pod` of database `db`, or None when it names none."""
    if pod is None:
        return None
    for index in range(names.MAX_INSTANCES):
        if names.instance_pod_name(db, index) == pod:
            return index
    return None


def wanted_indexes(existing: set[int], keep: set[int], replicas: int) -> list[int]:
    """The instances to have: `keep` always (the primary, the one being promoted), then existing ones
    lowest first, then new ones at the lowest free indexes, up to `replicas` in all."""
    out = sorted(keep)
    for index in sorted(existing - keep):
        if len(out) >= replicas:
            break
        out.append(index)
    free = (i for i in range(names.MAX_INSTANCES) if i not in existing and i not in keep)
    while len(out) < replicas:
        out.append(next(free))
    return sorted(out)


def _unready_for(view: InstanceView | None, now: datetime) -> float | None:
    """Seconds the instance's pod has been unready (None: it is ready, or its pod is missing)."""
    if view is None or view.pod is None:
        return None
    if serving(view.pod):
        return None
    if view.pod.since is None:
        return 0.0
    return max(0.0, (now - view.pod.since).total_seconds())


def candidates(inp: ReplicationInput, exclude: set[int]) -> list[InstanceView]:
    """Standbys that could be promoted: ready, and their server says it is in recovery; best first."""
    out = [v for i, v in inp.instances.items()
           if i not in exclude and serving(v.pod)
           and v.server is not None and v.server.in_recovery and v.replicas > 0]
    return sorted(out, key=lambda v: (-(v.server.position if v.server else 0), v.index))


def quorum_problem(inp: ReplicationInput, primary: int) -> Problem | None:
    """With synchronous replication a commit is on at least one standby: every standby must have answered
    before the most advanced can be chosen, or a committed transaction could be lost."""
    if not inp.synchronous:
        return None
    silent = sorted(names.instance_pod_name(inp.db, i) for i, v in inp.instances.items()
                    if i != primary and (v.server is None or not v.server.in_recovery))
    if not silent:
        return None
    return Problem("FailoverBlocked", "the primary is unavailable, but with synchronous replication the standby that"
                   f" holds the last commits may be {', '.join(silent)}, which did not answer; waiting for it",
                   "spec.replication.synchronous")


@dataclass
class _Pass:
    """The working state of one decision (private to decide)."""

    primary: int
    target: int | None = None
    fence: set[int] = field(default_factory=set)
    fence_pods: list[str] = field(default_factory=list)
    release: list[str] = field(default_factory=list)
    promote: str | None = None
    events: list[Event] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    requeue: float | None = None
    holding: bool = False  # a switchover's first step waits: the old primary is neither fenced nor relabelled


def _fence_strays(inp: ReplicationInput, p: _Pass) -> None:
    """Any writable instance other than the primary (or the one being promoted) is fenced at once."""
    primary_name = names.instance_pod_name(inp.db, p.primary)
    for i, v in sorted(inp.instances.items()):
        if i in (p.primary, p.target) or v.server is None or v.server.in_recovery:
            continue
        p.fence.add(i)
        if v.pod is not None and not v.pod.terminating:
            p.fence_pods.append(names.instance_pod_name(inp.db, i))
        p.events.append(Event("Warning", "UnexpectedPrimaryFenced",
                              f"{names.instance_pod_name(inp.db, i)} accepts writes but {primary_name} is the"
                              " primary: stopped it (it rejoins as a standby)"))


def _ahead_problem(inp: ReplicationInput, primary: int, best: list[InstanceView]) -> Problem | None:
    """With synchronous replication, a standby that answers but cannot be promoted now (its pod is not
    Ready) and is ahead of the best candidate may hold commits the candidate lacks: wait for it."""
    if not inp.synchronous or not best or best[0].server is None:
        return None
    top = best[0].server.position
    ahead = sorted(names.instance_pod_name(inp.db, i) for i, v in inp.instances.items()
                   if i != primary and v.server is not None and v.server.in_recovery and v.server.position > top)
    if not ahead:
        return None
    return Problem("FailoverBlocked", f"the primary is unavailable; with synchronous replication {', '.join(ahead)}"
                   " holds later commits than any standby that is ready; waiting for it to be ready",
                   "spec.replication.synchronous")


def _steady(inp: ReplicationInput, p: _Pass) -> None:
    """No failover running: start a switchover asked for, or a failover that is due."""
    db, primary_name = inp.db, names.instance_pod_name(inp.db, p.primary)
    primary_view = inp.instances.get(p.primary)
    unready = _unready_for(primary_view, inp.now)
    wanted = index_of(db, inp.switchover_to)
    if wanted is not None and wanted != p.primary:
        if any(c.index == wanted for c in candidates(inp, {p.primary})):
            p.target = wanted
            p.events.append(Event("Normal", "SwitchoverStarted",
                                  f"switching the primary from {primary_name} to {inp.switchover_to}: stopping"
                                  f" {primary_name} cleanly, then promoting {inp.switchover_to}"))
            return
        p.problems.append(Problem("SwitchoverPending", f"{SWITCHOVER_ANNOTATION}={inp.switchover_to}: that instance"
                                  " is not a ready standby yet", "metadata.annotations"))
    if unready is not None and len(inp.instances) < 2:  # a single instance that stopped itself (standbys just removed)
        _release(p, primary_view, primary_name, f"{primary_name} stopped itself and has no standby")
    if unready is None or len(inp.instances) < 2 or not inp.has_run:
        return
    if unready < inp.failover_delay:
        p.requeue = max(0.5, inp.failover_delay - unready)
        return
    best = candidates(inp, {p.primary})
    blocked = quorum_problem(inp, p.primary) or _ahead_problem(inp, p.primary, best)
    if blocked is not None:
        p.problems.append(blocked)
    elif best:
        p.target = best[0].index
        why = f"unready for {unready:.0f}s"
        if primary_view is not None and primary_view.pod is not None and primary_view.pod.node_silent:
            why = f"runs on node {primary_view.pod.node}, which sends no heartbeat"
        elif primary_view is not None and primary_view.pod is not None and primary_view.pod.self_fenced:
            why = "stopped itself (its lease from the operator ended while no standby received its WAL)"
        p.events.append(Event("Warning", "FailoverStarted",
                              f"primary {primary_name} {why}: fencing it and promoting"
                              f" {names.instance_pod_name(db, p.target)}, the most advanced standby"))
    else:
        p.problems.append(Problem("FailoverBlocked", f"primary {primary_name} is unready and no standby is ready"
                                  " to take over", "spec.replicas"))
        _release(p, primary_view, primary_name, f"primary {primary_name} stopped itself (its lease from the operator"
                 " ended while no standby received its WAL) and no standby is ready to take over")


def _release(p: _Pass, view: InstanceView | None, pod_name: str, why: str) -> None:
    """The primary's pod deleted (a new one starts it again, as the primary) when its server stopped itself and
    nobody is to be promoted, so there is no second primary to fear; not again while it is already going."""
    if view is not None and view.pod is not None and view.pod.self_fenced and not view.pod.terminating:
        p.release.append(pod_name)
        p.events.append(Event("Warning", "SelfFenceReleased",
                              f"{why}: deleting its pod so that it starts again as the primary"))


def _failover_step(inp: ReplicationInput, p: _Pass) -> None:
    """A failover or switchover runs: fence the old primary; once that is confirmed, promote the target;
    once it is promoted, it is the primary."""
    assert p.target is not None
    db = inp.db
    primary_name, target_name = names.instance_pod_name(db, p.primary), names.instance_pod_name(db, p.target)
    old = inp.instances.get(p.primary)
    graceful = inp.switchover_to == target_name  # a switchover: the StatefulSet stops it cleanly
    if graceful and inp.hold_fence:
        p.holding, p.requeue = True, HOLD_REQUEUE
        return
    p.fence.add(p.primary)
    p.requeue = FAILOVER_POLL
    if old is not None and old.pod is not None and not old.pod.terminating and not graceful:
        p.fence_pods.append(primary_name)
    if not inp.fence_confirmed:
        if old is not None and old.pod is not None and old.pod.terminating and old.pod.since is not None \
                and (inp.now - old.pod.since).total_seconds() >= FENCE_UNCONFIRMED_SECONDS:
            p.problems.append(Problem("FenceUnconfirmed", f"{primary_name} is still terminating: its node's kubelet"
                                      " does not stop it and its server cannot be reached to be stopped, so the"
                                      f" promotion of {target_name} waits (never two primaries) until its own stop"
                                      " is certain (its lease ended and no standby receiving its WAL for"
                                      " wal_sender_timeout); once the node is certainly down, delete the node object"
                                      " or taint it node.kubernetes.io/out-of-service to go on now", "spec.replicas"))
        return
    view = inp.instances.get(p.target)
    if view is not None and view.server is not None and not view.server.in_recovery:
        p.events.append(Event("Normal", "Promoted", f"{target_name} is the primary (was {primary_name});"
                              f" {primary_name} rejoins as a standby"))
        # The old primary stays fenced in this pass: it comes back (as a standby) only once the status
        # records the new primary, so a pass that read the old record can never fence the new one.
        p.fence_pods = [n for n in p.fence_pods if n != target_name]
        p.primary, p.target, p.requeue = p.target, None, FAILOVER_POLL
    elif view is not None and view.server is not None and view.server.in_recovery:
        p.promote = target_name
    elif inp.synchronous:
        # The target was chosen as the most advanced: it may hold commits no other standby has.
        p.problems.append(Problem("FailoverBlocked", f"{target_name} was chosen to be promoted and does not answer;"
                                  " with synchronous replication it may hold the last commits, so the operator waits"
                                  " for it (set spec.replication.synchronous to false to promote another)",
                                  "spec.replication.synchronous"))
    else:
        others = candidates(inp, {p.primary})
        if others and others[0].index != p.target:
            p.target = others[0].index
            p.events.append(Event("Warning", "FailoverRetargeted", f"{target_name} cannot be promoted; promoting"
                                  f" {names.instance_pod_name(db, p.target)} instead"))


def observed_primary(inp: ReplicationInput) -> int:
    """The primary when the status has no record of it (a new database, or a status lost or restored from a
    backup): the one instance that accepts writes, else the one pod labelled primary, else the first instance."""
    writable = sorted(i for i, v in inp.instances.items() if v.server is not None and not v.server.in_recovery)
    if len(writable) == 1:
        return writable[0]
    labelled = sorted(i for i, v in inp.instances.items() if v.pod is not None and v.pod.role == PRIMARY_ROLE)
    if len(labelled) == 1:
        return labelled[0]
    return 0


def decide(inp: ReplicationInput) -> ReplicationPlan:
    """The plan for one pass."""
    db = inp.db
    primary = index_of(db, inp.primary)
    p = _Pass(primary=observed_primary(inp) if primary is None else primary)
    target = index_of(db, inp.target)
    p.target = target if target != p.primary else None
    p.requeue = STATUS_POLL if (inp.replicas > 1 or len(inp.instances) > 1) else None
    _fence_strays(inp, p)
    if p.target is None:
        _steady(inp, p)
    if p.target is not None:
        _failover_step(inp, p)

    # Never scaled away: the primary, the one being promoted, and anything that accepts writes.
    keep = {p.primary} | ({p.target} if p.target is not None else set()) \
        | {i for i, v in inp.instances.items() if v.server is not None and not v.server.in_recovery}
    indexes = wanted_indexes(set(inp.instances), keep, inp.replicas)
    remove: tuple[int, ...] = ()
    if p.target is None:
        remove = tuple(sorted(set(inp.instances) - set(indexes)))
    else:  # no scale-down during a failover
        indexes = sorted(set(indexes) | set(inp.instances))
    instances = tuple(Instance(i, 0 if i in p.fence else 1) for i in indexes)

    labels: dict[str, str] = {}
    for i, v in inp.instances.items():  # terminating and removed pods too: none keeps a stale primary label
        if v.pod is None:
            continue
        role = PRIMARY_ROLE if ((p.target is None or p.holding) and i == p.primary and i not in p.fence) \
            else REPLICA_ROLE
        if v.pod.role != role:
            labels[names.instance_pod_name(db, i)] = role

    slots: frozenset[str] | None = None
    primary_view = inp.instances.get(p.primary)
    if p.target is None and primary_view is not None and primary_view.server is not None \
            and not primary_view.server.in_recovery:
        slots = frozenset(names.replication_slot_name(i) for i in indexes if i != p.primary)
    primary_name = names.instance_pod_name(db, p.primary)
    return ReplicationPlan(
        instances=instances, primary=primary_name,
        target=names.instance_pod_name(db, p.target) if p.target is not None else None,
        labels=labels, promote=p.promote, fence_pods=tuple(dict.fromkeys(p.fence_pods)), remove=remove,
        release=tuple(p.release),
        # Removed once the status records it done (a metadata write in the promoting pass would make
        # that pass's status write fail its precondition).
        slots=slots, clear_switchover=inp.switchover_to is not None and p.target is None and inp.target is None
        and inp.switchover_to == primary_name == inp.primary,
        events=tuple(p.events), problems=tuple(p.problems), requeue_after=p.requeue)
