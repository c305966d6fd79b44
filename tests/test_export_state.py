"""obs.otel.state: the export worker's state machine, as a table and on real sinks.

The table is checked against an independent statement of the rules; the property test runs
any sequence of signals; the sink tests watch the state of a real ExportSink exporting over
real HTTP into the loopback receiver while the receiver fails, recovers and hangs.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, SupportsIndex

import pytest
from hypothesis import given
from hypothesis import strategies as st

import obs.testing
from obs.otel import ExportSink
from obs.otel.state import Collector, Phase, Signal, State, transition
from obs.rank import RankResolver
from obs.settings import load_settings

OPEN = (Phase.RUNNING, Phase.FLUSHING)
SHUT = (Phase.CLOSING, Phase.ABANDONED, Phase.CLOSED)


def expected_phase(phase: Phase, signal: Signal) -> Phase:
    """The rules in words: flushing is entered and left by flush waiters while open;
    shutdown closes an open worker; only a closing one can be abandoned; close ends any but
    an abandoned one; a forked child starts running, or closed when the parent was shutting
    down."""
    if signal is Signal.FLUSH_BEGIN and phase is Phase.RUNNING:
        return Phase.FLUSHING
    if signal is Signal.FLUSH_END and phase is Phase.FLUSHING:
        return Phase.RUNNING
    if signal is Signal.SHUTDOWN and phase in OPEN:
        return Phase.CLOSING
    if signal is Signal.ABANDON and phase is Phase.CLOSING:
        return Phase.ABANDONED
    if signal is Signal.CLOSE and phase in (*OPEN, Phase.CLOSING):
        return Phase.CLOSED
    if signal is Signal.FORK:
        return Phase.RUNNING if phase in OPEN else Phase.CLOSED
    return phase


def expected_collector(state: State, signal: Signal) -> Collector:
    """A failure marks the collector down (gone while shutting down), a success up again;
    gone is final but for a fork; a give-up (a hung export at shutdown) means gone."""
    if signal is Signal.FORK:
        return Collector.UP
    if state.collector is Collector.GONE:
        return Collector.GONE
    if signal is Signal.GIVE_UP:
        return Collector.GONE
    if signal is Signal.EXPORT_FAILED:
        return Collector.GONE if state.phase in SHUT else Collector.DOWN
    if signal is Signal.SERVER_ERROR:  # it answered (server errors to single records)
        return Collector.GONE if state.phase in SHUT else Collector.UP
    if signal is Signal.EXPORT_OK:
        return Collector.UP
    return state.collector


STATES = [State(p, c) for p in Phase for c in Collector]


class TestTable:
    @pytest.mark.parametrize("state", STATES, ids=lambda s: f"{s.phase.value}-{s.collector.value}")
    @pytest.mark.parametrize("signal", list(Signal), ids=lambda s: s.value)
    def test_every_pair(self, state: State, signal: Signal) -> None:
        """Every (state, signal) pair goes where the rules say, and nowhere else."""
        expected = State(expected_phase(state.phase, signal), expected_collector(state, signal))
        assert expected == transition(state, signal)

    @given(st.lists(st.sampled_from(list(Signal)), max_size=40))
    def test_no_way_back_from_shutdown(self, signals: list[Signal]) -> None:
        """Once shutdown began the worker never runs again (only a forked child does), and
        an abandoned worker stays abandoned until a fork."""
        state = State(Phase.RUNNING, Collector.UP)
        for signal in signals:
            nxt = transition(state, signal)
            if state.phase in SHUT and signal is not Signal.FORK:
                assert nxt.phase in SHUT
            if state.phase is Phase.ABANDONED and signal is not Signal.FORK:
                assert nxt.phase is Phase.ABANDONED
            state = nxt

    def test_names(self) -> None:
        """The one-word names an operator sees: running, collector_down, flushing, ..."""
        assert [
            "running",
            "collector_down",
            "flushing",
            "closing",
            "abandoned",
            "closed",
        ] == [
            State(Phase.RUNNING, Collector.UP).name,
            State(Phase.RUNNING, Collector.DOWN).name,
            State(Phase.FLUSHING, Collector.DOWN).name,
            State(Phase.CLOSING, Collector.GONE).name,
            State(Phase.ABANDONED, Collector.GONE).name,
            State(Phase.CLOSED, Collector.UP).name,
        ]


def _sink(receiver: Any, tmp_path: Path, **overrides: Any) -> ExportSink:
    settings = load_settings(
        {
            "otlp_endpoint": receiver.http_endpoint,
            "otlp_protocol": "http/protobuf",
            "spool_dir": str(tmp_path / "spool"),
            "blrp_schedule_delay_ms": 20.0,
            "otlp_timeout": 1.0,
            "shutdown_timeout": 2.0,
            "service_name": "state-test",
            **overrides,
        },
        env={},
    )
    resolver = RankResolver(env={"RANK": "0", "WORLD_SIZE": "1"}, host="h")
    return ExportSink(settings, resolver, lambda *a, **k: None, drop_report_interval=0.05)


def _event(name: str, level: int = logging.ERROR) -> dict[str, Any]:
    return {
        "event": name,
        "body": name,
        "severity_text": logging.getLevelName(level),
        "severity_number": 17,
        "_obs_level": level,
    }


class TestOnARealSink:
    def test_down_then_up_then_closed(self, tmp_path: Path) -> None:
        """A failing collector puts the worker in collector_down (WARNING+ written ahead to
        the spool); when it answers again a flush brings it back to running and delivers
        the spooled record; shutdown ends in closed."""
        with obs.testing.OTLPReceiver(grpc=False) as receiver:
            sink = _sink(receiver, tmp_path)
            try:
                assert "running" == sink.state.name
                receiver.set_fault(fail=True, http_status=503)
                sink(None, "error", _event("while_down"))
                assert not sink.force_flush(2.0)
                assert "collector_down" == sink.state.name
                sink(None, "error", _event("written_ahead"))
                receiver.clear_fault()
                assert sink.force_flush(3.0)
                assert "running" == sink.state.name
                names = {r["event_name"] for r in receiver.wait_for(2, timeout=5.0)}
                assert {"while_down", "written_ahead"} <= names
            finally:
                sink.shutdown(2.0)
            assert "closed" == sink.state.name

    def test_hung_export_at_shutdown_is_abandoned_and_accounted(self, tmp_path: Path) -> None:
        """A collector that never answers: shutdown gives up on the export thread within its
        budget (abandoned) and the records it held are spooled or counted, none lost."""
        with obs.testing.OTLPReceiver(grpc=False) as receiver:
            receiver.set_fault(delay=30.0)
            sink = _sink(receiver, tmp_path, shutdown_timeout=1.0, otlp_timeout=20.0)
            for i in range(20):
                sink(None, "error", _event(f"held_{i}"))
            time.sleep(0.2)  # the thread is now inside the hung request
            start = time.monotonic()
            sink.shutdown(1.0)
            took = time.monotonic() - start
            stats = sink.stats()
            receiver.clear_fault()
        assert took < 10.0  # the budget (1 s) and a loaded machine's margin; hung: 20 s
        assert sink.state.phase in (Phase.ABANDONED, Phase.CLOSED)
        dropped = sum(stats["dropped"].values())
        assert 20 == stats["spooled"] + dropped + stats["exported"]


class _DrainedBetween(list[tuple[str, str, str]]):
    """Notes another thread's :meth:`Accounting.send` takes between this one's "any
    left?" and its take (two senders: a flush caller and the export thread)."""

    def pop(self, index: SupportsIndex = -1) -> tuple[str, str, str]:
        del self[:]  # the other sender took them meanwhile
        return super().pop(index)


def test_two_senders_at_once_never_raise() -> None:
    """A sender that finds the notes gone when it takes one reports what it has and
    returns (it raised IndexError: the flush returned False, or the export thread counted
    a crash of its own)."""
    from obs._reentry import MarkedLock
    from obs.otel.accounting import Accounting

    reports: list[object] = []
    acct = Accounting(lambda event, *a, **k: reports.append(event), MarkedLock(), 60.0)
    acct.ready = True
    acct.note("export", RuntimeError("first"))
    acct.notes = _DrainedBetween(acct.notes)
    acct.send(force=True)  # raised IndexError before
    acct.notes = [("export", "ExportFailed", "503")]
    acct.send(force=True)
    assert ["ExportFailed"] == [getattr(r, "error_type", None) for r in reports]
