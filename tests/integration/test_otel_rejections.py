"""Permanent rejections never strand records (issue 11 item 4), against real collectors.

A picky OTLP collector on loopback (a real HTTP server and a real gRPC server) refuses
requests the way real ones do: HTTP 413 / a gRPC receive limit for requests too large,
HTTP 400 / INVALID_ARGUMENT for a poisoned record, ``partial_success`` for records it
drops. The real SDK exporters talk to it through obs' export sink. Every test checks the
accounting identity: sent = received + reported rejected, per severity.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc

from obs._otlp_decode import decode_request as _decode_request
from obs.otel import ExportSink
from obs.rank import RankResolver
from obs.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


class Picky:
    """A real OTLP collector (HTTP + gRPC on loopback) with a rejection policy.

    ``max_records``: requests with more records are too large (HTTP 413). ``poison``: a
    request holding a record of that event name is refused for good (400 /
    INVALID_ARGUMENT). Records whose event name starts with ``bad`` are dropped with a
    ``partial_success``. ``grpc_max_bytes``: the gRPC server's receive limit. ``status``:
    every HTTP request answered with it and an empty body, nothing stored (a proxy's 3xx).
    """

    def __init__(
        self,
        *,
        max_records: int = 0,
        poison: str = "",
        grpc_max_bytes: int = 4 << 20,
        status: int = 0,
    ) -> None:
        self.max_records = max_records
        self.poison = poison
        self.status = status
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        picky = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
                status, payload = picky.answer(request, "http")
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

        class Servicer(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
                status, payload = picky.answer(request, "grpc")
                if status == 200:
                    return logs_service_pb2.ExportLogsServiceResponse.FromString(payload)
                code = {
                    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
                    503: grpc.StatusCode.UNAVAILABLE,
                }.get(status, grpc.StatusCode.INVALID_ARGUMENT)
                context.abort(code, status_pb2.Status.FromString(payload).message)
                return None

        self.grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4),
            options=[("grpc.max_receive_message_length", grpc_max_bytes)],
        )
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Servicer(), self.grpc)  # type: ignore[no-untyped-call]
        self.grpc_port = self.grpc.add_insecure_port("127.0.0.1:0")
        self.grpc.start()

    def answer(self, request: Any, transport: str) -> tuple[int, bytes]:
        """(HTTP status, body) for one export request; stores what it accepts."""
        records = _decode_request(request, transport)
        if self.status:
            return self.status, b""
        if self.max_records and len(records) > self.max_records:
            msg = f"request of {len(records)} records is too large"
            return 413, status_pb2.Status(code=8, message=msg).SerializeToString()
        if self.poison and any(r["event_name"] == self.poison for r in records):
            msg = "record poisoned: attribute value not allowed"
            return 400, status_pb2.Status(code=3, message=msg).SerializeToString()
        good = [r for r in records if not str(r["event_name"]).startswith("bad")]
        with self.lock:
            self.records.extend(good)
        response = logs_service_pb2.ExportLogsServiceResponse()
        if len(good) < len(records):
            response.partial_success.rejected_log_records = len(records) - len(good)
            response.partial_success.error_message = "bad records dropped by a filter"
        return 200, response.SerializeToString()

    def endpoint(self, protocol: str) -> str:
        if protocol == "grpc":
            return f"http://127.0.0.1:{self.grpc_port}"
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.grpc.stop(0)

    def events(self) -> list[str]:
        with self.lock:
            return [str(r["event_name"]) for r in self.records]


class Reports:
    """The runtime's report stand-in: records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict[str, Any]]] = []

    def __call__(self, event: Any, level: int | None = None, *, body: str | None = None) -> None:
        fields = {k: v for k, v in event.fields().items() if v is not None}
        fields["body"] = body if body is not None else event.body()
        level = type(event).level if level is None else level
        self.calls.append((type(event).name, level, fields))


def ev(event: str, level: int = logging.ERROR, **fields: Any) -> dict[str, Any]:
    names = {20: ("INFO", 9), 30: ("WARNING", 13), 40: ("ERROR", 17)}
    text, number = names[level]
    return {
        "severity_text": text,
        "severity_number": number,
        "event": event,
        "_obs_level": level,
        **fields,
    }


@pytest.fixture
def picky_sink(tmp_path: Path) -> Iterator[Any]:
    made: list[tuple[Picky, ExportSink]] = []

    def make(protocol: str, **policy: Any) -> tuple[Picky, ExportSink, Reports]:
        picky = Picky(**policy)
        settings = Settings(
            logs_exporter="otlp",
            otlp_protocol=protocol,
            otlp_endpoint=picky.endpoint(protocol),
            otlp_timeout=5.0,
            spool_dir=str(tmp_path / "spool"),
            blrp_schedule_delay_ms=20.0,
            shutdown_timeout=10.0,
            service_name="picky-test",
        )
        reports = Reports()
        sink = ExportSink(settings, RankResolver(env={}, host="h"), reports)
        made.append((picky, sink))
        return picky, sink, reports

    yield make
    for picky, sink in made:
        sink.shutdown(1.0)
        picky.stop()


def rejected(sink: ExportSink) -> dict[str, int]:
    return dict(sink.stats()["dropped_by_reason"].get("rejected", {}))


PROTOCOLS = ("grpc", "http/protobuf")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_poisoned_record_is_given_up_and_counted(picky_sink: Any, protocol: str) -> None:
    """One record the collector refuses for good is counted rejected (with the collector's
    message); every other record of its batch, and every later one, is delivered."""
    picky, sink, reports = picky_sink(protocol, poison="poison")
    sent = [f"e{i}" for i in range(300)]
    for i, name in enumerate(sent):
        sink(None, "error", ev(name))
        if i == 150:
            sink(None, "error", ev("poison"))
    assert sink.force_flush(20.0)
    sink(None, "error", ev("later"))
    assert sink.force_flush(20.0)
    got = picky.events()
    assert sorted([*sent, "later"]) == sorted(got)  # none twice, none lost
    assert {"ERROR": 1} == rejected(sink)  # 302 sent = 301 received + 1 rejected
    assert 0 == sink.stats()["spooled"]
    messages = [f["error_message"] for e, _, f in reports.calls if e == "obs_internal_error"]
    assert any("record poisoned" in m for m in messages)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_request_too_large_is_split(picky_sink: Any, protocol: str) -> None:
    """A collector that takes at most 100 records a request (HTTP 413 / RESOURCE_EXHAUSTED)
    still gets all 1,000, none twice, none counted lost."""
    picky, sink, _ = picky_sink(protocol, max_records=100)
    sent = [f"w{i}" for i in range(1000)]
    for name in sent:
        sink(None, "warning", ev(name, logging.WARNING))
    assert sink.force_flush(30.0)
    assert sorted(sent) == sorted(picky.events())
    assert {} == sink.stats()["dropped"]


def test_grpc_receive_limit_is_split(picky_sink: Any) -> None:
    """10 KB records against a 256 KiB gRPC receive limit (the Collector's 4 MiB, scaled
    down): a 512-record batch is split until it fits, and every record arrives."""
    picky, sink, _ = picky_sink("grpc", grpc_max_bytes=256 * 1024)
    sent = [f"big{i}" for i in range(120)]
    for name in sent:
        sink(None, "error", ev(name, payload="x" * 10_000))
    assert sink.force_flush(30.0)
    assert sorted(sent) == sorted(picky.events())
    assert {} == sink.stats()["dropped"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_partial_success_is_counted(picky_sink: Any, protocol: str) -> None:
    """Records a collector drops with a partial_success answer are counted as rejected:
    sent = received + rejected, per severity."""
    picky, sink, _ = picky_sink(protocol)
    for i in range(40):
        sink(None, "info", ev(f"i{i}", logging.INFO))
        sink(None, "info", ev(f"bad-i{i}", logging.INFO))
    assert sink.force_flush(10.0)
    for i in range(40):
        sink(None, "error", ev(f"e{i}"))
        sink(None, "error", ev(f"bad-e{i}"))
    assert sink.force_flush(10.0)
    assert 80 == len(picky.events())
    assert {"INFO": 40, "ERROR": 40} == rejected(sink)


@pytest.mark.parametrize("status", [300, 301, 302, 304, 307, 399])
def test_http_3xx_is_not_delivery(picky_sink: Any, status: int) -> None:
    """A 3xx answer (a proxy's redirect without a Location, 304) stored nothing: the
    records are not counted exported, flush() says so, and shutdown spools the ERRORs.
    (The SDK's client calls any status below 400 a success.)"""
    picky, sink, _ = picky_sink("http/protobuf", status=status)
    for i in range(5):
        sink(None, "error", ev(f"e{i}"))
    flushed = sink.force_flush(1.5)
    sink.shutdown(2.0)
    stats = sink.stats()
    assert (False, [], 0, 5) == (flushed, picky.events(), stats["exported"], stats["spooled"])


def test_poisoned_spool_replays_everything_else(picky_sink: Any, tmp_path: Path) -> None:
    """A spool holding a record the collector refuses for good does not strand the rest:
    the next sink replays every other record (before and after it) and counts the one."""
    picky, _, _ = picky_sink("http/protobuf", poison="poison")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    settings = Settings(
        logs_exporter="otlp",
        otlp_endpoint=dead,
        otlp_timeout=0.5,
        spool_dir=str(tmp_path / "spool"),
        blrp_schedule_delay_ms=20.0,
        service_name="picky-test",
    )
    down = ExportSink(settings, RankResolver(env={}, host="h"), Reports())
    sent = [f"s{i}" for i in range(300)]
    for i, name in enumerate(sent):
        down(None, "error", ev(name))
        if i == 100:
            down(None, "error", ev("poison"))
    down.shutdown(3.0)
    assert 301 == down.stats()["spooled"]
    up = ExportSink(
        dataclasses.replace(settings, otlp_endpoint=picky.endpoint("http/protobuf")),
        RankResolver(env={}, host="h"),
        Reports(),
    )
    try:
        assert up.force_flush(20.0)
        assert sorted(sent) == sorted(picky.events())
        assert {"ERROR": 1} == rejected(up)
    finally:
        up.shutdown(1.0)


def _spool_line(event: str, /, **fields: Any) -> bytes:
    """A spool line as obs writes one (an ERROR named ``event``), with ``fields`` changed."""
    now = time.time_ns()
    doc = {
        "v": 1, "cls": 3, "ts": now, "ots": now, "sn": 17, "st": "ERROR", "body": event,
        "name": event, "attrs": {"event": event}, "tid": 0, "sid": 0, "tf": 0,
        "res": {"service.name": "picky-test"},
    }  # fmt: skip
    doc.update(fields)
    return json.dumps(doc).encode() + b"\n"


def _plant_spool(directory: Path, bad: dict[str, Any]) -> list[str]:
    """A spool (another process's) of good records around one that is JSON but not a
    record; the good records' names."""
    directory.mkdir(mode=0o700)
    good = ["g0", "g1", "g2", "g3"]
    path = directory / "spool.jsonl"
    path.write_bytes(
        _spool_line("g0") + _spool_line("bad", **bad) + b"".join(map(_spool_line, good[1:]))
    )
    os.chmod(path, 0o600)
    return good


NOT_RECORDS = [
    {"ts": "2026-12-04T13:20:22Z"},  # another version's time
    {"ots": -1},
    {"ts": 1 << 64},
    {"tid": 1 << 130},
    {"sid": "abc"},
    {"tf": 1.5},
    {"st": 17},
    {"name": {"x": 1}},
    {"attrs": [1, 2]},
    {"res": "svc"},
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("bad", NOT_RECORDS)
def test_spool_line_that_is_not_a_record(
    picky_sink: Any, tmp_path: Path, protocol: str, bad: dict[str, Any]
) -> None:
    """A spool line that is JSON but not a record does not strand the spool: every other
    record is replayed, the line is counted and reported as a ``spool_corrupt`` drop, and
    the spool is emptied."""
    good = _plant_spool(tmp_path / "spool", bad)
    picky, sink, reports = picky_sink(protocol)
    assert sink.force_flush(10.0)
    stats = sink.stats()
    sink.shutdown(2.0)
    drops = [f for name, _, f in reports.calls if name == "obs_records_dropped"]
    assert (sorted(good), 1, {"ERROR": 1}) == (
        sorted(picky.events()),
        stats["spool_corrupt"],
        stats["dropped_by_reason"].get("spool_corrupt"),
    )
    assert [("spool_corrupt", 1)] == [(d["reason"], d["count"]) for d in drops]
    assert [] == sorted(p.name for p in (tmp_path / "spool").glob("spool*.jsonl"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unencodable_record_is_narrowed_and_counted(
    picky_sink: Any, tmp_path: Path, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The encoder failing on a record (the spool line check switched off here) is a
    permanent answer for that record alone: narrowed down, counted ``rejected``, and the
    rest delivered. It used to count as the collector being down, retried forever."""
    monkeypatch.setattr("obs.otel.records._check_spooled", lambda doc: None)
    good = _plant_spool(tmp_path / "spool", {"ts": "2026-12-04T13:20:22Z"})
    picky, sink, _ = picky_sink(protocol)
    assert sink.force_flush(10.0)
    assert (sorted(good), {"ERROR": 1}) == (sorted(picky.events()), rejected(sink))
