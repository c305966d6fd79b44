"""Tests for obs.otel: record mapping, the export queue/thread, spooling, bounds, fork.

These drive :class:`obs.otel.ExportSink` with hand-built event dicts (the shape
docs/INTERNALS.md fixes) and the SDK's real in-memory exporter; exporters that block or
fail on purpose stand in for a stuck or broken network. End-to-end tests over real gRPC
and HTTP are in tests/integration/test_otel_e2e.py.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    ConsoleLogRecordExporter,
    InMemoryLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.trace import TracerProvider

import obs.otel
import obs.otel.sink
from obs.encode import REDACTED
from obs.errors import ConfigError
from obs.otel import ExportSink, build_export_sink, build_exporter, in_export_thread
from obs.rank import RankResolver
from obs.settings import Settings

LEVELS = {
    10: ("DEBUG", 5),
    20: ("INFO", 9),
    30: ("WARNING", 13),
    40: ("ERROR", 17),
    50: ("CRITICAL", 21),
}


def ev(event: str, level: int = logging.ERROR, **fields: Any) -> dict[str, Any]:
    """An event dict as the chain hands it to the export sink."""
    text, number = LEVELS[level]
    ed: dict[str, Any] = {
        "timestamp": "2026-12-02T15:30:14.123456Z",
        "severity_text": text,
        "severity_number": number,
        "event": event,
        "body": fields.pop("body", event),
        "logger": "tests.otel",
        "rank": 3,
        "local_rank": 3,
        "world_size": 8,
        "node_rank": 0,
        "host.name": "gpu-node-0",
        "code.file.path": "/src/x.py",
        "code.line.number": 42,
        "code.function.name": "f",
        "_obs_level": level,
        "_obs_time_ns": 1_700_000_000_123_456_789,
        "_obs_console": True,
    }
    ed.update(fields)
    return ed


class Reports:
    """The runtime's ``report`` stand-in: records calls; can re-enter the sink like the
    real runtime does (the report itself is exported)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict[str, Any]]] = []
        self.sink: ExportSink | None = None

    def __call__(self, event: Any, level: int | None = None, *, body: str | None = None) -> None:
        fields = {k: v for k, v in event.fields().items() if v is not None}
        fields["body"] = body if body is not None else event.body()
        level = type(event).level if level is None else level
        self.calls.append((type(event).name, level, fields))
        if self.sink is not None:
            self.sink(None, "warning", ev(type(event).name, level, **fields))

    def named(self, event: str) -> list[dict[str, Any]]:
        return [f for e, _, f in self.calls if e == event]


class BlockingExporter(LogRecordExporter):
    """An exporter stuck on the network until released (or forever)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.batches: list[Sequence[ReadableLogRecord]] = []

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.entered.set()
        self.release.wait()
        self.batches.append(list(batch))
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        return

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class FailingExporter(InMemoryLogRecordExporter):
    """Fails (or raises) the first ``n`` exports, then delivers like the in-memory one."""

    def __init__(self, n: int, *, raises: bool = False) -> None:
        super().__init__()
        self.n = n
        self.raises = raises
        self.attempts = 0
        self.threads: list[bool] = []

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.attempts += 1
        self.threads.append(in_export_thread())
        if self.n > 0:
            self.n -= 1
            if self.raises:
                raise RuntimeError("exporter exploded")
            return LogRecordExportResult.FAILURE
        return super().export(batch)


@pytest.fixture
def make_sink(tmp_path: Path) -> Iterator[Callable[..., tuple[ExportSink, Reports]]]:
    """Build ExportSinks on a given exporter with test settings; shut them all down after."""
    sinks: list[ExportSink] = []

    def make(exporter: LogRecordExporter, **overrides: Any) -> tuple[ExportSink, Reports]:
        options: dict[str, Any] = {
            "logs_exporter": "otlp",
            "spool_dir": str(tmp_path / "spool"),
            "blrp_schedule_delay_ms": 20.0,
            "service_name": "svc",
            "shutdown_timeout": 2.0,
        }
        options.update(overrides)
        reports = Reports()
        resolver = RankResolver(
            env={"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "8"}, host="gpu-node-0"
        )
        sink = ExportSink(
            Settings(**options), resolver, reports, exporter=exporter, drop_report_interval=0.05
        )
        sinks.append(sink)
        return sink, reports

    yield make
    for sink in sinks:
        sink.shutdown(0.5)


def exported(exporter: InMemoryLogRecordExporter) -> list[ReadableLogRecord]:
    return list(exporter.get_finished_logs())


def events_of(exporter: InMemoryLogRecordExporter) -> list[str]:
    return [str(r.log_record.event_name) for r in exported(exporter)]


class TestMapping:
    def test_every_field_is_mapped(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """An event dict becomes one record with event_name, event attribute, str body,
        severity, timestamps, code.*, rank, stage/outcome, exception.* and plain fields;
        control keys and rendered-only keys are not attributes."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter)
        fields = {
            "stage": "terminal_failure",
            "outcome": "failure",
            "chain": "fi_ar",
            "backends_tried": ["mnnvl", "trtllm"],
            "exception.type": "RuntimeError",
            "exception.message": "no multicast",
            "exception.stacktrace": "Traceback ...",
        }
        ed = ev("workspace_terminal_failure", body="workspace unavailable", **fields)
        before = time.time_ns()
        sink(None, "error", ed)
        assert sink.force_flush(2.0)
        (record,) = exported(exporter)
        rec = record.log_record
        assert "workspace_terminal_failure" == rec.event_name
        assert "workspace unavailable" == rec.body
        assert ("ERROR", 17) == (
            rec.severity_text,
            rec.severity_number.value if rec.severity_number else None,
        )
        assert 1_700_000_000_123_456_789 == rec.timestamp
        assert before <= rec.observed_timestamp <= time.time_ns()
        attrs = dict(rec.attributes or {})
        uid = attrs.pop("log.record.uid")
        assert isinstance(uid, str)
        assert {
            "event": "workspace_terminal_failure",
            "logger": "tests.otel",
            "rank": 3,
            "local_rank": 3,
            "world_size": 8,
            "node_rank": 0,
            "host.name": "gpu-node-0",
            "code.file.path": "/src/x.py",
            "code.line.number": 42,
            "code.function.name": "f",
            "stage": "terminal_failure",
            "outcome": "failure",
            "chain": "fi_ar",
            "backends_tried": ["mnnvl", "trtllm"],
            "exception.type": "RuntimeError",
            "exception.message": "no multicast",
            "exception.stacktrace": "Traceback ...",
        } == attrs
        assert "obs" == (
            record.instrumentation_scope.name if record.instrumentation_scope else None
        )

    def test_resource(self, make_sink: Callable[..., tuple[ExportSink, Reports]]) -> None:
        """The resource carries service.name, extra resource attributes, host and rank
        attributes, and a service.instance.id stable per (host, rank)."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter, resource_attributes={"deployment.environment": "test"})
        sink(None, "info", ev("x", logging.INFO))
        assert sink.force_flush(2.0)
        attrs = dict(exported(exporter)[0].resource.attributes)
        assert "svc" == attrs["service.name"]
        assert "test" == attrs["deployment.environment"]
        assert "gpu-node-0" == attrs["host.name"]
        assert (3, 3, 8, 0) == (
            attrs["rank"],
            attrs["local_rank"],
            attrs["world_size"],
            attrs["node_rank"],
        )
        assert "gpu-node-0:rank3" == attrs["service.instance.id"]
        assert os.getpid() == attrs["process.pid"]

    def test_secret_resource_attributes_are_redacted(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """OTEL_RESOURCE_ATTRIBUTES with a secret-looking key (or a URL password in a
        value) is exported, spooled and shown redacted; the other attributes as given."""
        exporter = InMemoryLogRecordExporter()
        given = {
            "db.password": "hunter2",
            "hf_token": "hf_abc",
            "repo": "https://bob:hunter3@example.com/x",
            "deployment.environment": "prod",
        }
        sink, _ = make_sink(exporter, resource_attributes=given)
        sink(None, "info", ev("x", logging.INFO))
        assert sink.force_flush(2.0)
        attrs = dict(exported(exporter)[0].resource.attributes)
        shown = repr(Settings(resource_attributes=given))
        assert (REDACTED, REDACTED, "prod") == (
            attrs["db.password"],
            attrs["hf_token"],
            attrs["deployment.environment"],
        )
        assert [] == [s for s in ("hunter2", "hf_abc", "hunter3") if s in repr(attrs) + shown]

    def test_user_instance_id_is_kept(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """A service.instance.id given in OTEL_RESOURCE_ATTRIBUTES is honoured."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter, resource_attributes={"service.instance.id": "mine"})
        sink(None, "info", ev("x", logging.INFO))
        assert sink.force_flush(2.0)
        assert "mine" == exported(exporter)[0].resource.attributes["service.instance.id"]

    def test_unsafe_values_never_break_a_batch(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """Objects with a broken __repr__, exceptions, huge ints, non-str keys, recursive and
        nested containers and a non-str body are coerced; the batch is delivered."""

        class Broken:
            def __repr__(self) -> str:
                raise ValueError("no repr")

        loop: list[Any] = []
        loop.append(loop)
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter)
        ed = ev(
            "odd",
            body=Broken(),
            obj=Broken(),
            err=KeyError("k"),
            big=2**80,
            loop=loop,
            nested={1: {"a": (1, None)}},
        )
        ed[7] = "int key"
        sink(None, "error", ed)
        sink(None, "error", ev("plain"))
        assert sink.force_flush(2.0)
        odd, plain = exported(exporter)
        assert "plain" == plain.log_record.event_name
        attrs = dict(odd.log_record.attributes or {})
        assert isinstance(odd.log_record.body, str)
        assert "unrepresentable" in str(attrs["obj"])
        assert str(2**80) == attrs["big"]
        assert "KeyError" in str(attrs["err"])
        assert {"1": {"a": [1, None]}} == attrs["nested"]
        assert "int key" == attrs["7"]

    def test_trace_context_from_caller_thread(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """trace_id/span_id come from the span current in the caller's thread."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter)
        tracer = TracerProvider().get_tracer("t")
        with tracer.start_as_current_span("s") as span:
            sink(None, "error", ev("inside"))
            ctx = span.get_span_context()
        sink(None, "error", ev("outside"))
        assert sink.force_flush(2.0)
        inside, outside = (r.log_record for r in exported(exporter))
        assert (ctx.trace_id, ctx.span_id) == (inside.trace_id, inside.span_id)
        assert (0, 0) == (outside.trace_id, outside.span_id)

    def test_no_export_flag_and_return_value(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """The sink returns the very same, unchanged dict and skips ``_obs_no_export`` records."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter)
        ed = ev("sdk_internal", logging.WARNING, _obs_no_export=True)
        copy = dict(ed)
        assert sink(None, "warning", ed) is ed
        assert copy == ed
        sink(None, "error", ev("kept"))
        assert sink.force_flush(2.0)
        assert ["kept"] == events_of(exporter)

    def test_severity_from_number_when_level_missing(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """Without ``_obs_level`` (a user's own chain) severity comes from severity_number."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter)
        ed = {"event": "bare", "severity_number": 13, "severity_text": "WARN"}
        sink(None, "warning", ed)
        assert sink.force_flush(2.0)
        rec = exported(exporter)[0].log_record
        assert ("WARN", 13, "bare") == (
            rec.severity_text,
            rec.severity_number.value if rec.severity_number else 0,
            rec.body,
        )

    def test_exc_info_without_redactor(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """In a user's own chain, ``exc_info=True`` is resolved in the caller's thread into
        exception.* attributes."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter)
        try:
            {}["missing"]
        except KeyError:
            sink(None, "error", {"event": "failed", "severity_number": 17, "exc_info": True})
        assert sink.force_flush(2.0)
        attrs = dict(exported(exporter)[0].log_record.attributes or {})
        assert ("KeyError", "'missing'") == (attrs["exception.type"], attrs["exception.message"])
        assert '{}["missing"]' in str(attrs["exception.stacktrace"])
        assert "exc_info" not in attrs


class TestDelivery:
    def test_batches_and_export_thread(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """Records go out in batches of blrp_max_export_batch_size, from obs' export thread."""
        exporter = FailingExporter(0)
        sink, _ = make_sink(exporter, blrp_max_export_batch_size=4, blrp_schedule_delay_ms=5000)
        for i in range(10):
            sink(None, "info", ev(f"e{i}", logging.INFO))
        assert sink.force_flush(2.0)
        assert [f"e{i}" for i in range(10)] == events_of(exporter)
        assert exporter.threads
        assert all(exporter.threads)
        assert not in_export_thread()
        assert {"queued": 0, "enqueued": 10, "exported": 10} == {
            k: v for k, v in sink.stats().items() if k in ("queued", "enqueued", "exported")
        }

    def test_overflow_drops_lowest_first_and_reports(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """A full queue drops DEBUG/INFO before anything higher, keeps every ERROR, counts the
        drops per level and delivers them as an obs_records_dropped event."""
        exporter = BlockingExporter()
        sink, reports = make_sink(exporter, blrp_max_queue_size=4, blrp_max_export_batch_size=1)
        reports.sink = sink
        sink(None, "info", ev("first", logging.INFO))
        assert exporter.entered.wait(2.0)  # the export thread is stuck on "first"
        for i in range(6):
            sink(None, "debug", ev(f"d{i}", logging.DEBUG))
            sink(None, "info", ev(f"i{i}", logging.INFO))
        for i in range(4):
            sink(None, "error", ev(f"e{i}", logging.ERROR))
        stats = sink.stats()
        assert {"DEBUG": 6, "INFO": 6} == stats["dropped"]
        assert {"ERROR": 4} == sink._worker._queue.counts()
        exporter.release.set()
        assert sink.force_flush(2.0)
        names = [str(r.log_record.event_name) for b in exporter.batches for r in b]
        assert ["first", "e0", "e1", "e2", "e3"] == names[:5]
        (dropped,) = reports.named("obs_records_dropped")
        assert {"dropped": {"DEBUG": 6, "INFO": 6}, "reason": "queue_full"} == {
            k: dropped[k] for k in ("dropped", "reason")
        }
        assert "obs_records_dropped" in names  # the report itself is exported

    def test_overflow_of_errors_spools(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]], tmp_path: Path
    ) -> None:
        """When the queue is all ERROR, a further ERROR is spooled instead of dropped."""
        exporter = BlockingExporter()
        sink, _ = make_sink(exporter, blrp_max_queue_size=2, blrp_max_export_batch_size=1)
        sink(None, "error", ev("first"))
        assert exporter.entered.wait(2.0)
        for i in range(5):
            sink(None, "error", ev(f"e{i}"))
        stats = sink.stats()
        assert (3, {}) == (stats["spooled"], stats["dropped"])
        lines = (tmp_path / "spool" / "spool.jsonl").read_text().splitlines()
        assert 3 == len(lines)
        exporter.release.set()

    def test_failed_export_spools_warning_up_and_counts_the_rest(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """A failed export spools its WARNING+ records, counts the lower ones as dropped,
        reports the failure once, and the next successful export replays the spool."""
        exporter = FailingExporter(1)
        sink, reports = make_sink(exporter)
        sink(None, "info", ev("i0", logging.INFO))
        sink(None, "warning", ev("w0", logging.WARNING))
        sink(None, "error", ev("e0"))
        assert not sink.force_flush(2.0)
        stats = sink.stats()
        assert (2, {"INFO": 1}, 1) == (stats["spooled"], stats["dropped"], stats["failed_exports"])
        assert ["ExportFailed"] == [f["error_type"] for f in reports.named("obs_internal_error")]
        sink(None, "error", ev("e1"))
        assert sink.force_flush(2.0)
        assert ["e0", "e1", "w0"] == sorted(events_of(exporter))
        (replayed,) = [r for r in exported(exporter) if r.log_record.event_name == "w0"]
        assert replayed.log_record.attributes is not None
        assert replayed.log_record.attributes["obs.replayed"] is True
        assert 2 == sink.stats()["replayed"]

    def test_exporter_exception_is_reported_once(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """An exporter that raises never reaches the caller; it is reported once, and the
        WARNING+ records of the failed batches are spooled, then replayed."""
        exporter = FailingExporter(10**6, raises=True)  # until told: replays fail too
        sink, reports = make_sink(exporter, blrp_max_export_batch_size=1)
        for i in range(3):
            sink(None, "error", ev(f"e{i}"))
        assert not sink.force_flush(2.0)
        errors = [
            f for f in reports.named("obs_internal_error") if f["error_type"] == "RuntimeError"
        ]
        assert 1 == len(errors)
        assert "exporter exploded" in errors[0]["error_message"]
        exporter.n = 0
        sink(None, "error", ev("after"))
        assert sink.force_flush(2.0)
        assert sorted(["after", "e0", "e1", "e2"]) == sorted(events_of(exporter))

    def test_caller_never_sees_an_exception(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A failure inside the sink's enqueue path is swallowed and reported once."""
        exporter = InMemoryLogRecordExporter()
        sink, reports = make_sink(exporter)

        def boom() -> None:
            raise OSError("clock broke")

        monkeypatch.setattr(sink, "_context", boom)
        ed = ev("x")
        assert sink(None, "error", ed) is ed
        assert sink(None, "error", ev("y")) is not None
        monkeypatch.undo()
        sink.force_flush(2.0)
        errors = reports.named("obs_internal_error")
        assert [("otel_enqueue", "OSError")] == [(f["where"], f["error_type"]) for f in errors]

    def test_reentrant_report_does_not_deadlock(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """report() re-entering the sink (as the runtime's does) during flush never deadlocks."""
        exporter = FailingExporter(1)
        sink, reports = make_sink(exporter)
        reports.sink = sink
        sink(None, "info", ev("i0", logging.INFO))
        assert not sink.force_flush(2.0)
        assert sink.force_flush(2.0)
        names = events_of(exporter)
        assert "obs_records_dropped" in names
        assert "obs_internal_error" in names

    def test_flush_is_bounded(self, make_sink: Callable[..., tuple[ExportSink, Reports]]) -> None:
        """force_flush returns False within its timeout while an export is stuck."""
        exporter = BlockingExporter()
        sink, _ = make_sink(exporter)
        sink(None, "error", ev("stuck"))
        start = time.monotonic()
        assert not sink.force_flush(0.3)
        assert time.monotonic() - start < 0.3 + 8.0  # timeout + a loaded machine (stuck: never)
        exporter.release.set()
        assert sink.force_flush(2.0)

    def test_shutdown_is_bounded_and_spools(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]], tmp_path: Path
    ) -> None:
        """shutdown returns within its timeout with an export stuck forever, spools the
        stuck and queued WARNING+ records and counts the rest."""
        exporter = BlockingExporter()
        sink, _ = make_sink(exporter)
        sink(None, "error", ev("stuck"))
        assert exporter.entered.wait(2.0)
        sink(None, "warning", ev("queued_w", logging.WARNING))
        sink(None, "info", ev("queued_i", logging.INFO))
        start = time.monotonic()
        assert not sink.shutdown(0.6)
        assert time.monotonic() - start < 0.6 + 8.0  # timeout + a loaded machine (stuck: never)
        stats = sink.stats()
        assert (2, {"INFO": 1}) == (stats["spooled"], stats["dropped"])
        spooled = (tmp_path / "spool" / "spool.jsonl").read_text()
        assert "stuck" in spooled
        assert "queued_w" in spooled
        exporter.release.set()

    def test_after_shutdown_records_are_spooled_or_counted(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """Records arriving after shutdown are spooled (WARNING+) or counted, never lost."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter)
        assert sink.shutdown(1.0)
        assert sink.shutdown(1.0)  # idempotent
        sink(None, "error", ev("late_error"))
        sink(None, "info", ev("late_info", logging.INFO))
        stats = sink.stats()
        assert (1, {"after_shutdown": {"INFO": 1}}) == (
            stats["spooled"],
            stats["dropped_by_reason"],
        )
        assert not sink.force_flush(0.1)

    def test_spool_bound_counts_what_does_not_fit(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """With the spool full, undeliverable WARNING+ records are counted as spool_full drops."""
        exporter = FailingExporter(100)
        sink, _ = make_sink(exporter, spool_max_bytes=1500)
        for i in range(5):
            sink(None, "error", ev(f"e{i}"))
        sink.force_flush(1.0)
        stats = sink.stats()
        assert 5 == stats["spooled"] + stats["dropped_by_reason"]["spool_full"]["ERROR"]
        assert stats["spooled"] >= 1

    def test_unusable_spool_is_counted_and_reported(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]], tmp_path: Path
    ) -> None:
        """A spool directory that cannot be created never raises: the records are counted
        as spool_error drops and the failure is reported once."""
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("x")
        sink, reports = make_sink(FailingExporter(100), spool_dir=str(blocker / "spool"))
        sink(None, "error", ev("e0"))
        sink(None, "error", ev("e1"))
        assert not sink.force_flush(1.0)
        assert {"spool_error": {"ERROR": 2}} == sink.stats()["dropped_by_reason"]
        spool_errors = [
            f for f in reports.named("obs_internal_error") if f["where"] == "otel_spool"
        ]
        assert 1 == len(spool_errors)
        assert {"ERROR": 2} == reports.named("obs_records_dropped")[0]["dropped"]

    def test_a_lost_loss_report_is_not_reported_again(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]], tmp_path: Path
    ) -> None:
        """With the collector down and the spool unusable, the report of the drop is
        itself a WARNING that cannot be spooled: it is counted (stats) but never reported
        again, or every report would report itself, one a second, for ever."""
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("x")
        sink, reports = make_sink(FailingExporter(10**6), spool_dir=str(blocker / "spool"))
        reports.sink = sink  # the report is exported, as the runtime's is
        sink(None, "error", ev("e0"))
        for _ in range(6):
            sink.force_flush(0.3)
            time.sleep(0.1)  # past drop_report_interval (0.05 s) each round
        drops = reports.named("obs_records_dropped")
        assert [d["dropped"] for d in drops] == [{"ERROR": 1}], drops
        # e0 and the reports lost in turn (the spool failure's, the export failure's, the
        # drop's) are all counted, and nothing more is lost once they are
        counted = sink.stats()["dropped_by_reason"]["spool_error"]
        assert counted["ERROR"] >= 2
        assert counted["WARNING"] >= 1
        sink.force_flush(0.3)
        time.sleep(0.1)
        sink.force_flush(0.3)
        assert counted == sink.stats()["dropped_by_reason"]["spool_error"]


def _lost_reported(exporter: InMemoryLogRecordExporter, reports: Reports) -> int:
    """Records the operator hears were lost: the counts of the replayed loss reports and
    of the replaying sink's own."""
    replayed = sum(
        int(dict(r.log_record.attributes or {})["count"])
        for r in exported(exporter)
        if r.log_record.event_name == "obs_records_dropped"
    )
    return replayed + sum(int(f["count"]) for f in reports.named("obs_records_dropped"))


class TestLossReportsOutliveTheSpool:
    def _spool_then_replay(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]], max_bytes: int, rounds: int
    ) -> tuple[int, int]:
        """``rounds`` of 20 errors with the collector down and a small spool, each round a
        loss report; then a sink with the collector up: (records lost, counts reported)."""
        first, first_reports = make_sink(FailingExporter(10**6), spool_max_bytes=max_bytes)
        first_reports.sink = first  # its reports are exported (spooled), as the runtime's
        for r in range(rounds):
            for i in range(20):
                first(None, "error", ev(f"e{r}.{i}"))
            first.force_flush(0.5)
            time.sleep(0.06)  # past drop_report_interval (0.05 s)
        first.shutdown(1.0)
        exporter = InMemoryLogRecordExporter()
        second, second_reports = make_sink(exporter, spool_max_bytes=max_bytes)
        assert second.force_flush(2.0)
        delivered = sum(1 for name in events_of(exporter) if name.startswith("e"))
        return 20 * rounds - delivered, _lost_reported(exporter, second_reports)

    @pytest.mark.parametrize(("max_bytes", "rounds"), [(3000, 2), (12_000, 12)])
    def test_every_lost_record_reaches_the_operator(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]], max_bytes: int, rounds: int
    ) -> None:
        """A spool too small for a loss report (3000 bytes: a reserve of 375), or one whose
        reserve the reports of a long outage fill: every record lost for want of room is
        still counted in an obs_records_dropped the collector receives once it is back."""
        lost, reported = self._spool_then_replay(make_sink, max_bytes, rounds)
        assert lost > 0
        assert reported >= lost, (lost, reported)


class TestReplayOnStart:
    def test_next_sink_replays_the_spool(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """A new sink on the same spool dir replays what an earlier one spooled, once."""
        failing = FailingExporter(100)
        first, _ = make_sink(failing)
        first(None, "error", ev("e0"))
        first(None, "critical", ev("c0", logging.CRITICAL))
        assert not first.shutdown(1.0)
        exporter = InMemoryLogRecordExporter()
        second, _ = make_sink(exporter)
        assert second.force_flush(2.0)
        assert ["e0", "c0"] == events_of(exporter)
        third_exporter = InMemoryLogRecordExporter()
        third, _ = make_sink(third_exporter)
        assert third.force_flush(2.0)
        assert [] == events_of(third_exporter)


class TestFork:
    @pytest.mark.timeout(20)
    def test_child_starts_empty_and_exports_its_own(
        self, make_sink: Callable[..., tuple[ExportSink, Reports]]
    ) -> None:
        """A forked child drops the parent's queued records and exports only its own."""
        exporter = InMemoryLogRecordExporter()
        sink, _ = make_sink(exporter, blrp_schedule_delay_ms=60_000)
        sink(None, "error", ev("parent_queued"))
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            try:
                queued = sink.stats()["queued"]
                sink(None, "error", ev("child"))
                ok = sink.force_flush(2.0)
                os.write(write_fd, f"{queued} {ok} {','.join(events_of(exporter))}".encode())
            finally:
                os._exit(0)
        os.close(write_fd)
        os.waitpid(pid, 0)
        with os.fdopen(read_fd) as f:
            child = f.read()
        assert "0 True child" == child
        assert sink.force_flush(2.0)
        assert ["parent_queued"] == events_of(exporter)

    def test_collected_sink_does_not_break_fork(self, tmp_path: Path) -> None:
        """A garbage-collected sink's fork hook is a no-op (the hook holds a weak reference)."""
        settings = Settings(logs_exporter="otlp", spool_dir=str(tmp_path))
        sink = ExportSink(settings, RankResolver(), Reports(), exporter=InMemoryLogRecordExporter())
        assert sink.shutdown(1.0)
        del sink
        gc.collect()
        pid = os.fork()
        if pid == 0:  # pragma: no cover
            os._exit(7)
        _, status = os.waitpid(pid, 0)
        assert 7 == os.waitstatus_to_exitcode(status)


class TestBuild:
    def _settings(self, tmp_path: Path, **kw: Any) -> Settings:
        kw.setdefault("spool_dir", str(tmp_path))
        return Settings(**kw)

    def test_off_by_default(self, tmp_path: Path) -> None:
        """No exporter configured (or the SDK disabled): no sink, nothing on the network."""
        resolver = RankResolver()
        assert build_export_sink(self._settings(tmp_path), resolver, Reports()) is None
        disabled = self._settings(tmp_path, logs_exporter="otlp", sdk_disabled=True)
        assert build_export_sink(disabled, resolver, Reports()) is None

    def test_global_sdk_provider_is_used(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An SDK LoggerProvider installed by the application receives the records, even
        with OTEL_LOGS_EXPORTER unset; OTEL_SDK_DISABLED still wins."""
        exporter = InMemoryLogRecordExporter()
        provider = LoggerProvider(shutdown_on_exit=False)
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        monkeypatch.setattr(obs.otel.sink, "get_logger_provider", lambda: provider)
        sink = build_export_sink(self._settings(tmp_path), RankResolver(), Reports())
        assert sink is not None
        try:
            assert "provider" == sink.mode
            sink(None, "error", ev("via_app_provider"))
            assert sink.force_flush(2.0)
            assert ["via_app_provider"] == events_of(exporter)
        finally:
            sink.shutdown(1.0)
        disabled = self._settings(tmp_path, sdk_disabled=True)
        assert build_export_sink(disabled, RankResolver(), Reports()) is None

    def test_exporter_kinds(self, tmp_path: Path) -> None:
        """Settings choose the SDK's gRPC, HTTP or console exporter, endpoint included."""
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GRPC
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HTTP

        grpc_exporter = build_exporter(
            self._settings(
                tmp_path, logs_exporter="otlp", otlp_protocol="grpc", otlp_endpoint="http://h:4317"
            )
        )
        assert isinstance(grpc_exporter, GRPC)
        assert ("h:4317", True) == (grpc_exporter._endpoint, grpc_exporter._insecure)
        grpc_exporter.shutdown()
        http_exporter = build_exporter(
            self._settings(
                tmp_path, logs_exporter="otlp", otlp_endpoint="http://h:4318", otlp_timeout=4.0
            )
        )
        assert isinstance(http_exporter, HTTP)
        assert "http://h:4318/v1/logs" == http_exporter._endpoint
        assert 4.0 == http_exporter._client._timeout
        assert isinstance(
            build_exporter(self._settings(tmp_path, logs_exporter="console")),
            ConsoleLogRecordExporter,
        )

    def test_unreadable_certificate_is_a_config_error(self, tmp_path: Path) -> None:
        """A CA file that cannot be read fails at configure time, naming the variable."""
        settings = self._settings(
            tmp_path,
            logs_exporter="otlp",
            otlp_protocol="grpc",
            otlp_endpoint="https://h:4317",
            otlp_certificate=str(tmp_path / "missing.pem"),
        )
        with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_CERTIFICATE"):
            build_exporter(settings)


class TestSecrets:
    @pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
    def test_endpoint_credentials_never_reported_or_spooled(
        self, tmp_path: Path, protocol: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Credentials in the endpoint URL appear in no error report, no drop report and no
        spool file, even when the export to it fails (real SDK exporter, closed port)."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        settings = Settings(
            logs_exporter="otlp",
            otlp_protocol=protocol,
            otlp_endpoint=f"http://obsuser:s3cr3tpw@127.0.0.1:{port}",
            otlp_timeout=0.5,
            spool_dir=str(tmp_path / "spool"),
            blrp_schedule_delay_ms=20.0,
            shutdown_timeout=2.0,
        )
        reports = Reports()
        sink = ExportSink(settings, RankResolver(env={}, host="h"), reports)
        reports.sink = sink
        try:
            for i in range(3):
                sink(None, "error", ev(f"e{i}"))
            assert not sink.force_flush(3.0)
            sink(None, "error", ev("again"))
            sink.force_flush(3.0)
        finally:
            sink.shutdown(1.0)
        assert reports.named("obs_internal_error")
        assert "s3cr3tpw" not in repr(reports.calls)
        files = list((tmp_path / "spool").iterdir())
        assert any(f.name.startswith("spool.") for f in files)
        assert "s3cr3tpw" not in caplog.text  # the SDK's own warnings quote the endpoint
        for f in files:
            assert b"s3cr3tpw" not in f.read_bytes(), f.name
