"""Settings: the only module that reads environment variables.

Precedence is keyword argument > environment variable > default. Every value is parsed
and validated once, by one helper, at ``configure()`` time; a bad value raises
:class:`obs.ConfigError` naming the variable and the accepted values.
"""

from __future__ import annotations

__all__ = ["DEFAULT_ADOPT_LOGGERS", "ENV_VARS", "Settings", "load_settings", "parse_level"]

import dataclasses
import logging
import math
import os
import re
import stat
import string
import tempfile
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar
from urllib.parse import unquote, urlparse

from obs.errors import ConfigError

Format = Literal["json", "console", "auto"]
Protocol = Literal["grpc", "http/protobuf", "http/json"]  # http/json is refused by the parser
LogsExporter = Literal["otlp", "console", "none"]

_LEVELS = {
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARNING": logging.WARNING,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
}

#: Logger trees whose console output ``configure()`` takes over (``OBS_ADOPT_LOGGERS``).
DEFAULT_ADOPT_LOGGERS: tuple[str, ...] = ("torch", "vllm", "flashinfer")

#: Every variable obs reads, with a one-line meaning (the README table is checked against it).
ENV_VARS: dict[str, str] = {
    "OBS_LEVEL": "lowest level logged: DEBUG, INFO, WARNING, ERROR, CRITICAL (default INFO)",
    "OBS_FORMAT": "json, console or auto (console on a tty, else json; default auto)",
    "OBS_STREAM": "stderr, stdout or none (file-only: no console output; default stderr)",
    "OBS_CONSOLE_TRACEBACKS": "console format: tracebacks for error (ERROR and above), always "
    "or never; JSON and OTLP always keep the stack (default error)",
    "OBS_FILE": "also append JSON lines to this file; {rank}, {local_rank}, {node_rank}, "
    "{host}, {pid} are filled in per process (default: none)",
    "OBS_FILE_REOPEN_ON_SIGHUP": "true: SIGHUP makes obs reopen OBS_FILE (for logrotate's "
    "postrotate kill -HUP; the previous SIGHUP handler still runs; default false)",
    "OBS_HANDLE_SIGTERM": "true: on SIGTERM flush OTLP export within OBS_SHUTDOWN_TIMEOUT, "
    "then run the previous handler (default false)",
    "OBS_VLLM": "1: the vLLM plugin configures obs in every vLLM process and routes vLLM's "
    "logging through it (read by obs.vllm_plugin; default off)",
    "OBS_VLLM_FI_AR": "1: vLLM's FlashInfer allreduce workspace getters become comm's (read "
    "by comm.vllm_fi_ar; default off)",
    "OBS_DEDUP_CAPACITY": "distinct once/throttle keys remembered per process (default 10000)",
    "OBS_REPEAT_SUMMARY_SECONDS": "period of log_repeats_suppressed summaries, 0 = only at "
    "flush/shutdown (default 60)",
    "OBS_EXPORT_ALL_RANKS_LEVEL": "records at or above this level are exported from every "
    "rank whatever their console scope (default WARNING)",
    "OBS_SPOOL_DIR": "where undeliverable WARNING+ records are spooled (default "
    "$TMPDIR/obs-spool-$UID/<service.name>)",
    "OBS_SPOOL_MAX_BYTES": "size bound of the spool file (default 67108864)",
    "OBS_SHUTDOWN_TIMEOUT": "seconds flush/shutdown may take, collector down or not (default 3)",
    "OBS_ADOPT_LOGGERS": "stdlib logger trees that print to the console themselves (their own "
    "handler, propagate=False) whose console output obs takes over, comma-separated; none = "
    "leave them alone (default torch,vllm,flashinfer)",
    "OTEL_SDK_DISABLED": "true disables OTel export entirely",
    "OTEL_SERVICE_NAME": "resource service.name (default: the program name)",
    "OTEL_RESOURCE_ATTRIBUTES": "extra resource attributes, k=v,k2=v2",
    "OTEL_LOGS_EXPORTER": "otlp, console or none (default: otlp if an endpoint is set, else none)",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "collector base URL; http(s) gets /v1/logs appended",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "collector logs URL, used as is",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc or http/protobuf (default http/protobuf)",
    "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "overrides OTEL_EXPORTER_OTLP_PROTOCOL for logs",
    "OTEL_EXPORTER_OTLP_HEADERS": "k=v,k2=v2 sent with every export (values redacted in logs)",
    "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "overrides OTEL_EXPORTER_OTLP_HEADERS for logs",
    "OTEL_EXPORTER_OTLP_CERTIFICATE": "CA bundle to verify the collector",
    "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE": "overrides OTEL_EXPORTER_OTLP_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_KEY": "client private key for mTLS",
    "OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY": "overrides OTEL_EXPORTER_OTLP_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "client certificate for mTLS",
    "OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE": "overrides OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TIMEOUT": "seconds per export request (default 10, as the Python SDK)",
    "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT": "overrides OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip or none (default none)",
    "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION": "overrides OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_BLRP_SCHEDULE_DELAY": "ms between export batches (default 1000)",
    "OTEL_BLRP_MAX_QUEUE_SIZE": "records queued before low severities are dropped (default 2048)",
    "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE": "records per export request (default 512)",
    "OTEL_BLRP_EXPORT_TIMEOUT": "ms one export may take (default 30000)",
}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything ``obs.configure()`` decided, resolved and validated.

    .. versionadded:: 0.1.0
    """

    level: int = logging.INFO
    format: Format = "auto"
    stream: Literal["stderr", "stdout", "none"] = "stderr"
    console_tracebacks: Literal["error", "always", "never"] = "error"
    file: str | None = None
    file_reopen_on_sighup: bool = False
    dedup_capacity: int = 10_000
    repeat_summary_seconds: float = 60.0
    export_all_ranks_level: int = logging.WARNING
    spool_dir: str = ""
    spool_max_bytes: int = 64 * 1024 * 1024
    shutdown_timeout: float = 3.0
    handle_sigterm: bool = False
    stdlib_bridge: bool = True
    adopt_loggers: tuple[str, ...] = DEFAULT_ADOPT_LOGGERS
    sdk_disabled: bool = False
    service_name: str = "unknown_service"
    resource_attributes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    logs_exporter: LogsExporter = "none"
    otlp_endpoint: str | None = None
    otlp_endpoint_is_logs: bool = False
    otlp_protocol: Protocol = "http/protobuf"
    otlp_headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    otlp_certificate: str | None = None
    otlp_client_key: str | None = None
    otlp_client_certificate: str | None = None
    otlp_timeout: float = 10.0
    otlp_compression: Literal["gzip", "none"] = "none"
    blrp_schedule_delay_ms: float = 1000.0
    blrp_max_queue_size: int = 2048
    blrp_max_export_batch_size: int = 512
    blrp_export_timeout_ms: float = 30000.0
    #: field -> the variable (or keyword) its value came from, for errors found later.
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def __repr__(self) -> str:
        """The settings with header values and URL passwords redacted."""
        from obs.encode import REDACTED, scrub_text  # noqa: PLC0415

        shown = []
        for f in dataclasses.fields(self):
            if not f.repr:
                continue
            value: Any = getattr(self, f.name)
            if f.name == "otlp_headers":
                value = dict.fromkeys(value, REDACTED)
            elif isinstance(value, str):
                value = scrub_text(value)
            shown.append(f"{f.name}={value!r}")
        return f"Settings({', '.join(shown)})"

    __str__ = __repr__

    def source(self, field: str) -> str:
        """The variable or keyword ``field`` was read from (the field name by default)."""
        return self.sources.get(field, field)

    @property
    def otlp_logs_url(self) -> str | None:
        """The URL the logs exporter talks to (HTTP gets ``/v1/logs`` unless logs-specific)."""
        if self.otlp_endpoint is None:
            return None
        if self.otlp_protocol == "grpc" or self.otlp_endpoint_is_logs:
            return self.otlp_endpoint
        return self.otlp_endpoint.rstrip("/") + "/v1/logs"


T = TypeVar("T")


def parse_level(name: str, raw: object) -> int:
    """Parse a level name (any case) or number; ``name`` is what a ConfigError names."""
    accepted = "one of " + ", ".join(sorted(set(_LEVELS) - {"WARN"})) + " or an integer 0-100"
    if isinstance(raw, bool):
        raise ConfigError(name, raw, accepted)
    if isinstance(raw, int):
        if 0 <= raw <= 100:
            return int(raw)
        raise ConfigError(name, raw, accepted)
    if not isinstance(raw, str):
        raise ConfigError(name, raw, accepted)
    text = raw.strip().upper()
    if text in _LEVELS:
        return _LEVELS[text]
    if text.isascii() and text.isdigit() and int(text) <= 100:
        return int(text)
    raise ConfigError(name, raw, accepted)


def _choice(*choices: str) -> Callable[[str, object], Any]:
    def parse(name: str, raw: object) -> Any:
        text = raw.strip().lower() if isinstance(raw, str) else None
        if text not in choices:
            raise ConfigError(name, raw, "one of " + ", ".join(choices))
        return text

    return parse


def _number(
    kind: Callable[[str], T], *, minimum: float, maximum: float, what: str
) -> Callable[[str, object], T]:
    def parse(name: str, raw: object) -> T:
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise ConfigError(name, raw, what)
        try:
            text = raw.strip() if isinstance(raw, str) else raw
            # int() and float() take non-ASCII digits (superscripts, other scripts); nobody
            # means them in a config value, so such text is refused.
            value = kind(text if not isinstance(text, str) or text.isascii() else "x")  # type: ignore[arg-type]
            finite = math.isfinite(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):  # int(inf) is an OverflowError
            raise ConfigError(name, raw, what) from None
        if not finite or not minimum <= value <= maximum:  # type: ignore[operator]
            raise ConfigError(name, raw, what)
        if not isinstance(raw, str) and value != raw:
            raise ConfigError(name, raw, what)  # int(1.5) truncating
        return value

    return parse


def _bool(name: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if not isinstance(raw, str):
        raise ConfigError(name, raw, "true or false")
    text = raw.strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise ConfigError(name, raw, "true or false")


def _text(name: str, raw: object) -> str:
    text = raw.strip() if isinstance(raw, str) else ""
    if not text or "\x00" in text:
        raise ConfigError(name, raw, "a non-empty string")
    return text


def _pem_file(name: str, raw: object) -> str:
    """A readable PEM file (CA bundle, client key or certificate), checked now."""
    path = _text(name, raw)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the read forever
            raise IsADirectoryError(path)
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except (OSError, ValueError) as exc:
        raise ConfigError(name, raw, f"a readable PEM file ({type(exc).__name__})") from None
    if b"-----BEGIN" not in head:
        raise ConfigError(name, raw, "a PEM file (no -----BEGIN block found)")
    return path


def _pairs(name: str, raw: object) -> dict[str, str]:
    """Parse the OTel ``k=v,k2=v2`` list (values URL-decoded, as the spec says)."""
    if isinstance(raw, Mapping):
        return {str(k): str(v) for k, v in raw.items()}
    if not isinstance(raw, str):
        raise ConfigError(name, raw, "comma-separated key=value pairs")
    out: dict[str, str] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(name, raw, "comma-separated key=value pairs")
        key, value = unquote(key.strip()), unquote(value.strip())
        if any(c in key + value for c in "\r\n\x00"):
            raise ConfigError(name, raw, "key=value pairs without line breaks")
        out[key] = value
    return out


def _logger_names(name: str, raw: object) -> tuple[str, ...]:
    """Comma-separated logger names (or a sequence of them); ``none`` is the empty list."""
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, (list, tuple)):
        raise ConfigError(name, raw, "comma-separated logger names, or none")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    if not names or (len(names) == 1 and names[0].lower() == "none"):
        return ()
    if any(not n.replace("_", "").replace(".", "").replace("-", "").isalnum() for n in names):
        raise ConfigError(
            name, raw, "comma-separated logger names (letters, digits, . _ -), or none"
        )
    return names


FILE_FIELDS = ("rank", "local_rank", "node_rank", "host", "pid")


_FILE_SAMPLE = {"rank": 0, "local_rank": 0, "node_rank": 0, "host": "host", "pid": 1}


def _file_template(name: str, raw: object) -> str:
    """A path, optionally with ``{rank}``-style placeholders (checked now, filled later).

    Only the plain names are allowed (no ``{host.upper}``, ``{rank[0]}``), each with a
    format spec that fits its type (``{rank:03d}`` yes, ``{host:d}`` no).
    """
    text = _text(name, raw)
    accepted = "a file path; placeholders allowed: " + ", ".join(f"{{{f}}}" for f in FILE_FIELDS)
    try:
        fields = [(f, s, c) for _, f, s, c in string.Formatter().parse(text) if f is not None]
        plain = all(
            f in FILE_FIELDS and not c and "{" not in (s or "") and _small_spec(s or "")
            for f, s, c in fields
        )
        text.format(**_FILE_SAMPLE)
    except Exception:
        plain = False
    if not plain:
        raise ConfigError(name, raw, accepted)
    return text


def _small_spec(spec: str) -> bool:
    """A format spec without a width or precision over 64 (``{rank:>999999999}`` would
    build a path of any size)."""
    return all(int(n) <= 64 for n in re.findall(r"\d+", spec))


def _url(name: str, raw: object) -> str:
    text = raw.strip() if isinstance(raw, str) else ""
    try:
        parsed = urlparse(text)
        host = parsed.hostname
        parsed.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ConfigError(
            name, raw, "an http:// or https:// URL with a host and a valid port"
        ) from None
    if parsed.scheme not in {"http", "https"} or not host or any(c.isspace() for c in text):
        raise ConfigError(name, raw, "an http:// or https:// URL with a host")
    return text


_POSITIVE_INT = _number(int, minimum=1, maximum=2**31 - 1, what="an integer >= 1 (at most 2**31-1)")
_BYTES = _number(int, minimum=1, maximum=2**48, what="an integer >= 1 (bytes, at most 2**48)")
_NON_NEGATIVE = _number(float, minimum=0.0, maximum=1e9, what="a number >= 0 (finite)")
_MILLIS = _number(
    float, minimum=1.0, maximum=86_400_000.0, what="a number > 0 (milliseconds, 1 to 86400000)"
)
_SECONDS = _number(
    float, minimum=1e-3, maximum=86400.0, what="a number > 0 (seconds, 0.001 to 86400)"
)


class _Reader:
    """Resolves one setting from kwargs, then env, then default, through one parser."""

    __slots__ = ("env", "errors", "overrides", "sources", "strict", "used")

    def __init__(
        self,
        overrides: Mapping[str, object],
        env: Mapping[str, str],
        errors: list[ConfigError] | None = None,
    ) -> None:
        self.overrides = overrides
        self.env = env
        self.used: set[str] = set()
        self.sources: dict[str, str] = {}
        #: Not strict: errors go here and each bad value falls back to its default.
        self.strict = errors is None
        self.errors: list[ConfigError] = errors if errors is not None else []

    def get(
        self,
        field: str,
        parse: Callable[[str, object], T],
        default: T,
        *env_names: str,
    ) -> T:
        if field in self.overrides:
            self.used.add(field)
            raw = self.overrides[field]
            if raw is None:
                return default
            return self._parse(field, field, parse, raw, default)
        for env_name in env_names:
            value = self.env.get(env_name)
            if value is not None and value.strip() != "":
                return self._parse(field, env_name, parse, value, default)
        return default

    def _parse(
        self, field: str, name: str, parse: Callable[[str, object], T], raw: object, default: T
    ) -> T:
        self.sources[field] = name
        try:
            return parse(name, raw)
        except ConfigError as exc:
            if self.strict:
                raise
            self.errors.append(exc)
            return default


def _default_spool_dir() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"obs-spool-{uid}")


def _default_service_name() -> str:
    import sys  # noqa: PLC0415 - only for the program name

    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return f"unknown_service:{prog}" if prog else "unknown_service"


def load_settings(
    overrides: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    errors: list[ConfigError] | None = None,
) -> Settings:
    """Resolve :class:`Settings` from keyword overrides and the environment.

    Raises :class:`obs.ConfigError` for an unknown keyword or any invalid value. With
    ``errors`` (a list), a bad value is appended there instead and its default is used:
    the lazy path, where no caller could handle the error, takes that.
    """
    overrides = dict(overrides or {})
    env = os.environ if env is None else env
    known = {f.name for f in dataclasses.fields(Settings)} - {"sources"}
    unknown = sorted(set(overrides) - known)
    if unknown:
        error = ConfigError(
            unknown[0], overrides[unknown[0]], "a Settings field: " + ", ".join(sorted(known))
        )
        if errors is None:
            raise error
        errors.append(error)
        overrides = {k: v for k, v in overrides.items() if k in known}
    r = _Reader(overrides, env, errors)

    def logs(suffix: str) -> tuple[str, str]:
        return (f"OTEL_EXPORTER_OTLP_LOGS_{suffix}", f"OTEL_EXPORTER_OTLP_{suffix}")

    endpoint = r.get("otlp_endpoint", _url, None, "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    endpoint_is_logs = endpoint is not None
    if endpoint is None:
        endpoint = r.get("otlp_endpoint", _url, None, "OTEL_EXPORTER_OTLP_ENDPOINT")
    if "otlp_endpoint_is_logs" in overrides:
        endpoint_is_logs = _bool("otlp_endpoint_is_logs", overrides["otlp_endpoint_is_logs"])
    elif "otlp_endpoint" in overrides:
        endpoint_is_logs = False
    exporter_default: LogsExporter = "otlp" if endpoint is not None else "none"
    logs_exporter: LogsExporter = r.get(
        "logs_exporter", _choice("otlp", "console", "none"), exporter_default, "OTEL_LOGS_EXPORTER"
    )
    resource: dict[str, str] = r.get("resource_attributes", _pairs, {}, "OTEL_RESOURCE_ATTRIBUTES")
    service_default = resource.get("service.name") or _default_service_name()

    return Settings(
        level=r.get("level", parse_level, logging.INFO, "OBS_LEVEL"),
        format=r.get("format", _choice("json", "console", "auto"), "auto", "OBS_FORMAT"),
        stream=r.get("stream", _choice("stderr", "stdout", "none"), "stderr", "OBS_STREAM"),
        console_tracebacks=r.get(
            "console_tracebacks",
            _choice("error", "always", "never"),
            "error",
            "OBS_CONSOLE_TRACEBACKS",
        ),
        file=r.get("file", _file_template, None, "OBS_FILE"),
        file_reopen_on_sighup=r.get(
            "file_reopen_on_sighup", _bool, False, "OBS_FILE_REOPEN_ON_SIGHUP"
        ),
        dedup_capacity=r.get("dedup_capacity", _POSITIVE_INT, 10_000, "OBS_DEDUP_CAPACITY"),
        repeat_summary_seconds=r.get(
            "repeat_summary_seconds", _NON_NEGATIVE, 60.0, "OBS_REPEAT_SUMMARY_SECONDS"
        ),
        export_all_ranks_level=r.get(
            "export_all_ranks_level", parse_level, logging.WARNING, "OBS_EXPORT_ALL_RANKS_LEVEL"
        ),
        spool_dir=r.get("spool_dir", _text, _default_spool_dir(), "OBS_SPOOL_DIR"),
        spool_max_bytes=r.get("spool_max_bytes", _BYTES, 64 * 1024 * 1024, "OBS_SPOOL_MAX_BYTES"),
        shutdown_timeout=r.get("shutdown_timeout", _SECONDS, 3.0, "OBS_SHUTDOWN_TIMEOUT"),
        handle_sigterm=r.get("handle_sigterm", _bool, False, "OBS_HANDLE_SIGTERM"),
        stdlib_bridge=r.get("stdlib_bridge", _bool, True),
        adopt_loggers=r.get(
            "adopt_loggers", _logger_names, DEFAULT_ADOPT_LOGGERS, "OBS_ADOPT_LOGGERS"
        ),
        sdk_disabled=r.get("sdk_disabled", _bool, False, "OTEL_SDK_DISABLED"),
        service_name=r.get("service_name", _text, service_default, "OTEL_SERVICE_NAME"),
        resource_attributes=resource,
        logs_exporter=logs_exporter,
        otlp_endpoint=endpoint,
        otlp_endpoint_is_logs=endpoint_is_logs,
        otlp_protocol=r.get(
            "otlp_protocol",
            _choice("grpc", "http/protobuf"),
            "http/protobuf",
            *logs("PROTOCOL"),
        ),
        otlp_headers=r.get("otlp_headers", _pairs, {}, *logs("HEADERS")),
        otlp_certificate=r.get("otlp_certificate", _pem_file, None, *logs("CERTIFICATE")),
        otlp_client_key=r.get("otlp_client_key", _pem_file, None, *logs("CLIENT_KEY")),
        otlp_client_certificate=r.get(
            "otlp_client_certificate", _pem_file, None, *logs("CLIENT_CERTIFICATE")
        ),
        otlp_timeout=r.get("otlp_timeout", _SECONDS, 10.0, *logs("TIMEOUT")),
        otlp_compression=r.get(
            "otlp_compression", _choice("gzip", "none"), "none", *logs("COMPRESSION")
        ),
        blrp_schedule_delay_ms=r.get(
            "blrp_schedule_delay_ms", _MILLIS, 1000.0, "OTEL_BLRP_SCHEDULE_DELAY"
        ),
        blrp_max_queue_size=r.get(
            "blrp_max_queue_size", _POSITIVE_INT, 2048, "OTEL_BLRP_MAX_QUEUE_SIZE"
        ),
        blrp_max_export_batch_size=r.get(
            "blrp_max_export_batch_size", _POSITIVE_INT, 512, "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE"
        ),
        blrp_export_timeout_ms=r.get(
            "blrp_export_timeout_ms", _MILLIS, 30000.0, "OTEL_BLRP_EXPORT_TIMEOUT"
        ),
        sources=r.sources,
    )
