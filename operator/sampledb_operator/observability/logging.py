"""Structured logging with structlog; stdlib records (aiohttp, kubernetes_asyncio) are routed through it.

Invariants: every record, structlog's or stdlib's, passes the same chain (context variables, UTC
ISO timestamp, level, logger name, redaction) and one renderer (JSON lines or console). Redaction
is defense in depth: values under keys that look secret (password, token, authorization, a
Secret's data/stringData, the value of an env entry named like one, ...) are masked anywhere in
the event, and so are credentials in URLs and `password=` pairs inside strings; the caller's
objects are never mutated. This module imports nothing else of the package.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

REDACTED = "[REDACTED]"
NOISY_LOGGERS = ("aiohttp", "kubernetes_asyncio", "asyncio", "urllib3")

_SECRET_KEY = re.compile(
    r"password|passwd|(^|[_.-])pass$|passphrase|secret|token|authorization|^auth$|api[-_]?key|credential|"
    r"stringdata|private[-_]?key|^cookie$|^set-cookie$",
    re.IGNORECASE,
)
# keys that merely name or reference a secret ("secretName", "credentials_secret_ref", "token_count")
_REFERENCE_KEY = re.compile(r"(name|ref|_count|_total|expir\w*|_seconds)$", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@",
                              re.IGNORECASE)
_KV_SECRET = re.compile(
    r"\b(?P<key>password|passwd|pwd|token|secret)(?P<sep>\s*[=:]\s*)(?P<val>'[^']*'|\"[^\"]*\"|\S+)",
    re.IGNORECASE,
)
_MAX_DEPTH = 12


def is_secret_key(key: str) -> bool:
    """True when a value stored under `key` must not be logged."""
    return bool(_SECRET_KEY.search(key)) and not _REFERENCE_KEY.search(key)


def redact_text(text: str) -> str:
    """Mask credentials inside free text: "scheme://user:pw@" and "password=..." pairs."""
    text = _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    return _KV_SECRET.sub(lambda m: f"{m['key']}{m['sep']}{REDACTED}", text)


def redact_value(value: Any, depth: int = 0) -> Any:
    """A copy of `value` with secret-looking entries masked (containers copied, never mutated)."""
    if depth > _MAX_DEPTH:
        return REDACTED if isinstance(value, Mapping | list | tuple) else value
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return _redact_mapping(value, depth)
    if isinstance(value, list | tuple):
        return [redact_value(item, depth + 1) for item in value]
    return value


def _redact_mapping(value: Mapping[Any, Any], depth: int) -> dict[Any, Any]:
    is_secret_object = value.get("kind") == "Secret"
    entry_name = value.get("name")   # {"name": "PGPASSWORD", "value": ...}: a container env entry
    is_secret_entry = isinstance(entry_name, str) and is_secret_key(entry_name)
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if isinstance(key, str) and (
            is_secret_key(key) or (is_secret_object and key == "data") or (is_secret_entry and key == "value")
        ):
            out[key] = REDACTED
        else:
            out[key] = redact_value(item, depth + 1)
    return out


def redact_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: mask secret-looking values anywhere in the event dict."""
    for key in list(event_dict):
        if key.startswith("_") or key in ("exc_info", "stack_info"):
            continue   # stdlib plumbing (_record, _from_structlog) and exception objects
        if is_secret_key(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = redact_value(event_dict[key])
    return event_dict


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        redact_secrets,
    ]


def _renderer_chain(fmt: Literal["json", "console"]) -> list[Processor]:
    meta: Processor = structlog.stdlib.ProcessorFormatter.remove_processors_meta
    if fmt == "console":
        return [meta, structlog.dev.ConsoleRenderer(colors=False)]
    return [meta, structlog.processors.format_exc_info, _redact_exception, _leading_keys_first,
            structlog.processors.JSONRenderer(sort_keys=False)]


_LEADING_KEYS = ("timestamp", "level", "logger", "event")


def _leading_keys_first(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Put timestamp, level, logger and event first in each JSON line, for human readers."""
    ordered = {key: event_dict[key] for key in _LEADING_KEYS if key in event_dict}
    ordered.update((key, value) for key, value in event_dict.items() if key not in ordered)
    return ordered


def _redact_exception(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    exc = event_dict.get("exception")
    if isinstance(exc, str):
        event_dict["exception"] = redact_text(exc)
    return event_dict


def configure_logging(level: str, fmt: Literal["json", "console"], *, stream: TextIO | None = None) -> None:
    """Configure structlog and the stdlib root logger; may be called again (tests, reconfiguration).

    `level` is debug|info|warning|error; the noisy libraries (aiohttp, kubernetes_asyncio, asyncio)
    log at WARNING or above whatever the level. Output goes to `stream` (default: stderr).
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level: {level!r}")
    shared = _shared_processors()
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, structlog.stdlib.PositionalArgumentsFormatter(),
                    *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=_renderer_chain(fmt))
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
    logging.captureWarnings(True)


def get_logger(name: str, **initial: Any) -> structlog.stdlib.BoundLogger:
    """A structlog logger named `name` (the stdlib logger name), with `initial` bound values."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name, **initial)
    return logger

