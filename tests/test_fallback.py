"""Tests for obs.fallback: the generic runner, with a non-comm chain (attention backends)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import pytest

import obs
import obs.testing
from obs import events
from obs.events import Event, EventRegistry
from obs.fallback import (
    GENERIC_EVENTS,
    Attempt,
    ChainEvents,
    FallbackResult,
    FallbackRunner,
    Stage,
    classify_default,
)

# A chain that is not comm's: its own event names, registered in its own registry.
ATTN = EventRegistry()


@ATTN.register
@dataclasses.dataclass(frozen=True)
class AttnAttempt(events.ChainAttempt):
    name: ClassVar[str] = "attn_backend_attempt"


@ATTN.register
@dataclasses.dataclass(frozen=True)
class AttnFailed(events.ChainAttemptFailed):
    name: ClassVar[str] = "attn_backend_attempt_failed"


@ATTN.register
@dataclasses.dataclass(frozen=True)
class AttnFallback(events.ChainFallback):
    name: ClassVar[str] = "attn_backend_fallback"


@ATTN.register
@dataclasses.dataclass(frozen=True)
class AttnReady(events.ChainInitialized):
    name: ClassVar[str] = "attn_backend_selected"


@ATTN.register
@dataclasses.dataclass(frozen=True)
class AttnNone(events.ChainTerminalFailure):
    name: ClassVar[str] = "attn_backend_unavailable"


ATTN_EVENTS = ChainEvents(AttnAttempt, AttnFailed, AttnFallback, AttnReady, AttnNone)


class Recorder:
    """A stub emitter: records (event, logger, control) instead of logging."""

    def __init__(self) -> None:
        self.calls: list[tuple[Event, str | None, dict[str, Any]]] = []

    def __call__(self, event: Event, *, logger: str | None = None, **control: Any) -> None:
        self.calls.append((event, logger, control))

    @property
    def names(self) -> list[str]:
        return [type(e).name for e, _, _ in self.calls]


def classify(exc: BaseException) -> str:
    return "oom" if isinstance(exc, MemoryError) else "unsupported"


def ok(value: str) -> Any:
    return lambda: value


def fail(exc: BaseException) -> Any:
    def run() -> str:
        raise exc

    return run


def runner(rec: Recorder, **kw: Any) -> FallbackRunner:
    kw.setdefault("events", ATTN_EVENTS)
    kw.setdefault("classify", classify)
    return FallbackRunner("attention", logger="attn", emit=rec, **kw)


class TestRun:
    def test_first_stage_wins(self) -> None:
        """The first working stage wins: attempt then initialized, nothing else tried."""
        rec = Recorder()
        called: list[str] = []
        result = runner(rec).run(
            (Stage("flash", ok("F")), Stage("sdpa", lambda: called.append("sdpa") or "S"))
        )
        assert ("F", "flash", True, False) == (
            result.value,
            result.winner,
            result.ok,
            result.reused,
        )
        assert [] == called
        assert ["attn_backend_attempt", "attn_backend_selected"] == rec.names
        ready = rec.calls[1][0]
        assert isinstance(ready, AttnReady)
        assert ("attention", "flash", 1, False) == (
            ready.chain,
            ready.backend,
            ready.attempts,
            ready.reused,
        )
        assert ready.duration_ms >= 0.0
        assert (Attempt("flash", None, None, None, result.attempts[0].duration_ms),) == (
            result.attempts
        )

    def test_failure_then_fallback(self) -> None:
        """A failure is classified, reported, and the chain falls back to the next stage."""
        rec = Recorder()
        result = runner(rec).run(
            (Stage("flash", fail(MemoryError("no room"))), Stage("sdpa", ok("S")))
        )
        assert ("S", "sdpa") == (result.value, result.winner)
        assert [
            "attn_backend_attempt",
            "attn_backend_attempt_failed",
            "attn_backend_fallback",
            "attn_backend_attempt",
            "attn_backend_selected",
        ] == rec.names
        failed = rec.calls[1][0]
        assert isinstance(failed, AttnFailed)
        assert ("attention", "flash", 1, "oom", "MemoryError", "no room") == (
            failed.chain,
            failed.backend,
            failed.attempt,
            failed.reason,
            failed.error_type,
            failed.error_message,
        )
        fallback = rec.calls[2][0]
        assert isinstance(fallback, AttnFallback)
        assert ("flash", "sdpa", "oom") == (
            fallback.from_backend,
            fallback.to_backend,
            fallback.reason,
        )
        assert ("oom", "MemoryError") == (result.attempts[0].reason, result.attempts[0].error_type)
        assert isinstance(rec.calls[1][2]["exc_info"], MemoryError)
        assert rec.calls[4][0].attempts == 2  # type: ignore[attr-defined]

    def test_all_fail_terminal(self) -> None:
        """When every stage fails the result is empty and one terminal event says why."""
        rec = Recorder()
        result = runner(rec, hint=lambda r: f"{len(r.failures)} failed").run(
            (Stage("flash", fail(ValueError("a"))), Stage("sdpa", fail(MemoryError("b"))))
        )
        assert (None, None, False) == (result.value, result.winner, result.ok)
        assert "attn_backend_unavailable" == rec.names[-1]
        assert 1 == rec.names.count("attn_backend_fallback")
        terminal = rec.calls[-1][0]
        assert isinstance(terminal, AttnNone)
        assert (
            ("flash", "sdpa"),
            ("unsupported", "oom"),
            "MemoryError",
            "b",
            "2 failed",
            (),
        ) == (
            terminal.backends_tried,
            terminal.reasons,
            terminal.last_error_type,
            terminal.last_error_message,
            terminal.hint,
            terminal.backends_skipped,
        )
        assert "flash: unsupported (ValueError: a); sdpa: oom (MemoryError: b)" == (
            result.describe()
        )

    def test_skipped_stage(self) -> None:
        """A skipped stage is never run, never fallen back to, and listed with its reason."""
        rec = Recorder()
        ran: list[str] = []
        result = runner(rec).run(
            (
                Stage("flash", fail(ValueError("x"))),
                Stage("xformers", lambda: ran.append("x") or "X", skip="not_installed"),
            )
        )
        assert [] == ran
        assert [
            "attn_backend_attempt",
            "attn_backend_attempt_failed",
            "attn_backend_unavailable",
        ] == rec.names
        terminal = rec.calls[-1][0]
        assert isinstance(terminal, AttnNone)
        assert (("flash",), ("xformers",), ("not_installed",)) == (
            terminal.backends_tried,
            terminal.backends_skipped,
            terminal.skip_reasons,
        )
        assert (Attempt("xformers", "not_installed", None, None, 0.0, skipped=True),) == (
            result.skipped
        )

    def test_reuse(self) -> None:
        """A stage whose reuse() returns a value wins without running (reused=True)."""
        rec = Recorder()
        result = runner(rec).run(
            (Stage("flash", fail(AssertionError("must not run")), reuse=lambda: "shared"),)
        )
        assert ("shared", "flash", True) == (result.value, result.winner, result.reused)
        assert ["attn_backend_selected"] == rec.names
        assert rec.calls[0][0].reused is True  # type: ignore[attr-defined]

    def test_reuse_check_failure_creates(self) -> None:
        """A reuse check that raises means 'create one', never a crash."""
        rec = Recorder()
        result = runner(rec).run((Stage("flash", ok("new"), reuse=fail(RuntimeError("x"))),))
        assert ("new", False) == (result.value, result.reused)

    def test_empty_chain(self) -> None:
        """No stage at all is a terminal failure with nothing tried."""
        rec = Recorder()
        result = runner(rec).run(())
        assert (None, ()) == (result.value, result.attempts)
        assert ["attn_backend_unavailable"] == rec.names
        assert "no stage" == result.describe()


class TestRobustness:
    def test_keyboard_interrupt_propagates(self) -> None:
        """Only Exception is caught: Ctrl-C stops the chain (no fallback) and propagates,
        after the attempt and the terminal failure are reported as interrupted."""
        rec = Recorder()
        with pytest.raises(KeyboardInterrupt):
            runner(rec).run((Stage("flash", fail(KeyboardInterrupt())), Stage("sdpa", ok("S"))))
        assert [
            "attn_backend_attempt",
            "attn_backend_attempt_failed",
            "attn_backend_unavailable",
        ] == rec.names

    def test_classifier_failure_is_error(self) -> None:
        """A classifier that raises or returns junk yields reason 'error'."""

        def bad(exc: BaseException) -> str:
            raise TypeError("classifier bug")

        rec = Recorder()
        result = runner(rec, classify=bad).run((Stage("flash", fail(ValueError("x"))),))
        assert "error" == result.attempts[0].reason
        rec2 = Recorder()
        junk = runner(rec2, classify=lambda e: "").run((Stage("flash", fail(ValueError("x"))),))
        assert "error" == junk.attempts[0].reason

    def test_emitter_failure_does_not_break_chain(self) -> None:
        """An emitter that raises cannot change the chain's result."""

        def broken(event: Event, *, logger: str | None = None, **control: Any) -> None:
            raise RuntimeError("emit broke")

        result = FallbackRunner("attention", emit=broken).run(
            (Stage("flash", fail(ValueError("x"))), Stage("sdpa", ok("S")))
        )
        assert ("S", "sdpa") == (result.value, result.winner)

    def test_hint_failure_is_reported_in_hint(self) -> None:
        """A hint builder that raises leaves a marker instead of raising."""

        def bad_hint(result: FallbackResult[Any]) -> str:
            raise ZeroDivisionError

        rec = Recorder()
        runner(rec, hint=bad_hint).run(())
        assert "(hint failed: ZeroDivisionError)" == rec.calls[-1][0].hint  # type: ignore[attr-defined]

    def test_long_error_message_truncated(self) -> None:
        """Error messages are bounded at 2000 characters (plus a marker saying how many
        were cut)."""
        result = FallbackRunner("a", emit=Recorder()).run(
            (Stage("x", fail(ValueError("y" * 5000))),)
        )
        assert "y" * 2000 + "...[truncated 3000 chars]" == result.attempts[0].error_message


class TestControl:
    def test_scope_and_once(self) -> None:
        """scope goes on every event, terminal_scope on the terminal one, once on failures."""
        rec = Recorder()
        runner(rec, scope="local", terminal_scope="process").run(
            (Stage("flash", fail(ValueError("x"))), Stage("sdpa", fail(ValueError("y"))))
        )
        got = [(type(e).name, c.get("scope"), c.get("once", False)) for e, _, c in rec.calls]
        assert [
            ("attn_backend_attempt", "local", False),
            ("attn_backend_attempt_failed", "local", True),
            ("attn_backend_fallback", "local", True),
            ("attn_backend_attempt", "local", False),
            ("attn_backend_attempt_failed", "local", True),
            ("attn_backend_unavailable", "process", True),
        ] == got
        assert {"attn"} == {logger for _, logger, _ in rec.calls}

    def test_once_false_and_extra_control(self) -> None:
        """once=False leaves dedup off; run(**control) adds control keywords."""
        rec = Recorder()
        runner(rec, once=False).run((Stage("flash", fail(ValueError("x"))),), every_n=10)
        assert all("once" not in c for _, _, c in rec.calls)
        assert all(c["every_n"] == 10 for _, _, c in rec.calls)

    def test_defaults(self) -> None:
        """The default classifier says 'error' and the default events are chain_*."""
        assert "error" == classify_default(ValueError())
        assert events.ChainAttempt is GENERIC_EVENTS.attempt
        assert events.ChainTerminalFailure is GENERIC_EVENTS.terminal_failure


class TestThroughObs:
    @pytest.fixture
    def captured(self) -> Any:
        obs.configure(level="DEBUG", format="json", sdk_disabled=True, repeat_summary_seconds=0)
        with obs.testing.capture_events() as evs:
            yield evs

    def test_real_emit_levels_and_fields(self, captured: list[dict[str, Any]]) -> None:
        """Through obs, the generic chain_* events carry stage levels and their fields."""
        result = FallbackRunner("kv_connector", logger="kv", classify=classify).run(
            (Stage("nixl", fail(ValueError("no nic"))), Stage("lmcache", ok("L")))
        )
        assert "L" == result.value
        assert [
            ("chain_attempt", "DEBUG", "pending"),
            ("chain_attempt_failed", "WARNING", "failure"),
            ("chain_fallback", "WARNING", "degraded"),
            ("chain_attempt", "DEBUG", "pending"),
            ("chain_initialized", "INFO", "success"),
        ] == [(e["event"], e["severity_text"], e["outcome"]) for e in captured]
        assert {"kv"} == {e["logger"] for e in captured}
        failed = captured[1]
        assert ("kv_connector", "nixl", "unsupported", "ValueError", "no nic") == (
            failed["chain"],
            failed["backend"],
            failed["reason"],
            failed["error_type"],
            failed["error_message"],
        )
        assert "ValueError" == failed["exception.type"]

    def test_repeated_failure_logged_once(self, captured: list[dict[str, Any]]) -> None:
        """Running a failing chain three times logs its failure and terminal events once."""
        run = FallbackRunner("kv_connector", classify=classify)
        for _ in range(3):
            result: FallbackResult[str] = run.run((Stage("nixl", fail(ValueError("x"))),))
            assert result.value is None
        names = [e["event"] for e in captured]
        assert 1 == names.count("chain_attempt_failed")
        assert 1 == names.count("chain_terminal_failure")
        assert 3 == names.count("chain_attempt")
        obs.flush()
        repeats = [e for e in captured if e["event"] == "log_repeats_suppressed"]
        assert {("chain_attempt_failed", 2), ("chain_terminal_failure", 2)} == {
            (e["original_event"], e["suppressed_count"]) for e in repeats
        }
