"""A flush's answer is what became of the records: ``force_flush`` returns True exactly when
everything logged before it reached the collector, whatever attempt was in flight when it
began.

A replay the worker started before the flush (its own probe of a collector that was down),
answered with a failure once the flush had begun, made the flush return False although the
flush then replayed the spool and delivered every record (CI: a flush of 20 s after a
collector that answered 503 came back False). Now a failure the flush recovered from (the
spool empty, nothing lost since it began) is no failure of the flush's; what a failed
attempt spooled and no replay took back still makes it False.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, LogRecordExportResult
from test_otel import Reports, ev, events_of

from obs.otel import ExportSink
from obs.otel.state import Phase
from obs.rank import RankResolver
from obs.settings import Settings


class _Scripted(InMemoryLogRecordExporter):
    """Answers each export as scripted: ``fail``, ``raise``, ``hold`` (stuck until released,
    then ``after_hold``); past the script ``rest`` (``ok`` delivers)."""

    def __init__(self, script: list[str], after_hold: str, rest: str) -> None:
        super().__init__()
        self.script, self.after_hold, self.rest = script, after_hold, rest
        self.entered, self.release = threading.Event(), threading.Event()

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        step = self.script.pop(0) if self.script else self.rest
        if step == "hold":
            self.entered.set()
            self.release.wait(10.0)
            step = self.after_hold
        if step == "raise":
            raise RuntimeError("collector unavailable")
        if step == "fail":
            return LogRecordExportResult.FAILURE
        return super().export(batch)


def _wait_until(predicate: object, what: str) -> None:
    deadline = time.monotonic() + 10.0
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


@settings(max_examples=4, deadline=None)
@given(
    in_flight=st.sampled_from(["export", "replay"]),
    answer=st.sampled_from(["fail", "raise"]),
    back=st.booleans(),
)
@example(in_flight="replay", answer="fail", back=True)  # the CI failure
@example(in_flight="export", answer="raise", back=True)
def test_flush_answers_whether_everything_was_delivered(
    tmp_path_factory: pytest.TempPathFactory, in_flight: str, answer: str, back: bool
) -> None:
    """An export or replay in flight when a flush begins fails; then the collector is back
    (or not): the flush returns True exactly when every record logged reached it."""
    spool: Path = tmp_path_factory.mktemp("flush") / "spool"
    script = ["fail", "hold"] if in_flight == "replay" else ["hold"]
    exporter = _Scripted(script, answer, "ok" if back else "fail")
    settings_ = Settings(
        logs_exporter="otlp", spool_dir=str(spool), blrp_schedule_delay_ms=20.0,
        shutdown_timeout=2.0,
    )  # fmt: skip
    resolver = RankResolver(env={"RANK": "0", "WORLD_SIZE": "1"}, host="h")
    sink = ExportSink(settings_, resolver, Reports(), exporter=exporter)
    logged = ["a"]
    result: list[tuple[bool, list[str]]] = []

    def flush() -> None:
        flushed = sink.force_flush(8.0)
        exporter.rest = "fail"  # what it delivers later is no answer of this flush's
        result.append((flushed, events_of(exporter)))

    try:
        sink(None, "error", ev("a"))  # replay: "a" fails, is spooled, the probe replays it
        _wait_until(exporter.entered.is_set, "no attempt in flight")
        if in_flight == "replay":
            logged.append("b")
            sink(None, "error", ev("b"))
        flusher = threading.Thread(target=flush)
        flusher.start()
        _wait_until(lambda: sink.state.phase is Phase.FLUSHING, "the flush did not begin")
        exporter.release.set()
        flusher.join(20.0)
    finally:
        exporter.release.set()
        sink.shutdown(0.5)
    ((flushed, events),) = result
    delivered = set(logged) <= set(events)
    assert delivered == flushed
    if in_flight == "replay":  # the spool waited: the flush replays it once more
        assert back == flushed
