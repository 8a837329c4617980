"""Settings: defaults, precedence flag > env > default, and one-line errors naming flag and variable."""

from __future__ import annotations

import io

import pytest

from sampledb_operator.config import (
    OPTIONS,
    OPTIONS_BY_NAME,
    ConfigError,
    Settings,
    load_settings,
    parse_bind,
)


def test_defaults_match_controller_runtime_conventions() -> None:
    s = load_settings({}, {})
    assert s.workers == 16
    assert s.metrics_bind == ":8080" and s.health_bind == ":8081"
    assert s.leader_elect is True
    assert s.lease_name == "sampledb-operator"
    assert s.lease_namespace == "sampledb-system"
    assert (s.lease_duration, s.renew_deadline, s.retry_period) == (15, 10, 2)
    assert s.resync_period == 36000
    assert s.shutdown_timeout == 30
    assert s.exec_plugin_timeout == 30
    assert s.namespaces == [] and s.watch_namespaces == [None]
    assert s.field_manager == "sampledb-operator"
    assert s.log_level == "info" and s.log_format == "auto"
    assert s.kubeconfig is None and s.context is None and s.in_cluster is None
    assert s.chaos_annotation is False  # the sampledb.io/chaos annotation is opt-in


def test_the_chaos_annotation_setting_is_a_flag_and_a_variable() -> None:
    option = OPTIONS_BY_NAME["chaos_annotation"]
    assert (option.flag, option.env, option.kind) == ("--chaos-annotation", "SAMPLEDB_CHAOS_ANNOTATION", "bool")
    assert load_settings({}, {"SAMPLEDB_CHAOS_ANNOTATION": "true"}).chaos_annotation is True
    assert load_settings({"chaos_annotation": False}, {"SAMPLEDB_CHAOS_ANNOTATION": "true"}).chaos_annotation is False


def test_every_setting_has_exactly_one_option_with_derived_flag_and_env() -> None:
    assert set(OPTIONS_BY_NAME) == set(Settings.model_fields)
    assert len(OPTIONS) == len(OPTIONS_BY_NAME)
    assert OPTIONS_BY_NAME["lease_duration"].flag == "--lease-duration"
    assert OPTIONS_BY_NAME["lease_duration"].env == "SAMPLEDB_LEASE_DURATION"


def test_identity_is_unique_per_process_and_starts_with_hostname() -> None:
    a, b = load_settings({}, {}), load_settings({}, {})
    assert a.identity != b.identity
    host, _, suffix = a.identity.rpartition("_")
    assert host and len(suffix) == 8


def test_lease_namespace_defaults_to_pod_namespace() -> None:
    assert load_settings({}, {"POD_NAMESPACE": "ops"}).lease_namespace == "ops"
    assert load_settings({}, {"POD_NAMESPACE": "ops", "SAMPLEDB_LEASE_NAMESPACE": "x"}).lease_namespace == "x"


def test_environment_overrides_default_and_flag_overrides_environment() -> None:
    env = {"SAMPLEDB_WORKERS": "8", "SAMPLEDB_LOG_LEVEL": "debug"}
    assert load_settings({}, env).workers == 8
    s = load_settings({"workers": "16"}, env)
    assert s.workers == 16 and s.log_level == "debug"


def test_flag_false_overrides_environment_true() -> None:
    s = load_settings({"leader_elect": False}, {"SAMPLEDB_LEADER_ELECT": "true"})
    assert s.leader_elect is False


@pytest.mark.parametrize(("text", "expected"), [("true", True), ("0", False), ("OFF", False), ("yes", True)])
def test_boolean_environment_words(text: str, expected: bool) -> None:
    assert load_settings({}, {"SAMPLEDB_LEADER_ELECT": text}).leader_elect is expected


def test_namespaces_from_env_are_split_trimmed_and_deduplicated() -> None:
    s = load_settings({}, {"SAMPLEDB_NAMESPACES": " b, a,,b "})
    assert s.namespaces == ["a", "b"]
    assert s.watch_namespaces == ["a", "b"]


def test_empty_env_for_optional_setting_counts_as_unset() -> None:
    s = load_settings({}, {"SAMPLEDB_KUBECONFIG": "", "SAMPLEDB_IN_CLUSTER": "", "SAMPLEDB_NAMESPACES": ""})
    assert s.kubeconfig is None and s.in_cluster is None and s.namespaces == []


def test_empty_env_for_required_setting_is_rejected() -> None:
    with pytest.raises(ConfigError, match="SAMPLEDB_WORKERS"):
        load_settings({}, {"SAMPLEDB_WORKERS": ""})


@pytest.mark.parametrize(
    ("flags", "env", "names", "accepts"),
    [
        ({"workers": "65"}, {}, ("--workers", "SAMPLEDB_WORKERS"), "from 1 to 64"),
        ({}, {"SAMPLEDB_WORKERS": "four"}, ("SAMPLEDB_WORKERS", "--workers"), "from 1 to 64"),
        ({"log_level": "verbose"}, {}, ("--log-level",), "debug, info, warning, error"),
        ({}, {"SAMPLEDB_LOG_FORMAT": "xml"}, ("SAMPLEDB_LOG_FORMAT",), "json, console, auto"),
        ({"metrics_bind": "8080"}, {}, ("--metrics-bind",), "host:port"),
        ({"health_bind": ":99999"}, {}, ("--health-bind",), "host:port"),
        ({}, {"SAMPLEDB_LEADER_ELECT": "maybe"}, ("SAMPLEDB_LEADER_ELECT",), "true or false"),
        ({"namespaces": ["Bad_NS"]}, {}, ("--namespaces",), "namespace names"),
        ({"shutdown_timeout": "0"}, {}, ("--shutdown-timeout",), "> 0"),
        ({}, {"SAMPLEDB_EXEC_PLUGIN_TIMEOUT": "0"}, ("SAMPLEDB_EXEC_PLUGIN_TIMEOUT",), "> 0"),
        ({"resync_period": "-1"}, {}, ("--resync-period",), ">= 0"),
        ({"retry_period": "0.5"}, {}, ("--retry-period",), ">= 1"),
        ({"lease_duration": "nan"}, {}, ("--lease-duration",), ">= 1"),
    ],
)
def test_invalid_value_fails_with_one_line_naming_source_and_accepted_values(
    flags: dict[str, object], env: dict[str, str], names: tuple[str, ...], accepts: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(flags, env)
    message = str(info.value)
    assert "\n" not in message
    for name in names:
        assert name in message
    assert accepts in message


def test_lease_timings_must_be_ordered_and_the_message_names_all_three() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"renew_deadline": "15"}, {})
    message = str(info.value)
    for name in ("--lease-duration", "--renew-deadline", "--retry-period", "SAMPLEDB_RETRY_PERIOD"):
        assert name in message
    assert "\n" not in message
    with pytest.raises(ConfigError):
        load_settings({"retry_period": "9"}, {})   # 10 > 1.2 * 9 fails
    slow = load_settings({"lease_duration": "60", "renew_deadline": "40", "retry_period": "5"}, {})
    assert slow.retry_period == 5


def test_unknown_fields_are_rejected_when_constructed_directly() -> None:
    with pytest.raises(ValueError, match="image_registry"):
        Settings(image_registry="x")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("text", "expected"),
    [(":8080", (None, 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9090", ("::1", 9090)),
     ("localhost:1", ("localhost", 1))],
)
def test_parse_bind(text: str, expected: tuple[str | None, int]) -> None:
    assert parse_bind(text) == expected


def test_addresses_are_parsed_from_binds() -> None:
    s = load_settings({"metrics_bind": "0.0.0.0:9000", "health_bind": ":9001"}, {})
    assert s.metrics_address == ("0.0.0.0", 9000)
    assert s.health_address == (None, 9001)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_log_format_is_console_on_a_terminal_and_json_otherwise() -> None:
    s = load_settings({}, {})
    assert s.effective_log_format(_Tty()) == "console"
    assert s.effective_log_format(io.StringIO()) == "json"
    assert load_settings({"log_format": "json"}, {}).effective_log_format(_Tty()) == "json"
