"""spec.parameters -> the server's postgresql.conf, and the hashes that say what changed.

Pure. The file lives in the database's ConfigMap (key CONFIG_KEY), mounted read-only at CONFIG_DIR
in the database container, which runs `postgres -c config_file=CONFIG_FILE`. The access rules are the
operator's too (HBA, the ConfigMap's pg_hba.conf at HBA_FILE: streaming replication needs its own
line); PGDATA stays the data directory, ident_file keeps its default there, and
postgresql.auto.conf (ALTER SYSTEM) is still read after this file. The file first includes
PGDATA's own postgresql.conf (initdb's, with the image's listen_addresses = '*'), then sets each
parameter, so the parameters win.

Invariants: a value is always one single-quoted string (quotes doubled, backslashes doubled: the
file parser reads backslash escapes in quoted strings), so no value can end its line or add a
setting (the CRD also refuses control characters and odd names). `restart_hash` covers only the
postmaster-context parameters: it is the pod-template annotation, so only their edits roll the pod.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from sampledb_operator.model.hba import OPERATOR_USERS
from sampledb_operator.model.pg_settings import needs_restart
from sampledb_operator.model.roles import CERTIFICATE_GROUP

CONFIG_DIR = "/etc/sampledb"
CONFIG_KEY = "postgresql.conf"
CONFIG_FILE = f"{CONFIG_DIR}/{CONFIG_KEY}"
HBA_KEY = "pg_hba.conf"
HBA_FILE = f"{CONFIG_DIR}/{HBA_KEY}"
RUN_DIR = "/var/run/postgresql"
INSTANCE_CONF = f"{RUN_DIR}/sampledb-instance.conf"  # written by instance.sh at each start: conninfo, slot
SYNCHRONOUS_STANDBYS = "ANY 1 (*)"
WAL_KEEP_SIZE = "256MB"  # WAL a promoted standby keeps, so the old primary can pg_rewind from it
# A replication connection that hears nothing for this long is dropped, on both ends (PostgreSQL's default: 60 s):
# a standby notices a primary cut off, and a cut-off primary's WAL senders end, within it; both bound the self-fence
# and the failover of a primary beyond reach (decide/replicas/primary_lease.py). spec.parameters may set either.
REPLICATION_TIMEOUTS = (("wal_sender_timeout", "15s"), ("wal_receiver_timeout", "15s"))

# Who may connect, and how: the image's rules (trust on the socket, scram-sha-256 over TCP) plus
# streaming replication over TCP for the standbys (the superuser of the superuser Secret, with its password). With
# spec.tls.required, TCP admits only encrypted connections (hostssl): an unencrypted one finds no line. With
# roles that log in by certificate (spec.roles[].certificate), the members of that group are admitted over TLS
# by a client certificate whose common name is the role (`cert`), before the password lines.
# The user's rules (spec.pgHba, model/hba.py) come after the socket, the replication line and a line for the
# operator's own user (so no rule locks the operator or the standbys out), in their order, before all of these.
CERTIFICATE_LINE = f"hostssl all          +{CERTIFICATE_GROUP} all cert\n"


def hba(*, tls_required: bool = False, certificates: bool = False, rules: Sequence[str] = ()) -> str:
    """The pg_hba.conf the server reads; `rules`: the lines of spec.pgHba (model/hba.line), already valid. Without
    rules it is what it always was."""
    tcp = "hostssl" if tls_required else "host"
    head = ("# Written by sampledb-operator.\n"
            "local   all          all                 trust\n"
            "local   replication  all                 trust\n")
    replication = f"{tcp:<8}replication  all          all    scram-sha-256\n"
    everyone = f"{tcp:<8}all          all          all    scram-sha-256\n"
    if not rules:
        return head + (CERTIFICATE_LINE if certificates else "") + everyone + replication
    return (head + replication + f"{tcp:<8}all          {','.join(OPERATOR_USERS):<12} all    scram-sha-256\n"
            + "# spec.pgHba\n" + "".join(f"{line}\n" for line in rules) + "# defaults\n"
            + (CERTIFICATE_LINE if certificates else "") + everyone)


HBA = hba()
RESTART_ANNOTATION = "sampledb.io/restart-parameters"  # on the pod template
PARAMETERS_HASH_ANNOTATION = "sampledb.io/parameters-hash"  # on a reload Job: the hash it applies


def quote(value: str) -> str:
    """A postgresql.conf string literal holding exactly `value`."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def render(parameters: Mapping[str, str] | None, pgdata: str, *, synchronous: bool = False,
           hba_file: str = HBA_FILE, client_ca: str | None = None) -> str:
    """The postgresql.conf the server reads: PGDATA's own file, the operator's settings (access rules, what
    pg_rewind needs, synchronous replication when asked, the replication connections' timeouts, the CA client
    certificates are checked with when roles log in by certificate), the instance's own file (instance.sh:
    primary_conninfo, primary_slot_name, cluster_name, TLS), then the parameters in name order."""
    lines = ["# Written by sampledb-operator from spec.parameters; edit the SampleDB, not this file.",
             f"include_if_exists = {quote(pgdata + '/postgresql.conf')}",
             f"hba_file = {quote(hba_file)}",
             *([f"ssl_ca_file = {quote(client_ca)}"] if client_ca else []),
             "wal_log_hints = 'on'",
             f"wal_keep_size = {quote(WAL_KEEP_SIZE)}",
             f"synchronous_standby_names = {quote(SYNCHRONOUS_STANDBYS if synchronous else '')}",
             *(f"{name} = {quote(value)}" for name, value in REPLICATION_TIMEOUTS),
             f"include_if_exists = {quote(INSTANCE_CONF)}"]
    lines += [f"{name} = {quote(str(value))}" for name, value in sorted((parameters or {}).items())]
    return "\n".join(lines) + "\n"


def _digest(parameters: Mapping[str, str]) -> str:
    return _digest_of(tuple(sorted(parameters.items())))


def _digest_of(items: tuple[tuple[str, str], ...]) -> str:
    """The digest of the settings `items` (name order)."""
    text = json.dumps(dict(items), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parameters_hash(parameters: Mapping[str, str] | None, *, synchronous: bool = False,
                    hba_rules: Sequence[str] = ()) -> str:
    """Identifies the whole set of reloadable settings the operator writes: the parameters, the
    replication mode and the access rules of spec.pgHba (recorded in status.appliedParameters once reloaded).
    Without synchronous replication or rules it is the parameters' hash alone, as it always was."""
    settings = dict(parameters or {})
    if synchronous:
        settings["synchronous_standby_names"] = SYNCHRONOUS_STANDBYS
    if hba_rules:
        settings["pg_hba"] = "\n".join(hba_rules)
    return _digest(settings)


def restart_hash(parameters: Mapping[str, str] | None, *, tls_required: bool = False) -> str:
    """Identifies the postmaster-context parameters only: changes when a change needs a restart. Required TLS
    counts as one (its pg_hba.conf is read at the restart it causes; without it the hash is what it always was)."""
    settings = {k: v for k, v in (parameters or {}).items() if needs_restart(k)}
    if tls_required:
        settings["hba"] = "hostssl"
    return _digest(settings)
