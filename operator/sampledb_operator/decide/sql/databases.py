"""spec.databases: what to do to the server's databases, and what the status says of each, as pure functions.

`plan` compares the declared databases with what the server has (`observed`, read by pg/databases.py) and returns
the statements to run: creations and changes first, drops last. `statuses` turns their outcomes into
status.databases. `applied_hash` identifies what was applied (the databases as written), so that a pass with nothing
new sends no SQL.

Invariants: a database is dropped only when written `ensure: absent`; one removed from spec.databases is Retained,
never touched again (its data stays); nothing but the owner and the connection limit of an existing database is
ever changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from sampledb_operator.model.databases import (
    DatabaseOp,
    DatabaseSpec,
    DatabaseState,
    DatabaseStatus,
    ObservedDatabase,
    database_name_error,
)
from sampledb_operator.model.roles import Ensure
from sampledb_operator.model.sampledb import Problem


def applied_hash(databases: Sequence[DatabaseSpec]) -> str:
    """What a pass applies: the databases as written."""
    body = [d.model_dump(mode="json", by_alias=True) for d in databases]
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def problems(databases: Sequence[DatabaseSpec]) -> list[Problem]:
    """Declared databases the CRD would refuse today (an object stored before a rule existed): never applied."""
    return [Problem("InvalidDatabase", f"database {d.name!r}: {why}", "spec.databases")
            for d in databases if (why := database_name_error(d.name, d.owner))]


def plan(databases: Sequence[DatabaseSpec], observed: Mapping[str, ObservedDatabase]) -> list[DatabaseOp]:
    """The statements that make the server's databases what `databases` says."""
    changes: list[DatabaseOp] = []
    drops: list[DatabaseOp] = []
    for want in databases:
        have = observed.get(want.name)
        if want.ensure is Ensure.ABSENT:
            if have is not None:
                drops.append(DatabaseOp("drop", want.name))
            continue
        if have is None:
            changes.append(DatabaseOp("create", want.name, want.owner, want.connection_limit))
            continue
        if have.owner != want.owner:
            changes.append(DatabaseOp("owner", want.name, owner=want.owner))
        if have.connection_limit != want.connection_limit:
            changes.append(DatabaseOp("limit", want.name, connection_limit=want.connection_limit))
    return [*changes, *drops]


def statuses(databases: Sequence[DatabaseSpec], previous: Sequence[DatabaseStatus],
             failed: Mapping[str, str]) -> list[DatabaseStatus]:
    """status.databases after a pass: `failed` maps a database to the server's words for its refused statement."""
    out = []
    for want in databases:
        why = failed.get(want.name)
        if why is not None:
            out.append(DatabaseStatus(name=want.name, state=DatabaseState.FAILED, message=why[:1024]))
        else:
            state = DatabaseState.DROPPED if want.ensure is Ensure.ABSENT else DatabaseState.READY
            out.append(DatabaseStatus(name=want.name, state=state))
    declared = {d.name for d in databases}
    out += [DatabaseStatus(name=s.name, state=DatabaseState.DROPPED if s.state is DatabaseState.DROPPED
                           else DatabaseState.RETAINED)
            for s in previous if s.name not in declared]
    return out
