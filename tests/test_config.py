"""Tests for obs.configure/flush/shutdown (obs._config, obs._runtime) and internal errors."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import obs
import obs.testing
from obs._config import STATE
from obs._own_events import ObsInternalError
from obs.encode import REDACTED

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]


def _failing(name: str = "boom") -> Callable[..., Any]:
    def processor(logger: object, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError(name)

    return processor


def _insert_before_render(processor: Callable[..., Any]) -> None:
    runtime = STATE.runtime
    assert runtime is not None
    runtime.processors = (*runtime.processors, processor)


class TestConfigure:
    def test_returns_settings(self) -> None:
        """configure() returns the resolved Settings."""
        settings = obs.configure(format="json", level="WARNING", sdk_disabled=True)
        assert (isinstance(settings, obs.Settings), logging.WARNING) == (True, settings.level)

    def test_idempotent(self, configure_json: Configure) -> None:
        """Configuring twice with the same settings works and writes each event once."""
        read = configure_json()
        obs.configure(format="json", sdk_disabled=True, repeat_summary_seconds=0)
        obs.get_logger("t").info("e")
        assert ["e"] == [r["event"] for r in read()]

    def test_failed_configure_keeps_previous_runtime(self, configure_json: Configure) -> None:
        """A configure() that raises ConfigError leaves the working runtime in place."""
        configure_json(level="WARNING")
        before = STATE.runtime
        with pytest.raises(obs.ConfigError):
            obs.configure(level="loud")
        assert before is STATE.runtime

    def test_stream_stdout(self, capsys: pytest.CaptureFixture[str]) -> None:
        """stream="stdout" writes to stdout and nothing to stderr."""
        obs.configure(format="json", stream="stdout", sdk_disabled=True)
        obs.get_logger("t").info("to_stdout")
        out, err = capsys.readouterr()
        assert ("to_stdout", "") == (json.loads(out)["event"], err)

    def test_file_gets_json_lines(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], json_lines: Any
    ) -> None:
        """OBS_FILE receives JSON lines even when the stream shows console lines."""
        path = tmp_path / "logs" / "rank0.jsonl"
        obs.configure(format="console", file=str(path), sdk_disabled=True)
        log = obs.get_logger("t")
        log.info("first", n=1)
        log.warning("second\nline", token="t")
        obs.flush()
        records = json_lines(path.read_text())
        assert [("first", 1), ("second\nline", REDACTED)] == [
            (r["event"], r.get("n", r.get("token"))) for r in records
        ]
        assert "INFO      first" in capsys.readouterr().err

    def test_file_placeholders_are_filled_per_process(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, json_lines: Any
    ) -> None:
        """OBS_FILE's {rank}/{node_rank}/{pid} are filled from this process's rank info."""
        for name, value in {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        obs.configure(
            format="json", sdk_disabled=True, file=str(tmp_path / "n{node_rank}-r{rank}-{pid}.log")
        )
        obs.get_logger("t").info("placed")
        obs.shutdown()
        path = tmp_path / f"n1-r3-{os.getpid()}.log"
        assert [("placed", 3)] == [(r["event"], r["rank"]) for r in json_lines(path.read_text())]

    def test_file_from_env_is_appended(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, json_lines: Any
    ) -> None:
        """OBS_FILE from the env is appended to across configurations."""
        path = tmp_path / "app.jsonl"
        monkeypatch.setenv("OBS_FILE", str(path))
        for event in ("one", "two"):
            obs.configure(format="json", sdk_disabled=True)
            obs.get_logger("t").info(event)
            obs.shutdown()
        assert ["one", "two"] == [r["event"] for r in json_lines(path.read_text())]

    def test_reset_unconfigures(self, configure_json: Configure) -> None:
        """obs.testing.reset() drops the runtime."""
        configure_json()
        obs.testing.reset()
        assert STATE.runtime is None

    def test_changed_dedup_settings_flush_old_summaries(self, configure_json: Configure) -> None:
        """Reconfiguring with another capacity summarises the old table's repeats first;
        the new table keeps the key, so the event is not written again: its repeat is
        the new table's to count."""
        read = configure_json()
        log = obs.get_logger("t")
        log.warning_once("repeated")
        log.warning_once("repeated")
        obs.configure(format="json", sdk_disabled=True, dedup_capacity=99)
        log.warning_once("repeated")
        obs.flush()
        events = [(r["event"], r.get("suppressed_count")) for r in read()]
        assert [
            ("repeated", None),
            ("log_repeats_suppressed", 1),
            ("log_repeats_suppressed", 1),
        ] == events


class TestFlushShutdown:
    def test_before_configure(self) -> None:
        """flush() and shutdown() with nothing configured return True."""
        assert (True, True) == (obs.flush(), obs.shutdown())

    def test_no_sink(self, configure_json: Configure) -> None:
        """With no export sink flush() and shutdown() return True."""
        configure_json()
        assert (True, True) == (obs.flush(timeout=0.5), obs.shutdown(timeout=0.5))

    def test_sink_is_flushed_and_shut_down(self, fake_sink: Any) -> None:
        """flush() flushes the sink; shutdown() stops it and takes it out of the chain."""
        obs.configure(format="json")
        ok = (obs.flush(), obs.shutdown())
        runtime = STATE.runtime
        assert runtime is not None
        assert (ok, 1, 1, False) == (
            (True, True),
            fake_sink.flushed,
            fake_sink.closed,
            fake_sink in runtime.processors,
        )

    def test_logging_after_shutdown(self, configure_json: Configure) -> None:
        """After shutdown() the console output still works."""
        read = configure_json()
        obs.shutdown()
        obs.get_logger("t").info("after")
        assert ["after"] == [r["event"] for r in read()]

    def test_failing_sink_flush_is_false(self, fake_sink: Any) -> None:
        """A sink whose force_flush raises makes flush() return False, not raise."""

        def boom(timeout: float) -> bool:
            raise RuntimeError("collector gone")

        fake_sink.force_flush = boom
        obs.configure(format="json")
        assert obs.flush() is False


class TestInternalErrors:
    def test_failing_processor_never_raises(self, configure_json: Configure) -> None:
        """A processor that raises: the call returns, the event is still written (with the
        error noted), and obs_internal_error is reported once for repeated failures."""
        read = configure_json()
        _insert_before_render(_failing())
        log = obs.get_logger("t")
        for i in range(5):
            log.warning("still_written", i=i, api_key="k")
        records = read()
        written = [r for r in records if r["event"] == "still_written"]
        errors = [r for r in records if r["event"] == "obs_internal_error"]
        assert [0, 1, 2, 3, 4] == [r["i"] for r in written]
        assert {REDACTED} == {r["api_key"] for r in written}
        assert all(r["obs_internal_error"].startswith("RuntimeError") for r in written)
        assert [("RuntimeError", "test_config.processor", "ERROR")] == [
            (r["error_type"], r["where"], r["severity_text"]) for r in errors
        ]

    def test_failure_before_redaction_still_redacts(self, configure_json: Configure) -> None:
        """A processor failing first in the chain writes the event with secrets redacted and
        a timestamp."""
        read = configure_json()
        runtime = STATE.runtime
        assert runtime is not None
        runtime.processors = (_failing(), *runtime.processors)
        obs.get_logger("t").info(
            "early_failure", password="hunter2", request={"authorization": "Bearer t", "n": 1}
        )
        written = [r for r in read() if r["event"] == "early_failure"]
        assert [REDACTED] == [r["password"] for r in written]
        assert [{"authorization": REDACTED, "n": 1}] == [r["request"] for r in written]
        assert isinstance(written[0]["timestamp"], str)

    def test_two_different_failures_reported_separately(self, configure_json: Configure) -> None:
        """Different failure sites are each reported once."""
        read = configure_json()
        runtime = STATE.runtime
        assert runtime is not None
        original = runtime.processors
        for _ in range(2):
            runtime.processors = (*original, _failing("a"))
            obs.get_logger("t").info("x")

        def other(logger: object, method: str, event_dict: dict[str, Any]) -> Any:
            raise KeyError("b")

        for _ in range(2):
            runtime.processors = (*original, other)
            obs.get_logger("t").info("y")
        errors = [r["error_type"] for r in read() if r["event"] == "obs_internal_error"]
        assert ["RuntimeError", "KeyError"] == errors

    def test_renderer_failure_never_raises(
        self, configure_json: Configure, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A failure in the output write itself is counted, never raised."""
        configure_json()
        runtime = STATE.runtime
        assert runtime is not None

        def broken_render(event_dict: Any) -> bytes:
            raise OSError("disk full")

        # Every renderer (the chain's, the last resort's) goes through it; the fused path
        # holds it under its own name (a frame fewer per line) and tries orjson first.
        monkeypatch.setattr("obs.render._dumps", lambda *a, **k: broken_render({}))
        monkeypatch.setattr("obs._fused._line", lambda *a, **k: broken_render({}))
        monkeypatch.setattr("obs._fused._orjson_dumps", lambda *a, **k: broken_render({}))
        obs.get_logger("t").error("lost")
        obs.get_logger("t").error("lost again")
        assert 3 == runtime.unreported_errors  # two events and the one report about them

    def test_report_is_guarded_against_recursion(self, configure_json: Configure) -> None:
        """Runtime.report() called while reporting is deferred and written after, one more
        generation too; past that it is counted, never recursed."""
        read = configure_json()
        runtime = STATE.runtime
        assert runtime is not None
        calls: list[str] = []

        def reporting(logger: object, method: str, event_dict: dict[str, Any]) -> Any:
            calls.append(event_dict["where"])
            runtime.report(ObsInternalError("nested_report", "X", "inner"))
            return event_dict

        runtime.processors = (*runtime.processors, reporting)
        runtime.report(ObsInternalError("outer_report", "X", "outer"))
        written = ["outer_report", "nested_report", "nested_report"]
        assert (written, 1, written) == (
            calls,
            runtime.reentrant_dropped,
            [r["where"] for r in read()],
        )

    def test_summary_due_while_reporting_is_not_lost(self, configure_json: Configure) -> None:
        """A summary falling due while an internal event is being reported (another thread's
        repeat) is kept for later, not drained into a report that the guard would drop."""
        read = configure_json()
        runtime = STATE.runtime
        assert runtime is not None
        log = obs.get_logger("t")
        log.warning_once("repeated")
        log.warning_once("repeated")

        def due_now(logger: object, method: str, event_dict: dict[str, Any]) -> Any:
            if event_dict.get("where") == "internal_notice":
                runtime.deduper.summary_due = True  # as if set by a racing thread
            return event_dict

        runtime.processors = (*runtime.processors, due_now)
        runtime.report(ObsInternalError("internal_notice", "X", "notice"))
        obs.flush()
        assert (["repeated", "obs_internal_error", "log_repeats_suppressed"], 0) == (
            [r["event"] for r in read()],
            runtime.unreported_errors,
        )

    def test_bad_env_without_configure_is_reported(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A bad OBS_* value seen by the lazy default runtime is one obs_internal_error."""
        monkeypatch.setenv("OBS_DEDUP_CAPACITY", "lots")
        monkeypatch.setenv("OBS_FORMAT", "json")
        log = obs.get_logger("t")
        log.info("a")
        log.info("b")
        records = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
        assert [("obs_internal_error", "ConfigError"), ("a", None), ("b", None)] == [
            (r["event"], r.get("error_type")) for r in records
        ]
