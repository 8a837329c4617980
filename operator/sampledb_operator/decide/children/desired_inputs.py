"""What the desired-state builders read besides the SampleDB itself: the version running, the instances, the
data-plane scripts.

Pure: frozen values. The reconcilers gather them (decide/upgrades/upgrade_step.py says what runs during an upgrade,
decide/replicas/replication.py which instances there are and which are fenced) and hand them to
decide/children/desired.py's children().

Invariants: the defaults are a database with no upgrade under way (spec.version with its image, the default
data directory) and a single unfenced instance, 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.model.sampledb import SampleDB, image_for


@dataclass(frozen=True, slots=True)
class Running:
    """What the StatefulSet should run now: during an upgrade, not yet what spec.version says."""

    version: str
    image: str
    data_dir: str = "pgdata"  # under DATA_MOUNT; a major upgrade moves to pgdata-<major>


@dataclass(frozen=True, slots=True)
class Instance:
    """One PostgreSQL instance the database should have: its index and its StatefulSet's replicas (0 while
    it is fenced, 1 otherwise). decide/replicas/replication.py chooses them."""

    index: int
    replicas: int = 1


@dataclass(frozen=True, slots=True)
class Inputs:
    """What desired-state functions read besides the SampleDB itself."""

    db: SampleDB
    scripts: dict[str, str]  # data-plane scripts by file name (the scripts ConfigMap's data)
    running: Running | None = None  # None: spec.version with its image, default data directory
    instances: tuple[Instance, ...] = (Instance(0),)
    skip_volumes: frozenset[int] = frozenset()  # instances whose data volume is not applied (never re-created)
    replica_service: bool = False  # the `-ro` Service exists already: kept in shape whatever spec.replicas is
    ca_cert: str = ""  # the certificate authority of the served TLS certificate, PEM (published in the ConfigMap)
    # a digest of the served certificate (decide/children/tls.certificate_digest), for the pooler
    served_certificate: str = ""

    def run(self) -> Running:
        return self.running or Running(self.db.spec.version, image_for(self.db.spec))
