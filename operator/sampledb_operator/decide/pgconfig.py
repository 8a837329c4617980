"""spec.parameters -> the server's postgresql.conf, and the hashes that say what changed.

Pure. The file lives in the database's ConfigMap (key CONFIG_KEY), mounted read-only at CONFIG_DIR
in the database container, which runs `postgres -c config_file=CONFIG_FILE`. PGDATA stays the
configuration directory, so data_directory, hba_file and ident_file keep their defaults in PGDATA,
and postgresql.auto.conf (ALTER SYSTEM) is still read after this file. The file first includes
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
from collections.abc import Mapping

from sampledb_operator.model.pg_settings import needs_restart

CONFIG_DIR = "/etc/sampledb"
CONFIG_KEY = "postgresql.conf"
CONFIG_FILE = f"{CONFIG_DIR}/{CONFIG_KEY}"
RESTART_ANNOTATION = "sampledb.io/restart-parameters"  # on the pod template
PARAMETERS_HASH_ANNOTATION = "sampledb.io/parameters-hash"  # on a reload Job: the hash it applies


def quote(value: str) -> str:
    """A postgresql.conf string literal holding exactly `value`."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def render(parameters: Mapping[str, str] | None, pgdata: str) -> str:
    """The postgresql.conf the server reads: PGDATA's own file, then the parameters in name order."""
    lines = ["# Written by sampledb-operator from spec.parameters; edit the SampleDB, not this file.",
             f"include_if_exists = {quote(pgdata + '/postgresql.conf')}"]
    lines += [f"{name} = {quote(str(value))}" for name, value in sorted((parameters or {}).items())]
    return "\n".join(lines) + "\n"


def _digest(parameters: Mapping[str, str]) -> str:
    text = json.dumps(dict(sorted(parameters.items())), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parameters_hash(parameters: Mapping[str, str] | None) -> str:
    """Identifies the whole set of parameters (recorded in status.appliedParameters once reloaded)."""
    return _digest(dict(parameters or {}))


def restart_hash(parameters: Mapping[str, str] | None) -> str:
    """Identifies the postmaster-context parameters only: changes when a change needs a restart."""
    return _digest({k: v for k, v in (parameters or {}).items() if needs_restart(k)})
