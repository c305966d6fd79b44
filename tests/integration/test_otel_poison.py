"""A record the collector fails on with a server error (HTTP 500, gRPC INTERNAL/UNKNOWN:
a collector bug, a pipeline that panics on one value) while it takes every other record.

Such a record is narrowed down by halves and given up, counted ``rejected``, once the
collector took another part of the same request: it never holds the records behind it,
live or in the spool. Real SDK exporters, real loopback collector (test_otel_answers).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_otel_answers import Collector, _settings, _sink, _unaccounted, collector  # noqa: F401
from test_otel_rejections import ev

from obs.otel import ExportSink
from obs.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _fails_on_poison(to: Collector, code: grpc.StatusCode, status: int) -> None:
    to.http_answer = lambda names: (
        (status, [], b"panic: nil map") if any("poison" in n for n in names) else None
    )
    to.grpc_answer = lambda names: (
        (code, "panic: nil map", None) if any("poison" in n for n in names) else None
    )


@contextlib.contextmanager
def _running(to: Collector, base: Settings) -> Iterator[ExportSink]:
    """A sink exporting to ``to`` with ``base``: shut down, and the collector's
    scripted answers cleared, whatever the test body raised."""
    sink, _ = _sink(base)
    try:
        yield sink
    finally:
        sink.shutdown(2.0)
        to.http_answer = lambda names: None
        to.grpc_answer = lambda names: None


def _rejected(stats: dict[str, object]) -> int:
    total = 0
    for table in ("dropped_by_reason", "replay_dropped"):
        by_reason = stats.get(table) or {}
        assert isinstance(by_reason, dict)
        total += sum((by_reason.get("rejected") or {}).values())
    return total


@settings(max_examples=8)
@given(
    protocol=st.sampled_from(["grpc", "http/protobuf"]),
    code=st.sampled_from([grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN]),
    poisons=st.sets(st.integers(0, 7), max_size=3),
    batch=st.sampled_from([1, 3, 8]),
    spooled_first=st.booleans(),
)
@example(
    protocol="http/protobuf",
    code=grpc.StatusCode.INTERNAL,
    poisons={1},
    batch=8,
    spooled_first=False,
)
@example(protocol="grpc", code=grpc.StatusCode.INTERNAL, poisons={0}, batch=8, spooled_first=True)
# a request holding nothing but poison (the last batch, {6, 7}): no part of it is taken, so
# the collector looked down, the next records were written ahead to the spool behind the
# poison, and the replay failed on its head for ever (the spool stranded)
@example(
    protocol="grpc", code=grpc.StatusCode.INTERNAL, poisons={0, 6, 7}, batch=3, spooled_first=False
)
@example(
    protocol="http/protobuf",
    code=grpc.StatusCode.UNKNOWN,
    poisons={6, 7},
    batch=3,
    spooled_first=False,
)
def test_a_record_the_collector_fails_on_holds_nothing_behind_it(
    collector: Collector,  # noqa: F811 - the fixture
    tmp_path_factory: pytest.TempPathFactory,
    *,
    protocol: str,
    code: grpc.StatusCode,
    poisons: set[int],
    batch: int,
    spooled_first: bool,
) -> None:
    """Eight ERRORs, some of them poison (the collector answers 500 / INTERNAL / UNKNOWN
    to any request holding one), sent live or spooled first (the collector was down)
    and replayed: every other record arrives once, each poison is counted rejected, the
    spool ends empty and the counts add up. One poison stopped all delivery: its batch
    failed, was spooled, and the replay failed on it for ever, with every later record
    spooled behind it (44 of 44 records spooled, none delivered)."""
    spool = tmp_path_factory.mktemp("poison") / "spool"
    tag = f"p{time.monotonic_ns()}"
    names = [f"{tag}-{'poison' if i in poisons else 'ok'}{i}" for i in range(8)]
    base = dataclasses.replace(
        _settings(spool, collector.endpoint(protocol), protocol),
        blrp_max_export_batch_size=batch,
    )
    if spooled_first:  # written while the collector was down
        down, _ = _sink(dataclasses.replace(base, otlp_endpoint="http://127.0.0.1:9"))
        for name in names:
            down(None, "error", ev(name))
        down.shutdown(2.0)
    _fails_on_poison(collector, code, 500)
    with _running(collector, base) as sink:
        if not spooled_first:
            for name in names:
                sink(None, "error", ev(name))
        good = [n for n in names if "poison" not in n]
        end = time.monotonic() + 20.0
        while time.monotonic() < end and not set(good) <= set(collector.events()):
            sink.force_flush(2.0)
        # the application logs on: the collector takes a request after the last poison
        # failed alone (until then it may as well be failing on everything)
        good.append(f"{tag}-after")
        sink(None, "error", ev(good[-1]))
        while time.monotonic() < end and (
            sink.stats()["in_flight"] or any(p.stat().st_size for p in spool.rglob("spool*.json*"))
        ):
            sink.force_flush(2.0)
    stats = sink.stats()
    got = [e for e in collector.events() if e.startswith(tag)]
    assert (sorted(got), len(poisons), 0, False) == (
        sorted(good),
        _rejected(stats),
        _unaccounted(stats),
        any(p.stat().st_size for p in spool.rglob("spool*.json*")),
    )


@settings(max_examples=6)
@given(
    protocol=st.sampled_from(["grpc", "http/protobuf"]),
    code=st.sampled_from([grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN]),
    failing=st.integers(1, 12),
    batch=st.sampled_from([1, 3, 8]),
)
def test_a_collector_failing_on_everything_loses_nothing(
    collector: Collector,  # noqa: F811 - the fixture
    tmp_path_factory: pytest.TempPathFactory,
    *,
    protocol: str,
    code: grpc.StatusCode,
    failing: int,
    batch: int,
) -> None:
    """A collector answering 500 / INTERNAL / UNKNOWN to its first ``failing`` requests,
    whatever they hold, then taking everything: no record is given up (nothing was taken
    while they failed alone), every ERROR arrives once."""
    spool = tmp_path_factory.mktemp("broken") / "spool"
    tag = f"b{time.monotonic_ns()}"
    names = [f"{tag}-{i}" for i in range(8)]
    left = [failing]

    def answer(names: list[str]) -> tuple[int, list[tuple[str, str]], bytes] | None:
        if left[0] <= 0:
            return None
        left[0] -= 1
        return 500, [], b"internal error"

    collector.http_answer = answer
    collector.grpc_answer = lambda names: None if answer(names) is None else (code, "x", None)
    base = dataclasses.replace(
        _settings(spool, collector.endpoint(protocol), protocol),
        blrp_max_export_batch_size=batch,
    )
    with _running(collector, base) as sink:
        for name in names:
            sink(None, "error", ev(name))
        end = time.monotonic() + 20.0
        while time.monotonic() < end and not set(names) <= set(collector.events()):
            sink.force_flush(2.0)
    stats = sink.stats()
    got = [e for e in collector.events() if e.startswith(tag)]
    assert (sorted(got), 0, 0) == (sorted(names), _rejected(stats), _unaccounted(stats))


@settings(max_examples=2)
@given(protocol=st.sampled_from(["grpc", "http/protobuf"]), failing=st.integers(1, 3))
@example(protocol="http/protobuf", failing=3)
@example(protocol="grpc", failing=1)
def test_shutdown_during_second_tries_spools_exactly_what_was_not_taken(
    collector: Collector,  # noqa: F811 - the fixture
    tmp_path_factory: pytest.TempPathFactory,
    *,
    protocol: str,
    failing: int,
) -> None:
    """Records fail alone, the collector takes the one after them, then stalls on their
    second tries past shutdown's deadline: shutdown spools each record the collector did
    not take (and none it took; a second try cut short is no answer: none is given up),
    and the counts add up. Shutdown spooled the batch past how many were handled, as if
    those were its first: over HTTP the first record failing alone was lost without a
    count and the record taken was spooled to be sent again; over gRPC shutdown's
    interrupt counted the record being tried again rejected."""
    spool = tmp_path_factory.mktemp("abandon") / "spool"
    tag = f"a{time.monotonic_ns()}"
    names = [f"{tag}-poison{i}" for i in range(failing)] + [f"{tag}-ok3"]
    release = threading.Event()
    up = [False]

    def answer(got: list[str]) -> bool:
        if not any("poison" in n for n in got):
            up[0] = True
            return False
        if up[0]:
            release.wait(10.0)
        return True

    collector.http_answer = lambda got: (500, [], b"panic") if answer(got) else None
    collector.grpc_answer = lambda got: (
        (grpc.StatusCode.INTERNAL, "panic", None) if answer(got) else None
    )
    base = dataclasses.replace(
        _settings(spool, collector.endpoint(protocol), protocol, timeout=8.0),
        blrp_max_export_batch_size=len(names),
        shutdown_timeout=1.0,
    )
    try:
        with _running(collector, base) as sink:
            for name in names:
                sink(None, "error", ev(name))
            end = time.monotonic() + 10.0
            while time.monotonic() < end and f"{tag}-ok3" not in collector.events():
                time.sleep(0.02)
            time.sleep(0.2)  # a second try is under way
    finally:
        release.set()
    stats = sink.stats()
    spooled = [
        json.loads(line).get("body")
        for p in spool.rglob("spool*.json*")
        for line in p.read_text().splitlines()
    ]
    got = [e for e in collector.events() if e.startswith(tag)]
    assert (got, _unaccounted(stats)) == ([f"{tag}-ok3"], 0)
    assert (sorted(b for b in spooled if str(b).startswith(tag)), _rejected(stats)) == (
        sorted(names[:failing]),
        0,
    )
