"""`kubectl sampledb report`: what the support archive holds and its bytes (pure; no I/O).

Role: from what plugin/support_read.py read (a SupportData, and the Masks of the Secret values it saw),
the archive's members (path and bytes), the .tar.gz itself, and the lines the command prints.

Invariants:
- a Secret is in the archive only as its name and the names of its keys (secrets.yaml): SupportData has
  no field that can hold a Secret's value, and a Secret object is never a member;
- every object, log, message and screen passes the package's redaction (observability/logging.py:
  values under keys that look secret, a Secret's data, credentials in URLs, `password=` pairs) and,
  here, SQL's `PASSWORD '...'`, `"password": "..."` pairs inside strings (JSON in annotations or log
  lines), and Masks: every value of the Secrets read (plain and base64), wherever it appears verbatim,
  becomes [REDACTED]; only the connection coordinates (host, port, user and database names) and values
  shorter than MIN_MASKED characters are not masked that way;
- the members are a function of their input (same data, same paths in the same order, same bytes), and
  so is the archive: regular files (mode 0644) under one directory named after the namespace, the
  database and the time of the report, with that time as every entry's (and the gzip header's) mtime.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import re
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.observability.logging import REDACTED, is_secret_key, redact_text, redact_value
from sampledb_operator.plugin.report import CHILD_KINDS, SecretInfo, event_time, strip_secret

MIN_MASKED = 6   # shorter Secret values are not masked wherever they appear ("app", "5432" would blank the report)
CONNECTION_KEYS = frozenset({"host", "port", "username", "user", "database", "dbname"})  # in status and Services
_SQL_PASSWORD = re.compile(r"\b(?P<key>password)(?P<sep>\s+)(?P<val>[EU]?&?'(?:[^']|'')*')", re.IGNORECASE)
_QUOTED_PAIR = re.compile(r'"(?P<key>[A-Za-z0-9_.\-]+)"(?P<sep>\s*:\s*)"(?P<val>(?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Masks:
    """Values that must not appear anywhere in the archive (kept out of repr)."""

    values: frozenset[str] = field(default=frozenset(), repr=False)

    def __or__(self, other: Masks) -> Masks:
        return Masks(self.values | other.values)

    def apply(self, text: str) -> str:
        for value in sorted(self.values, key=len, reverse=True):   # the longest first: no half-masked value
            if value in text:
                text = text.replace(value, REDACTED)
        return text


def reduce_secret(secret: Obj) -> tuple[SecretInfo, Masks]:
    """A Secret read from the API server as its name and key names, and its values as Masks (never kept
    otherwise): each value (decoded, and as the base64 the API server gave) except the connection
    coordinates and short ones."""
    masked: set[str] = set()
    items = [(k, v, True) for k, v in (secret.get("data") or {}).items()]
    items += [(k, v, False) for k, v in (secret.get("stringData") or {}).items()]
    for key, value, encoded in items:
        if not isinstance(value, str) or str(key).lower() in CONNECTION_KEYS:
            continue
        plain = value
        if encoded:
            try:
                plain = base64.b64decode(value, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                plain = ""   # binary: only its base64 form can appear in text
        for form in (plain.strip(), plain, value if encoded else base64.b64encode(value.encode()).decode()):
            if len(form) >= MIN_MASKED:
                masked.add(form)
    return strip_secret(secret), Masks(frozenset(masked))


def credentials_secret(db: Obj) -> str:
    """The name of the database's credentials Secret (status.secretName, else the operator's naming)."""
    return str((db.get("status") or {}).get("secretName") or names.secret_name(str(db["metadata"]["name"])))


def referenced_secrets(db: Obj) -> dict[str, str]:
    """Every Secret the SampleDB uses, by name -> where it is named: its credentials Secret and each
    `secretName` or `secretKeyRef`/`secretRef` name in its spec (init SQL, object store credentials)."""
    found = {credentials_secret(db): "status.secretName"}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                where = f"{path}.{key}"
                if key == "secretName" and isinstance(item, str) and item:
                    found.setdefault(item, where)
                elif key in ("secretKeyRef", "secretRef") and isinstance(item, dict) and item.get("name"):
                    found.setdefault(str(item["name"]), where)
                else:
                    walk(item, where)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")

    walk(db.get("spec") or {}, "spec")
    return found


def events_about(events: Iterable[Obj], objects: Iterable[Obj]) -> list[Obj]:
    """The Events whose involved object is one of `objects` (by kind and name), oldest first."""
    wanted = {(str(o.get("kind")), str((o.get("metadata") or {}).get("name"))) for o in objects}
    mine = [e for e in events if (str((e.get("involvedObject") or {}).get("kind")),
                                  str((e.get("involvedObject") or {}).get("name"))) in wanted]
    return sorted(mine, key=lambda e: (event_time(e), str((e.get("metadata") or {}).get("name"))))


def redact_string(text: str, masks: Masks) -> str:
    """Free text with credentials masked: the package's redaction, SQL passwords, quoted secret pairs, Masks."""
    text = redact_text(text)
    text = _SQL_PASSWORD.sub(lambda m: f"{m['key']}{m['sep']}'{REDACTED}'", text)
    text = _QUOTED_PAIR.sub(lambda m: f'"{m["key"]}"{m["sep"]}"{REDACTED}"' if is_secret_key(m["key"]) else m[0],
                            text)
    return masks.apply(text)


def redact_object(obj: Any, masks: Masks) -> Any:
    """A copy of an API object with secret-looking entries masked (the package's redact_value) and every
    string, at any depth, passed through redact_string."""
    return _strings(redact_value(obj), lambda s: redact_string(s, masks))


def _strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {key: _strings(item, change) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strings(item, change) for item in value]
    return value


@dataclass(frozen=True)
class InstanceLog:
    """The end of one instance's PostgreSQL log (`previous`: its container's last run, after a restart)."""

    pod: str
    text: str
    previous: bool = False


@dataclass(frozen=True)
class SupportData:
    """Everything a report holds, as read; no Secret values (see Masks)."""

    namespace: str
    name: str
    taken_at: datetime
    db: Obj
    backups: list[Obj] = field(default_factory=list)
    children: list[Obj] = field(default_factory=list)     # objects of report.CHILD_KINDS, each with its kind
    secrets: list[SecretInfo] = field(default_factory=list)
    missing_secrets: dict[str, str] = field(default_factory=dict)   # name -> where the SampleDB names it
    events: list[Obj] = field(default_factory=list)       # oldest first
    logs: list[InstanceLog] = field(default_factory=list)
    log_lines: int = 0
    status_screen: str = ""
    server_version: str | None = None
    plugin_version: str = ""
    problems: list[str] = field(default_factory=list)     # what could not be read, and why


@dataclass(frozen=True)
class Member:
    """One file of the archive: its path under the archive's directory and its bytes."""

    path: str
    data: bytes


def archive_root(namespace: str, name: str, taken_at: datetime) -> str:
    """The archive's directory (and, with .tar.gz, its default file name)."""
    return f"sampledb-report-{namespace}-{name}-{taken_at.astimezone(UTC):%Y%m%dT%H%M%SZ}"


def _yaml(value: Any) -> bytes:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False).encode()


def _folder(kind: str) -> str:
    return next((r.plural for r in CHILD_KINDS if r.kind == kind), kind.lower() + "s")


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "unnamed").replace("/", "_")


def members(data: SupportData, masks: Masks) -> list[Member]:
    """The archive's files, README.txt first; every one redacted."""
    def obj(value: Any) -> bytes:
        return _yaml(redact_object(value, masks))

    out = [Member("status.txt", redact_string(data.status_screen, masks).encode()),
           Member("sampledb.yaml", obj(data.db)),
           Member("status.yaml", obj(data.db.get("status") or {}))]
    out += [Member(f"backups/{_name(b)}.yaml", obj(b)) for b in sorted(data.backups, key=_name)]
    out += [Member(f"{_folder(str(c.get('kind')))}/{_name(c)}.yaml", obj(c))
            for c in sorted(data.children, key=lambda c: (_folder(str(c.get("kind"))), _name(c)))]
    secrets: list[dict[str, Any]] = [{"name": s.name, "keys": list(s.keys), "created": s.created}
                                     for s in sorted(data.secrets, key=lambda s: s.name)]
    secrets += [{"name": n, "missing": True, "namedBy": where} for n, where in sorted(data.missing_secrets.items())]
    out.append(Member("secrets.yaml", obj(secrets)))
    out.append(Member("events.yaml", obj(data.events)))
    out += [Member(f"logs/{log.pod}{'.previous' if log.previous else ''}.log", redact_string(log.text, masks).encode())
            for log in sorted(data.logs, key=lambda log: (log.pod, log.previous))]
    return [Member("README.txt", _readme(data, out, masks).encode()), *out]


_ABOUT = {"status.txt": "the `kubectl sampledb status` screen",
          "sampledb.yaml": "the SampleDB, with its status",
          "status.yaml": "its status alone",
          "secrets.yaml": "the Secrets it uses: names and key names only, never values",
          "events.yaml": "the namespace's Events about the SampleDB, its backups and its children"}


def _about(path: str, log_lines: int) -> str:
    """One line about a member, for README.txt."""
    if path in _ABOUT:
        return _ABOUT[path]
    top = path.split("/", 1)[0]
    if top == "backups":
        return "a SampleDBBackup of the database"
    if top == "logs":
        run = ", its container's previous run" if path.endswith(".previous.log") else ""
        return f"the last {log_lines} lines of an instance's PostgreSQL log{run}"
    return "a child of the database (labelled sampledb.io/database)"


def _readme(data: SupportData, files: list[Member], masks: Masks) -> str:
    lines = [f"kubectl sampledb report: SampleDB {data.namespace}/{data.name}",
             f"Taken:      {data.taken_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ} by kubectl-sampledb"
             f" {data.plugin_version or '-'}",
             f"Kubernetes: {data.server_version or '-'}",
             "", "Files"]
    width = max(len(f.path) for f in files) + 3
    lines += [f"  {f.path:<{width}}{_about(f.path, data.log_lines)}" for f in files]
    if data.problems:
        lines += ["", "Not included (could not be read)", *(f"  {redact_string(p, masks)}" for p in data.problems)]
    lines += ["", "Redaction: Secrets appear by name and key names only. Values under keys that look secret",
              "(password, token, key, credentials, ...), credentials in URLs, `password=...` and SQL `PASSWORD '...'`,",
              "and any value of the Secrets read found verbatim were replaced with [REDACTED]. A log line can quote",
              "anything a statement held: read the archive before you share it."]
    return "\n".join(lines) + "\n"


def archive_bytes(root: str, files: list[Member], taken_at: datetime) -> bytes:
    """The .tar.gz of `files` under the directory `root`."""
    mtime = int(taken_at.timestamp())
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=buffer, mode="wb", mtime=mtime) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folder = tarfile.TarInfo(root)
        folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, mtime
        tar.addfile(folder)
        for member in files:
            info = tarfile.TarInfo(f"{root}/{member.path}")
            info.size, info.mode, info.mtime = len(member.data), 0o644, mtime
            tar.addfile(info, io.BytesIO(member.data))
    return buffer.getvalue()


def summary(path: str, root: str, files: list[Member], size: int, *, problems: list[str], masks: Masks) -> str:
    """What `report` prints: the file written, each member with its size, and what was left out."""
    lines = [f"wrote {path} ({_size(size)}, {len(files)} files in {root}/)"]
    width = max(len(f.path) for f in files) + 3
    lines += [f"  {f.path:<{width}}{_size(len(f.data))}" for f in files]
    if problems:
        lines += ["not included (could not be read):", *(f"  {redact_string(p, masks)}" for p in problems)]
    lines.append("Secrets are in it by name and key names only; values that look like passwords or keys are"
                  " [REDACTED]. Read it before you share it.")
    return "\n".join(lines) + "\n"


def _size(n: int) -> str:
    return f"{n}B" if n < 1024 else f"{n / 1024:.1f}KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f}MiB"
