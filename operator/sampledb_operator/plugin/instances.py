"""Which instance a command acts on (pure; no I/O): the standby `switchover` promotes, the pod `logs` reads.

Both read only the SampleDB as the API server returned it: spec.replicas and spec.paused, the
annotation sampledb.io/switchover, status.primary, status.targetPrimary and status.instances (each
instance's name, role, readiness, WAL position and lagBytes, as the operator last saw them).

Invariants:
- a switchover target is a standby (role `replica`) that status.instances lists as ready and that is
  not status.primary; nothing is chosen for a database with one instance (spec.replicas 1), while it
  is paused, before a primary is elected, or while a failover or switchover runs (targetPrimary set);
- without --to the choice is the ready standby with the least replay lag; a standby whose lag the
  operator could not read comes after every standby with a known lag, and ties go to the lowest name,
  so the same status always gives the same choice;
- the switchover patch sets only the annotation sampledb.io/switchover (what the operator honours,
  decide/replicas/replication.py), guarded by the resourceVersion the choice was made on when one is given;
- `logs` reads the primary (status.primary, instance 0 before one is elected) unless an instance is
  named, and a named instance must be one of the database's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sampledb_operator.decide.labels import REPLICA_ROLE
from sampledb_operator.decide.replicas.replication import SWITCHOVER_ANNOTATION, index_of
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.plugin.actions import ActionError

WAIT_REASONS = frozenset({"SwitchoverPending", "FailoverBlocked"})  # Degraded reasons a switchover can wait on


@dataclass(frozen=True)
class SwitchoverChoice:
    """The standby to promote, the primary it replaces, and why it was chosen."""

    db: str
    primary: str
    target: str
    why: str                  # "named with --to", "the ready standby with the least lag (0B)", ...
    note: str | None = None   # something the user should know before waiting for it

    def describe(self) -> str:
        return f"{self.primary} -> {self.target} ({self.why})"


def _meta(db: Obj) -> dict[str, Any]:
    return db.get("metadata") or {}


def _status(db: Obj) -> dict[str, Any]:
    return db.get("status") or {}


def db_name(db: Obj) -> str:
    return str(_meta(db).get("name") or "")


def instances_of(db: Obj) -> list[dict[str, Any]]:
    """status.instances: the entries that are objects with a name, in the operator's order."""
    return [i for i in _status(db).get("instances") or [] if isinstance(i, dict) and i.get("name")]


def primary_of(db: Obj) -> str:
    """The primary's pod name: status.primary, else instance 0 (before the operator elected one)."""
    return str(_status(db).get("primary") or names.instance_pod_name(db_name(db), 0))


def _lag(instance: dict[str, Any]) -> int | None:
    lag = instance.get("lagBytes")
    return lag if isinstance(lag, int) and not isinstance(lag, bool) else None


def format_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{size:.1f}GiB"


def _roster(instances: list[dict[str, Any]]) -> str:
    """"db-0 (primary, ready), db-i1-0 (replica, not ready)"."""
    return ", ".join(f"{i['name']} ({i.get('role') or '-'}, {'ready' if i.get('ready') else 'not ready'})"
                     for i in instances) or "none listed in status.instances yet"


def choose_switchover(db: Obj, to: str | None = None) -> SwitchoverChoice:
    """The standby a switchover of `db` promotes: `to` once checked, else the ready standby with the least lag.

    ActionError, saying why and what to do, when there is none to choose or `to` cannot be promoted."""
    name, spec, status = db_name(db), db.get("spec") or {}, _status(db)
    replicas = int(spec.get("replicas") or 1)
    if replicas < 2:
        raise ActionError(f"SampleDB {name} has one instance (spec.replicas {replicas}): there is no standby to"
                          " switch over to; add one first (spec.replicas: 2, see \"Replicas and failover\")")
    if spec.get("paused"):
        raise ActionError(f"SampleDB {name} is paused: the operator switches nothing over until"
                          f" `kubectl sampledb resume {name}`")
    primary = status.get("primary")
    if not primary:
        raise ActionError(f"SampleDB {name} has no elected primary yet (status.primary is empty): wait until it"
                          " is Ready")
    running = status.get("targetPrimary")
    if running and running != primary:
        raise ActionError(f"a failover or switchover of {name} to {running} is in progress: wait for it to"
                          f" finish (kubectl sampledb status {name})")
    instances = instances_of(db)
    if to is not None:
        chosen = _checked(name, primary, instances, to)
        why = "named with --to"
    else:
        ready = [i for i in instances if i["name"] != primary and i.get("role") == REPLICA_ROLE and i.get("ready")]
        if not ready:
            raise ActionError(f"no standby of {name} is ready to take over; instances: {_roster(instances)}")
        chosen = min(ready, key=lambda i: (_lag(i) is None, _lag(i) or 0, str(i["name"])))
        lag = _lag(chosen)
        why = (f"the ready standby with the least lag, {format_bytes(lag)}" if lag is not None
               else "a ready standby; the operator has no lag of any ready standby")
    return SwitchoverChoice(name, primary, str(chosen["name"]), why, _note(db, chosen))


def _checked(name: str, primary: str, instances: list[dict[str, Any]], to: str) -> dict[str, Any]:
    """The entry of status.instances for `to`, once it is known to be a ready standby."""
    if to == primary:
        raise ActionError(f"{to} is already the primary of {name}")
    found = next((i for i in instances if i["name"] == to), None)
    if found is None:
        raise ActionError(f"{to} is not an instance of {name}; its instances: {_roster(instances)}")
    if found.get("role") != REPLICA_ROLE:
        raise ActionError(f"{to} is {found.get('role') or 'of no known role'}, not a standby the operator can"
                          " promote")
    if not found.get("ready"):
        raise ActionError(f"{to} is not ready: the operator promotes only a ready standby (kubectl sampledb"
                          f" status {name})")
    return found


def _note(db: Obj, chosen: dict[str, Any]) -> str | None:
    notes = []
    if not chosen.get("lsn"):
        notes.append(f"the operator has not read {chosen['name']}'s WAL position (its server did not answer):"
                     " the switchover starts once it does (Degraded SwitchoverPending until then)")
    pending = (_meta(db).get("annotations") or {}).get(SWITCHOVER_ANNOTATION)
    if pending and pending != chosen["name"]:
        notes.append(f"this replaces the pending request {SWITCHOVER_ANNOTATION}={pending}")
    return "; ".join(notes) or None


def switchover_patch(target: str, resource_version: str | None = None) -> Obj:
    """The merge patch asking the operator to promote `target`; with `resource_version`, the API server
    refuses it (Conflict) if the SampleDB changed since the choice was made."""
    meta: Obj = {"annotations": {SWITCHOVER_ANNOTATION: target}}
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"metadata": meta}


def _degraded(db: Obj) -> dict[str, Any]:
    return next((c for c in _status(db).get("conditions") or [] if isinstance(c, dict) and c.get("type") ==
                 "Degraded"), {})


@dataclass(frozen=True)
class SwitchoverProgress:
    """Where a switchover to `target` stands, read from one SampleDB."""

    line: str          # e.g. "primary ha-0, promoting ha-i1-0"
    done: bool         # status.primary is the target
    withdrawn: bool    # the request is gone or names another instance, and the target is not the primary


def switchover_progress(db: Obj, target: str) -> SwitchoverProgress:
    status = _status(db)
    primary, promoting = status.get("primary"), status.get("targetPrimary")
    parts = [f"primary {primary or '-'}"]
    if promoting and promoting != primary:
        parts.append(f"promoting {promoting}")
    degraded = _degraded(db)
    if degraded.get("status") == "True" and degraded.get("reason") in WAIT_REASONS:
        parts.append(f"{degraded['reason']}: {' '.join(str(degraded.get('message') or '').split())[:160]}")
    done = primary == target
    asked = (_meta(db).get("annotations") or {}).get(SWITCHOVER_ANNOTATION)
    withdrawn = not done and target not in (asked, promoting)
    return SwitchoverProgress(", ".join(parts), done, withdrawn)


def log_pod(db: Obj, instance: str | None = None) -> str:
    """The pod whose PostgreSQL log `logs` reads: `instance` once checked, else the primary."""
    if instance is None:
        return primary_of(db)
    name, instances = db_name(db), instances_of(db)
    if any(i["name"] == instance for i in instances) or index_of(name, instance) is not None:
        return instance
    raise ActionError(f"{instance} is not an instance of {name}; its instances: {_roster(instances)}")
