"""Typed events: one frozen dataclass per event, one registry, one ``emit``.

An event class names its stable snake_case ``name`` (the Grafana contract), its ``stage``
(which drives severity and ``outcome``), a default ``level``, a one-line ``description``
and an optional ``message`` template for the human ``body``; its dataclass fields are the
record's typed fields. The registry (:mod:`obs._registry`) lists every event
(``python -m obs schema`` prints it as Markdown or JSON Schema), so dashboards, alerts and
docs can be checked against code. This module holds ``emit`` and the generic fallback-chain
events; obs' own events live in :mod:`obs._own_events`, comm's in :mod:`comm.events`
(registered through the ``obs.events`` entry point group).

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
    "ObsExportProvider",
    "ObsInternalError",
    "ObsRecordsDropped",
    "ObsUnbridgeableRecord",
    "ObsUnrenderableEvent",
    "Stage",
    "cli_schema",
    "emit",
    "json_schema",
    "markdown",
]

import dataclasses
import logging
from typing import Any, ClassVar

from obs._config import STATE
from obs._fields import CONTROL_SET
from obs._logger import BoundLogger
from obs._own_events import (
    LogRepeatsSuppressed,
    ObsDedupCapacityReached,
    ObsExportProvider,
    ObsInternalError,
    ObsRecordsDropped,
    ObsUnbridgeableRecord,
    ObsUnrenderableEvent,
)
from obs._registry import REGISTRY, STAGES, Event, EventRegistry, Stage
from obs._schema import COMMON_FIELDS, cli_schema, json_schema, markdown
from obs.encode import error_text, scrubbed_text


def emit(event: Event, /, *, logger: str | None = None, **control: Any) -> None:
    """Log a typed event at its level, with ``stage``, ``body`` and its fields.

    The event's text (its str fields and the body built from them: error messages, hints)
    is scrubbed as obs' own text is, secret pairs too. ``control`` (scope, once, once_key,
    every_n, every_seconds, exc_info, ...) goes to the
    logger as is; ``once=True`` without ``once_key`` keys on the event's ``identity``
    fields. The event class owns its name, stage and fields: a keyword naming one of them
    (``stage="recovered"`` on a terminal failure) is kept as ``user.<name>``, never
    overrides. Never raises: a failure is reported as ``obs_internal_error``.
    """
    try:
        cls = type(event)
        fields = {k: _scrubbed(v) for k, v in event.fields().items()}
        if control.get("once") and "once_key" not in control:
            control["once_key"] = event.once_key()
        if cls.stage is not None:
            fields["stage"] = cls.stage
        fields.setdefault("body", scrubbed_text(event.body()))
        owned = set(fields) | CONTROL_SET
        owned.discard("body")  # a caller may word the message
        for key, value in control.items():
            fields[f"user.{key}" if key in owned else key] = value
        BoundLogger(logger or "obs.events", STATE).log(cls.level, cls.name, **fields)
    except Exception as exc:
        _report_emit_failure(event, exc)


def _scrubbed(value: Any) -> Any:
    """A typed event's field value with its text scrubbed (a str, or strs in a tuple)."""
    if type(value) is str:
        return scrubbed_text(value)
    if type(value) is tuple and any(type(v) is str for v in value):
        return tuple(scrubbed_text(v) if type(v) is str else v for v in value)
    return value


def _report_emit_failure(event: object, exc: Exception) -> None:
    try:
        BoundLogger("obs", STATE).error(
            "obs_internal_error",
            where="obs.events.emit",
            error_type=type(exc).__name__,
            error_message=f"{type(event).__name__}: {error_text(exc, 1000)}",
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
    #: The failure's identity: a later run that fails with another error type (same
    #: reasons) is another failure and gets its own ERROR line, not a repeat count.
    identity: ClassVar[tuple[str, ...] | None] = (
        "chain",
        "backends_tried",
        "reasons",
        "last_error_type",
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
