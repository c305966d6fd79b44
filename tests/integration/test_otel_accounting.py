"""Delivery accounting against real loopback collectors: the counts add up whatever
happens to a record after it is spooled, each record is sent once for each answer the
collector gives, a collector's "not before" is honoured, and each kind of failure reaches
the operator.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from test_otel_answers import Collector, _deliver_spool, _log, _settings, _sink, _unaccounted
from test_otel_rejections import ev

from obs._otlp_decode import decode_request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    made = Collector()
    yield made
    made.stop()


def _reset(collector: Collector) -> None:
    collector.http_answer = lambda names: None
    collector.grpc_answer = lambda names: None


def _refuse(collector: Collector, protocol: str, *, permanent: bool, delay: int | None) -> None:
    """Every request refused: for good (400 / INVALID_ARGUMENT) or for now (503 /
    UNAVAILABLE), with a Retry-After / RetryInfo of ``delay`` seconds when not None."""
    status, code = (400, grpc.StatusCode.INVALID_ARGUMENT) if permanent else (503, None)
    code = code or grpc.StatusCode.UNAVAILABLE
    headers = [] if delay is None else [("Retry-After", str(delay))]
    body = status_pb2.Status(code=3, message="refused by the test").SerializeToString()
    collector.http_answer = lambda names: (status, headers, body)
    collector.grpc_answer = lambda names: (code, "refused by the test", delay)


def _drops(reports: Any, reason: str) -> int:
    return sum(
        int(f["count"])
        for name, _, f in reports.calls
        if name == "obs_records_dropped" and f.get("reason") == reason
    )


# -- 2. an informational (1xx) answer before the final one ----------------------------------


class _Informational(BaseHTTPRequestHandler):
    """Stores every request and answers it 200, after ``server.hints`` 1xx answers
    (103 Early Hints and the like), on a keep-alive connection."""

    server: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
        with self.server.lock:
            self.server.events.extend(str(r["event_name"]) for r in decode_request(request, "http"))
        for status in self.server.hints:
            self.wfile.write(f"HTTP/1.1 {status} Informational\r\nLink: </x>\r\n\r\n".encode())
        self.wfile.flush()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()


@settings(max_examples=6)
@given(
    hints=st.lists(st.sampled_from([102, 103, 104, 150, 199]), min_size=1, max_size=4),
    batches=st.integers(1, 3),
)
def test_informational_answer_is_not_the_answer(
    tmp_path_factory: pytest.TempPathFactory, hints: list[int], batches: int
) -> None:
    """A collector (or a proxy before it) that sends 1xx answers (103 Early Hints) before
    its 200: every record is stored once and counted exported, none spooled. The 1xx was
    read as the final answer, a failure: the batch was spooled and sent again (stored
    twice), and the 200 left on the connection was read as the next request's answer."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Informational)
    server.daemon_threads = True
    server.events, server.lock, server.hints = [], threading.Lock(), hints  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    spool = tmp_path_factory.mktemp("informational") / "spool"
    sink, _ = _sink(_settings(spool, endpoint, "http/protobuf", timeout=5.0))
    sent: list[str] = []
    try:
        for b in range(batches):
            sent += _log(sink, f"h{b}-{time.monotonic_ns()}", n=2)
            assert sink.force_flush(10.0)
        stats = sink.stats()
    finally:
        sink.shutdown(2.0)
        server.shutdown()
        server.server_close()
    with server.lock:  # type: ignore[attr-defined]
        stored = [e for e in server.events if "-e" in e]  # type: ignore[attr-defined]
    assert (sorted(sent), 0, 0) == (sorted(stored), stats["spooled"], _unaccounted(stats))


# -- 1. spooled, then replayed and refused for good: counted once ---------------------------


@settings(max_examples=4)
@given(protocol=st.sampled_from(["grpc", "http/protobuf"]), n=st.integers(1, 6))
def test_spooled_then_rejected_on_replay_adds_up(
    collector: Collector, tmp_path_factory: pytest.TempPathFactory, protocol: str, n: int
) -> None:
    """Records spooled while the collector is down and rejected for good when they are
    replayed: ``obs.delivery()`` still adds up (sent = acknowledged + spooled + dropped +
    queued + in flight) and the rejection reaches the operator as an ``obs_records_dropped``
    of reason ``rejected``. The replayed record was counted ``spooled`` and again
    ``dropped``: the counts no longer added up."""
    spool = tmp_path_factory.mktemp("replay_rejected") / "spool"
    _refuse(collector, protocol, permanent=False, delay=None)
    sink, reports = _sink(_settings(spool, collector.endpoint(protocol), protocol))
    try:
        errors = _log(sink, f"p{time.monotonic_ns()}", n=n)
        assert not sink.force_flush(3.0)
        _refuse(collector, protocol, permanent=True, delay=None)
        end = time.monotonic() + 30.0
        while sink.stats()["replayed"] + sink.stats()["spool_corrupt"] < len(errors):
            assert time.monotonic() < end, sink.stats()
            sink.force_flush(2.0)
        stats = sink.stats()
    finally:
        sink.shutdown(2.0)
        _reset(collector)
    assert (0, len(errors), len(errors)) == (
        _unaccounted(stats),
        stats["spooled"],
        sum(stats["dropped_by_reason"].get("rejected", {}).values()),
    )
    assert {"ERROR": len(errors)} == stats["replay_dropped"]
    assert _drops(reports, "rejected") == len(errors)
    assert not set(errors) & set(collector.events())


# -- 3. a long Retry-After / RetryInfo is honoured ------------------------------------------


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_long_retry_after_is_honoured(collector: Collector, tmp_path: Path, protocol: str) -> None:
    """A 503 / UNAVAILABLE asking for 120 s: obs sends nothing more to the collector before
    then (its own backoff, 0.5 s doubling to 5 s, asked again within a second), a flush
    returns False without sending or waiting out its timeout, shutdown spools the ERRORs
    within its budget, and the next process delivers them. The collector's delay was
    ignored past the exporter's own request: obs asked again on its own schedule, and a
    flush asked at once."""
    _refuse(collector, protocol, permanent=False, delay=120)
    requests: list[int] = []
    http_refuse, grpc_refuse = collector.http_answer, collector.grpc_answer

    def counted(refuse: Any) -> Any:
        def answer(names: list[str]) -> Any:
            requests.append(len(names))
            return refuse(names)

        return answer

    collector.http_answer, collector.grpc_answer = counted(http_refuse), counted(grpc_refuse)
    sink, _ = _sink(_settings(tmp_path / "spool", collector.endpoint(protocol), protocol))
    try:
        errors = _log(sink, f"ra{time.monotonic_ns()}", n=3)
        assert not sink.force_flush(3.0)
        first = len(requests)
        for i in range(8):  # 4 s: obs' own backoff asked again 3 times or more in this
            errors += _log(sink, f"rb{i}-{time.monotonic_ns()}", n=1)
            assert not sink.force_flush(5.0)
            time.sleep(0.5)
        later = len(requests)
        assert not sink.shutdown(3.0)
        stats = sink.stats()
    finally:
        sink.shutdown(2.0)
        _reset(collector)
    assert (first, 0, len(errors)) == (later, _unaccounted(stats), stats["spooled"])
    assert first >= 1
    assert not set(errors) & set(collector.events())
    _deliver_spool(tmp_path / "spool", collector, protocol, errors)
    assert set(errors) <= set(collector.events())


def _http_date(seconds: int) -> str:
    from email.utils import formatdate

    return formatdate(time.time() + seconds, usegmt=True)


_LATER = st.one_of(
    st.integers(min_value=30, max_value=10**12).map(str),
    st.floats(min_value=30.0, max_value=1e300).map(repr),
    st.integers(min_value=60, max_value=86_400).map(_http_date),
)


@settings(max_examples=6)
@given(status=st.sampled_from([429, 500, 502, 503, 504]), later=_LATER)
def test_flush_sends_nothing_before_retry_after(
    collector: Collector, tmp_path_factory: pytest.TempPathFactory, status: int, later: str
) -> None:
    """Any retryable status with a Retry-After past the flush's deadline (seconds, a float,
    an HTTP-date): the next flush sends nothing and returns False, the records stay
    spooled (WARNING+) or counted. A flush skipped every backoff and asked at once."""
    spool = tmp_path_factory.mktemp("later") / "spool"
    requests: list[int] = []

    def answer(names: list[str]) -> Any:
        requests.append(len(names))
        return (status, [("Retry-After", later)], b"")

    collector.http_answer = answer
    sink, _ = _sink(_settings(spool, collector.endpoint("http/protobuf"), "http/protobuf"))
    try:
        _log(sink, f"l{time.monotonic_ns()}", n=1)
        assert not sink.force_flush(3.0)
        first = len(requests)
        _log(sink, f"m{time.monotonic_ns()}", n=1)
        flushed = sink.force_flush(2.0)
        stats = sink.stats()
    finally:
        sink.shutdown(2.0)
        _reset(collector)
    assert (False, first, 0) == (flushed, len(requests), _unaccounted(stats))
    assert first >= 1


# -- 4. each kind of failure reaches the operator -------------------------------------------


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_each_kind_of_failure_is_reported(
    collector: Collector, tmp_path: Path, protocol: str
) -> None:
    """A collector that is first unavailable, then back, then refusing records for good,
    then refusing the token: each distinct failure is reported once as
    ``obs_internal_error`` naming its answer; repeats of one are not. Only the first failed
    export of the sink's life was ever reported, and the first rejection."""
    endpoint = collector.endpoint(protocol)
    sink, reports = _sink(_settings(tmp_path / "spool", endpoint, protocol, timeout=5.0))
    try:
        _refuse(collector, protocol, permanent=False, delay=None)
        for _ in range(3):
            _log(sink, f"u{time.monotonic_ns()}", n=1)
            sink.force_flush(2.0)
        _reset(collector)
        assert sink.force_flush(20.0)
        _refuse(collector, protocol, permanent=True, delay=None)
        for _ in range(2):
            _log(sink, f"x{time.monotonic_ns()}", n=1)
            sink.force_flush(5.0)
        collector.http_answer = lambda names: (401, [], b"who are you")
        collector.grpc_answer = lambda names: (grpc.StatusCode.UNAUTHENTICATED, "who?", None)
        for _ in range(3):
            _log(sink, f"w{time.monotonic_ns()}", n=1)
            sink.force_flush(2.0)
    finally:
        sink.shutdown(2.0)
        _reset(collector)
    got = [
        f"{f['error_type']}: {f['error_message']}"
        for name, _, f in reports.calls
        if name == "obs_internal_error"
    ]
    words = ("UNAVAILABLE", "INVALID_ARGUMENT", "UNAUTHENTICATED")
    if protocol != "grpc":
        words = ("HTTP 503", "HTTP 400", "HTTP 401")
    assert [1, 1, 1] == [sum(word in g for g in got) for word in words], got


# -- 5. records given to a closed sink are sent too ----------------------------------------


@settings(max_examples=4)
@given(
    levels=st.lists(st.sampled_from(["info", "warning", "error"]), min_size=1, max_size=6),
    protocol=st.sampled_from(["grpc", "http/protobuf"]),
)
def test_records_after_shutdown_add_up(
    collector: Collector, tmp_path_factory: pytest.TempPathFactory, levels: list[str], protocol: str
) -> None:
    """Records that reach the sink after its shutdown (obs' own last reports do: the drop
    counts shutdown makes are logged once it is closed) are spooled or counted, and sent:
    the counts add up. They were spooled or dropped without being counted as sent."""
    spool = tmp_path_factory.mktemp("after") / "spool"
    _refuse(collector, protocol, permanent=False, delay=None)
    sink, _ = _sink(_settings(spool, collector.endpoint(protocol), protocol))
    try:
        _log(sink, f"b{time.monotonic_ns()}", n=2)
        sink.shutdown(2.0)
        before = sink.stats()
        for i, level in enumerate(levels):
            number = {"info": 20, "warning": 30, "error": 40}[level]
            sink(None, level, ev(f"late{i}", number))
        after = sink.stats()
    finally:
        sink.shutdown(2.0)
        _reset(collector)
    assert (0, 0, len(levels)) == (
        _unaccounted(before),
        _unaccounted(after),
        after["enqueued"] - before["enqueued"],
    )


# -- 6. the counts add up at every moment, obs' own reports included ---------------------


class _Snapshots:
    """The runtime's report stand-in that reads the sink's counts at every report (obs
    reports from its export thread, between a spool write and what follows it)."""

    def __init__(self) -> None:
        self.sink: Any = None
        self.seen: list[int] = []

    def __call__(self, event: Any, level: int | None = None, *, body: str | None = None) -> None:
        if self.sink is not None:
            self.seen.append(_unaccounted(self.sink.stats()))


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_counts_add_up_when_obs_reports(
    collector: Collector, tmp_path: Path, protocol: str
) -> None:
    """Whenever obs reports a failure (from the export thread, right after spooling the
    batch that failed), the counts add up. The spooled batch was counted spooled and
    still in flight until the report returned: a report that blocks (a full stderr pipe)
    showed ``obs.delivery()`` not adding up for as long as it blocked."""
    from obs.otel import ExportSink
    from obs.rank import RankResolver

    _refuse(collector, protocol, permanent=False, delay=None)
    snapshots = _Snapshots()
    settings_ = _settings(tmp_path / "spool", collector.endpoint(protocol), protocol)
    sink = ExportSink(settings_, RankResolver(env={}, host="h"), snapshots)
    snapshots.sink = sink
    try:
        for _ in range(3):
            _log(sink, f"c{time.monotonic_ns()}", n=2)
            sink.force_flush(1.0)
    finally:
        sink.shutdown(2.0)
        _reset(collector)
    assert snapshots.seen
    assert {0} == set(snapshots.seen), snapshots.seen


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_counts_add_up_while_a_rejection_is_narrowed(
    collector: Collector, tmp_path: Path, protocol: str
) -> None:
    """A batch holding a record the collector refuses for good is narrowed down by halves;
    while the request after that rejection stalls, every record sent is acknowledged,
    spooled, dropped, queued or in flight once. The rejected record was counted
    ``rejected`` and still in flight until the whole batch was done."""
    release, got, refused = threading.Event(), threading.Event(), threading.Event()
    body = status_pb2.Status(code=3, message="poisoned").SerializeToString()

    def http(names: list[str]) -> Any:
        if any("poison" in n for n in names):
            if len(names) == 1:  # narrowed down to it: given up once this is answered
                refused.set()
            return (400, [], body)
        if refused.is_set():
            got.set()
            release.wait(60.0)
        return None

    def grpc_(names: list[str]) -> Any:
        answer = http(names)
        return None if answer is None else (grpc.StatusCode.INVALID_ARGUMENT, "poisoned", None)

    collector.http_answer, collector.grpc_answer = http, grpc_
    sink, _ = _sink(_settings(tmp_path / "spool", collector.endpoint(protocol), protocol, 30.0))
    try:
        names = [f"n{i}-{time.monotonic_ns()}" for i in range(8)]
        for i, name in enumerate(names):
            sink(None, "error", ev(name if i != 2 else f"poison-{name}"))
        assert got.wait(30.0)
        stalled = sink.stats()
        release.set()
        sink.force_flush(30.0)
        after = sink.stats()
    finally:
        release.set()
        sink.shutdown(2.0)
        _reset(collector)
    assert (0, 1, 0, {"ERROR": 1}) == (
        _unaccounted(stalled),
        sum(stalled["dropped_by_reason"].get("rejected", {}).values()),
        _unaccounted(after),
        after["dropped_by_reason"].get("rejected"),
    )


# -- 7. a spool write that fails part way -----------------------------------------------

_FULL_CHILD = r"""
import json, logging, resource, signal, socket, sys
sys.path.insert(0, sys.argv[2])
from test_otel_rejections import Reports, ev
from obs.otel import ExportSink
from obs.rank import RankResolver
from obs.settings import Settings

spool = sys.argv[1]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}"
settings = Settings(logs_exporter="otlp", otlp_endpoint=dead, otlp_timeout=0.5,
                    spool_dir=spool, blrp_schedule_delay_ms=20.0, shutdown_timeout=3.0)
sink = ExportSink(settings, RankResolver(env={}, host="h"), Reports())
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), resource.RLIM_INFINITY))
for i in range(40):
    sink(None, "error", ev(f"full{i}", payload="x" * 200))
sink.shutdown(3.0)
print(json.dumps(sink.stats()))
"""


@settings(max_examples=4)
@given(limit=st.integers(min_value=600, max_value=6000))
def test_spool_write_failing_part_way_counts_what_was_written(
    tmp_path_factory: pytest.TempPathFactory, limit: int
) -> None:
    """The spool file reaches its size limit (a full disk, RLIMIT_FSIZE) part way through a
    batch: the records written whole count ``spooled`` (they are replayed), only the rest
    ``spool_error``. Every record of the batch was counted lost although most of it was in
    the spool, replayed and delivered later."""
    spool = tmp_path_factory.mktemp("full") / "spool"
    here = str(Path(__file__).resolve().parent)
    child = subprocess.run(
        [sys.executable, "-c", _FULL_CHILD, str(spool), here, str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    stats = json.loads(child.stdout.splitlines()[-1])
    whole = [  # lines ended by their newline (a replay reads no other)
        line
        for path in spool.glob("spool*.jsonl")
        for line in path.read_bytes().split(b"\n")[:-1]
        if line.startswith(b"{") and line.endswith(b"}")
    ]
    lost = stats["dropped_by_reason"].get("spool_error", {}).get("ERROR", 0)
    assert (len(whole), 40) == (stats["spooled"], stats["spooled"] + lost)


# -- 8. shutdown takes over a batch the collector took part of --------------------------


def test_shutdown_spools_only_what_a_stuck_batch_did_not_deliver(
    collector: Collector, tmp_path: Path
) -> None:
    """A batch split in halves (HTTP 413) whose first half the collector stores and whose
    second half's request never ends: shutdown takes the batch over and spools only the
    second half; the first counts exported. The whole batch was spooled (the first half
    sent again by the next process: stored twice) and none of it counted exported."""
    release = threading.Event()
    stored: list[list[str]] = []

    def answer(names: list[str]) -> Any:
        if len(names) > 4:
            return (413, [], b"too large")
        if stored:
            release.wait(60.0)  # the second half: no answer before shutdown gives up
            return (503, [], b"")
        stored.append(names)
        return None

    collector.http_answer = answer
    base = _settings(tmp_path / "spool", collector.endpoint("http/protobuf"), "http/protobuf", 30.0)
    settings_ = dataclasses.replace(
        base, blrp_schedule_delay_ms=5000.0, blrp_max_export_batch_size=8
    )
    sink, _ = _sink(settings_)
    names = [f"half{i}-{time.monotonic_ns()}" for i in range(8)]
    try:
        for name in names:
            sink(None, "error", ev(name))
        end = time.monotonic() + 30.0
        while not stored and time.monotonic() < end:
            time.sleep(0.01)
        assert not sink.shutdown(2.0)
        stats = sink.stats()
    finally:
        release.set()
        _reset(collector)
    spooled = [
        json.loads(line)["name"]
        for path in (tmp_path / "spool").glob("spool*.jsonl")
        for line in path.read_text().splitlines()
        if line.startswith("{")
    ]
    assert (names[:4], names[4:]) == (stored[0], sorted(spooled, key=names.index))
    assert (4, 4, 0) == (stats["exported"], stats["spooled"], _unaccounted(stats))
