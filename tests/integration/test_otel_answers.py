"""Odd and hostile collector answers, against real loopback collectors (HTTP and gRPC).

Whatever a collector answers, every record is acknowledged, spooled (and replayed when the
collector is back) or counted; a record is counted delivered only when the collector took
it, and lost ("rejected") only when the collector said that asking again cannot succeed.
"""

from __future__ import annotations

import gzip
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from test_otel_rejections import Reports, ev

from obs._delivery import delivery_report
from obs._otlp_decode import decode_request
from obs.otel import ExportSink
from obs.rank import RankResolver
from obs.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

#: ``answer(names)`` for HTTP: None stores the records and answers 200, else
#: (status, headers, body) is sent and nothing is stored.
HTTPAnswer = Callable[[list[str]], "tuple[int, list[tuple[str, str]], bytes] | None"]
#: ``answer(names)`` for gRPC: None stores the records, else (code, details, RetryInfo
#: delay in seconds or None) aborts the call and nothing is stored.
GRPCAnswer = Callable[[list[str]], "tuple[grpc.StatusCode, str, int | None] | None"]


class Collector:
    """A real OTLP collector on loopback (HTTP and gRPC) whose answers the test chooses."""

    def __init__(self) -> None:
        self.records: list[str] = []
        self.lock = threading.Lock()
        self.http_answer: HTTPAnswer = lambda names: None
        self.grpc_answer: GRPCAnswer = lambda names: None
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
                names = [str(r["event_name"]) for r in decode_request(request, "http")]
                answer = collector.http_answer(names)
                if answer is None:
                    collector.store(names)
                    answer = (200, [], b"")
                status, headers, payload = answer
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:  # the client closed a body it would not read
                    self.close_connection = True

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

        class Servicer(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
                names = [str(r["event_name"]) for r in decode_request(request, "grpc")]
                answer = collector.grpc_answer(names)
                if answer is None:
                    collector.store(names)
                    return logs_service_pb2.ExportLogsServiceResponse()
                code, details, delay = answer
                if delay is not None:
                    info = error_details_pb2.RetryInfo(
                        retry_delay=duration_pb2.Duration(seconds=delay)
                    )
                    context.set_trailing_metadata(
                        [("google.rpc.retryinfo-bin", info.SerializeToString())]
                    )
                context.abort(code, details)
                return None

        self.grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Servicer(), self.grpc)  # type: ignore[no-untyped-call]
        self.grpc_port = self.grpc.add_insecure_port("127.0.0.1:0")
        self.grpc.start()

    def store(self, names: list[str]) -> None:
        with self.lock:
            self.records.extend(names)

    def events(self) -> list[str]:
        with self.lock:
            return list(self.records)

    def endpoint(self, protocol: str) -> str:
        if protocol == "grpc":
            return f"http://127.0.0.1:{self.grpc_port}"
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.grpc.stop(0)


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    made = Collector()
    yield made
    made.stop()


def _settings(spool: Path, endpoint: str, protocol: str, timeout: float = 0.5) -> Settings:
    return Settings(
        logs_exporter="otlp",
        otlp_protocol=protocol,
        otlp_endpoint=endpoint,
        otlp_timeout=timeout,
        spool_dir=str(spool),
        blrp_schedule_delay_ms=20.0,
        shutdown_timeout=3.0,
        service_name="answers-test",
    )


def _sink(settings: Settings) -> tuple[ExportSink, Reports]:
    reports = Reports()
    return ExportSink(settings, RankResolver(env={}, host="h"), reports), reports


def _log(sink: ExportSink, tag: str, n: int = 4) -> list[str]:
    """``n`` ERROR and ``n`` INFO records; the ERRORs' names."""
    errors = []
    for i in range(n):
        errors.append(f"{tag}-e{i}")
        sink(None, "error", ev(f"{tag}-e{i}"))
        sink(None, "info", ev(f"{tag}-i{i}", logging.INFO))
    return errors


def _deliver_spool(spool: Path, collector: Collector, protocol: str, want: list[str]) -> None:
    """A new process's sink (the collector answering again) replays the spool."""
    sink, _ = _sink(_settings(spool, collector.endpoint(protocol), protocol))
    try:
        end = time.monotonic() + 30.0
        while time.monotonic() < end and not set(want) <= set(collector.events()):
            sink.force_flush(2.0)
    finally:
        sink.shutdown(2.0)


# -- gRPC RESOURCE_EXHAUSTED: throttling is not "too large" ----------------------------------

_THROTTLES = [
    "rate limit exceeds quota",
    "ingestion rate exceeds limit for tenant",
    "too many requests: per-tenant quota exceeded",
    "queue size exceeds capacity, retry later",
]


@settings(max_examples=6)
@given(
    details=st.sampled_from(_THROTTLES),
    delay=st.one_of(st.none(), st.integers(min_value=-5, max_value=10**9)),
)
def test_grpc_throttling_is_spooled_not_rejected(
    collector: Collector, tmp_path_factory: pytest.TempPathFactory, details: str, delay: int | None
) -> None:
    """RESOURCE_EXHAUSTED from a rate limiter (with or without RetryInfo, whose delay may be
    negative or far past any deadline) is transient: the ERRORs are spooled and delivered
    when the collector takes records again, none counted lost. A details text holding a
    size word ("exceeds") used to read as "request too large": every batch was split down
    to single records and each given up as ``rejected``, lost for good."""
    spool = tmp_path_factory.mktemp("throttle") / "spool"
    collector.grpc_answer = lambda names: (grpc.StatusCode.RESOURCE_EXHAUSTED, details, delay)
    sink, _ = _sink(_settings(spool, collector.endpoint("grpc"), "grpc"))
    try:
        errors = _log(sink, f"t{time.monotonic_ns()}")
        flushed = sink.force_flush(3.0)
    finally:
        sink.shutdown(2.0)
        collector.grpc_answer = lambda names: None
    stats = sink.stats()
    assert (False, {}, len(errors)) == (
        flushed,
        {k: v for k, v in stats["dropped_by_reason"].items() if k != "export_failed"},
        stats["spooled"],
    )
    _deliver_spool(spool, collector, "grpc", errors)
    assert set(errors) <= set(collector.events())


# -- HTTP: a body that is too large to read --------------------------------------------------

_BIG = 64 << 20  # far past any OTLP answer (a few hundred bytes)


def _zeros_answer(status: int, *, gzipped: bool) -> tuple[int, list[tuple[str, str]], bytes]:
    if gzipped:  # 64 MiB of zeros in 64 KiB on the wire
        return status, [("Content-Encoding", "gzip")], gzip.compress(b"\0" * _BIG)
    return status, [], b"\0" * _BIG


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
def test_http_huge_answer_body_is_not_read_whole(
    collector: Collector, tmp_path: Path, gzipped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 200 whose body is 64 MiB (or a gzip bomb inflating to it) is a delivery read no
    further than an OTLP answer can be; a 503 with one is a failure (spooled). The
    client read the whole body into memory first, however large (a 400 MiB body took
    860 MB of RSS), and parsed it as a response."""
    big = _zeros_answer(200, gzipped=gzipped)
    stored: list[str] = []

    def answer(names: list[str]) -> tuple[int, list[tuple[str, str]], bytes]:
        stored.extend(names)
        return big

    import requests

    read: list[int] = []
    real_content = requests.Response.content

    def content(self: requests.Response) -> bytes:
        body: bytes = real_content.fget(self)  # type: ignore[attr-defined]
        read.append(len(body))
        return body

    monkeypatch.setattr(requests.Response, "content", property(content))
    collector.http_answer = answer
    sink, _ = _sink(
        _settings(tmp_path / "spool", collector.endpoint("http/protobuf"), "http/protobuf", 5.0)
    )
    try:
        errors = _log(sink, f"h{time.monotonic_ns()}")
        flushed = sink.force_flush(10.0)
        refusal = _zeros_answer(503, gzipped=gzipped)
        collector.http_answer = lambda names: refusal
        later = _log(sink, f"l{time.monotonic_ns()}")
        refused = sink.force_flush(3.0)
    finally:
        sink.shutdown(2.0)
        collector.http_answer = lambda names: None
    stats = sink.stats()
    assert (True, False, 8, len(later)) == (flushed, refused, stats["exported"], stats["spooled"])
    assert set(errors) <= set(stored)
    assert read
    assert max(read) <= 1 << 20


# -- a failed export's report says what the collector answered -------------------------------

_SECRET = "sk-live-0123456789abcdef"
_HTTP_TRANSIENT = [102, 103, 302, 304, 401, 403, 404, 405, 408, 418, 429, 499, 500, 502, 503, 599]
_GRPC_TRANSIENT = [
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.DATA_LOSS,
]


def _failure_report(reports: Reports) -> str:
    texts = [
        str(f.get("error_message"))
        for name, _, f in reports.calls
        if name == "obs_internal_error" and f.get("error_type") == "ExportFailed"
    ]
    assert len(texts) == 1, reports.calls
    return texts[0]


@settings(max_examples=8)
@given(
    protocol=st.sampled_from(["grpc", "http/protobuf"]),
    http_status=st.sampled_from(_HTTP_TRANSIENT),
    grpc_code=st.sampled_from(_GRPC_TRANSIENT),
)
def test_failed_export_reports_the_collectors_answer(
    collector: Collector,
    tmp_path_factory: pytest.TempPathFactory,
    protocol: str,
    http_status: int,
    grpc_code: grpc.StatusCode,
) -> None:
    """A collector refusing with a status that is not permanent (401, 404, 503,
    UNAUTHENTICATED, ...): the ERRORs are spooled and delivered by the next process once
    it answers, and obs' report of the failure names the answer (status or code and the
    collector's message, scrubbed). The report said only "export failed": an operator
    could not tell a wrong token from a collector that is down."""
    spool = tmp_path_factory.mktemp("answer") / "spool"
    text = f"tenant refused: token={_SECRET}"
    body = status_pb2.Status(code=16, message=text).SerializeToString()
    collector.http_answer = lambda names: (http_status, [], body)
    collector.grpc_answer = lambda names: (grpc_code, text, None)
    sink, reports = _sink(_settings(spool, collector.endpoint(protocol), protocol))
    try:
        errors = _log(sink, f"a{time.monotonic_ns()}")
        flushed = sink.force_flush(3.0)
    finally:
        sink.shutdown(2.0)
        collector.http_answer = lambda names: None
        collector.grpc_answer = lambda names: None
    stats = sink.stats()
    assert (False, len(errors), 0) == (flushed, stats["spooled"], stats["exported"])
    report = _failure_report(reports)
    code = grpc_code.name if protocol == "grpc" else f"HTTP {http_status}"
    assert code in report
    if protocol == "grpc" or not (http_status < 200 or http_status == 304):  # no body
        assert "tenant refused" in report
    assert _SECRET not in repr(reports.calls)
    _deliver_spool(spool, collector, protocol, errors)
    assert set(errors) <= set(collector.events())


# -- HTTP Retry-After: any value ------------------------------------------------------------

_PRINTABLE = st.characters(min_codepoint=32, max_codepoint=126)
_RETRY_AFTERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.text(_PRINTABLE, max_size=40),
    st.builds(
        "{}, {} {} {} {}:{}:{} {}".format,
        st.sampled_from(["Mon", "Sun", "Xyz"]),
        st.integers(min_value=-(10**25), max_value=10**25),
        st.sampled_from(["Jan", "Dec", "Foo"]),
        st.integers(min_value=-(10**25), max_value=10**25),
        *[st.integers(min_value=-(10**25), max_value=10**25)] * 3,
        st.sampled_from(["GMT", "+0000", "-9999", "+99999999999999999999"]),
    ),
)


@settings(max_examples=12)
@given(status=st.sampled_from([429, 502, 503, 504]), retry_after=_RETRY_AFTERS)
@example(status=503, retry_after="Mon, 01 Jan 99999999999999999999 00:00:00 GMT")
@example(status=429, retry_after="Mon, 01 Jan 2026 99999999999:00:00 GMT")
@example(status=503, retry_after="Mon, 01 Jan 2026 00:00:00 +99999999999999999")
@example(status=502, retry_after="999999999999")
@example(status=504, retry_after="-1")
def test_any_retry_after_is_a_plain_transient_failure(
    collector: Collector, tmp_path_factory: pytest.TempPathFactory, status: int, retry_after: str
) -> None:
    """A retryable status whose ``Retry-After`` is huge, negative, a date out of range or
    garbage: the ERRORs are spooled and the failure reported as that status, nothing
    else. A date whose numbers overflow a C long raised OverflowError out of the SDK's
    parser, reported as an obs internal error instead of the collector's answer."""
    spool = tmp_path_factory.mktemp("retry_after") / "spool"
    collector.http_answer = lambda names: (status, [("Retry-After", retry_after)], b"")
    sink, reports = _sink(_settings(spool, collector.endpoint("http/protobuf"), "http/protobuf"))
    try:
        errors = _log(sink, f"r{time.monotonic_ns()}", n=2)
        flushed = sink.force_flush(3.0)
    finally:
        sink.shutdown(2.0)
        collector.http_answer = lambda names: None
    kinds = [f.get("error_type") for name, _, f in reports.calls if name == "obs_internal_error"]
    assert (False, len(errors), ["ExportFailed"]) == (flushed, sink.stats()["spooled"], kinds)
    assert f"HTTP {status}" in _failure_report(reports)


# -- HTTP: one connection that trickles for ever ---------------------------------------------


class _OneTrickle(BaseHTTPRequestHandler):
    """Stores every request; answers the first one 200 and then its body a byte every
    0.1 s for as long as the server lives (a collector or proxy stuck streaming one
    answer), the others at once."""

    server: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
        with self.server.lock:
            first = not self.server.requests
            self.server.requests += 1
            self.server.events.extend(str(r["event_name"]) for r in decode_request(request, "http"))
        if not first:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        try:
            while not self.server.done.is_set():
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            self.server.cut.set()  # the client gave up on it and closed the connection
        self.close_connection = True


def test_one_trickling_answer_does_not_strand_delivery(tmp_path: Path) -> None:
    """A request whose answer trickles for ever is given up after its timeout, and its
    connection closed once it has held the transport for 10 s: the records after it are
    delivered (over a new connection). The abandoned request kept reading, and no request
    was sent while it did: nothing was delivered for as long as that one connection
    trickled, every ERROR sat in the spool."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OneTrickle)
    server.daemon_threads = True
    server.events, server.lock, server.requests = [], threading.Lock(), 0  # type: ignore[attr-defined]
    server.done, server.cut = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    sink, _ = _sink(_settings(tmp_path / "spool", endpoint, "http/protobuf"))
    sent = ["first", *(f"later{i}" for i in range(5))]
    try:
        sink(None, "error", ev(sent[0]))
        sink.force_flush(3.0)
        for name in sent[1:]:
            sink(None, "error", ev(name))
        end = time.monotonic() + 30.0
        while time.monotonic() < end and len(set(server.events)) < len(sent):  # type: ignore[attr-defined]
            sink.force_flush(1.0)
        cut = server.cut.wait(10.0)  # type: ignore[attr-defined]
    finally:
        sink.shutdown(2.0)
        server.done.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
    assert (sorted(sent), True) == (sorted(set(server.events)), cut)  # type: ignore[attr-defined]


# -- counts add up while a request is in flight ----------------------------------------------


def _unaccounted(stats: dict[str, Any]) -> int:
    """Records sent that no count holds: sent - acknowledged - spooled - dropped - queued
    - in flight (``obs.delivery()``'s identity)."""
    report = delivery_report(Settings(), stats, 0)
    return int(
        report["sent"]
        - report["acknowledged"]
        - report["spooled"]
        - report["dropped"]
        - report["queued"]
        - report.get("in_flight", 0)
    )


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_counts_add_up_while_the_collector_stalls(
    collector: Collector, tmp_path: Path, protocol: str
) -> None:
    """A collector that takes a request and stalls before answering: while it stalls,
    every record sent is acknowledged, spooled, dropped, queued or in flight, and the
    batch it holds is in flight; once it answers, the counts add up the same way. The
    batch being exported was in no count: ``obs.delivery()`` did not add up."""
    release, got = threading.Event(), threading.Event()

    def stall(names: list[str]) -> None:
        got.set()
        release.wait(60.0)  # then stored and answered as usual

    collector.http_answer = stall
    collector.grpc_answer = stall
    sink, _ = _sink(_settings(tmp_path / "spool", collector.endpoint(protocol), protocol, 30.0))
    try:
        errors = _log(sink, f"s{time.monotonic_ns()}", n=3)
        assert got.wait(30.0)
        stalled = sink.stats()
        release.set()
        flushed = sink.force_flush(30.0)
        after = sink.stats()
    finally:
        release.set()
        sink.shutdown(2.0)
        collector.http_answer = lambda names: None
        collector.grpc_answer = lambda names: None
    assert (0, True, True, 0) == (
        _unaccounted(stalled),
        stalled.get("in_flight", 0) > 0,
        flushed,
        _unaccounted(after),
    )
    assert set(errors) <= set(collector.events())


# -- gRPC: an answer too large for the client ------------------------------------------------


def test_grpc_answer_too_large_to_read_is_a_delivery(tmp_path: Path) -> None:
    """A collector that stores the request and answers OK with a 5 MiB message (a
    partial_success text past the client's 4 MiB receive limit): the records count as
    exported, each stored once, none counted lost. The client's RESOURCE_EXHAUSTED
    ("CLIENT: Received message larger than max") read as "request too large": the batch
    was split and sent again down to single records (each stored 4 times) and every
    record counted ``rejected``."""
    stored: list[str] = []
    lock = threading.Lock()

    class Servicer(logs_service_pb2_grpc.LogsServiceServicer):
        def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
            with lock:
                stored.extend(str(r["event_name"]) for r in decode_request(request, "grpc"))
            response = logs_service_pb2.ExportLogsServiceResponse()
            response.partial_success.error_message = "x" * (5 << 20)
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Servicer(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sink, _ = _sink(_settings(tmp_path / "spool", f"http://127.0.0.1:{port}", "grpc", 5.0))
    try:
        errors = _log(sink, "big")
        flushed = sink.force_flush(10.0)
    finally:
        sink.shutdown(2.0)
        server.stop(0)
    stats = sink.stats()
    assert (True, 8, {}, 0) == (flushed, stats["exported"], stats["dropped"], stats["spooled"])
    with lock:
        assert (sorted(set(stored)), len(set(stored))) == (sorted(stored), 8)
    assert set(errors) <= set(stored)


# -- HTTP: a status whose body cannot be decoded --------------------------------------------


@pytest.mark.parametrize("status", [400, 413, 422])
def test_permanent_status_with_an_undecodable_body_is_still_permanent(
    collector: Collector, tmp_path: Path, status: int
) -> None:
    """A 400 / 413 / 422 whose body is not what its ``Content-Encoding`` says (gzip over
    plain text): the status decides, the records are given up and counted ``rejected``,
    and the spool is left empty. The body's decoding error hid the status: the answer
    read as a transient failure, the ERRORs were spooled and sent again for ever."""
    collector.http_answer = lambda names: (
        status,
        [("Content-Encoding", "gzip"), ("Content-Type", "text/plain")],
        b"not gzip at all",
    )
    sink, _ = _sink(
        _settings(tmp_path / "spool", collector.endpoint("http/protobuf"), "http/protobuf")
    )
    try:
        _log(sink, f"p{time.monotonic_ns()}", n=2)
        flushed = sink.force_flush(5.0)
    finally:
        sink.shutdown(2.0)
        collector.http_answer = lambda names: None
    stats = sink.stats()
    assert (True, {"ERROR": 2, "INFO": 2}, 0) == (
        flushed,
        stats["dropped_by_reason"].get("rejected"),
        stats["spooled"],
    )
    assert [] == list((tmp_path / "spool").glob("spool*.jsonl"))


# -- HTTP 200: the body is read as what its Content-Type says --------------------------------

_PARTIAL = logs_service_pb2.ExportLogsServiceResponse()
_PARTIAL.partial_success.rejected_log_records = 2
_PARTIAL.partial_success.error_message = "2 records dropped: password=hunter2"
_JSON_PARTIAL = b'{"partialSuccess": {"rejectedLogRecords": "2", "errorMessage": "2 dropped"}}'


@pytest.mark.parametrize(
    ("content_type", "body", "rejected"),
    [
        ("application/x-protobuf", _PARTIAL.SerializeToString(), 2),
        ("", _PARTIAL.SerializeToString(), 2),
        ("application/json", _JSON_PARTIAL, 2),
        ("application/json; charset=utf-8", b'{"partialSuccess": {}}', 0),
        ("application/json", b"{not json", 0),
        ("text/html", b"\n\x02\x08\x05", 0),  # garbage that parses: rejected 5
        ("text/plain", _PARTIAL.SerializeToString(), 0),
    ],
    ids=["protobuf", "untyped", "json", "json-empty", "json-garbage", "html", "text"],
)
def test_http_200_body_is_read_as_its_content_type(
    collector: Collector, tmp_path: Path, content_type: str, body: bytes, rejected: int
) -> None:
    """A 200's partial_success is read from a protobuf body (or one without a type), and
    from a JSON body (a collector answering OTLP/JSON); any other body (an HTML page, text)
    holds none: every record counts delivered. A garbage body that happened to parse as
    protobuf counted delivered records as ``rejected``; a JSON partial_success was
    ignored."""
    headers = [("Content-Type", content_type)] if content_type else []
    stored: list[str] = []

    def answer(names: list[str]) -> tuple[int, list[tuple[str, str]], bytes]:
        stored.extend(names)
        return 200, headers, body

    collector.http_answer = answer
    endpoint = collector.endpoint("http/protobuf")
    sink, reports = _sink(_settings(tmp_path / "spool", endpoint, "http/protobuf"))
    try:
        for i in range(8):
            sink(None, "error", ev(f"c{i}"))
        flushed = sink.force_flush(5.0)
    finally:
        sink.shutdown(2.0)
        collector.http_answer = lambda names: None
    stats = sink.stats()
    assert (True, 8 - rejected, rejected, 8) == (
        flushed,
        stats["exported"],
        sum(stats["dropped_by_reason"].get("rejected", {}).values()),
        len(stored),
    )
    assert "hunter2" not in repr(reports.calls)
