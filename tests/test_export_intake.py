"""The callers' lock-free end of the export queue (obs.otel.intake): what a log call
appends without the lock is queued, counted and delivered exactly as before."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from test_otel import BlockingExporter, Reports, ev, events_of

from obs._export_queue import SeverityQueue
from obs.levels import WARNING_CLASS, level_class
from obs.otel import ExportSink
from obs.rank import RankResolver
from obs.settings import Settings

Make = Callable[..., tuple[ExportSink, Reports]]
LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)


@pytest.fixture
def make_sink(tmp_path: Path) -> Iterator[Make]:
    """ExportSinks on a given exporter (test settings); all shut down after the test."""
    sinks: list[ExportSink] = []

    def make(exporter: Any, **overrides: Any) -> tuple[ExportSink, Reports]:
        options: dict[str, Any] = {
            "logs_exporter": "otlp",
            "spool_dir": str(tmp_path / "spool"),
            "blrp_schedule_delay_ms": 20.0,
            "shutdown_timeout": 2.0,
            **overrides,
        }
        reports = Reports()
        resolver = RankResolver(env={}, host="h")
        sink = ExportSink(Settings(**options), resolver, reports, exporter=exporter)
        sinks.append(sink)
        return sink, reports

    yield make
    for sink in sinks:
        sink.shutdown(0.5)


def unaccounted(stats: dict[str, Any]) -> int:
    """Records sent that no count holds (``obs.delivery()``'s identity)."""
    held = stats["exported"] + stats["spooled"] + stats["queued"] + stats["in_flight"]
    return int(stats["enqueued"] - held - sum(stats["dropped"].values()))


class TestIntake:
    @given(
        capacity=st.integers(2, 5),
        levels=st.lists(st.sampled_from(LEVELS), max_size=14),
    )
    @settings(
        max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    def test_a_full_queue_drops_what_one_queue_would(
        self, make_sink: Make, capacity: int, levels: list[int]
    ) -> None:
        """With the export thread stuck, records logged without the lock leave a full queue
        exactly as if each had been put in the severity queue at its call: the same ones
        dropped per level, WARNING+ spooled, every record counted once at every moment."""
        exporter = BlockingExporter()
        sink, _ = make_sink(exporter, blrp_max_queue_size=capacity, blrp_max_export_batch_size=1)
        try:
            sink(None, "info", ev("first", logging.INFO))
            assert exporter.entered.wait(2.0)
            model: SeverityQueue[str] = SeverityQueue(capacity)
            dropped: dict[str, int] = {}
            spooled = 0
            for i, level in enumerate(levels):
                sink(None, "info", ev(f"e{i}", level))
                assert 0 == unaccounted(sink.stats())
                victim = model.put(level_class(level), f"e{i}")
                if victim is None:
                    continue
                if victim[0] >= WARNING_CLASS:
                    spooled += 1
                else:
                    name = logging.getLevelName(LEVELS[victim[0]])
                    dropped[name] = dropped.get(name, 0) + 1
            stats = sink.stats()
            assert (dropped, spooled, 1 + len(levels)) == (
                stats["dropped"],
                stats["spooled"],
                stats["enqueued"],
            )
        finally:
            exporter.release.set()
        assert sink.force_flush(2.0)
        names = [str(r.log_record.event_name) for b in exporter.batches for r in b]
        kept = [payload for _, payload in model.drain()]
        assert ["first", *kept] == names[: 1 + len(kept)]

    def test_threads_deliver_every_record_once(self, make_sink: Make) -> None:
        """Records appended by several threads at once are each exported once, and
        counted once."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter, blrp_max_queue_size=10_000, blrp_max_export_batch_size=64)

        def log(t: int) -> None:
            for i in range(300):
                sink(None, "info", ev(f"t{t}-{i}", logging.INFO))

        threads = [threading.Thread(target=log, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sink.force_flush(5.0)
        names = events_of(exporter)
        expected = sorted(f"t{t}-{i}" for t in range(4) for i in range(300))
        assert expected == sorted(names)
        stats = sink.stats()
        assert (1200, 1200, 0) == (stats["enqueued"], stats["exported"], unaccounted(stats))

    def test_flush_and_shutdown_deliver_what_the_intake_holds(self, make_sink: Make) -> None:
        """Records still waiting in the intake (fewer than a batch, before the schedule)
        are counted as queued, delivered by a flush, and by shutdown."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter, blrp_schedule_delay_ms=60_000.0)
        sink(None, "info", ev("a0", logging.INFO))
        assert sink.force_flush(2.0)  # the first call takes the lock; the rest need not
        for i in range(1, 4):
            sink(None, "info", ev(f"a{i}", logging.INFO))
        waiting = len(sink._worker.intake)
        assert (3, 3, 4) == (waiting, sink.stats()["queued"], sink.stats()["enqueued"])
        assert sink.force_flush(2.0)
        for i in range(3):
            sink(None, "error", ev(f"b{i}"))
        assert 3 == len(sink._worker.intake)
        assert sink.shutdown(2.0)
        assert [*(f"a{i}" for i in range(4)), "b0", "b1", "b2"] == events_of(exporter)
        assert (7, 0) == (sink.stats()["exported"], unaccounted(sink.stats()))
