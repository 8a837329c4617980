"""Per-instance metrics from inside PostgreSQL (spec.monitoring): a postgres_exporter beside each instance.

Pure data, no I/O. With `enabled` (the default), every instance's pod runs the exporter as a second container on
port EXPORTER_PORT (`metrics`), connected over the pod's socket as MONITOR_ROLE: a role the operator makes on the
primary, member of pg_monitor (reads every statistic, no data), LOGIN without a password (the socket is the only
way in: TCP lines of pg_hba ask for a password it does not have), with MONITOR_STATEMENT_TIMEOUT on every query,
its own and the user's custom ones. `customQueries` names a ConfigMap key in postgres_exporter's queries.yaml
format, run by that role. With spec.pooler, each PgBouncer pod runs pgbouncer_exporter on POOLER_EXPORTER_PORT
too (the same switch).

Invariants: the exporter never connects as a superuser; turning it on or off, or changing its image or custom
queries, changes the pod template (a rolling restart of the instances, as any template change).
"""

from __future__ import annotations

from pydantic import Field

from sampledb_operator.model.roles import MONITOR_ROLE
from sampledb_operator.model.schema import KeyRef, SpecModel
from sampledb_operator.model.spec_rules import Image

DEFAULT_EXPORTER_IMAGE = "quay.io/prometheuscommunity/postgres-exporter:v0.17.1"
DEFAULT_POOLER_EXPORTER_IMAGE = "quay.io/prometheuscommunity/pgbouncer-exporter:v0.10.2"
EXPORTER_PORT = 9187
POOLER_EXPORTER_PORT = 9127
MONITOR_STATEMENT_TIMEOUT = "10s"
__all__ = [
    "DEFAULT_EXPORTER_IMAGE",
    "DEFAULT_POOLER_EXPORTER_IMAGE",
    "EXPORTER_PORT",
    "MONITOR_ROLE",
    "MONITOR_STATEMENT_TIMEOUT",
    "POOLER_EXPORTER_PORT",
    "MonitoringSpec",
]


class MonitoringSpec(SpecModel):
    """Metrics from inside each instance."""

    enabled: bool = Field(
        default=True,
        description="Run postgres_exporter beside each instance (port 9187, `metrics`), as the least-privilege"
        " role sampledb_monitor (pg_monitor). Turning it off or on restarts the instances one at a time.")
    image: Image | None = Field(
        default=None,
        description=f"A postgres_exporter image (0.15 or later, the upstream entrypoint); {DEFAULT_EXPORTER_IMAGE}"
        " when omitted.")
    pooler_image: Image | None = Field(
        default=None,
        description=f"A pgbouncer_exporter image (0.8 or later, the upstream entrypoint) for the pooler's pods (port"
        f" 9127), with spec.pooler; {DEFAULT_POOLER_EXPORTER_IMAGE} when omitted.")
    custom_queries: KeyRef | None = Field(
        default=None,
        description="A key of a ConfigMap in the database's namespace with more metrics in postgres_exporter's"
        " queries.yaml format, run by sampledb_monitor with a 10 s statement timeout. A change of the name or key"
        " restarts the instances; a change of the content reaches the exporter within about a minute (the kubelet's"
        " refresh) and is read at its next start.")
