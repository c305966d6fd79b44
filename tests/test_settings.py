"""Tests for obs.settings: precedence kwargs > env > defaults, and clear ConfigErrors."""

from __future__ import annotations

import dataclasses
import logging
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
from obs.errors import ConfigError
from obs.settings import (
    ENV_VARS,
    SETTINGS,
    Derived,
    Setting,
    Settings,
    load_settings,
    parse_level,
    read_variable,
)
from tools.gendocs import BEGIN, END, render

#: Real PEM files: certificate variables are checked at configure time.
_PEM_DIR = Path(tempfile.mkdtemp(prefix="obs-test-pem-"))
for _name in ("ca.pem", "c", "key", "k"):
    (_PEM_DIR / _name).write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
CA, C, KEY, K = (str(_PEM_DIR / n) for n in ("ca.pem", "c", "key", "k"))

# field, env var, env text, value parsed from the env text, kwarg, value parsed from the kwarg
PRECEDENCE: list[tuple[str, str, str, Any, Any, Any]] = [
    ("level", "OBS_LEVEL", "debug", logging.DEBUG, "ERROR", logging.ERROR),
    ("format", "OBS_FORMAT", "console", "console", "json", "json"),
    ("stream", "OBS_STREAM", "stdout", "stdout", "stderr", "stderr"),
    ("file", "OBS_FILE", "/tmp/a.jsonl", "/tmp/a.jsonl", "/tmp/b.jsonl", "/tmp/b.jsonl"),
    ("dedup_capacity", "OBS_DEDUP_CAPACITY", "50", 50, 7, 7),
    ("repeat_summary_seconds", "OBS_REPEAT_SUMMARY_SECONDS", "0", 0.0, 2.5, 2.5),
    ("export_all_ranks_level", "OBS_EXPORT_ALL_RANKS_LEVEL", "ERROR", 40, "info", 20),
    ("spool_dir", "OBS_SPOOL_DIR", "/tmp/spool-env", "/tmp/spool-env", "/tmp/kw", "/tmp/kw"),
    ("spool_max_bytes", "OBS_SPOOL_MAX_BYTES", "1024", 1024, 2048, 2048),
    ("shutdown_timeout", "OBS_SHUTDOWN_TIMEOUT", "0.5", 0.5, 9, 9.0),
    ("sdk_disabled", "OTEL_SDK_DISABLED", "true", True, False, False),
    ("service_name", "OTEL_SERVICE_NAME", "svc-env", "svc-env", "svc-kw", "svc-kw"),
    (
        "resource_attributes",
        "OTEL_RESOURCE_ATTRIBUTES",
        "a=1,b=x%20y",
        {"a": "1", "b": "x y"},
        {"k": 2},
        {"k": "2"},
    ),
    ("logs_exporter", "OTEL_LOGS_EXPORTER", "console", "console", "none", "none"),
    (
        "otlp_protocol",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "grpc",
        "grpc",
        "http/protobuf",
        "http/protobuf",
    ),
    (
        "otlp_protocol",
        "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
        "grpc",
        "grpc",
        "http/protobuf",
        "http/protobuf",
    ),
    ("otlp_headers", "OTEL_EXPORTER_OTLP_HEADERS", "x=1", {"x": "1"}, "y=2", {"y": "2"}),
    ("otlp_headers", "OTEL_EXPORTER_OTLP_LOGS_HEADERS", "x=1", {"x": "1"}, "y=2", {"y": "2"}),
    ("otlp_certificate", "OTEL_EXPORTER_OTLP_CERTIFICATE", CA, CA, K, K),
    ("otlp_certificate", "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", C, C, K, K),
    ("otlp_client_key", "OTEL_EXPORTER_OTLP_CLIENT_KEY", KEY, KEY, K, K),
    ("otlp_client_key", "OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY", KEY, KEY, K, K),
    ("otlp_client_certificate", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", C, C, K, K),
    ("otlp_client_certificate", "OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE", C, C, K, K),
    ("otlp_timeout", "OTEL_EXPORTER_OTLP_TIMEOUT", "4", 4.0, 1.5, 1.5),
    ("otlp_timeout", "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "4", 4.0, 1.5, 1.5),
    ("otlp_compression", "OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", "gzip", "none", "none"),
    ("otlp_compression", "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "gzip", "gzip", "none", "none"),
    ("blrp_schedule_delay_ms", "OTEL_BLRP_SCHEDULE_DELAY", "250", 250.0, 10, 10.0),
    ("blrp_max_queue_size", "OTEL_BLRP_MAX_QUEUE_SIZE", "64", 64, 8, 8),
    ("blrp_max_export_batch_size", "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", "32", 32, 4, 4),
    ("blrp_export_timeout_ms", "OTEL_BLRP_EXPORT_TIMEOUT", "500", 500.0, 100, 100.0),
    ("adopt_loggers", "OBS_ADOPT_LOGGERS", " vllm, ray.serve ", ("vllm", "ray.serve"), [], ()),
    ("adopt_loggers", "OBS_ADOPT_LOGGERS", "none", (), ("torch",), ("torch",)),
    ("adopt_loggers", "OBS_ADOPT_LOGGERS", " NONE ", (), "None", ()),
]

# env var, bad text, words the message must contain (the accepted values)
BAD_ENV: list[tuple[str, str, str]] = [
    ("OBS_LEVEL", "VERBOSE", "CRITICAL, DEBUG, ERROR, INFO, WARNING"),
    ("OBS_FORMAT", "xml", "json, console, auto"),
    ("OBS_STREAM", "stdlog", "stderr, stdout"),
    ("OBS_DEDUP_CAPACITY", "-5", "an integer >= 1"),
    ("OBS_DEDUP_CAPACITY", "0", "an integer >= 1"),
    ("OBS_DEDUP_CAPACITY", "ten", "an integer >= 1"),
    ("OBS_DEDUP_CAPACITY", "1.5", "an integer >= 1"),
    ("OBS_REPEAT_SUMMARY_SECONDS", "-1", "a number >= 0"),
    ("OBS_REPEAT_SUMMARY_SECONDS", "soon", "a number >= 0"),
    ("OBS_EXPORT_ALL_RANKS_LEVEL", "LOUD", "CRITICAL, DEBUG, ERROR, INFO, WARNING"),
    ("OBS_SPOOL_MAX_BYTES", "0", "an integer >= 1"),
    ("OBS_SHUTDOWN_TIMEOUT", "0", "a number > 0"),
    ("OBS_SHUTDOWN_TIMEOUT", "nan", "a number > 0"),
    ("OTEL_SDK_DISABLED", "maybe", "true or false"),
    ("OTEL_LOGS_EXPORTER", "zipkin", "otlp, console, none"),
    ("OTEL_RESOURCE_ATTRIBUTES", "a=1,broken", "comma-separated key=value pairs"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317", "an http:// or https:// URL with a host"),
    ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "ftp://x/", "an http:// or https:// URL with a host"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://", "an http:// or https:// URL with a host"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:99999", "a valid port"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift", "grpc, http/protobuf"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "grpc, http/protobuf"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "-3", "a number > 0"),
    ("OTEL_EXPORTER_OTLP_COMPRESSION", "brotli", "gzip, none"),
    ("OBS_ADOPT_LOGGERS", "torch;vllm", "comma-separated logger names"),
    ("OTEL_BLRP_MAX_QUEUE_SIZE", "many", "an integer >= 1"),
    ("OTEL_BLRP_SCHEDULE_DELAY", "0", "a number > 0"),
]

# keyword, bad value, words the message must contain
BAD_KWARGS: list[tuple[str, Any, str]] = [
    ("level", "loud", "CRITICAL, DEBUG, ERROR, INFO, WARNING"),
    ("level", True, "CRITICAL, DEBUG, ERROR, INFO, WARNING"),
    ("format", "yaml", "json, console, auto"),
    ("dedup_capacity", -1, "an integer >= 1"),
    ("dedup_capacity", 0, "an integer >= 1"),
    ("dedup_capacity", 1.5, "an integer >= 1"),
    ("dedup_capacity", float("inf"), "an integer >= 1"),
    ("dedup_capacity", True, "an integer >= 1"),
    ("dedup_capacity", [3], "an integer >= 1"),
    ("repeat_summary_seconds", -0.1, "a number >= 0"),
    ("shutdown_timeout", 0, "a number > 0"),
    ("otlp_endpoint", "localhost:4318", "an http:// or https:// URL with a host"),
    ("otlp_headers", "novalue", "comma-separated key=value pairs"),
    ("file", "   ", "a non-empty string"),
    ("stdlib_bridge", "sometimes", "true or false"),
    ("adopt_loggers", 7, "comma-separated logger names, or none"),
    ("file", "/logs/{nope}.jsonl", "placeholders allowed: {rank}, {local_rank}, {node_rank}"),
    ("file", "/logs/{rank.jsonl", "placeholders allowed: {rank}"),
    ("file", "/logs/{0}.jsonl", "placeholders allowed: {rank}"),
]


class TestPrecedence:
    @pytest.mark.parametrize("row", PRECEDENCE, ids=[f"{r[0]}-{r[1]}" for r in PRECEDENCE])
    def test_env_beats_default(self, row: tuple[str, str, str, Any, Any, Any]) -> None:
        """A set environment variable replaces the default."""
        field, var, env_text, env_value, _, _ = row
        assert env_value == getattr(load_settings({}, env={var: env_text}), field)

    @pytest.mark.parametrize("row", PRECEDENCE, ids=[f"{r[0]}-{r[1]}" for r in PRECEDENCE])
    def test_kwarg_beats_env(self, row: tuple[str, str, str, Any, Any, Any]) -> None:
        """A keyword argument wins over the environment variable."""
        field, var, env_text, _, kwarg, kw_value = row
        assert kw_value == getattr(load_settings({field: kwarg}, env={var: env_text}), field)

    @pytest.mark.parametrize(
        "field", sorted({row[0] for row in PRECEDENCE} - {"service_name", "spool_dir"})
    )
    def test_default_without_env(self, field: str) -> None:
        """With neither kwarg nor env the dataclass default is used."""
        assert getattr(Settings(), field) == getattr(load_settings({}, env={}), field)

    def test_default_spool_dir_is_per_user_under_tmp(self) -> None:
        """The default spool dir is $TMPDIR/obs-spool-$UID."""
        import os
        import tempfile

        expected = os.path.join(tempfile.gettempdir(), f"obs-spool-{os.getuid()}")
        assert expected == load_settings({}, env={}).spool_dir

    def test_logs_specific_var_beats_generic(self) -> None:
        """OTEL_EXPORTER_OTLP_LOGS_* overrides OTEL_EXPORTER_OTLP_* for the same setting."""
        env = {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_HEADERS": "a=1",
            "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "b=2",
        }
        settings = load_settings({}, env=env)
        assert ("grpc", {"b": "2"}) == (settings.otlp_protocol, settings.otlp_headers)

    def test_empty_env_value_means_unset(self) -> None:
        """An exported-but-empty variable (OBS_LEVEL=) falls back to the default."""
        assert logging.INFO == load_settings({}, env={"OBS_LEVEL": "  "}).level

    def test_none_kwarg_means_default(self) -> None:
        """``level=None`` is the default even when the env says otherwise."""
        assert logging.INFO == load_settings({"level": None}, env={"OBS_LEVEL": "ERROR"}).level

    def test_configure_reads_os_environ(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """obs.configure() reads the real environment and a kwarg still wins."""
        monkeypatch.setenv("OBS_LEVEL", "ERROR")
        monkeypatch.setenv("OBS_DEDUP_CAPACITY", "77")
        settings = obs.configure(format="json", sdk_disabled=True, dedup_capacity=5)
        assert (logging.ERROR, 5) == (settings.level, settings.dedup_capacity)

    def test_service_name_from_resource_attributes(self) -> None:
        """service.name in OTEL_RESOURCE_ATTRIBUTES is the default service name."""
        env = {"OTEL_RESOURCE_ATTRIBUTES": "service.name=vllm,team=infra"}
        assert "vllm" == load_settings({}, env=env).service_name

    def test_service_name_var_beats_resource_attribute(self) -> None:
        """OTEL_SERVICE_NAME wins over service.name in OTEL_RESOURCE_ATTRIBUTES (OTel spec)."""
        env = {"OTEL_RESOURCE_ATTRIBUTES": "service.name=vllm", "OTEL_SERVICE_NAME": "engine"}
        assert "engine" == load_settings({}, env=env).service_name

    def test_default_service_name_names_the_program(self) -> None:
        """Without any service name the default is unknown_service[:program]."""
        assert load_settings({}, env={}).service_name.startswith("unknown_service")

    def test_every_env_var_is_documented(self) -> None:
        """Every variable the precedence table exercises is listed in ENV_VARS."""
        assert set() == {row[1] for row in PRECEDENCE} - set(ENV_VARS)

    def test_readme_table_is_generated_from_the_table(self) -> None:
        """The README configuration table is exactly what SETTINGS generates (make docs)."""
        readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
        assert render(readme) == readme

    def test_readme_table_lists_every_env_var(self) -> None:
        """The generated README table names every variable obs reads, and no other."""
        readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
        table = readme.split(BEGIN, 1)[1].split(END, 1)[0]
        named = set(re.findall(r"^\| `([A-Z_]+)`(?:, `([A-Z_]+)`)?", table, re.MULTILINE))
        flat = {name for pair in named for name in pair if name}
        assert (set(), set()) == (set(ENV_VARS) - flat, flat - set(ENV_VARS))

    def test_every_settings_field_has_one_row(self) -> None:
        """Each Settings field is resolved by exactly one SETTINGS row (keyword-only ones too)."""
        fields = [f.name for f in dataclasses.fields(Settings) if f.name != "sources"]
        rows = [row.field for row in SETTINGS if row.field is not None]
        assert (sorted(fields), len(rows)) == (sorted(rows), len(set(rows)))

    def test_table_defaults_are_the_dataclass_defaults(self) -> None:
        """A row's plain default is the Settings field's default (no second source of truth)."""
        defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
        differ = {
            row.field: (row.default, defaults[row.field])
            for row in SETTINGS
            if row.field is not None
            and not isinstance(row.default, Derived)
            and defaults[row.field] is not dataclasses.MISSING
            and row.default != defaults[row.field]
        }
        assert {} == differ

    @pytest.mark.parametrize(
        "row",
        [r for r in SETTINGS if r.variables and not isinstance(r.default, Derived)],
        ids=lambda r: r.variables[0],
    )
    def test_unset_variables_give_the_default(self, row: Setting) -> None:
        """With none of its variables set, a field takes its row's default."""
        if row.field is None:
            assert row.default == read_variable(row.variables[0], env={})
        else:
            assert row.default == getattr(load_settings({}, env={}), row.field)

    def test_derived_defaults_follow_what_they_derive_from(self) -> None:
        """Derived defaults: the exporter follows the endpoint, service.name the resource
        attributes, the logs flag the variable the endpoint came from."""
        plain = load_settings({}, env={})
        env = {
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://c:4318/v1/logs",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=svc",
        }
        derived = load_settings({}, env=env)
        assert ("none", False) == (plain.logs_exporter, plain.otlp_endpoint_is_logs)
        assert ("otlp", True, "svc") == (
            derived.logs_exporter,
            derived.otlp_endpoint_is_logs,
            derived.service_name,
        )

    def test_lax_loading_falls_back_to_the_next_variable(self) -> None:
        """On the lazy path a bad logs-specific value is reported and the general one used."""
        errors: list[ConfigError] = []
        env = {"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT": "soon", "OTEL_EXPORTER_OTLP_TIMEOUT": "4"}
        settings = load_settings({}, env=env, errors=errors)
        assert (4.0, ["OTEL_EXPORTER_OTLP_LOGS_TIMEOUT"]) == (
            settings.otlp_timeout,
            [e.variable for e in errors],
        )

    def test_read_variable_parses_through_the_row(self) -> None:
        """A variable read outside Settings (OBS_VLLM) uses its row's parser and errors."""
        assert (True, False) == (
            read_variable("OBS_VLLM", env={"OBS_VLLM": "yes"}),
            read_variable("OBS_VLLM", env={"OBS_VLLM": " "}),
        )
        with pytest.raises(ConfigError) as info:
            read_variable("OBS_VLLM", env={"OBS_VLLM": "maybe"})
        assert "OBS_VLLM" == info.value.variable

    @pytest.mark.parametrize(
        ("env", "expected"),
        [({}, (False, False)), ({"NO_COLOR": "x"}, (True, False)),
         ({"FORCE_COLOR": "0"}, (False, False)), ({"FORCE_COLOR": "3"}, (False, True))],
    )  # fmt: skip
    def test_color_variables_never_fail(self, env: dict[str, str], expected: object) -> None:
        """NO_COLOR (any non-empty) and FORCE_COLOR (not 0) follow their conventions."""
        settings = load_settings({}, env=env)
        assert expected == (settings.no_color, settings.force_color)


class TestFileTemplate:
    def test_placeholders_are_kept_for_later(self) -> None:
        """OBS_FILE with {rank}/{local_rank}/{node_rank}/{host}/{pid} is accepted unfilled."""
        template = "/logs/{host}/n{node_rank}-r{rank}-l{local_rank}-{pid}.jsonl"
        assert template == load_settings({}, env={"OBS_FILE": template}).file

    def test_bad_placeholder_in_env(self) -> None:
        """An unknown placeholder in OBS_FILE is a ConfigError naming OBS_FILE."""
        with pytest.raises(ConfigError) as info:
            load_settings({}, env={"OBS_FILE": "/logs/{gpu}.jsonl"})
        assert ("OBS_FILE", True) == (info.value.variable, "{pid}" in str(info.value))


class TestLevels:
    @pytest.mark.parametrize(
        ("raw", "expected"),
        [("debug", 10), ("Info", 20), ("WARN", 30), ("warning", 30), ("15", 15), (40, 40)],
    )
    def test_parse_level(self, raw: object, expected: int) -> None:
        """Level names in any case, WARN, digit strings and ints are accepted."""
        assert expected == parse_level("OBS_LEVEL", raw)


class TestErrors:
    @pytest.mark.parametrize(("var", "bad", "accepted"), BAD_ENV)
    def test_bad_env_value(self, var: str, bad: str, accepted: str) -> None:
        """A bad env value raises ConfigError naming the variable and the accepted values."""
        with pytest.raises(ConfigError) as info:
            load_settings({}, env={var: bad})
        assert (var, bad) == (info.value.variable, info.value.value)
        assert str(info.value).startswith(f"{var}={bad!r} is not valid")
        assert accepted in str(info.value)

    @pytest.mark.parametrize(("field", "bad", "accepted"), BAD_KWARGS)
    def test_bad_kwarg_value(self, field: str, bad: Any, accepted: str) -> None:
        """A bad keyword value raises ConfigError naming the keyword and the accepted values."""
        with pytest.raises(ConfigError) as info:
            load_settings({field: bad}, env={})
        assert field == info.value.variable
        assert accepted in str(info.value)

    def test_unknown_kwarg(self) -> None:
        """An unknown keyword raises ConfigError listing the Settings fields."""
        with pytest.raises(ConfigError) as info:
            load_settings({"levle": "INFO"}, env={})
        assert "levle" == info.value.variable
        assert "a Settings field: " in str(info.value)
        assert "level" in str(info.value).split("a Settings field: ")[1].split(", ")

    def test_config_error_is_a_value_error(self) -> None:
        """ConfigError subclasses ValueError, so generic handlers still catch it."""
        assert issubclass(obs.ConfigError, ValueError)

    def test_configure_raises_at_configure_time(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """obs.configure() raises the ConfigError itself, and nothing is swapped in."""
        monkeypatch.setenv("OBS_DEDUP_CAPACITY", "-1")
        with pytest.raises(obs.ConfigError) as info:
            obs.configure()
        assert "OBS_DEDUP_CAPACITY" == info.value.variable
        from obs._config import STATE

        assert STATE.runtime is None


class TestEndpoints:
    def test_http_endpoint_gets_v1_logs(self) -> None:
        """OTEL_EXPORTER_OTLP_ENDPOINT over HTTP gets /v1/logs appended (once, no //)."""
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
        assert "http://collector:4318/v1/logs" == load_settings({}, env=env).otlp_logs_url

    def test_http_endpoint_with_path_prefix(self) -> None:
        """A base URL with a path keeps it before /v1/logs."""
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://gw.example/otlp"}
        assert "https://gw.example/otlp/v1/logs" == load_settings({}, env=env).otlp_logs_url

    def test_logs_endpoint_used_as_is(self) -> None:
        """OTEL_EXPORTER_OTLP_LOGS_ENDPOINT is the logs URL exactly as given."""
        env = {
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://c:4318/custom/logs",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318",
        }
        assert "http://c:4318/custom/logs" == load_settings({}, env=env).otlp_logs_url

    def test_grpc_endpoint_used_as_is(self) -> None:
        """With protocol grpc the base endpoint is not given a path."""
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        }
        assert "http://collector:4317" == load_settings({}, env=env).otlp_logs_url

    def test_kwarg_endpoint_is_a_base_url(self) -> None:
        """An ``otlp_endpoint=`` kwarg is a base URL (gets /v1/logs) and beats the env."""
        env = {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://env:4318/v1/logs"}
        settings = load_settings({"otlp_endpoint": "http://kw:4318"}, env=env)
        assert "http://kw:4318/v1/logs" == settings.otlp_logs_url

    def test_kwarg_endpoint_can_be_logs_specific(self) -> None:
        """``otlp_endpoint_is_logs=True`` makes the kwarg endpoint the logs URL as is."""
        settings = load_settings(
            {"otlp_endpoint": "http://kw:4318/in", "otlp_endpoint_is_logs": True}, env={}
        )
        assert "http://kw:4318/in" == settings.otlp_logs_url

    def test_no_endpoint_no_exporter_means_none(self) -> None:
        """No endpoint and no OTEL_LOGS_EXPORTER: logs_exporter is "none", no URL."""
        settings = load_settings({}, env={})
        assert ("none", None) == (settings.logs_exporter, settings.otlp_logs_url)

    def test_endpoint_defaults_exporter_to_otlp(self) -> None:
        """An endpoint alone turns the OTLP exporter on."""
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
        assert "otlp" == load_settings({}, env=env).logs_exporter

    def test_explicit_exporter_none_beats_endpoint(self) -> None:
        """OTEL_LOGS_EXPORTER=none keeps export off even with an endpoint."""
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_LOGS_EXPORTER": "none"}
        assert "none" == load_settings({}, env=env).logs_exporter

    def test_headers_are_url_decoded(self) -> None:
        """Header values are URL-decoded as the OTel spec says (``Bearer%20x``)."""
        env = {"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc, x-team = infra"}
        assert {"authorization": "Bearer abc", "x-team": "infra"} == load_settings(
            {}, env=env
        ).otlp_headers


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.sampled_from(["", "db.", "svc_", "X-", "my "]),
    word=st.sampled_from(
        ["password", "Passwd", "secret", "api_key", "apiKey", "token", "AUTH", "cookie",
         "credentials", "private-key", "session_id", "otlp_headers"]
    ),
    value=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=6, max_size=20).map(
        "Zq".__add__
    ),
)  # fmt: skip
def test_secret_resource_attributes_never_shown(prefix: str, word: str, value: str) -> None:
    """OTEL_RESOURCE_ATTRIBUTES under any secret-looking key: the value is in neither
    repr(Settings) nor the exported resource."""
    from obs.otel import resource_attributes
    from obs.rank import RankInfo

    env = {"OTEL_RESOURCE_ATTRIBUTES": f"{prefix}{word}={value},team=infra"}
    loaded = load_settings({}, env=env)
    shown = repr(loaded) + repr(resource_attributes(loaded, RankInfo()))
    assert (value not in shown, "infra" in shown) == (True, True)
