"""obs._runtime: the configured chain, its export seam, its reports and its budgets."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import obs
import obs.testing
from obs._config import STATE
from obs._own_events import ObsInternalError
from obs._runtime import Runtime
from obs._seams import ExportProcessor
from obs.rank import RankResolver
from obs.settings import Settings, load_settings


class RecordingSink:
    """An ExportProcessor that records what the runtime hands it and the budgets it gets."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.flush_budgets: list[float] = []
        self.shutdown_budgets: list[float] = []

    def __call__(self, logger: object, method_name: str, event_dict: Any) -> Any:
        self.received.append(dict(event_dict))
        return event_dict

    def force_flush(self, timeout: float) -> bool:
        self.flush_budgets.append(timeout)
        return True

    def shutdown(self, timeout: float) -> bool:
        self.shutdown_budgets.append(timeout)
        return True

    def stats(self) -> dict[str, Any]:
        return {"enqueued": len(self.received), "exported": 1, "dropped": {"INFO": 2}}


def _runtime(sink: RecordingSink | None, **overrides: Any) -> Runtime:
    settings = load_settings({"stream": "none", **overrides}, env={})
    seen: list[tuple[Settings, RankResolver]] = []

    def factory(s: Settings, resolver: RankResolver, report: Any) -> ExportProcessor | None:
        seen.append((s, resolver))
        return sink

    runtime = Runtime(settings, sink_factory=factory)
    assert [(settings, runtime.resolver)] == seen
    return runtime


class TestSeam:
    def test_the_factorys_sink_is_the_last_processor(self) -> None:
        """The injected sink runs last, after every enriching processor."""
        sink = RecordingSink()
        runtime = _runtime(sink)
        assert sink is runtime.processors[-1]

    def test_no_sink_no_export_level(self) -> None:
        """A factory returning None means no export: hidden events are not kept for it."""
        runtime = _runtime(None)
        assert (None, False) == (runtime.sink, any(p is None for p in runtime.processors))
        assert runtime.export_level > logging.CRITICAL

    def test_events_reach_the_sink_with_control_fields(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A logged event reaches the sink with its level, rank and callsite fields."""
        sink = RecordingSink()
        monkeypatch.setattr(STATE, "sink_factory", lambda s, r, report: sink)
        obs.configure(stream="none")
        obs.get_logger("rt").warning("seam_event", n=1)
        (event,) = [e for e in sink.received if e["event"] == "seam_event"]
        assert ("WARNING", 1, 0) == (event["severity_text"], event["n"], event["rank"])

    def test_real_export_sink_satisfies_the_protocol(self) -> None:
        """obs' own OTLP sink is an ExportProcessor (the seam is not a fiction)."""
        from obs.otel import build_export_sink

        settings = load_settings(
            {"stream": "none", "otlp_endpoint": "http://127.0.0.1:9", "shutdown_timeout": 0.2},
            env={},
        )
        sink = build_export_sink(settings, RankResolver(), lambda *a, **k: None)
        try:
            assert isinstance(sink, ExportProcessor)
        finally:
            assert sink is not None
            sink.shutdown(0.2)


class TestBudgets:
    def test_flush_and_shutdown_stay_within_the_settings_budget(self) -> None:
        """A caller's timeout is capped by OBS_SHUTDOWN_TIMEOUT; infinite means the setting."""
        sink = RecordingSink()
        runtime = _runtime(sink, shutdown_timeout=2.0)
        runtime.flush(timeout=10.0)
        runtime.flush(timeout=0.5)
        runtime.shutdown(timeout=float("inf"))
        assert ([2.0, 0.5], [2.0]) == (sink.flush_budgets, sink.shutdown_budgets)

    def test_shutdown_keeps_the_final_counts(self) -> None:
        """After shutdown the sink is gone from the chain but delivery() keeps its counts."""
        sink = RecordingSink()
        runtime = _runtime(sink)
        runtime.shutdown(timeout=0.1)
        delivery = runtime.delivery()
        assert (False, 1, 2) == (
            sink in runtime.processors,
            delivery["acknowledged"],
            delivery["dropped"],
        )


class TestReports:
    def test_report_goes_through_the_chain(self) -> None:
        """obs' own events are ordinary events: enriched, captured, exported."""
        sink = RecordingSink()
        runtime = _runtime(sink)
        runtime.report(ObsInternalError(where="test", error_type="X", error_message="m"))
        (event,) = [e for e in sink.received if e["event"] == "obs_internal_error"]
        assert ("ERROR", "test", "obs") == (
            event["severity_text"],
            event["where"],
            event["logger"],
        )

    def test_bad_argument_is_reported_once_per_name(self) -> None:
        """The same bad argument twice is one report; another argument is another."""
        sink = RecordingSink()
        runtime = _runtime(sink)
        runtime._bad_argument("every", -1)
        runtime._bad_argument("every", -2)
        runtime._bad_argument("stage", 5, "a stage name, a str", "kept as user.stage")
        messages = [e["error_message"] for e in sink.received if e["event"] == "obs_internal_error"]
        assert 2 == len(messages)
        assert messages[1].startswith("stage=5 is not valid (expected a stage name, a str)")


class TestReentrancy:
    def test_a_log_call_inside_a_log_call_is_written_after(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An event logged while obs renders another (a __repr__ that logs) is deferred and
        written once the outer one is done: both arrive, outer first, nothing hangs."""
        sink = RecordingSink()
        monkeypatch.setattr(STATE, "sink_factory", lambda s, r, report: sink)
        obs.configure(stream="none")
        log = obs.get_logger("rt")

        class Loud:
            def __repr__(self) -> str:
                log.warning("inner_event")
                return "Loud()"

        log.warning("outer_event", thing=Loud())
        names = [e["event"] for e in sink.received if e["event"] in {"outer_event", "inner_event"}]
        assert ["outer_event", "inner_event"] == names
