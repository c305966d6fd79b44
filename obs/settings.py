"""Settings: every variable obs reads for its configuration, in one declarative table.

Each :class:`Setting` row names its :class:`Settings` field, its variable(s), its parser, its
default and its line in the docs; loading, the ``ConfigError`` a bad value raises,
:data:`ENV_VARS` and the README's configuration table are all generated from
:data:`SETTINGS`. Precedence is keyword argument > variable (in the row's order) > default.
Besides this module only :mod:`obs.rank` reads the environment: the launcher's per-process
``RANK``-style variables, which are facts about the process rather than settings.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_ADOPT_LOGGERS",
    "ENV_VARS",
    "SETTINGS",
    "Derived",
    "Setting",
    "Settings",
    "load_settings",
    "markdown_rows",
    "parse_level",
    "read_variable",
]

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, Literal

from obs import _parsers as p
from obs._parsers import parse_level
from obs.errors import ConfigError

Format = Literal["json", "console", "auto"]
Protocol = Literal["grpc", "http/protobuf", "http/json"]  # http/json is refused by the parser
LogsExporter = Literal["otlp", "console", "none"]
Parser = Callable[[str, object], Any]

#: Logger trees whose console output ``configure()`` takes over (``OBS_ADOPT_LOGGERS``).
DEFAULT_ADOPT_LOGGERS: tuple[str, ...] = ("torch", "vllm", "flashinfer")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything ``obs.configure()`` decided, resolved and validated.

    .. versionadded:: 0.1.0
    """

    level: int = logging.INFO
    format: Format = "auto"
    stream: Literal["stderr", "stdout", "none"] = "stderr"
    console_tracebacks: Literal["error", "always", "never"] = "error"
    no_color: bool = False
    force_color: bool = False
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
            elif f.name == "resource_attributes":
                value = self.shown_resource_attributes()
            elif isinstance(value, str):
                value = scrub_text(value)
            shown.append(f"{f.name}={value!r}")
        return f"Settings({', '.join(shown)})"

    __str__ = __repr__

    def shown_resource_attributes(self) -> dict[str, Any]:
        """``resource_attributes`` as obs shows and exports them: a value under a
        secret-looking key redacted, URL passwords, bearer tokens and secret pairs scrubbed
        from texts, names as values (a name is percent-decoded text too)."""
        from obs.encode import REDACTED, is_secret_key, scrub_text  # noqa: PLC0415

        return {
            scrub_text(key): REDACTED
            if is_secret_key(key)
            else scrub_text(v)
            if isinstance(v, str)
            else v
            for key, v in self.resource_attributes.items()
        }

    @property
    def shown_service_name(self) -> str:
        """``service_name`` as obs exports it (the resource's ``service.name``) and names
        the spool directory after it: URL passwords, bearer tokens and secret pairs
        scrubbed, as from every text obs writes."""
        from obs.encode import scrub_text  # noqa: PLC0415

        return scrub_text(self.service_name)

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


@dataclasses.dataclass(frozen=True)
class Derived:
    """A default computed from the settings resolved before it (and where each came from)."""

    compute: Callable[[Mapping[str, Any], Mapping[str, str]], Any]
    shown: str  #: how the docs state it


@dataclasses.dataclass(frozen=True)
class Setting:
    """One row: a :class:`Settings` field (None: a variable another module reads through
    :func:`read_variable`), its variables in precedence order, parser, default and doc."""

    field: str | None
    variables: tuple[str, ...]
    parse: Parser
    default: Any
    doc: str  #: one line of markdown, without the default
    shown_default: str | None = None  #: the default as the docs state it (None: none stated)
    reader: str = "obs.settings"  #: the module that reads it

    def doc_line(self) -> str:
        """The doc with its default, as the README table shows it."""
        shown = self.default.shown if isinstance(self.default, Derived) else self.shown_default
        if not shown:
            return self.doc
        if self.doc.endswith(")"):  # "... (a note; default x)", not "(a note) (default x)"
            return f"{self.doc[:-1]}; default {shown})"
        return f"{self.doc} (default {shown})"


def _default_spool_dir() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    import tempfile  # noqa: PLC0415 - only when the spool path is derived

    return os.path.join(tempfile.gettempdir(), f"obs-spool-{uid}")


def _default_service_name() -> str:
    import sys  # noqa: PLC0415 - only for the program name

    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return f"unknown_service:{prog}" if prog else "unknown_service"


def _present(name: str, raw: object) -> bool:
    """``NO_COLOR``'s rule (no-color.org): any non-empty value means yes; never an error."""
    return bool(raw.strip()) if isinstance(raw, str) else bool(raw)


def _force(name: str, raw: object) -> bool:
    """``FORCE_COLOR``'s rule: non-empty and not ``0`` means yes; never an error."""
    return raw.strip() not in ("", "0") if isinstance(raw, str) else bool(raw)


def _logs(suffix: str) -> tuple[str, str]:
    """The logs-specific OTLP variable first, then the general one (the OTel spec's order)."""
    return (f"OTEL_EXPORTER_OTLP_LOGS_{suffix}", f"OTEL_EXPORTER_OTLP_{suffix}")


_LOGS_ENDPOINT = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"

#: The table: every setting and every variable obs reads, in the README's order.
SETTINGS: tuple[Setting, ...] = (
    Setting("level", ("OBS_LEVEL",), parse_level, logging.INFO,
            "lowest level logged: DEBUG, INFO, WARNING, ERROR, CRITICAL", "INFO"),
    Setting("format", ("OBS_FORMAT",), p.choice("json", "console", "auto"), "auto",
            "json, console or auto (console on a tty, else json)", "auto"),
    Setting("stream", ("OBS_STREAM",), p.choice("stderr", "stdout", "none"), "stderr",
            "stderr, stdout or none (none = no console output, only `OBS_FILE` / OTLP)",
            "stderr"),
    Setting("console_tracebacks", ("OBS_CONSOLE_TRACEBACKS",),
            p.choice("error", "always", "never"), "error",
            "console format: tracebacks for `error` (ERROR and above), `always` or `never`; "
            "JSON lines and OTLP always keep the stack", "error"),
    Setting("no_color", ("NO_COLOR",), _present, False,
            "any non-empty value turns console colours off (no-color.org)"),
    Setting("force_color", ("FORCE_COLOR",), _force, False,
            "non-empty and not `0` turns console colours on off a tty (for `less -R`)"),
    Setting("file", ("OBS_FILE",), p.file_template, None,
            "also append JSON lines to this file (created 0600, `O_APPEND`, reopened when "
            "rotated); `{rank}`, `{local_rank}`, `{node_rank}`, `{host}`, `{pid}` are filled in "
            "per process", "none"),
    Setting("file_reopen_on_sighup", ("OBS_FILE_REOPEN_ON_SIGHUP",), p.parse_bool, False,
            "`true`: SIGHUP makes obs reopen `OBS_FILE` (logrotate's `postrotate kill -HUP`); "
            "the previous SIGHUP handler still runs", "false"),
    Setting("handle_sigterm", ("OBS_HANDLE_SIGTERM",), p.parse_bool, False,
            "`true`: on SIGTERM, flush OTLP export within `OBS_SHUTDOWN_TIMEOUT`, then run the "
            "previous handler", "false"),
    Setting(None, ("OBS_VLLM",), p.parse_bool, False,
            "`1`: the vLLM plugin configures obs in every vLLM process and routes vLLM's "
            "logging through it (see [docs/VLLM.md](docs/VLLM.md))", "off",
            reader="obs.vllm_plugin"),
    Setting(None, ("OBS_VLLM_FI_AR",), p.parse_bool, False,
            "`1`: vLLM's FlashInfer allreduce workspace getters become comm's, so vLLM's "
            "fusion pass emits the `workspace_*` events", "off", reader="comm.vllm_fi_ar"),
    Setting("dedup_capacity", ("OBS_DEDUP_CAPACITY",), p.POSITIVE_INT, 10_000,
            "distinct once/throttle keys remembered per process", "10000"),
    Setting("repeat_summary_seconds", ("OBS_REPEAT_SUMMARY_SECONDS",), p.NON_NEGATIVE, 60.0,
            "period of `log_repeats_suppressed` summaries; 0 = only at flush/shutdown", "60"),
    Setting("export_all_ranks_level", ("OBS_EXPORT_ALL_RANKS_LEVEL",), parse_level,
            logging.WARNING, "records at or above it are exported from every rank whatever "
            "their console scope (a terminal failure always is)", "WARNING"),
    Setting("spool_dir", ("OBS_SPOOL_DIR",), p.nonempty,
            Derived(lambda _v, _s: _default_spool_dir(), "`$TMPDIR/obs-spool-$UID/<service.name>`"),
            "where undeliverable WARNING+ records are spooled (a directory that is a symlink, "
            "another user's or group/other-writable is refused, never chmodded)"),
    Setting("spool_max_bytes", ("OBS_SPOOL_MAX_BYTES",), p.BYTES, 64 * 1024 * 1024,
            "size bound of the spool", "64 MiB"),
    Setting("shutdown_timeout", ("OBS_SHUTDOWN_TIMEOUT",), p.SECONDS, 3.0,
            "seconds flush/shutdown may take, collector down or not", "3"),
    Setting("adopt_loggers", ("OBS_ADOPT_LOGGERS",), p.logger_names, DEFAULT_ADOPT_LOGGERS,
            "logger trees whose own console handlers obs takes over so their records come out "
            "once, through obs (torch and vLLM set `propagate=False`); comma-separated, `none` "
            "= leave them alone", "`torch,vllm,flashinfer`"),
    Setting("stdlib_bridge", (), p.parse_bool, True,
            "keyword only: route stdlib `logging` records through obs"),
    Setting("sdk_disabled", ("OTEL_SDK_DISABLED",), p.parse_bool, False,
            "`true` turns OTel export off", "false"),
    Setting("service_name", ("OTEL_SERVICE_NAME",), p.nonempty,
            Derived(lambda v, _s: v["resource_attributes"].get("service.name")
                    or _default_service_name(),
                    "`service.name` of `OTEL_RESOURCE_ATTRIBUTES`, else "
                    "`unknown_service:<program>`"),
            "resource `service.name`"),
    Setting("resource_attributes", ("OTEL_RESOURCE_ATTRIBUTES",), p.pairs, {},
            "extra resource attributes, `k=v,k2=v2`"),
    Setting("logs_exporter", ("OTEL_LOGS_EXPORTER",), p.choice("otlp", "console", "none"),
            Derived(lambda v, _s: "otlp" if v["otlp_endpoint"] is not None else "none",
                    "otlp when an endpoint is set, else none: nothing goes on the network"),
            "otlp, console or none"),
    Setting("otlp_endpoint", (_LOGS_ENDPOINT, "OTEL_EXPORTER_OTLP_ENDPOINT"), p.url, None,
            "the collector: the logs URL used as is, or a base URL (HTTP gets `/v1/logs` "
            "appended)"),
    Setting("otlp_endpoint_is_logs", (), p.parse_bool,
            Derived(lambda _v, s: s.get("otlp_endpoint") == _LOGS_ENDPOINT,
                    "true when the endpoint came from the logs variable"),
            "keyword only: the endpoint is the logs URL itself"),
    Setting("otlp_protocol", _logs("PROTOCOL"), p.choice("grpc", "http/protobuf"),
            "http/protobuf", "grpc or http/protobuf", "http/protobuf"),
    Setting("otlp_headers", _logs("HEADERS"), p.headers, {},
            "`k=v,k2=v2` sent with every export (values redacted in obs' own text); a "
            "header whose name is not letters, digits, `-` `_` `.` or whose value is not "
            "visible ASCII is left out and reported, by position only"),
    Setting("otlp_certificate", _logs("CERTIFICATE"), p.pem_file, None,
            "CA bundle that verifies the collector"),
    Setting("otlp_client_key", _logs("CLIENT_KEY"), p.pem_file, None, "client key for mTLS"),
    Setting("otlp_client_certificate", _logs("CLIENT_CERTIFICATE"), p.pem_file, None,
            "client certificate for mTLS"),
    Setting("otlp_timeout", _logs("TIMEOUT"), p.SECONDS, 10.0,
            "seconds per export request", "10"),
    Setting("otlp_compression", _logs("COMPRESSION"), p.choice("gzip", "none"), "none",
            "gzip or none", "none"),
    Setting("blrp_schedule_delay_ms", ("OTEL_BLRP_SCHEDULE_DELAY",), p.MILLIS, 1000.0,
            "ms between export batches", "1000"),
    Setting("blrp_max_queue_size", ("OTEL_BLRP_MAX_QUEUE_SIZE",), p.POSITIVE_INT, 2048,
            "records queued before low severities are dropped", "2048"),
    Setting("blrp_max_export_batch_size", ("OTEL_BLRP_MAX_EXPORT_BATCH_SIZE",),
            p.POSITIVE_INT, 512, "records per export request", "512"),
    Setting("blrp_export_timeout_ms", ("OTEL_BLRP_EXPORT_TIMEOUT",), p.MILLIS, 30000.0,
            "ms one export may take", "30000"),
)  # fmt: skip

#: Every variable obs reads -> its doc line (generated from :data:`SETTINGS`).
ENV_VARS: dict[str, str] = {var: row.doc_line() for row in SETTINGS for var in row.variables}
_BY_VARIABLE = {var: row for row in SETTINGS for var in row.variables}
_FIELDS = {row.field: row for row in SETTINGS if row.field is not None}


def markdown_rows() -> list[str]:
    """The README configuration table's rows, one per setting that has a variable."""
    return [
        "| " + ", ".join(f"`{v}`" for v in row.variables) + f" | {row.doc_line()} |"
        for row in SETTINGS
        if row.variables
    ]


def read_variable(name: str, env: Mapping[str, str] | None = None) -> Any:
    """Parse one table variable read outside :class:`Settings` (``OBS_VLLM``): its value or
    its default when unset; a bad value raises the row's ``ConfigError``."""
    row = _BY_VARIABLE[name]
    raw = (os.environ if env is None else env).get(name)
    if raw is None or raw.strip() == "":
        return row.default
    return row.parse(name, raw)


class _Reader:
    """Resolves settings from keywords, then variables, then defaults, each through its row's
    parser; not strict: a bad value is appended to ``errors`` and the next source is tried."""

    __slots__ = ("env", "errors", "overrides", "sources", "strict")

    def __init__(
        self,
        overrides: Mapping[str, object],
        env: Mapping[str, str],
        errors: list[ConfigError] | None = None,
    ) -> None:
        self.overrides = overrides
        self.env = env
        self.sources: dict[str, str] = {}
        self.strict = errors is None
        self.errors: list[ConfigError] = errors if errors is not None else []

    def get(self, row: Setting) -> tuple[bool, Any]:
        """(found, value): the keyword's or the first good variable's value."""
        field = row.field or ""
        if field in self.overrides:
            raw = self.overrides[field]
            if raw is None:
                return False, None
            return self._parse(row, field, raw)
        for name in row.variables:
            raw = self.env.get(name)
            if raw is not None and raw.strip() != "":
                found, value = self._parse(row, name, raw)
                if found:
                    return found, value
        return False, None

    def _parse(self, row: Setting, name: str, raw: object) -> tuple[bool, Any]:
        self.sources[row.field or ""] = name
        try:
            return True, row.parse(name, raw)
        except ConfigError as exc:
            if self.strict:
                raise
            self.errors.append(exc)
            return False, None


def load_settings(
    overrides: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    errors: list[ConfigError] | None = None,
) -> Settings:
    """Resolve :class:`Settings` from keyword overrides and the environment.

    Raises :class:`obs.ConfigError` for an unknown keyword or any invalid value. With
    ``errors`` (a list), a bad value is appended there instead and the next variable or the
    default is used: the lazy path, where no caller could handle the error, takes that.
    """
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(_FIELDS))
    if unknown:
        error = ConfigError(
            unknown[0], overrides[unknown[0]], "a Settings field: " + ", ".join(sorted(_FIELDS))
        )
        if errors is None:
            raise error
        errors.append(error)
        overrides = {k: v for k, v in overrides.items() if k in _FIELDS}
    reader = _Reader(overrides, os.environ if env is None else env, errors)
    values: dict[str, Any] = {}
    derived: list[Setting] = []
    for field, row in _FIELDS.items():
        found, value = reader.get(row)
        if found:
            values[field] = value
        elif isinstance(row.default, Derived):
            derived.append(row)
        else:  # a fresh copy of a mutable default
            values[field] = dict(row.default) if isinstance(row.default, dict) else row.default
    for row in derived:  # after every plain value: a derived default reads them
        values[row.field or ""] = row.default.compute(values, reader.sources)
    return Settings(**values, sources=reader.sources)
