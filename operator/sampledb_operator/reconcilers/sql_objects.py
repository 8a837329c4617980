"""The declared SQL objects of one pass: spec.roles, then spec.databases, in the order that lets each succeed;
then the pooler's role and lookup function (spec.pooler, reconcilers/pooler.py), the exporters' role
(spec.monitoring, reconcilers/monitoring.py) and the application role's password (reconcilers/app_role.py).

Roles go first: a database's owner declared in spec.roles exists by the time the database is created. A role
written `ensure: absent` that owns a database written `ensure: absent` too is refused by the server until that
database is gone; when the databases step dropped one and a role failed, the roles step runs once more in the same
pass (from the statuses it just made), so that both go in one pass instead of a Degraded retry 30 s later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sampledb_operator.model.objects import Obj
from sampledb_operator.model.roles import RoleState
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.reconcilers.app_role import AppRoleOutcome, reconcile_app_role
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.databases import DatabasesOutcome, reconcile_databases
from sampledb_operator.reconcilers.monitoring import MonitoringOutcome, reconcile_monitoring
from sampledb_operator.reconcilers.pooler import PoolerOutcome, reconcile_pooler
from sampledb_operator.reconcilers.roles import RolesOutcome, reconcile_roles


@dataclass(frozen=True, slots=True)
class DeclaredOutcome:
    """The roles', the databases', the pooler's, the exporters' role's and the application role's outcomes of one
    pass."""

    roles: RolesOutcome
    databases: DatabasesOutcome
    pooler: PoolerOutcome = field(default_factory=PoolerOutcome)
    monitoring: MonitoringOutcome = field(default_factory=MonitoringOutcome)
    app_role: AppRoleOutcome = field(default_factory=AppRoleOutcome)

    @property
    def problems(self) -> tuple[Problem, ...]:
        return (*self.roles.problems, *self.databases.problems, *self.pooler.problems, *self.monitoring.problems,
                *self.app_role.problems)

    @property
    def recheck_after(self) -> float | None:
        after = [a for a in (self.roles.recheck_after, self.databases.recheck_after, self.pooler.recheck_after,
                             self.monitoring.recheck_after, self.app_role.recheck_after) if a is not None]
        return min(after) if after else None


async def reconcile_declared(ctx: Context, db: SampleDB, *, db_ready: bool, primary_pod: Obj | None) -> DeclaredOutcome:
    """One pass of spec.roles and spec.databases (see the module's docstring)."""
    roles = await reconcile_roles(ctx, db, db_ready=db_ready, primary_pod=primary_pod)
    databases = await reconcile_databases(ctx, db, db_ready=db_ready, primary_pod=primary_pod)
    if databases.dropped and roles.statuses and any(s.state is RoleState.FAILED for s in roles.statuses):
        after = db.model_copy(update={"status": db.status.model_copy(update={"roles": list(roles.statuses)})})
        roles = await reconcile_roles(ctx, after, db_ready=db_ready, primary_pod=primary_pod)
    pooler = await reconcile_pooler(ctx, db, db_ready=db_ready, primary_pod=primary_pod)
    monitoring = await reconcile_monitoring(ctx, db, db_ready=db_ready, primary_pod=primary_pod)
    app_role = await reconcile_app_role(ctx, db, db_ready=db_ready, primary_pod=primary_pod)
    return DeclaredOutcome(roles, databases, pooler, monitoring, app_role)
