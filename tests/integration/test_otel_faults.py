"""Collector faults in the middle of a delivery, against real loopback collectors.

A collector that takes part of a request split in halves and then fails (goes down, or
answers 503 / UNAVAILABLE for a while) must not get the part it took again, and the part
it did not take must reach it later, in order: live records through the spool, spooled
records through the replay's recorded progress.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from test_otel_rejections import PROTOCOLS, Picky, Reports, ev

from obs._otlp_decode import decode_request
from obs.otel import ExportSink
from obs.rank import RankResolver
from obs.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class Flaky(Picky):
    """Takes at most ``max_records`` a request (413 / RESOURCE_EXHAUSTED above that); the
    ``fail_at``-th request of an accepted size starts an outage of ``outage`` seconds
    (503 / UNAVAILABLE-like refusals, nothing stored)."""

    def __init__(self, *, fail_at: int, outage: float = 1.0, **policy: Any) -> None:
        super().__init__(**policy)
        self.fail_at = fail_at
        self.outage = outage
        self.seen = 0
        self.down_until = 0.0

    def answer(self, request: Any, transport: str) -> tuple[int, bytes]:
        records = decode_request(request, transport)
        if self.max_records and len(records) > self.max_records:
            return super().answer(request, transport)
        with self.lock:
            self.seen += 1
            if self.seen == self.fail_at:
                self.down_until = time.monotonic() + self.outage
            down = time.monotonic() < self.down_until
        if down:  # 503 / UNAVAILABLE
            return 503, status_pb2.Status(code=14, message="down").SerializeToString()
        return super().answer(request, transport)


def _settings(tmp: Path, endpoint: str, protocol: str) -> Settings:
    return Settings(
        logs_exporter="otlp",
        otlp_protocol=protocol,
        otlp_endpoint=endpoint,
        otlp_timeout=0.3,
        spool_dir=str(tmp / "spool"),
        blrp_schedule_delay_ms=20.0,
        shutdown_timeout=3.0,
        service_name="faults-test",
    )


def _dead_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _settle(sink: ExportSink, picky: Picky, want: int, budget: float = 15.0) -> None:
    """Flush until the collector holds ``want`` records (or the budget is spent)."""
    end = time.monotonic() + budget
    while time.monotonic() < end and len(picky.events()) < want:
        sink.force_flush(1.0)
        time.sleep(0.05)
    sink.force_flush(1.0)


def _spool_with(tmp: Path, names: list[str], protocol: str) -> None:
    """A spool holding ERROR records ``names`` (a process that ran with the collector down)."""
    down = ExportSink(
        _settings(tmp, _dead_endpoint(), protocol), RankResolver(env={}, host="h"), Reports()
    )
    for name in names:
        down(None, "error", ev(name))
    down.shutdown(3.0)
    assert len(names) == down.stats()["spooled"]


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(min_value=4, max_value=40),
    max_records=st.integers(min_value=1, max_value=8),
    fail_at=st.integers(min_value=2, max_value=6),
    protocol=st.sampled_from(PROTOCOLS),
)
def test_replay_interrupted_mid_split_sends_nothing_twice(
    tmp_path_factory: pytest.TempPathFactory, n: int, max_records: int, fail_at: int, protocol: str
) -> None:
    """A spool replayed to a collector that takes a few records a request and goes down
    after some of a batch's halves: every record arrives once, in order. The replay
    used to resend the whole batch, so the halves taken before the outage came twice."""
    tmp = tmp_path_factory.mktemp("faults")
    sent = [f"s{i}" for i in range(n)]
    _spool_with(tmp, sent, protocol)
    picky = Flaky(max_records=max_records, fail_at=fail_at, outage=0.6)
    try:
        sink = ExportSink(
            _settings(tmp, picky.endpoint(protocol), protocol),
            RankResolver(env={}, host="h"),
            Reports(),
        )
        try:
            _settle(sink, picky, n)
            got, stats = picky.events(), sink.stats()
        finally:
            sink.shutdown(1.0)
    finally:
        picky.stop()
    dups = {k: v for k, v in collections.Counter(got).items() if v > 1}
    assert ({}, sent, n) == (dups, got, stats["replayed"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_live_batch_cut_mid_split_is_spooled_in_order(tmp_path: Path, protocol: str) -> None:
    """A live batch split for a collector that takes 5 records a request, which then goes
    down: the halves it took are not sent again, the rest is spooled and replayed, and
    the collector ends up with every record once, in the order they were logged."""
    picky = Flaky(max_records=5, fail_at=2, outage=0.8)
    try:
        sink = ExportSink(
            dataclasses.replace(
                _settings(tmp_path, picky.endpoint(protocol), protocol),
                blrp_schedule_delay_ms=500.0,  # one batch of all 30
            ),
            RankResolver(env={}, host="h"),
            Reports(),
        )
        sent = [f"w{i}" for i in range(30)]
        try:
            for name in sent:
                sink(None, "error", ev(name))
            _settle(sink, picky, len(sent))
            got = picky.events()
        finally:
            sink.shutdown(1.0)
    finally:
        picky.stop()
    assert sent == got


class _BodyBreaker(BaseHTTPRequestHandler):
    """A collector that stores each request, then answers 200 with a body the client
    cannot read: ``Content-Encoding: gzip`` over bytes that are not gzip, or a body cut
    short by a reset connection (``server.fault``)."""

    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
        with self.server.lock:
            self.server.events.extend(str(r["event_name"]) for r in decode_request(request, "http"))
        if self.server.fault == "gzip":
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", "14")
            self.end_headers()
            self.wfile.write(b"this is no gz!")
            return
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()


@pytest.mark.parametrize("fault", ["gzip", "cut"])
def test_http_200_with_an_unreadable_body_is_delivered_once(tmp_path: Path, fault: str) -> None:
    """A 200 is the collector's word that it stored the request, whatever its body: the
    records count as exported, none is sent again or counted lost. A body the client could
    not decode (or read to its end) used to make it a failure: the WARNING+ were spooled
    and replayed (each stored twice) and the INFO counted ``export_failed``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BodyBreaker)
    server.daemon_threads = True
    server.events, server.lock, server.fault = [], threading.Lock(), fault  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    sink = ExportSink(
        _settings(tmp_path, endpoint, "http/protobuf"), RankResolver(env={}, host="h"), Reports()
    )
    sent = [f"r{i}" for i in range(10)]
    try:
        for i, name in enumerate(sent):
            sink(None, "error" if i % 2 else "info", ev(name, 40 if i % 2 else 20))
        flushed = sink.force_flush(5.0)
        time.sleep(0.7)  # a replay would be due by now
        sink.force_flush(2.0)
        stats = sink.stats()
    finally:
        sink.shutdown(1.0)
        server.shutdown()
        server.server_close()
    assert (True, sent, 10, {}, 0) == (
        flushed,
        server.events,  # type: ignore[attr-defined]
        stats["exported"],
        stats["dropped"],
        stats["spooled"],
    )


class _Trickler(BaseHTTPRequestHandler):
    """A collector that, while ``server.trickle`` is set, answers a byte (or a header
    line) every 0.1 s and never finishes: each socket read succeeds, so the client's read
    timeout never fires. Otherwise it stores the request and answers 200."""

    server: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.trickle:
            head = self.server.trickle == "headers"
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            if not head:
                self.wfile.write(b"Content-Length: 100000\r\n\r\n")
            with contextlib.suppress(OSError):
                while self.server.trickle:
                    self.wfile.write(b"X-Wait: 1\r\n" if head else b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
            self.close_connection = True
            return
        request = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
        with self.server.lock:
            self.server.events.extend(str(r["event_name"]) for r in decode_request(request, "http"))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.mark.parametrize("trickle", ["body", "headers"])
def test_trickling_collector_cannot_hold_the_export(tmp_path: Path, trickle: str) -> None:
    """A collector that trickles its answer for ever: each request is given up after its
    timeout, the ERRORs are spooled (not held in memory), and once the collector answers
    properly every record arrives once. The export thread used to wait for ever (the
    HTTP client's timeout bounds each read, not the request): nothing spooled, flush
    waited out its budget, every later record queued behind it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickler)
    server.daemon_threads = True
    server.events, server.lock, server.trickle = [], threading.Lock(), trickle  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    settings = dataclasses.replace(_settings(tmp_path, endpoint, "http/protobuf"), otlp_timeout=0.5)
    sink = ExportSink(settings, RankResolver(env={}, host="h"), Reports())
    sent = [f"t{i}" for i in range(6)]
    try:
        for name in sent[:3]:
            sink(None, "error", ev(name))
        start = time.monotonic()
        flushed = sink.force_flush(4.0)
        took = time.monotonic() - start
        for name in sent[3:]:
            sink(None, "error", ev(name))
        time.sleep(0.5)
        spooled = sink.stats()["spooled"]
        server.trickle = ""  # type: ignore[attr-defined]
        end = time.monotonic() + 15.0
        while time.monotonic() < end and len(server.events) < len(sent):  # type: ignore[attr-defined]
            sink.force_flush(1.0)
    finally:
        sink.shutdown(1.0)
        server.trickle = ""  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
    assert (False, True, 6, sent) == (
        flushed,
        took < 2.5,
        spooled,
        sorted(server.events, key=lambda e: int(e[1:])),  # type: ignore[attr-defined]
    )
