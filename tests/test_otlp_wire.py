"""Tests for obs.otlp_wire: our request bytes parse to exactly the SDK's encode_logs message,
and the OTLP exporters send them."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import TraceFlags

from obs.otel import _ExporterTransport, build_exporter
from obs.otlp_wire import Encoder, encode_logs_request
from obs.settings import load_settings

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.binary(max_size=16)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(0, 9), inner, max_size=4)
    ),
    max_leaves=12,
)
_attributes = st.dictionaries(st.text(max_size=20), _values, max_size=12)
_resources = st.sampled_from(
    [
        Resource({"service.name": "vllm", "rank": 3}),
        Resource({"service.name": "vllm", "host.name": "n7"}, schema_url="https://x/1.0"),
        Resource({}),
    ]
)
_scopes = st.sampled_from(
    [
        InstrumentationScope("obs", "0.1.0"),
        InstrumentationScope("other", None, "https://s/1", {"a": 1}),
        None,
    ]
)


@st.composite
def _records(draw: st.DrawFn) -> ReadableLogRecord:
    record = LogRecord(
        timestamp=draw(st.none() | st.integers(0, (1 << 64) - 1)),
        observed_timestamp=draw(st.none() | st.integers(0, (1 << 64) - 1)),
        trace_id=draw(st.none() | st.integers(0, (1 << 128) - 1)),
        span_id=draw(st.none() | st.integers(0, (1 << 64) - 1)),
        trace_flags=draw(st.none() | st.sampled_from([TraceFlags(0), TraceFlags(1)])),
        severity_text=draw(st.none() | st.sampled_from(["", "WARNING", "ERROR"])),
        severity_number=draw(st.none() | st.sampled_from(list(SeverityNumber))),
        body=draw(_values),
        attributes=draw(_attributes),
        event_name=draw(st.none() | st.text(max_size=30)),
    )
    return ReadableLogRecord(record, draw(_resources), draw(_scopes))


def _parsed(data: bytes) -> ExportLogsServiceRequest:
    return ExportLogsServiceRequest.FromString(data)


class TestSameMessageAsTheSDK:
    @settings(max_examples=200, deadline=None)
    @given(st.lists(_records(), max_size=6))
    def test_arbitrary_batches(self, batch: list[ReadableLogRecord]) -> None:
        """Any batch (values, nesting, resources, scopes, ids, flags) parses to the message
        the SDK's encode_logs builds, field for field."""
        assert encode_logs(batch) == _parsed(encode_logs_request(batch))

    def test_chain_shaped_record(self) -> None:
        """A record shaped like obs' own (rank, code location, stage fields) round-trips
        through one reused encoder twice (the second time from the pair cache)."""
        attributes = {
            "event": "workspace_terminal_failure",
            "logger": "comm",
            "rank": 5,
            "host.name": "n1",
            "stage": "terminal_failure",
            "code.line.number": 120,
            "duration_ms": 12.5,
            "reasons": ["no_multicast", "no_cuda"],
            "ok": False,
        }
        record = LogRecord(
            timestamp=1,
            observed_timestamp=2,
            severity_text="ERROR",
            severity_number=SeverityNumber.ERROR,
            body="allreduce fusion workspace unavailable",
            attributes=attributes,
            event_name="workspace_terminal_failure",
        )
        batch = [ReadableLogRecord(record, Resource({"service.name": "vllm", "rank": 5}))]
        encoder = Encoder()
        assert [encode_logs(batch)] * 2 == [_parsed(encoder.request(batch)) for _ in range(2)]

    @pytest.mark.parametrize(
        "bad", [1 << 63, -(1 << 63) - 1, [1, 1 << 70], object(), "lone \ud800 surrogate"]
    )
    def test_unencodable_attribute_is_skipped_as_the_sdk_skips_it(self, bad: Any) -> None:
        """An attribute the SDK cannot encode (out of int64, unknown type, invalid UTF-8)
        is left out; the rest of the record is sent."""
        record = LogRecord(body="b", attributes={"bad": bad, "good": 1})
        batch = [ReadableLogRecord(record, Resource({}))]
        message = _parsed(encode_logs_request(batch))
        assert encode_logs(batch) == message
        assert ["good"] == [
            kv.key for kv in message.resource_logs[0].scope_logs[0].log_records[0].attributes
        ]

    def test_str_and_int_subclasses_are_sent_as_their_values(self) -> None:
        """A str or int Enum is sent as its value, as protobuf takes it (not its str())."""

        class Mode(str, enum.Enum):
            TRAIN = "train"

        class Level(enum.IntEnum):
            HIGH = 3

        record = LogRecord(body=Mode.TRAIN, attributes={"mode": Mode.TRAIN, "lvl": Level.HIGH})
        batch = [ReadableLogRecord(record, Resource({}))]
        message = _parsed(encode_logs_request(batch))
        assert encode_logs(batch) == message
        log_record = message.resource_logs[0].scope_logs[0].log_records[0]
        assert ("train", "train", 3) == (
            log_record.body.string_value,
            log_record.attributes[0].value.string_value,
            log_record.attributes[1].value.int_value,
        )

    def test_pair_cache_is_bounded_and_starts_over(self) -> None:
        """More distinct pairs than the limit: the cache never grows past it, and what is
        encoded stays right."""
        encoder = Encoder(limit=8)
        for i in range(40):
            batch = [
                ReadableLogRecord(LogRecord(body="b", attributes={"k": f"v{i}"}), Resource({}))
            ]
            assert encode_logs(batch) == _parsed(encoder.request(batch))
            assert len(encoder._pairs) <= 8


class TestExportersUseIt:
    @pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
    def test_otlp_exporters_take_the_wire_path(self, protocol: str) -> None:
        """Both SDK OTLP exporters built by obs encode through obs.otlp_wire (if an SDK
        upgrade renames what this relies on, this fails instead of silently slowing down)."""
        exporter = build_exporter(
            load_settings({"otlp_endpoint": "http://127.0.0.1:9", "otlp_protocol": protocol})
        )
        try:
            assert _ExporterTransport(exporter).wire
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]

    def test_console_exporter_keeps_its_own_encoding(self) -> None:
        """The console exporter is not OTLP: it formats records itself."""
        exporter = build_exporter(load_settings({"logs_exporter": "console"}))
        assert not _ExporterTransport(exporter).wire

    def test_request_over_the_size_limit_fails_the_export(self) -> None:
        """The HTTP exporter's max_request_size still applies to our bytes: the export
        fails as too large (the sink then splits the batch)."""
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        exporter = OTLPLogExporter(endpoint="http://127.0.0.1:9/v1/logs", max_request_size=64)
        transport = _ExporterTransport(exporter)
        batch = [ReadableLogRecord(LogRecord(body="x" * 200), Resource({}))]
        outcome = transport.export(batch, 1.0)
        assert (False, True) == (outcome.ok, outcome.too_large)
        assert "exceeds 64" in outcome.message
        exporter.shutdown()  # type: ignore[no-untyped-call]

    def test_unexpected_client_answer_falls_back_to_the_sdk_path(
        self, otlp_receiver: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """If a future SDK's client answers differently, the transport switches to the
        exporter's own export() for good, and the batch is still delivered."""
        exporter = build_exporter(load_settings({"otlp_endpoint": otlp_receiver.http_endpoint}))
        transport = _ExporterTransport(exporter)
        real_export = exporter._client.export  # type: ignore[attr-defined]

        def export(data: bytes) -> object:  # an answer obs does not know, once
            real_export(data)
            monkeypatch.setattr(exporter._client, "export", real_export)  # type: ignore[attr-defined]
            return object()

        monkeypatch.setattr(exporter._client, "export", export)  # type: ignore[attr-defined]
        batch = [ReadableLogRecord(LogRecord(body="fell_back"), Resource({}))]
        assert transport.export(batch, 5.0)
        assert not transport.wire
        assert transport.export(batch, 5.0)
        got = otlp_receiver.wait_for(3, predicate=lambda r: r["body"] == "fell_back")
        assert 3 == len(got)  # wire send, SDK resend of that batch, the next batch
        exporter.shutdown()  # type: ignore[no-untyped-call]

    def test_end_to_end_over_http_and_grpc(self, otlp_receiver: Any) -> None:
        """Our bytes are accepted by a real OTLP peer over both transports, values intact."""
        record = LogRecord(
            body="hello",
            severity_number=SeverityNumber.WARN,
            attributes={"rank": 3, "reasons": ["a", "b"], "ratio": 0.5, "ok": True},
            event_name="workspace_fallback",
        )
        batch = [ReadableLogRecord(record, Resource({"service.name": "wire-test"}))]
        for protocol, endpoint in (
            ("http/protobuf", otlp_receiver.http_endpoint),
            ("grpc", otlp_receiver.grpc_endpoint),
        ):
            exporter = build_exporter(
                load_settings({"otlp_endpoint": endpoint, "otlp_protocol": protocol})
            )
            try:
                assert _ExporterTransport(exporter).export(batch, 5.0)
            finally:
                exporter.shutdown()  # type: ignore[no-untyped-call]
        got = otlp_receiver.wait_for(2, predicate=lambda r: r["body"] == "hello", timeout=10)
        assert [(3, ["a", "b"], 0.5, True)] * 2 == [
            (
                r["attributes"]["rank"],
                r["attributes"]["reasons"],
                r["attributes"]["ratio"],
                r["attributes"]["ok"],
            )
            for r in got
        ]
