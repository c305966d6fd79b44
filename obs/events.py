"""Typed events: one frozen dataclass per event, one registry, one ``emit``.

An event class names its stable snake_case ``name`` (the Grafana contract), its ``stage``
(which drives severity and ``outcome``), a default ``level``, a one-line ``description``
and an optional ``message`` template for the human ``body``; its dataclass fields are the
record's typed fields. The registry lists every event (``python -m obs schema`` prints it
as Markdown or JSON Schema), so dashboards, alerts and docs can be checked against code.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "COMMON_FIELDS",
    "REGISTRY",
    "STAGES",
    "ChainAttempt",
    "ChainAttemptFailed",
    "ChainFallback",
    "ChainInitialized",
    "ChainTerminalFailure",
    "Event",
    "EventRegistry",
    "LogRepeatsSuppressed",
    "ObsDedupCapacityReached",
    "ObsInternalError",
    "ObsRecordsDropped",
    "Stage",
    "WorkspaceAttempt",
    "WorkspaceAttemptFailed",
    "WorkspaceDestroyFailed",
    "WorkspaceFallback",
    "WorkspaceInitialized",
    "WorkspaceTerminalFailure",
    "cli_schema",
    "emit",
]

import dataclasses
import logging
import re
import string
import sys
import threading
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeVar

from obs.severity import DEFAULT_POLICY, level_name

Stage = Literal["attempt", "attempt_failed", "fallback", "initialized", "terminal_failure"]
#: The stages of a fallback chain, in the order they happen.
STAGES: tuple[Stage, ...] = typing.get_args(Stage)

_NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")

#: Keys every record carries (or may carry): an event field must not reuse one of them,
#: nor a control keyword that ``emit`` passes to the logger.
COMMON_FIELDS: dict[str, tuple[dict[str, Any], bool, str]] = {
    # name: (JSON schema, required, meaning)
    "event": ({"type": "string"}, True, "the stable event name"),
    "body": ({"type": "string"}, True, "human message"),
    "logger": ({"type": "string"}, True, "logger name"),
    "timestamp": ({"type": "string", "format": "date-time"}, True, "ISO 8601, UTC"),
    "severity_text": (
        {"enum": ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]},
        True,
        "level name after the stage policy",
    ),
    "severity_number": (
        {"type": "integer", "minimum": 1, "maximum": 24},
        True,
        "OTel severity number",
    ),
    "stage": ({"enum": list(STAGES)}, False, "fallback-chain stage"),
    "outcome": (
        {"enum": ["pending", "failure", "degraded", "success"]},
        False,
        "what the stage means for the caller",
    ),
    "rank": ({"type": "integer", "minimum": 0}, True, "global rank"),
    "local_rank": ({"type": "integer", "minimum": 0}, True, "rank within the node"),
    "world_size": ({"type": "integer", "minimum": 1}, True, "number of ranks"),
    "node_rank": ({"type": "integer", "minimum": 0}, True, "node index"),
    "host.name": ({"type": "string"}, True, "host name"),
    "code.file.path": ({"type": "string"}, False, "caller's file"),
    "code.line.number": ({"type": "integer"}, False, "caller's line"),
    "code.function.name": ({"type": "string"}, False, "caller's function"),
    "exception.type": ({"type": "string"}, False, "exception class, when exc_info was given"),
    "exception.message": ({"type": "string"}, False, "exception message"),
    "exception.stacktrace": ({"type": "string"}, False, "formatted traceback"),
}
_RESERVED = frozenset(COMMON_FIELDS) | {
    "scope",
    "once",
    "once_key",
    "every_n",
    "every_seconds",
    "exc_info",
    "level",
}


def _outcome(stage: str) -> str:
    """The outcome the default severity policy attaches to ``stage``."""
    rule = DEFAULT_POLICY.rule(stage)
    return rule.outcome if rule is not None else ""


class Event:
    """Base of typed events; subclasses are frozen dataclasses registered in a registry."""

    __slots__ = ()

    name: ClassVar[str]
    stage: ClassVar[Stage | None] = None
    level: ClassVar[int] = logging.INFO
    description: ClassVar[str] = ""
    #: ``str.format`` template over the fields for ``body``; lists render "a, b".
    message: ClassVar[str | None] = None
    #: Fields that identify an occurrence for ``once=True`` (None: every field).
    identity: ClassVar[tuple[str, ...] | None] = None

    def fields(self) -> dict[str, Any]:
        """The event's fields as a dict (shallow: values are the objects themselves)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def body(self) -> str:
        """The human message: the template filled in, else the event name."""
        template = type(self).message
        if template is None:
            return type(self).name
        shown = {k: _display(v) for k, v in self.fields().items()}
        return template.format_map(shown)

    def once_key(self) -> tuple[str, ...]:
        """Field names that make the dedup key of ``emit(event, once=True)``."""
        identity = type(self).identity
        if identity is not None:
            return identity
        return tuple(f.name for f in dataclasses.fields(self))  # type: ignore[arg-type]


def _display(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(_display(v) for v in value) if value else "none"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


E = TypeVar("E", bound=type[Event])


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """One typed field of an event, as introspected from the dataclass."""

    name: str
    type: Any
    required: bool
    type_name: str
    schema: dict[str, Any]


class EventRegistry:
    """Every known event class, by name; ``register`` is the class decorator."""

    __slots__ = ("_events", "_lock")

    def __init__(self) -> None:
        self._events: dict[str, type[Event]] = {}
        self._lock = threading.Lock()

    def register(self, cls: E) -> E:
        """Validate and add an event class (use as ``@REGISTRY.register`` over the dataclass).

        Raises TypeError/ValueError for a class that is not a frozen dataclass, a name that
        is not snake_case or is taken, an unknown stage, a field that reuses a record key,
        or a message template naming a field that does not exist.
        """
        if not (isinstance(cls, type) and issubclass(cls, Event)):
            raise TypeError(f"{cls!r} is not an obs.events.Event subclass")
        if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
            raise TypeError(f"{cls.__name__} must be a frozen dataclass")
        name = cls.__dict__.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"{cls.__name__}.name must be a snake_case str, got {name!r}")
        if cls.stage is not None and cls.stage not in STAGES:
            raise ValueError(f"{cls.__name__}.stage {cls.stage!r} is not one of {STAGES}")
        specs = _field_specs(cls)
        clash = sorted({s.name for s in specs} & _RESERVED)
        if clash:
            raise ValueError(f"{cls.__name__} fields reuse record/control keys: {clash}")
        if cls.message is not None:
            names = {s.name for s in specs}
            used = {f for _, f, _, _ in string.Formatter().parse(cls.message) if f}
            missing = sorted(used - names)
            if missing:
                raise ValueError(f"{cls.__name__}.message names unknown fields {missing}")
        if cls.identity is not None:
            unknown = sorted(set(cls.identity) - {s.name for s in specs})
            if unknown:
                raise ValueError(f"{cls.__name__}.identity names unknown fields {unknown}")
        with self._lock:
            known = self._events.get(name)
            if known is not None and known is not cls:
                raise ValueError(f"event name {name!r} already registered by {known.__name__}")
            self._events[name] = cls
        return cls

    def get(self, name: str) -> type[Event] | None:
        """The class registered as ``name``, or None."""
        return self._events.get(name)

    def __getitem__(self, name: str) -> type[Event]:
        try:
            return self._events[name]
        except KeyError:
            raise KeyError(f"no event {name!r}; known: {', '.join(self.names())}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._events

    def __iter__(self) -> Iterator[type[Event]]:
        return iter(self.all())

    def __len__(self) -> int:
        return len(self._events)

    def all(self) -> tuple[type[Event], ...]:
        """Every registered class, sorted by name."""
        return tuple(self._events[n] for n in self.names())

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted."""
        return tuple(sorted(self._events))

    def fields(self, name: str) -> tuple[FieldSpec, ...]:
        """The typed fields of event ``name``, in declaration order."""
        return _field_specs(self[name])

    # -- documentation ---------------------------------------------------------------

    def to_json_schema(self) -> dict[str, Any]:
        """One JSON Schema (2020-12) document: a schema per event under ``$defs``.

        Each event schema pins ``event`` (and ``stage``/``outcome``) with ``const``, types
        the event's fields and the common record fields, and lists what is required.
        """
        defs = {cls.name: _event_schema(cls) for cls in self.all()}
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:obs:events",
            "title": "obs event records",
            "description": "One JSON line / OTel log record per event; keys equal OTel "
            "attribute names.",
            "oneOf": [{"$ref": f"#/$defs/{n}"} for n in defs],
            "$defs": defs,
        }

    def to_markdown(self) -> str:
        """The registry as Markdown: common record fields, then one section per event."""
        out = [
            "# Event reference",
            "",
            "Generated by `python -m obs schema`. Every record carries these fields:",
            "",
            "| field | type | required | meaning |",
            "|---|---|---|---|",
        ]
        for key, (schema, required, meaning) in COMMON_FIELDS.items():
            out.append(f"| `{key}` | {_schema_name(schema)} | {_yes(required)} | {meaning} |")
        for cls in self.all():
            level = level_name(cls.level)
            stage = f"`{cls.stage}` (outcome `{_outcome(cls.stage)}`)" if cls.stage else "-"
            out += [
                "",
                f"## `{cls.name}`",
                "",
                cls.description,
                "",
                f"- stage: {stage}",
                f"- default level: {level}",
                f"- class: `{cls.__module__}.{cls.__qualname__}`",
            ]
            if cls.message:
                out.append(f"- body: `{cls.message}`")
            out += ["", "| field | type | required |", "|---|---|---|"]
            for spec in _field_specs(cls):
                out.append(f"| `{spec.name}` | {spec.type_name} | {_yes(spec.required)} |")
        return "\n".join(out) + "\n"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _field_specs(cls: type[Event]) -> tuple[FieldSpec, ...]:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    specs = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        tp = hints.get(f.name, Any)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        specs.append(FieldSpec(f.name, tp, required, _type_name(tp), _json_type(tp)))
    return tuple(specs)


def _is_union(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is typing.Union or origin is types.UnionType


def _json_type(tp: Any) -> dict[str, Any]:
    """The JSON Schema of a field annotation (tuples and lists are arrays)."""
    if tp is Any:
        return {}
    if _is_union(tp):
        return {"anyOf": [_json_type(a) for a in typing.get_args(tp)]}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (tuple, list, Sequence, typing.Sequence):
        item = args[0] if args else Any
        return {"type": "array", "items": _json_type(item)}
    if origin in (dict, Mapping, typing.Mapping):
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": _json_type(value)}
    simple = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string"}
    if tp in simple:
        return {"type": simple[tp]}
    return {}


def _type_name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    if _is_union(tp):
        return " \\| ".join(_type_name(a) for a in typing.get_args(tp))
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return " \\| ".join(repr(a) for a in args)
    if origin in (tuple, list, Sequence, typing.Sequence):
        return f"list[{_type_name(args[0]) if args else 'any'}]"
    if origin in (dict, Mapping, typing.Mapping):
        return f"map[{_type_name(args[0])}, {_type_name(args[1])}]" if args else "map"
    return getattr(tp, "__name__", str(tp))


def _schema_name(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " \\| ".join(str(v) for v in schema["enum"])
    return str(schema.get("type", "any"))


def _event_schema(cls: type[Event]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    for key, (schema, req, meaning) in COMMON_FIELDS.items():
        props[key] = {**schema, "description": meaning}
        if req:
            required.append(key)
    props["event"] = {"const": cls.name, "description": cls.description}
    if cls.stage is not None:
        props["stage"] = {"const": cls.stage}
        props["outcome"] = {"const": _outcome(cls.stage)}
        required += ["stage", "outcome"]
    for spec in _field_specs(cls):
        props[spec.name] = spec.schema
        if spec.required:
            required.append(spec.name)
    return {
        "title": cls.name,
        "description": cls.description,
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": True,
        "x-obs-level": level_name(cls.level),
    }


#: The default registry: every event obs and comm emit.
REGISTRY = EventRegistry()


def emit(event: Event, /, *, logger: str | None = None, **control: Any) -> None:
    """Log a typed event at its level, with ``stage``, ``body`` and its fields.

    ``control`` (scope, once, once_key, every_n, every_seconds, exc_info, ...) goes to the
    logger as is; ``once=True`` without ``once_key`` keys on the event's ``identity``
    fields. The event class owns its name, stage and fields: a keyword naming one of them
    (``stage="recovered"`` on a terminal failure) is kept as ``user.<name>``, never
    overrides. Never raises: a failure is reported as ``obs_internal_error``.
    """
    try:
        import obs  # noqa: PLC0415 - obs imports this module lazily; no import cycle
        from obs.render import CONTROL_FIELDS  # noqa: PLC0415

        cls = type(event)
        fields = event.fields()
        if control.get("once") and "once_key" not in control:
            control["once_key"] = event.once_key()
        if cls.stage is not None:
            fields["stage"] = cls.stage
        fields.setdefault("body", event.body())
        owned = set(fields) | set(CONTROL_FIELDS)
        owned.discard("body")  # a caller may word the message
        for key, value in control.items():
            fields[f"user.{key}" if key in owned else key] = value
        obs.get_logger(logger or "obs.events").log(cls.level, cls.name, **fields)
    except Exception as exc:
        _report_emit_failure(event, exc)


def _report_emit_failure(event: object, exc: Exception) -> None:
    try:
        import obs  # noqa: PLC0415

        obs.get_logger("obs").error(
            "obs_internal_error",
            where="obs.events.emit",
            error_type=type(exc).__name__,
            error_message=f"{type(event).__name__}: {exc}"[:1000],
            once=True,
            once_key=("where", "error_type"),
        )
    except Exception:
        return  # the chain itself is broken; nothing left to tell


# --- generic fallback-chain events --------------------------------------------------------


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ChainAttempt(Event):
    """A fallback chain starts trying one backend."""

    name: ClassVar[str] = "chain_attempt"
    stage: ClassVar[Stage | None] = "attempt"
    level: ClassVar[int] = logging.DEBUG
    description: ClassVar[str] = "A fallback chain starts an attempt with one backend."
    message: ClassVar[str | None] = "{chain}: trying backend {backend} (attempt {attempt})"
    identity: ClassVar[tuple[str, ...] | None] = ("chain", "backend", "attempt")

    chain: str
    backend: str
    attempt: int


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ChainAttemptFailed(Event):
    """One backend of a fallback chain failed (the chain may still recover)."""

    name: ClassVar[str] = "chain_attempt_failed"
    stage: ClassVar[Stage | None] = "attempt_failed"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = "One attempt of a fallback chain failed, with its reason."
    message: ClassVar[str | None] = (
        "{chain}: backend {backend} failed ({reason}): {error_type}: {error_message}"
    )
    identity: ClassVar[tuple[str, ...] | None] = ("chain", "backend", "reason", "error_type")

    chain: str
    backend: str
    attempt: int
    reason: str
    error_type: str
    error_message: str
    duration_ms: float


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ChainFallback(Event):
    """A fallback chain moves on to the next backend."""

    name: ClassVar[str] = "chain_fallback"
    stage: ClassVar[Stage | None] = "fallback"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = "A fallback chain falls back from one backend to the next."
    message: ClassVar[str | None] = (
        "{chain}: falling back from {from_backend} to {to_backend} ({reason})"
    )
    identity: ClassVar[tuple[str, ...] | None] = ("chain", "from_backend", "to_backend", "reason")

    chain: str
    from_backend: str
    to_backend: str
    reason: str


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ChainInitialized(Event):
    """A fallback chain ended with a working backend (terminal success)."""

    name: ClassVar[str] = "chain_initialized"
    stage: ClassVar[Stage | None] = "initialized"
    level: ClassVar[int] = logging.INFO
    description: ClassVar[str] = "A fallback chain succeeded; names the winning backend."
    message: ClassVar[str | None] = (
        "{chain}: initialized with backend {backend} after {attempts} attempt(s)"
    )
    identity: ClassVar[tuple[str, ...] | None] = ("chain", "backend", "reused")

    chain: str
    backend: str
    attempts: int
    duration_ms: float
    reused: bool = False


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ChainTerminalFailure(Event):
    """Every backend of a fallback chain failed or was skipped (terminal failure)."""

    name: ClassVar[str] = "chain_terminal_failure"
    stage: ClassVar[Stage | None] = "terminal_failure"
    level: ClassVar[int] = logging.ERROR
    description: ClassVar[str] = "A fallback chain ran out of backends; nothing works."
    message: ClassVar[str | None] = "{chain}: no backend works: tried {backends_tried}"
    identity: ClassVar[tuple[str, ...] | None] = (
        "chain",
        "backends_tried",
        "reasons",
        "backends_skipped",
    )

    chain: str
    backends_tried: tuple[str, ...]
    reasons: tuple[str, ...]
    last_error_type: str | None
    last_error_message: str | None
    hint: str
    backends_skipped: tuple[str, ...] = ()
    skip_reasons: tuple[str, ...] = ()
    duration_ms: float = 0.0


# --- comm: FlashInfer allreduce-fusion workspace (names are the Grafana contract) --------


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class WorkspaceAttempt(ChainAttempt):
    """Creating a FlashInfer allreduce-fusion workspace with one backend starts."""

    name: ClassVar[str] = "workspace_attempt"
    description: ClassVar[str] = (
        "Creating a FlashInfer allreduce-fusion workspace starts with one backend."
    )
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}): trying backend {backend}"
    )


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class WorkspaceAttemptFailed(ChainAttemptFailed):
    """One backend could not create the workspace."""

    name: ClassVar[str] = "workspace_attempt_failed"
    description: ClassVar[str] = "One backend failed to create the workspace (reason classified)."
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}): backend {backend} failed "
        "({reason}): {error_type}: {error_message}"
    )


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class WorkspaceFallback(ChainFallback):
    """The workspace getter falls back to the next backend (mnnvl -> trtllm)."""

    name: ClassVar[str] = "workspace_fallback"
    description: ClassVar[str] = "The workspace getter falls back to the next backend."
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}): falling back from "
        "{from_backend} to {to_backend} ({reason})"
    )


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class WorkspaceInitialized(ChainInitialized):
    """A workspace exists (created, or reused from the other getter)."""

    name: ClassVar[str] = "workspace_initialized"
    description: ClassVar[str] = (
        "The workspace is ready: backend, attempts, time, reused from the other getter."
    )
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}) initialized with backend "
        "{backend} after {attempts} attempt(s)"
    )


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class WorkspaceTerminalFailure(ChainTerminalFailure):
    """No backend could create the workspace: the fusion is unavailable."""

    name: ClassVar[str] = "workspace_terminal_failure"
    description: ClassVar[str] = (
        "No backend could create the workspace; allreduce fusion is unavailable (alert)."
    )
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace unavailable ({chain}): tried {backends_tried}"
    )


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class WorkspaceDestroyFailed(Event):
    """Destroying a workspace raised; the reference is dropped anyway."""

    name: ClassVar[str] = "workspace_destroy_failed"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = "A workspace's destroy() raised; it was released anyway."
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}, {backend}) destroy failed: "
        "{error_type}: {error_message}"
    )

    chain: str
    backend: str
    error_type: str
    error_message: str


# --- obs's own events (emitted by the chain itself) ---------------------------------------


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsInternalError(Event):
    """A processor or exporter failed; logging went on without raising."""

    name: ClassVar[str] = "obs_internal_error"
    level: ClassVar[int] = logging.ERROR
    description: ClassVar[str] = "obs itself failed somewhere; reported once per place and type."

    where: str
    error_type: str
    error_message: str


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsRecordsDropped(Event):
    """Records could not be delivered or spooled; counted per level."""

    name: ClassVar[str] = "obs_records_dropped"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = "Records were lost (queue full, export failed); counts by level."

    dropped: Mapping[str, int]
    reason: str


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class LogRepeatsSuppressed(Event):
    """A deduplicated event repeated; how often and when (logged at the original level)."""

    name: ClassVar[str] = "log_repeats_suppressed"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = (
        "A once/throttled event kept repeating: suppressed count and first/last seen "
        "(logged at the original event's level)."
    )

    dedup_key: str
    original_event: str
    suppressed_count: int
    first_seen: str
    last_seen: str


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsDedupCapacityReached(Event):
    """The dedup table is full; new keys share one throttled overflow slot."""

    name: ClassVar[str] = "obs_dedup_capacity_reached"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = "The dedup table is full; new keys now share one throttled slot."

    capacity: int


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsExportProvider(Event):
    """obs exports through the application's global OpenTelemetry LoggerProvider."""

    name: ClassVar[str] = "obs_export_provider"
    level: ClassVar[int] = logging.INFO
    description: ClassVar[str] = (
        "Records are exported through the application's global LoggerProvider (installed "
        "by opentelemetry-instrument or the app), not obs' own exporter; WARNING when obs' "
        "OTLP endpoint setting is therefore not used."
    )

    provider: str


def cli_schema(argv: list[str] | None = None) -> int:
    """``python -m obs schema [--format markdown|json]``: print the registry to stdout."""
    import argparse  # noqa: PLC0415 - CLI only
    import json  # noqa: PLC0415

    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["schema"]:
        args = args[1:]
    parser = argparse.ArgumentParser(
        prog="python -m obs schema", description="Print the registered events."
    )
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    try:
        opts = parser.parse_args(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    if opts.format == "json":
        sys.stdout.write(json.dumps(REGISTRY.to_json_schema(), indent=2, sort_keys=False) + "\n")
    else:
        sys.stdout.write(REGISTRY.to_markdown())
    return 0
