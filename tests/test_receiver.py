"""Tests for obs._receiver: the real SDK exporters talk to a real OTLPReceiver."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as HttpLogExporter,
)
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from obs import pytest_plugin
from obs._receiver import OTLPReceiver, make_self_signed_cert

pytest_plugins = ["pytester"]
# The plugin's fixture, bound here so it works whether or not the `obs` pytest11 entry point
# is installed (naming obs.pytest_plugin in pytest_plugins registers it twice once it is).
otlp_receiver = pytest_plugin.otlp_receiver

ROOT = Path(__file__).resolve().parents[1]
ATTRS: dict[str, Any] = {
    "event": "kv_cache_alloc",
    "rank": 3,
    "ratio": 0.25,
    "ok": True,
    "name": "w0",
    "dims": [1, 2, 3],
    "tags": ["a", "b"],
    "nested": {"inner": {"depth": 2}, "flag": False},
}


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    """A receiver on free loopback ports, stopped after the test."""
    with OTLPReceiver() as r:
        yield r


def emit_through(exporter: LogRecordExporter, **kwargs: Any) -> None:
    """Emit one record through LoggerProvider + SimpleLogRecordProcessor into `exporter`."""
    provider = LoggerProvider(
        resource=Resource.create({"service.name": "svc-test", "host.name": "node7"})
    )
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("obs.test", "1.2.3")
    logger.emit(**kwargs)
    provider.shutdown()


def readable_batch(n: int = 1, **kwargs: Any) -> Sequence[ReadableLogRecord]:
    """Build real SDK records (via an in-memory exporter) to call `exporter.export` directly."""
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": "svc-test"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger("obs.test")
    for i in range(n):
        logger.emit(body=f"record {i}", event_name="batch", **kwargs)
    return memory.get_finished_logs()


def full_emit_kwargs() -> dict[str, Any]:
    """Every LogRecord field the SDK lets us set."""
    return {
        "timestamp": 1_700_000_000_123_456_789,
        "observed_timestamp": 1_700_000_000_200_000_000,
        "severity_number": SeverityNumber.ERROR,
        "severity_text": "ERROR",
        "body": "allocation failed",
        "attributes": ATTRS,
        "event_name": "kv_cache_alloc",
    }


def assert_full_record(record: dict[str, Any], transport: str) -> None:
    """The record carries exactly what full_emit_kwargs() emitted."""
    assert transport == record["transport"]
    assert record["resource"]["service.name"] == "svc-test"
    assert record["resource"]["host.name"] == "node7"
    assert record["resource"]["telemetry.sdk.language"] == "python"
    assert record["resource_dropped_attributes_count"] == 0
    assert record["scope"] == {"name": "obs.test", "version": "1.2.3", "attributes": {}}
    assert record["time_unix_nano"] == 1_700_000_000_123_456_789
    assert record["observed_time_unix_nano"] == 1_700_000_000_200_000_000
    assert record["severity_number"] == 17
    assert record["severity_text"] == "ERROR"
    assert record["event_name"] == "kv_cache_alloc"
    assert record["body"] == "allocation failed"
    assert record["attributes"] == ATTRS
    assert record["dropped_attributes_count"] == 0


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
    """POST with urllib; returns (status, content type, body), HTTP errors included."""
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def proto_request(body: str) -> bytes:
    """A serialized one-record ExportLogsServiceRequest."""
    req = logs_service_pb2.ExportLogsServiceRequest()
    lr = req.resource_logs.add().scope_logs.add().log_records.add()
    lr.body.string_value = body
    return req.SerializeToString()


class TestGrpc:
    def test_every_field_decoded(self, receiver: OTLPReceiver) -> None:
        """A record sent by the SDK gRPC exporter arrives with every field decoded."""
        exporter = GrpcLogExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=5)
        emit_through(exporter, **full_emit_kwargs())

        [record] = receiver.wait_for(1)
        assert_full_record(record, "grpc")
        assert (record["trace_id"], record["span_id"], record["flags"]) == ("", "", 0)
        assert receiver.requests == {"grpc": 1, "http": 0}

    def test_trace_and_span_ids_inside_a_span(self, receiver: OTLPReceiver) -> None:
        """A record emitted inside a span carries its trace id, span id and sampled flag."""
        tracer = TracerProvider().get_tracer("t")
        exporter = GrpcLogExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=5)
        with tracer.start_as_current_span("step") as span:
            emit_through(exporter, body="in span")
        ctx = span.get_span_context()

        [record] = receiver.wait_for(1)
        assert f"{ctx.trace_id:032x}" == record["trace_id"]
        assert f"{ctx.span_id:016x}" == record["span_id"]
        assert record["flags"] == int(ctx.trace_flags)
        assert record["flags"] & 0x01  # sampled (1.45 also sets W3C's 0x02 "random" bit)

    def test_grpc_gzip(self, receiver: OTLPReceiver) -> None:
        """gRPC-level gzip compression is accepted."""
        exporter = GrpcLogExporter(
            endpoint=receiver.grpc_endpoint,
            insecure=True,
            timeout=5,
            compression=grpc.Compression.Gzip,
        )
        emit_through(exporter, body="zipped")
        assert [r["body"] for r in receiver.wait_for(1)] == ["zipped"]


class TestHttp:
    def test_protobuf_every_field_decoded(self, receiver: OTLPReceiver) -> None:
        """A record sent by the SDK HTTP exporter arrives with every field decoded."""
        emit_through(
            HttpLogExporter(endpoint=receiver.http_logs_url, timeout=5), **full_emit_kwargs()
        )

        [record] = receiver.wait_for(1)
        assert_full_record(record, "http")
        assert receiver.requests == {"grpc": 0, "http": 1}

    def test_exporter_gzip(self, receiver: OTLPReceiver) -> None:
        """The SDK HTTP exporter with gzip compression is understood."""
        exporter = HttpLogExporter(
            endpoint=receiver.http_logs_url, timeout=5, compression=Compression.Gzip
        )
        emit_through(exporter, body="gzipped", attributes={"n": 1})
        [record] = receiver.wait_for(1)
        assert (record["body"], record["attributes"]) == ("gzipped", {"n": 1})

    @pytest.mark.parametrize(
        ("encoding", "compress"),
        [
            ("gzip", gzip.compress),
            ("deflate", zlib.compress),
            ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, no zlib header
        ],
    )
    def test_content_encoding(self, receiver: OTLPReceiver, encoding: str, compress: Any) -> None:
        """Compressed protobuf bodies are inflated, and the reply is protobuf."""
        status, ctype, body = post(
            receiver.http_logs_url,
            compress(proto_request("packed")),
            {"Content-Type": "application/x-protobuf", "Content-Encoding": encoding},
        )
        assert (status, ctype) == (200, "application/x-protobuf")
        assert logs_service_pb2.ExportLogsServiceResponse() == (
            logs_service_pb2.ExportLogsServiceResponse.FromString(body)
        )
        assert [r["body"] for r in receiver.records] == ["packed"]

    def test_json(self, receiver: OTLPReceiver) -> None:
        """OTLP/JSON with hex ids, string int64s and every AnyValue kind decodes, reply is JSON."""
        doc = {
            "resourceLogs": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "js"}}],
                        "droppedAttributesCount": 2,
                    },
                    "scopeLogs": [
                        {
                            "scope": {"name": "manual", "version": "0.1"},
                            "logRecords": [
                                {
                                    "timeUnixNano": "1700000000000000001",
                                    "observedTimeUnixNano": 1700000000000000002,
                                    "severityNumber": 9,
                                    "severityText": "INFO",
                                    "eventName": "hello",
                                    "body": {
                                        "kvlistValue": {
                                            "values": [
                                                {"key": "s", "value": {"stringValue": "x"}},
                                                {"key": "i", "value": {"intValue": "7"}},
                                                {"key": "d", "value": {"doubleValue": 0.5}},
                                                {"key": "b", "value": {"boolValue": True}},
                                                {"key": "y", "value": {"bytesValue": "AAE="}},
                                                {
                                                    "key": "a",
                                                    "value": {
                                                        "arrayValue": {
                                                            "values": [{"intValue": 1}, {}]
                                                        }
                                                    },
                                                },
                                            ]
                                        }
                                    },
                                    "attributes": [{"key": "rank", "value": {"intValue": "0"}}],
                                    "droppedAttributesCount": 1,
                                    "flags": 1,
                                    "traceId": "5b8efff798038103d269b633813fc60c",
                                    "spanId": "eee19b7ec3c1b174",
                                    "someFutureField": "ignored",
                                }
                            ],
                        }
                    ],
                }
            ]
        }
        status, ctype, body = post(
            receiver.http_logs_url, json.dumps(doc).encode(), {"Content-Type": "application/json"}
        )
        assert (status, ctype, json.loads(body)) == (200, "application/json", {})
        [record] = receiver.records
        assert record == {
            "transport": "http",
            "resource": {"service.name": "js"},
            "resource_dropped_attributes_count": 2,
            "scope": {"name": "manual", "version": "0.1", "attributes": {}},
            "time_unix_nano": 1700000000000000001,
            "observed_time_unix_nano": 1700000000000000002,
            "severity_number": 9,
            "severity_text": "INFO",
            "event_name": "hello",
            "body": {"s": "x", "i": 7, "d": 0.5, "b": True, "y": b"\x00\x01", "a": [1, None]},
            "attributes": {"rank": 0},
            "trace_id": "5b8efff798038103d269b633813fc60c",
            "span_id": "eee19b7ec3c1b174",
            "flags": 1,
            "dropped_attributes_count": 1,
        }

    def test_unknown_path_is_404(self, receiver: OTLPReceiver) -> None:
        """Only /v1/logs is served; other paths get 404 and store nothing."""
        url = receiver.http_endpoint + "/v1/traces"
        status, _, _ = post(url, proto_request("x"), {"Content-Type": "application/x-protobuf"})
        assert status == 404
        assert receiver.records == []

    def test_bad_requests_rejected(self, receiver: OTLPReceiver) -> None:
        """An unknown content type is 415 and an unparsable body is 400."""
        url = receiver.http_logs_url
        assert post(url, b"x", {"Content-Type": "text/plain"})[0] == 415
        assert post(url, b"\xff\xff", {"Content-Type": "application/x-protobuf"})[0] == 400
        assert post(url, b"{", {"Content-Type": "application/json"})[0] == 400
        assert receiver.records == []


class TestLifecycle:
    def test_endpoints(self) -> None:
        """Endpoints name the chosen ports and need a start first."""
        r = OTLPReceiver()
        with pytest.raises(RuntimeError, match="start"):
            _ = r.grpc_endpoint
        with r:
            assert r.grpc_port > 0
            assert r.http_port > 0
            assert f"http://127.0.0.1:{r.grpc_port}" == r.grpc_endpoint
            assert f"http://127.0.0.1:{r.http_port}" == r.http_endpoint
            assert f"http://127.0.0.1:{r.http_port}/v1/logs" == r.http_logs_url

    def test_restart_on_same_ports(self, receiver: OTLPReceiver) -> None:
        """After restart() the old endpoints work again; records from before are kept."""
        grpc_exp = GrpcLogExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=0.5)
        http_exp = HttpLogExporter(endpoint=receiver.http_logs_url, timeout=0.5)
        ports = (receiver.grpc_port, receiver.http_port)

        assert grpc_exp.export(readable_batch()) == LogRecordExportResult.SUCCESS
        assert http_exp.export(readable_batch()) == LogRecordExportResult.SUCCESS
        receiver.stop()
        start = time.monotonic()
        assert grpc_exp.export(readable_batch()) == LogRecordExportResult.FAILURE
        assert http_exp.export(readable_batch()) == LogRecordExportResult.FAILURE
        assert time.monotonic() - start < 10  # 0.5 s each; stuck: the test's timeout
        receiver.restart()
        assert ports == (receiver.grpc_port, receiver.http_port)
        assert grpc_exp.export(readable_batch(2)) == LogRecordExportResult.SUCCESS
        assert http_exp.export(readable_batch(2)) == LogRecordExportResult.SUCCESS

        records = receiver.wait_for(6)
        assert [r["transport"] for r in records] == ["grpc", "http", "grpc", "grpc", "http", "http"]
        assert [r["body"] for r in records] == ["record 0"] * 2 + ["record 0", "record 1"] * 2

    def test_fixed_port_is_released_by_stop(self, receiver: OTLPReceiver) -> None:
        """A second receiver can bind the exact ports right after the first stops."""
        ports = (receiver.grpc_port, receiver.http_port)
        receiver.stop()
        with OTLPReceiver(grpc_port=ports[0], http_port=ports[1]) as again:
            emit_through(HttpLogExporter(endpoint=again.http_logs_url, timeout=5), body="b")
            assert [r["body"] for r in again.wait_for(1)] == ["b"]

    def test_busy_port_fails(self, receiver: OTLPReceiver) -> None:
        """Binding ports another receiver holds raises OSError instead of sharing them."""
        with pytest.raises(OSError, match="gRPC"):
            OTLPReceiver(grpc_port=receiver.grpc_port, http=False).start()
        with pytest.raises(OSError):
            OTLPReceiver(http_port=receiver.http_port, grpc=False).start()

    def test_http_only(self) -> None:
        """grpc=False serves HTTP alone and leaves the gRPC port unset."""
        with OTLPReceiver(grpc=False) as r:
            assert r.grpc_port == 0
            emit_through(HttpLogExporter(endpoint=r.http_logs_url, timeout=5), body="only")
            assert [rec["body"] for rec in r.wait_for(1)] == ["only"]


class TestAccess:
    def test_wait_for_predicate_and_by_event(self, receiver: OTLPReceiver) -> None:
        """wait_for(predicate=) returns the matches; by_event matches event_name or attribute."""
        for kwargs in (
            {"body": "a", "event_name": "alpha"},
            {"body": "b", "attributes": {"event": "beta"}},
            {"body": "c", "event_name": "alpha"},
        ):  # a fresh exporter each time: provider.shutdown() shuts the exporter down
            emit_through(HttpLogExporter(endpoint=receiver.http_logs_url, timeout=5), **kwargs)

        alphas = receiver.wait_for(2, predicate=lambda r: r["event_name"] == "alpha")
        assert [r["body"] for r in alphas] == ["a", "c"]
        assert [r["body"] for r in receiver.by_event("beta")] == ["b"]
        assert [r["body"] for r in receiver.by_event("alpha")] == ["a", "c"]

    def test_wait_for_timeout_says_what_arrived(self, receiver: OTLPReceiver) -> None:
        """A timed-out wait_for raises TimeoutError naming the count that did arrive."""
        emit_through(HttpLogExporter(endpoint=receiver.http_logs_url, timeout=5), event_name="x")
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"for 3 records, got 1 .*'x'"):
            receiver.wait_for(3, timeout=0.2)
        assert time.monotonic() - start < 5  # the default timeout (10 s) or none: not met
        with pytest.raises(TimeoutError, match="matching records, got 0"):
            receiver.wait_for(predicate=lambda r: False, timeout=0.05)

    def test_clear(self, receiver: OTLPReceiver) -> None:
        """clear() forgets records and counters; records is a copy."""
        emit_through(HttpLogExporter(endpoint=receiver.http_logs_url, timeout=5), body="x")
        receiver.wait_for(1)
        receiver.records.clear()
        assert len(receiver.records) == 1
        receiver.clear()
        assert (receiver.records, receiver.requests) == ([], {"grpc": 0, "http": 0})


class TestFaults:
    def test_fail_rejects_without_storing(self, receiver: OTLPReceiver) -> None:
        """fail=True makes both exporters return FAILURE quickly and stores nothing."""
        receiver.set_fault(fail=True)
        grpc_exp = GrpcLogExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=0.5)
        http_exp = HttpLogExporter(endpoint=receiver.http_logs_url, timeout=0.5)
        start = time.monotonic()
        assert grpc_exp.export(readable_batch()) == LogRecordExportResult.FAILURE
        assert http_exp.export(readable_batch()) == LogRecordExportResult.FAILURE
        assert time.monotonic() - start < 10  # 0.5 s each; stuck: the test's timeout
        assert receiver.records == []
        assert receiver.rejected == {"grpc": 1, "http": 1}
        assert receiver.requests == {"grpc": 1, "http": 1}

        receiver.clear_fault()
        assert grpc_exp.export(readable_batch()) == LogRecordExportResult.SUCCESS
        assert http_exp.export(readable_batch()) == LogRecordExportResult.SUCCESS
        assert len(receiver.records) == 2

    def test_non_retryable_codes(self, receiver: OTLPReceiver) -> None:
        """Injected non-retryable codes fail at the first answer (one request each, not
        retried) even with a long exporter timeout."""
        receiver.set_fault(fail=True, http_status=400, grpc_code=grpc.StatusCode.INVALID_ARGUMENT)
        grpc_exp = GrpcLogExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=10)
        http_exp = HttpLogExporter(endpoint=receiver.http_logs_url, timeout=10)
        assert grpc_exp.export(readable_batch()) == LogRecordExportResult.FAILURE
        assert http_exp.export(readable_batch()) == LogRecordExportResult.FAILURE
        assert receiver.rejected == {"grpc": 1, "http": 1}
        assert receiver.requests == {"grpc": 1, "http": 1}

    def test_retryable_failure_is_retried(
        self, receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With a timeout above the ~1 s first backoff, the exporter retries a 503 and
        succeeds (the fault is cleared as the first request is answered: counted, not timed)."""
        receiver.set_fault(fail=True)
        begin = receiver._begin_request

        def once(transport: str) -> Any:
            fault = begin(transport)
            receiver.clear_fault()
            return fault

        monkeypatch.setattr(receiver, "_begin_request", once)
        http_exp = HttpLogExporter(endpoint=receiver.http_logs_url, timeout=10)
        assert http_exp.export(readable_batch()) == LogRecordExportResult.SUCCESS
        assert (
            receiver.requests,
            receiver.rejected,
        ) == ({"grpc": 0, "http": 2}, {"grpc": 0, "http": 1})
        assert len(receiver.records) == 1

    def test_delay(self, receiver: OTLPReceiver) -> None:
        """delay= holds each answer at least that long, then stores the records."""
        receiver.set_fault(delay=0.4)
        grpc_exp = GrpcLogExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=5)
        http_exp = HttpLogExporter(endpoint=receiver.http_logs_url, timeout=5)
        for exporter in (grpc_exp, http_exp):
            start = time.monotonic()
            assert exporter.export(readable_batch()) == LogRecordExportResult.SUCCESS
            assert time.monotonic() - start >= 0.4
        assert [r["transport"] for r in receiver.records] == ["grpc", "http"]
        assert receiver.rejected == {"grpc": 0, "http": 0}

    def test_stop_cuts_a_delay_short(
        self, receiver: OTLPReceiver, capfd: pytest.CaptureFixture[str]
    ) -> None:
        """A client timing out in a delay gets FAILURE; stop() wakes the delayed handler."""
        receiver.set_fault(delay=60.0)
        http_exp = HttpLogExporter(endpoint=receiver.http_logs_url, timeout=0.3)
        assert http_exp.export(readable_batch()) == LogRecordExportResult.FAILURE
        receiver.stop()
        end = time.monotonic() + 10  # not woken: rejected after the 60 s delay
        while not receiver.rejected["http"] and time.monotonic() < end:
            time.sleep(0.01)  # the woken handler finishing
        assert receiver.records == []
        assert receiver.rejected["http"] >= 1
        assert "Traceback" not in capfd.readouterr().err


@pytest.fixture
def no_ca_bundle_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override the exporter's
    certificate_file (session.verify), so TLS tests run without them."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


@pytest.fixture(scope="module")
def cert_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """One self-signed localhost/127.0.0.1 certificate for the TLS tests."""
    return make_self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.mark.usefixtures("no_ca_bundle_env")
class TestTls:
    def test_tls_both_transports(self, cert_pair: tuple[str, str]) -> None:
        """With tls=, both transports serve https and the exporters trust the self-signed CA."""
        cert, _ = cert_pair
        with OTLPReceiver(tls=cert_pair) as r:
            assert r.grpc_endpoint.startswith("https://127.0.0.1:")
            assert r.http_logs_url.startswith("https://127.0.0.1:")
            creds = grpc.ssl_channel_credentials(root_certificates=Path(cert).read_bytes())
            grpc_exp = GrpcLogExporter(endpoint=r.grpc_endpoint, credentials=creds, timeout=5)
            http_exp = HttpLogExporter(endpoint=r.http_logs_url, certificate_file=cert, timeout=5)
            assert grpc_exp.export(readable_batch()) == LogRecordExportResult.SUCCESS
            assert http_exp.export(readable_batch()) == LogRecordExportResult.SUCCESS
            assert [rec["transport"] for rec in r.wait_for(2)] == ["grpc", "http"]

    def test_wrong_ca_fails_cleanly(self, cert_pair: tuple[str, str], tmp_path: Path) -> None:
        """A client trusting another CA gets FAILURE (no exception) fast, and nothing is stored."""
        other_cert, _ = make_self_signed_cert(tmp_path)
        with OTLPReceiver(tls=cert_pair) as r:
            creds = grpc.ssl_channel_credentials(root_certificates=Path(other_cert).read_bytes())
            grpc_exp = GrpcLogExporter(endpoint=r.grpc_endpoint, credentials=creds, timeout=0.5)
            http_exp = HttpLogExporter(
                endpoint=r.http_logs_url, certificate_file=other_cert, timeout=0.5
            )
            start = time.monotonic()
            assert grpc_exp.export(readable_batch()) == LogRecordExportResult.FAILURE
            assert http_exp.export(readable_batch()) == LogRecordExportResult.FAILURE
            assert time.monotonic() - start < 10  # 0.5 s each; stuck: the test's timeout
            assert r.records == []
            assert r.requests == {"grpc": 0, "http": 0}

    def test_plaintext_client_against_tls_fails(self, cert_pair: tuple[str, str]) -> None:
        """An insecure gRPC client cannot talk to the TLS receiver and gets FAILURE."""
        with OTLPReceiver(tls=cert_pair, http=False) as r:
            endpoint = r.grpc_endpoint.replace("https://", "http://")
            exporter = GrpcLogExporter(endpoint=endpoint, insecure=True, timeout=0.5)
            assert exporter.export(readable_batch()) == LogRecordExportResult.FAILURE
            assert r.records == []

    def test_ca_bundle_env_overrides_certificate_file(
        self, cert_pair: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """REQUESTS_CA_BUNDLE silently beats certificate_file; a trust_env=False session wins."""
        import requests

        cert, _ = cert_pair
        other_cert, _ = make_self_signed_cert(tmp_path)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", other_cert)
        with OTLPReceiver(tls=cert_pair, grpc=False) as r:
            plain = HttpLogExporter(endpoint=r.http_logs_url, certificate_file=cert, timeout=0.5)
            assert plain.export(readable_batch()) == LogRecordExportResult.FAILURE
            session = requests.Session()
            session.trust_env = False
            fixed = HttpLogExporter(
                endpoint=r.http_logs_url, certificate_file=cert, timeout=5, session=session
            )
            assert fixed.export(readable_batch()) == LogRecordExportResult.SUCCESS
            assert len(r.records) == 1


class TestCli:
    def test_receive_prints_saves_and_summarises(self, tmp_path: Path) -> None:
        """`receive` prints endpoints and a line per record, writes JSONL, summarises on SIGINT."""
        out = tmp_path / "records.jsonl"
        code = "import sys; from obs._receive_cli import cli_main; sys.exit(cli_main(sys.argv[1:]))"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-c", code, "--port", "0", "--grpc-port", "0", "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        try:
            assert proc.stdout is not None
            banner = proc.stdout.readline()
            assert banner.startswith("OTLP receiver listening: grpc http://127.0.0.1:")
            words = banner.split()
            grpc_endpoint, http_url = words[4], words[6]
            assert http_url.endswith("/v1/logs")

            emit_through(
                GrpcLogExporter(endpoint=grpc_endpoint, insecure=True, timeout=5),
                severity_text="WARN",
                body="low memory",
                event_name="mem",
                attributes={"rank": 1, "host": "n1", "blob": b"\x00\xff"},
                timestamp=1_700_000_000_000_000_000,
            )
            emit_through(HttpLogExporter(endpoint=http_url, timeout=5), body="b", event_name="mem")
            emit_through(HttpLogExporter(endpoint=http_url, timeout=5), body="c")
            lines = [proc.stdout.readline() for _ in range(3)]
            proc.send_signal(signal.SIGINT)
            rest, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        assert banner.rstrip().endswith("(Ctrl-C to stop)")
        cols = [c for c in lines[0].rstrip("\n").split("  ") if c.strip()]
        assert ["22:13:20.000", "WARN", "svc-test", "r1@node7", "mem", "low memory"] == [
            c.strip() for c in cols[:6]
        ], lines[0]
        assert cols[6].strip() == 'host=n1 blob="AP8="', lines[0]
        assert 1 == len({line.index(" mem ") for line in lines[:2]}), lines  # aligned
        assert lines[1].rstrip().endswith(" mem                           b")
        assert lines[2].rstrip().endswith(" -                             c")
        assert "received 3 records in 3 requests (grpc 1, http 2)\n" in rest
        assert "       2  mem\n" in rest
        assert "       1  <no event>\n" in rest

        saved = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["body"] for r in saved] == ["low memory", "b", "c"]
        assert saved[0]["attributes"]["blob"] == "AP8="
        assert {k: saved[0]["attributes"][k] for k in ("rank", "host")} == {"rank": 1, "host": "n1"}


class TestCliUsability:
    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        code = "import sys; from obs.__main__ import main; sys.exit(main(sys.argv[1:]))"
        return subprocess.run(
            [sys.executable, "-c", code, "receive", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
        )

    def test_port_in_use_is_one_clear_line(self) -> None:
        """A busy port gives one line naming it and exit 1, not a traceback."""
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            proc = self._run("--http-only", "--port", str(port))
        assert 1 == proc.returncode
        assert [f"python -m obs receive: cannot listen on 127.0.0.1:{port}"] == [
            line.split(" (")[0] for line in proc.stderr.splitlines()
        ], proc.stderr
        assert "Traceback" not in proc.stderr

    def test_help_shows_defaults_and_only_flags(self) -> None:
        """--help lists --grpc-only/--http-only, the defaults and how to stop."""
        text = self._run("--help").stdout
        for needle in ("--grpc-only", "--http-only", "(default: 4318)", "Ctrl-C"):
            assert needle in text, needle

    def test_grpc_only_and_http_only_are_exclusive(self) -> None:
        """Both at once is a usage error (exit 2)."""
        assert 2 == self._run("--grpc-only", "--http-only").returncode


class TestPlugin:
    def test_fixture_yields_started_receiver(self, otlp_receiver: OTLPReceiver) -> None:
        """The otlp_receiver fixture is a started receiver that the exporters reach."""
        emit_through(HttpLogExporter(endpoint=otlp_receiver.http_logs_url, timeout=5), body="fx")
        assert [r["body"] for r in otlp_receiver.wait_for(1)] == ["fx"]

    def test_fixture_stops_receiver_after_test(self, pytester: pytest.Pytester) -> None:
        """Loaded as a plugin, the fixture serves during the test and frees its ports after."""
        pytester.makepyfile(
            """
            import pathlib

            def test_uses_it(otlp_receiver):
                assert otlp_receiver.grpc_port > 0
                pathlib.Path("ports.txt").write_text(
                    f"{otlp_receiver.grpc_port} {otlp_receiver.http_port}"
                )
            """
        )
        result = pytester.runpytest("-p", "no:obs", "-p", "obs.pytest_plugin", "-q")
        result.assert_outcomes(passed=1)
        ports = [int(p) for p in (pytester.path / "ports.txt").read_text().split()]
        for port in ports:  # a stopped receiver refuses connections
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()

    def test_plugin_import_is_light(self) -> None:
        """Importing the plugin module (after obs itself) loads neither grpc nor protobuf."""
        code = (
            "import sys, obs; before = set(sys.modules); import obs.pytest_plugin; "
            "new = set(sys.modules) - before; "
            "print(sorted(m for m in new if m.startswith(('grpc', 'google', 'obs._receiver'))))"
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert result.stdout == "[]\n"
