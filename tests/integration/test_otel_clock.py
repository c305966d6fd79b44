"""A wall clock stepped back (an NTP step, a VM resumed) while a collector asks to be
retried: an export is still bounded by its timeout, on the monotonic clock.

The SDK's OTLP exporters keep their retry loop's deadline on ``time.time()``: stepped back
by an hour after an export began, the loop saw an hour left and slept its backoffs (or the
collector's ``Retry-After`` / ``RetryInfo``) in the export thread, so nothing was delivered
or spooled meanwhile. Real SDK exporters, real loopback collector (test_otel_answers);
only the exporter module's wall clock is stepped.
"""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.common import http as http_common
from opentelemetry.exporter.otlp.proto.grpc import exporter as grpc_common
from test_otel_answers import Collector, _deliver_spool, _log, _settings, _sink, collector  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class _SteppedClock:
    """``time.time()`` stepped back by ``back`` seconds after its first reading (the step
    happens just after the exporter computed its deadline), steady from then on."""

    def __init__(self, back: float) -> None:
        self.back = back
        self.read = 0

    def time(self) -> float:
        self.read += 1
        return time.time() - (self.back if self.read > 1 else 0.0)


def _until(done: Any, limit: float = 20.0) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end and not done():
        time.sleep(0.02)


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    protocol=st.sampled_from(["http/protobuf", "grpc"]),
    back=st.sampled_from([120.0, 3600.0, 86400.0 * 365]),
    wait=st.one_of(st.none(), st.integers(min_value=1, max_value=600)),
)
@example(protocol="http/protobuf", back=3600.0, wait=600)
@example(protocol="grpc", back=3600.0, wait=600)
@example(protocol="http/protobuf", back=3600.0, wait=None)
def test_a_clock_stepped_back_does_not_hold_the_export(  # noqa: PLR0917 - fixtures and draws
    collector: Collector,  # noqa: F811 - the fixture
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    protocol: str,
    back: float,
    wait: int | None,
) -> None:
    """The collector answers 503 / UNAVAILABLE (with a ``Retry-After`` / ``RetryInfo`` of
    ``wait`` seconds, or none) and the wall clock steps back ``back`` seconds as the export
    starts: the ERRORs are spooled within the request's budget (not after the SDK slept
    its backoffs: 31 s, or ``wait`` five times) and delivered once the collector is back,
    each once. The export thread slept in the SDK's retry loop: nothing was spooled until
    it woke."""
    clock = _SteppedClock(back)
    if protocol == "grpc":
        monkeypatch.setattr(grpc_common, "time", clock.time)
    else:
        monkeypatch.setattr(http_common, "time", clock)
    headers = [] if wait is None else [("Retry-After", str(wait))]
    collector.http_answer = lambda names: (503, headers, b"down")
    collector.grpc_answer = lambda names: (grpc.StatusCode.UNAVAILABLE, "down", wait)
    spool = tmp_path_factory.mktemp("clock") / "spool"
    sink, _ = _sink(_settings(spool, collector.endpoint(protocol), protocol))
    try:
        errors = _log(sink, f"k{time.monotonic_ns()}", n=3)
        sink.force_flush(3.0)
        _until(lambda: sink.stats()["spooled"] >= len(errors))
        spooled = sink.stats()["spooled"]
    finally:
        collector.http_answer = lambda names: None
        collector.grpc_answer = lambda names: None
        sink.shutdown(2.0)
    assert spooled == len(errors)
    _deliver_spool(spool, collector, protocol, errors)
    got = collector.events()
    assert [got.count(name) for name in errors] == [1] * len(errors)
