"""Logging: JSON/console output with the agreed fields, stdlib routed through, secrets never printed."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from sampledb_operator.observability.logging import (
    REDACTED,
    configure_logging,
    get_logger,
    is_secret_key,
    redact_text,
    redact_value,
)

SECRET = "s3cr3t-value"


@pytest.fixture
def out() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    configure_logging("info", "json", stream=buf)
    yield buf
    structlog.contextvars.clear_contextvars()
    logging.getLogger().handlers.clear()


def _lines(buf: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]


def test_json_record_has_timestamp_level_logger_event_and_context(out: io.StringIO) -> None:
    structlog.contextvars.bind_contextvars(controller="sampledb", reconcile_id="r1")
    get_logger("sampledb_operator.test").info("reconciled", namespace="ns", name="db")
    [record] = _lines(out)
    assert record["event"] == "reconciled"
    assert record["level"] == "info"
    assert record["logger"] == "sampledb_operator.test"
    assert record["timestamp"].endswith("Z") and "T" in record["timestamp"]
    assert record["controller"] == "sampledb" and record["reconcile_id"] == "r1"
    assert (record["namespace"], record["name"]) == ("ns", "db")
    assert list(record)[:4] == ["timestamp", "level", "logger", "event"]


def test_records_below_the_level_are_dropped(out: io.StringIO) -> None:
    log = get_logger("sampledb_operator.test")
    log.debug("hidden")
    log.info("shown")
    assert [r["event"] for r in _lines(out)] == ["shown"]


def test_exception_is_rendered_as_a_traceback_string(out: io.StringIO) -> None:
    try:
        raise RuntimeError("broken thing")
    except RuntimeError:
        get_logger("x").exception("failed")
    [record] = _lines(out)
    assert record["level"] == "error"
    assert "RuntimeError: broken thing" in record["exception"]
    assert "Traceback" in record["exception"]


def test_stdlib_records_pass_the_same_chain_and_libraries_log_warning_and_above(out: io.StringIO) -> None:
    logging.getLogger("aiohttp.client").info("chatty")
    logging.getLogger("kubernetes_asyncio.client.rest").debug("chatty")
    logging.getLogger("kubernetes_asyncio.watch").warning("watch dropped password=%s", SECRET)
    logging.getLogger("sampledb_operator.plain").info("plain %d", 3)
    records = _lines(out)
    assert [r["event"] for r in records] == [f"watch dropped password={REDACTED}", "plain 3"]
    assert records[0]["logger"] == "kubernetes_asyncio.watch" and records[0]["level"] == "warning"
    assert "timestamp" in records[1]
    assert SECRET not in out.getvalue()


def test_libraries_stay_at_warning_even_when_level_is_debug() -> None:
    buf = io.StringIO()
    configure_logging("debug", "json", stream=buf)
    try:
        logging.getLogger("aiohttp.access").info("GET /healthz")
        get_logger("sampledb_operator.x").debug("mine")
        assert [r["event"] for r in _lines(buf)] == ["mine"]
    finally:
        logging.getLogger().handlers.clear()


def test_secret_values_never_reach_the_output(out: io.StringIO) -> None:
    secret_obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-credentials"},
                  "data": {"password": "czNjcjN0"}, "stringData": {"password": SECRET}}
    get_logger("x").info(
        "applying",
        password=SECRET,
        superuserPassword=SECRET,
        headers={"Authorization": f"Bearer {SECRET}", "Accept": "application/json"},
        objects=[secret_obj],
        env=[{"name": "PGPASSWORD", "value": SECRET}],
        dsn=f"postgresql://postgres:{SECRET}@db:5432/app",
        api_token=SECRET,
        secretName="db-credentials",
    )
    text = out.getvalue()
    assert SECRET not in text
    assert "czNjcjN0" not in text
    [record] = _lines(out)
    assert record["password"] == REDACTED
    assert record["superuserPassword"] == REDACTED
    assert record["headers"] == {"Authorization": REDACTED, "Accept": "application/json"}
    assert record["objects"][0]["data"] == REDACTED
    assert record["objects"][0]["stringData"] == REDACTED
    assert record["objects"][0]["metadata"] == {"name": "db-credentials"}
    assert record["dsn"] == f"postgresql://postgres:{REDACTED}@db:5432/app"
    assert record["secretName"] == "db-credentials"     # a reference, not a secret


def test_secret_in_the_message_is_masked(out: io.StringIO) -> None:
    get_logger("x").warning(f"connect failed: host=db user=app password={SECRET} sslmode=require")
    assert SECRET not in out.getvalue()
    assert "sslmode=require" in out.getvalue()


def test_redaction_never_mutates_the_callers_object(out: io.StringIO) -> None:
    cached = {"kind": "Secret", "data": {"password": "eA=="}, "metadata": {"labels": {"token": "t"}}}
    get_logger("x").info("seen", obj=cached)
    assert cached == {"kind": "Secret", "data": {"password": "eA=="}, "metadata": {"labels": {"token": "t"}}}


def test_console_format_renders_key_values_without_secrets() -> None:
    buf = io.StringIO()
    configure_logging("info", "console", stream=buf)
    try:
        get_logger("sampledb_operator.c").info("ready", workers=4, password=SECRET)
        text = buf.getvalue()
        assert "ready" in text and "workers=4" in text and "sampledb_operator.c" in text
        assert SECRET not in text
        assert not text.lstrip().startswith("{")
    finally:
        logging.getLogger().handlers.clear()


@pytest.mark.parametrize("key", ["password", "PGPASSWORD", "passwd", "client_secret", "token", "stringData",
                                 "Authorization", "api_key", "tls.private_key", "credentials"])
def test_keys_that_look_secret(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["name", "secretName", "credentials_secret_ref", "namespace", "compass",
                                 "passwordSecretRef", "token_count", "data"])
def test_keys_that_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


def test_redact_value_handles_deep_nesting_and_tuples() -> None:
    value: Any = {"a": ({"b": {"token": "x"}},)}
    assert redact_value(value) == {"a": [{"b": {"token": REDACTED}}]}


def test_redact_text_masks_url_credentials_and_pairs() -> None:
    assert redact_text("https://u:p@h/x token: abc") == f"https://u:{REDACTED}@h/x token: {REDACTED}"
    assert redact_text("nothing to hide") == "nothing to hide"


def test_unknown_level_is_rejected() -> None:
    with pytest.raises(ValueError, match="verbose"):
        configure_logging("verbose", "json", stream=io.StringIO())
