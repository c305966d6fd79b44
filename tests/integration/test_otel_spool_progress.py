"""A replay whose progress the disk will not take (full, read-only, a name in the way):
the records it delivered are not sent again, and the rest of the spool is not stranded.
Real sink, real loopback collector (test_otel_answers), a real file system obstacle.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_otel_answers import Collector, _settings, _sink, collector  # noqa: F401
from test_otel_rejections import _spool_line

from obs._spool import Spool

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_replay_progress_the_disk_refuses_is_kept_in_memory(
    collector: Collector,  # noqa: F811 - the fixture
    tmp_path: Path,
    protocol: str,
) -> None:
    """The replay cannot record its offset (a directory stands where its temporary file
    goes, as a full or read-only disk refuses it): every spooled record reaches the
    collector once, the spool is emptied and the failure reported (``otel_spool``). The
    replay raised after its first batch and started over from the recorded offset: that
    batch was sent again every few seconds, and the records behind it never."""
    directory = tmp_path / "spool"
    directory.mkdir(mode=0o700)
    tag = f"p{time.monotonic_ns()}"
    names = [f"{tag}-{i}" for i in range(12)]
    path = directory / "spool.jsonl"
    path.write_bytes(b"".join(_spool_line(name) for name in names))
    os.chmod(path, 0o600)
    (directory / f"spool.replay.offset.{os.getpid()}.tmp").mkdir()
    settings = dataclasses.replace(
        _settings(directory, collector.endpoint(protocol), protocol),
        blrp_max_export_batch_size=4,
    )
    sink, reports = _sink(settings)
    try:
        flushed = sink.force_flush(20.0)
    finally:
        sink.shutdown(2.0)
    got = [name for name in collector.events() if name.startswith(tag)]
    assert (True, names) == (flushed, got)
    assert not Spool(str(directory), 1 << 20).pending()
    assert any(
        name == "obs_internal_error" and fields.get("where") == "otel_spool"
        for name, _, fields in reports.calls
    ), reports.calls


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_replay_that_cannot_run_makes_flush_false(
    collector: Collector,  # noqa: F811 - the fixture
    tmp_path: Path,
    protocol: str,
) -> None:
    """The spool holds records and no replay can run (``replay.lock`` is a directory:
    every replay raises opening it): ``force_flush`` says False, not that everything was
    delivered, and the failure is reported (``otel_replay``). It said True: a flush
    whose replay raised counted as one that had nothing left to deliver."""
    directory = tmp_path / "spool"
    directory.mkdir(mode=0o700)
    path = directory / "spool.jsonl"
    path.write_bytes(_spool_line(f"q{time.monotonic_ns()}"))
    os.chmod(path, 0o600)
    (directory / "replay.lock").mkdir()
    sink, reports = _sink(_settings(directory, collector.endpoint(protocol), protocol))
    try:
        flushed = sink.force_flush(5.0)
    finally:
        sink.shutdown(2.0)
    assert (False, True) == (flushed, Spool(str(directory), 1 << 20).pending())
    assert any(
        name == "obs_internal_error" and fields.get("where") == "otel_replay"
        for name, _, fields in reports.calls
    ), reports.calls


@settings(max_examples=4, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    error=st.sampled_from(
        [OSError(30, "Read-only file system"), PermissionError(13, "denied"), RuntimeError("x")]
    ),
    protocol=st.sampled_from(["http/protobuf", "grpc"]),
)
def test_any_replay_failure_makes_flush_false_until_it_passes(
    collector: Collector,  # noqa: F811 - the fixture
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    protocol: str,
) -> None:
    """Whatever a replay raises, a flush says False while the spool holds records, and
    the next flush once the obstacle is gone delivers them and says True."""
    directory = tmp_path_factory.mktemp("replay_fails") / "spool"
    directory.mkdir(mode=0o700)
    name = f"f{time.monotonic_ns()}"
    path = directory / "spool.jsonl"
    path.write_bytes(_spool_line(name))
    os.chmod(path, 0o600)
    real = Spool.replay

    def failing(self: Spool, *args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(Spool, "replay", failing)
    sink, _ = _sink(_settings(directory, collector.endpoint(protocol), protocol))
    try:
        blocked = sink.force_flush(5.0)
        monkeypatch.setattr(Spool, "replay", real)
        delivered = False
        end = time.monotonic() + 30.0
        while not delivered and time.monotonic() < end:
            delivered = sink.force_flush(5.0) and name in collector.events()
    finally:
        monkeypatch.setattr(Spool, "replay", real)
        sink.shutdown(2.0)
    assert (False, True) == (blocked, delivered)
