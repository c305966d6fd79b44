"""A generic fallback chain: an explicit ordered tuple of stages, each timed and reported.

Each stage is a backend name and a callable. The runner tries them in order, classifies
every failure with a pluggable classifier, and emits typed events for the named chain:
``attempt`` -> ``attempt_failed`` -> ``fallback`` -> ... -> ``initialized`` or
``terminal_failure``. Which event classes are used is a :class:`ChainEvents` mapping, so
comm's ``workspace_*`` events and an attention-backend chain's own events share one runner.
The result records the winner and why each earlier stage failed or was skipped.

The stage callable's ``Exception`` is caught. A ``BaseException`` (``KeyboardInterrupt``,
``SystemExit``, a framework's ``Cancelled``) propagates, after the attempt and the chain's
terminal failure are reported with reason :data:`INTERRUPTED`: the alert keyed on the
terminal failure fires for a chain that ended that way too. The instrumentation itself
never raises.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "GENERIC_EVENTS",
    "INTERRUPTED",
    "Attempt",
    "ChainEvents",
    "Classifier",
    "FallbackResult",
    "FallbackRunner",
    "Stage",
    "classify_default",
    "error_type",
]

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from obs import events as _events
from obs.encode import error_text, scrubbed_text
from obs.events import (
    ChainAttempt,
    ChainAttemptFailed,
    ChainFallback,
    ChainInitialized,
    ChainTerminalFailure,
    Event,
)

T = TypeVar("T")

#: The reason of an attempt a ``BaseException`` (not an ``Exception``) ended.
INTERRUPTED = "interrupted"

#: ``(exception) -> reason``: a short, stable snake_case string for dashboards.
Classifier = Callable[[BaseException], str]


class Emitter(Protocol):
    """What the runner calls to emit an event (``obs.events.emit`` by default)."""

    def __call__(self, event: Event, /, *, logger: str | None = None, **control: Any) -> None: ...


#: The class's own ``__name__`` slot: a metaclass property of that name cannot shadow it.
_TYPE_NAME = type.__dict__["__name__"]


def error_type(exc: BaseException) -> str:
    """An exception's type name as obs writes it (``error_type``, ``last_error_type``, in
    comm's errors): the class's own name, so a metaclass cannot make reading it raise or
    give something other than text; scrubbed (a class generated with a pair in its name)
    and cut to 200 characters. Never raises."""
    try:
        return scrubbed_text(_TYPE_NAME.__get__(type(exc)), 200)
    except Exception:
        return "BaseException"


def classify_default(exc: BaseException) -> str:
    """The fallback classifier: every failure is ``"error"``."""
    del exc
    return "error"


@dataclasses.dataclass(frozen=True)
class Stage(Generic[T]):
    """One backend of a chain.

    ``run`` creates the value (raising on failure). ``skip`` (a reason) marks a stage the
    chain must not try here, e.g. trtllm on several nodes. ``reuse`` returns an existing
    value to use instead of creating one (or None to create).
    """

    backend: str
    run: Callable[[], T]
    skip: str | None = None
    reuse: Callable[[], T | None] | None = None


@dataclasses.dataclass(frozen=True)
class Attempt:
    """What happened to one stage: failed (reason, error), skipped (reason) or won."""

    backend: str
    reason: str | None
    error_type: str | None
    error_message: str | None
    duration_ms: float
    skipped: bool = False

    @property
    def ok(self) -> bool:
        """True for the winning stage."""
        return self.reason is None


@dataclasses.dataclass(frozen=True)
class FallbackResult(Generic[T]):
    """A chain's outcome: the value (None on terminal failure), winner and every attempt."""

    chain: str
    value: T | None
    winner: str | None
    attempts: tuple[Attempt, ...]
    duration_ms: float
    reused: bool = False

    @property
    def ok(self) -> bool:
        """True when a stage produced the value."""
        return self.winner is not None

    @property
    def tried(self) -> tuple[Attempt, ...]:
        """Attempts that ran (not skipped)."""
        return tuple(a for a in self.attempts if not a.skipped)

    @property
    def failures(self) -> tuple[Attempt, ...]:
        """Attempts that ran and failed."""
        return tuple(a for a in self.attempts if not a.skipped and not a.ok)

    @property
    def skipped(self) -> tuple[Attempt, ...]:
        """Stages not tried, with the reason."""
        return tuple(a for a in self.attempts if a.skipped)

    def describe(self) -> str:
        """One line per attempt: ``backend: reason (Type: message)`` / ``skipped``."""
        lines = []
        for a in self.attempts:
            if a.skipped:
                lines.append(f"{a.backend}: skipped ({a.reason})")
            elif a.ok:
                lines.append(f"{a.backend}: ok ({a.duration_ms:.1f} ms)")
            else:
                lines.append(f"{a.backend}: {a.reason} ({a.error_type}: {a.error_message})")
        return "; ".join(lines) if lines else "no stage"


@dataclasses.dataclass(frozen=True)
class ChainEvents:
    """The event classes a chain emits at each stage (generic ``chain_*`` by default)."""

    attempt: type[ChainAttempt] = ChainAttempt
    attempt_failed: type[ChainAttemptFailed] = ChainAttemptFailed
    fallback: type[ChainFallback] = ChainFallback
    initialized: type[ChainInitialized] = ChainInitialized
    terminal_failure: type[ChainTerminalFailure] = ChainTerminalFailure


GENERIC_EVENTS = ChainEvents()

_Hint = Callable[["FallbackResult[Any]"], str]


class FallbackRunner:
    """Runs stages for one named chain and reports each step as a typed event.

    ``scope`` applies to every event but the terminal failure, which uses
    ``terminal_scope`` (default: ``scope``); this is console rank scoping, WARNING+ is
    exported from every rank by per-sink scoping anyway. ``once`` dedups the failure-side events
    (attempt_failed, fallback, terminal_failure) per process on their identity fields.
    ``hint`` builds the terminal failure's ``hint`` from the result.
    """

    __slots__ = (
        "_classify",
        "_emit",
        "_events",
        "_hint",
        "_logger",
        "_once",
        "_scope",
        "_terminal_scope",
        "chain",
    )

    def __init__(
        self,
        chain: str,
        *,
        events: ChainEvents = GENERIC_EVENTS,
        classify: Classifier = classify_default,
        logger: str | None = None,
        scope: object = "process",
        terminal_scope: object | None = None,
        once: bool = True,
        hint: _Hint | None = None,
        emit: Emitter | None = None,
    ) -> None:
        self.chain = chain
        self._events = events
        self._classify = classify
        self._logger = logger or "obs.fallback"
        self._scope = scope
        self._terminal_scope = scope if terminal_scope is None else terminal_scope
        self._once = once
        self._hint = hint
        self._emit: Emitter = emit or _events.emit

    def run(self, stages: tuple[Stage[T], ...], **extra_control: Any) -> FallbackResult[T]:
        """Try ``stages`` in order; return the first value or a terminal failure result."""
        started = time.perf_counter_ns()
        attempts: list[Attempt] = []
        tried = 0
        pending = list(stages)
        while pending:
            stage = pending.pop(0)
            if stage.skip is not None:
                attempts.append(Attempt(stage.backend, stage.skip, None, None, 0.0, skipped=True))
                continue
            reused = self._reuse(stage)
            if reused is not None:
                total = _ms(started)
                attempts.append(Attempt(stage.backend, None, None, None, 0.0))
                self._send(
                    self._events.initialized(self.chain, stage.backend, tried, total, True),
                    extra_control,
                )
                return FallbackResult(
                    self.chain, reused, stage.backend, tuple(attempts), total, reused=True
                )
            tried += 1
            self._send(self._events.attempt(self.chain, stage.backend, tried), extra_control)
            t0 = time.perf_counter_ns()
            try:
                value = stage.run()
            except Exception as exc:
                reason = self._reason(exc)
                self._failed(stage, exc, reason, tried, t0, attempts, extra_control)
                nxt = next((s for s in pending if s.skip is None), None)
                if nxt is not None:
                    self._send(
                        self._events.fallback(self.chain, stage.backend, nxt.backend, reason),
                        extra_control,
                        failure=True,
                    )
                continue
            except BaseException as exc:  # Ctrl-C, SystemExit, a framework's Cancelled
                self._failed(stage, exc, INTERRUPTED, tried, t0, attempts, extra_control)
                self._finish(started, attempts, extra_control)
                raise
            took = _ms(t0)
            attempts.append(Attempt(stage.backend, None, None, None, took))
            total = _ms(started)
            self._send(
                self._events.initialized(self.chain, stage.backend, tried, total, False),
                extra_control,
            )
            return FallbackResult(self.chain, value, stage.backend, tuple(attempts), total)
        return self._finish(started, attempts, extra_control)

    def _failed(  # noqa: PLR0917 - one attempt's whole story
        self,
        stage: Stage[Any],
        exc: BaseException,
        reason: str,
        tried: int,
        t0: int,
        attempts: list[Attempt],
        extra_control: Mapping[str, Any],
    ) -> None:
        """Record and report one failed attempt."""
        took = _ms(t0)
        kind, error_message = error_type(exc), _message(exc)
        attempts.append(Attempt(stage.backend, reason, kind, error_message, took))
        self._send(
            self._events.attempt_failed(
                self.chain, stage.backend, tried, reason, kind, error_message, took
            ),
            extra_control,
            failure=True,
            exc_info=exc,
        )

    def _finish(
        self, started: int, attempts: list[Attempt], extra_control: Mapping[str, Any]
    ) -> FallbackResult[Any]:
        """The chain ran out of stages (or was interrupted): report the terminal failure."""
        result: FallbackResult[Any] = FallbackResult(
            self.chain, None, None, tuple(attempts), _ms(started)
        )
        self._send(self._terminal(result), extra_control, failure=True, scope=self._terminal_scope)
        return result

    def _terminal(self, result: FallbackResult[Any]) -> ChainTerminalFailure:
        failures = result.failures
        last = failures[-1] if failures else None
        hint = ""
        if self._hint is not None:
            try:
                hint = self._hint(result)
            except Exception as exc:
                hint = f"(hint failed: {error_type(exc)})"
        return self._events.terminal_failure(
            self.chain,
            tuple(a.backend for a in result.tried),
            tuple(a.reason or "" for a in result.tried),
            last.error_type if last else None,
            last.error_message if last else None,
            hint,
            tuple(a.backend for a in result.skipped),
            tuple(a.reason or "" for a in result.skipped),
            result.duration_ms,
        )

    def _reuse(self, stage: Stage[T]) -> T | None:
        if stage.reuse is None:
            return None
        try:
            return stage.reuse()
        except Exception:
            return None  # a broken reuse check means "create one", never a crash

    def _reason(self, exc: Exception) -> str:
        try:
            reason = self._classify(exc)
        except Exception:
            return "error"
        return reason if isinstance(reason, str) and reason else "error"

    def _send(
        self,
        event: Event,
        extra: Mapping[str, Any],
        *,
        failure: bool = False,
        exc_info: BaseException | None = None,
        scope: object = None,
    ) -> None:
        control: dict[str, Any] = {"scope": self._scope if scope is None else scope, **extra}
        if failure and self._once:
            control["once"] = True
        if exc_info is not None:
            control["exc_info"] = exc_info
        try:
            self._emit(event, logger=self._logger, **control)
        except Exception:
            return  # emit never raises; a custom emitter must not break the chain either


def _ms(start_ns: int) -> float:
    return round((time.perf_counter_ns() - start_ns) / 1e6, 3)


def _message(exc: BaseException) -> str:
    """The error message an attempt keeps: scrubbed, then cut (every event, the result's
    ``describe()`` and comm's errors show it)."""
    return error_text(exc, 2000)
