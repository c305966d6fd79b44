"""Every sink call is bounded in time, however fast other threads log.

CI found a hang (issue 15, third round): four threads logged to ``OBS_FILE`` while the main
thread reconfigured, and ``configure()`` never returned. The thread that held a sink wrote
what others queued "until the queue was empty", and with producers faster than the writes
it never was: that call, and the flush inside ``configure()``, ran forever. A caller now
writes at most :data:`obs._output.HOLDER_ROUNDS` rounds for others and hands the rest to the
sink's writer thread. The first two tests failed (timed out) on the commit before.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from _streams import HeldStream, first_writer_held
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import obs
from obs._config import STATE
from obs._output import HOLDER_ROUNDS, Combiner

#: How long the producers keep the sink busy.
RUN_SECONDS = 1.5
#: The most batches one call may write: its own line, then HOLDER_ROUNDS rounds for others
#: (counted, not timed: the old main's holder wrote hundreds, for the whole run).
MOST_BATCHES = 1 + HOLDER_ROUNDS


class _Sink:
    """A slow sink: each batch takes ``pause`` seconds; every ``fail_every``-th fails."""

    def __init__(self, pause: float, fail_every: int = 0) -> None:
        self.pause = pause
        self.fail_every = fail_every
        self.batches = 0
        self.written: list[bytes] = []
        self.failed: list[bytes] = []
        self.lock = threading.Lock()  # the test's own bookkeeping only
        self.mine = threading.local()  # batches written by this thread in its current call

    def emit(self, lines: list[bytes]) -> int:
        self.mine.n = getattr(self.mine, "n", 0) + 1
        time.sleep(self.pause)
        with self.lock:
            self.batches += 1
            if self.fail_every and self.batches % self.fail_every == 0:
                self.failed.extend(lines)
                n = len(lines)
                lines.clear()
                return n
            self.written.extend(lines)
        lines.clear()
        return 0

    def settled(self, expected: int, timeout: float = 10.0) -> bool:
        """True once ``expected`` lines were written or failed (no call needed: the writer
        thread does it)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if len(self.written) + len(self.failed) >= expected:
                    return True
            time.sleep(0.01)
        return False


def _produce(
    sink: _Sink, combiner: Combiner[bytes], producers: int, seconds: float
) -> tuple[list[int], list[int], list[int], Callable[[], None]]:
    """``producers`` threads submitting as fast as they can for ``seconds``; returns the
    most batches each thread wrote in one call, its count of lines and of reported
    failures, and a join."""
    most = [0] * producers
    counts = [0] * producers
    reported = [0] * producers
    stop = time.monotonic() + seconds

    def work(t: int) -> None:
        while time.monotonic() < stop:
            sink.mine.n = 0
            reported[t] += combiner.submit(f"{t}:{counts[t]}\n".encode())
            most[t] = max(most[t], sink.mine.n)
            counts[t] += 1

    pool = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(producers)]
    for th in pool:
        th.start()

    def join() -> None:
        for th in pool:
            th.join(seconds + 30)

    return most, counts, reported, join


def test_no_producer_stays_the_writer_for_the_others() -> None:
    """Four threads log into a sink slower than they are: no call writes more than a few
    batches (on the old main one thread wrote for the others for the whole run)."""
    sink = _Sink(pause=0.0005)
    most, counts, _, join = _produce(sink, Combiner(sink.emit), 4, RUN_SECONDS)
    join()
    assert max(most) <= MOST_BATCHES, most
    assert sink.settled(sum(counts))


@pytest.mark.parametrize("call", ["submit", "settle"])
def test_a_call_writes_a_bounded_number_of_rounds_for_others(call: str) -> None:
    """Another thread logs a line during every write this call makes, so the queue is never
    empty when it looks again: ``submit`` and ``settle`` (what ``flush()`` and
    ``configure()`` call) still return after a few rounds, and the writer thread writes the
    rest. On the old main both ran until the other thread stopped logging."""
    me = threading.current_thread()
    stop = time.monotonic() + RUN_SECONDS
    written: list[bytes] = []
    fed = [0]
    mine = [0]

    def emit(lines: list[bytes]) -> int:
        written.extend(lines)
        lines.clear()
        if threading.current_thread() is me and time.monotonic() < stop:
            mine[0] += 1
            other = threading.Thread(target=combiner.submit, args=(b"fed %d\n" % fed[0],))
            fed[0] += 1
            other.start()
            other.join()  # queued: this thread holds the lock
        return 0

    combiner: Combiner[bytes] = Combiner(emit)
    if call == "submit":
        combiner.submit(b"mine\n")
    else:
        combiner.queue.append(b"mine\n")
        combiner.settle(1.0)
    assert mine[0] <= MOST_BATCHES, f"{call} wrote {mine[0]} batches, for others"
    end = time.monotonic() + 10
    while len(written) < fed[0] + 1 and time.monotonic() < end:
        time.sleep(0.01)
    assert written == [b"mine\n"] + [b"fed %d\n" % i for i in range(fed[0])]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    producers=st.integers(1, 6),
    pause=st.sampled_from([0.0, 0.0002, 0.001, 0.003]),
    fail_every=st.sampled_from([0, 0, 5]),
)
def test_every_call_is_bounded_and_no_line_is_stranded(
    producers: int, pause: float, fail_every: int
) -> None:
    """Any number of producers, any sink speed, failing batches: no call writes more than
    its own line and HOLDER_ROUNDS rounds; after the producers stop, every line is written
    (or counted failed) exactly once without another call, in each thread's order; a flush
    then reports every failure."""
    sink = _Sink(pause, fail_every)
    combiner = Combiner(sink.emit)
    most, counts, reported, join = _produce(sink, combiner, producers, 0.5)
    join()
    assert max(most) <= MOST_BATCHES, most
    total = sum(counts)
    assert sink.settled(total), "lines stranded in the queue after the producers stopped"
    flushed, _ = combiner.settle(5.0)  # failures the writer thread saw reach the next caller
    expected = sorted(f"{t}:{i}\n".encode() for t in range(producers) for i in range(counts[t]))
    assert sorted(sink.written + sink.failed) == expected
    assert sum(reported) + flushed == len(sink.failed)
    for t in range(producers):
        mine = [int(x.split(b":")[1]) for x in sink.written if x.startswith(f"{t}:".encode())]
        assert mine == sorted(mine)


def test_reconfiguring_does_not_wait_for_a_sink_it_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """``configure()`` hands the same stream (and file) on to the new runtime: it does not
    flush them, so it never waits behind another thread's write there. On the old main it
    waited the flush timeout (1 s) for the held writer; under a flood of lines it wrote the
    whole queue of every other thread, on every reconfiguration. (Counted, not timed: no
    wait on the held sink's queue while configuring.)"""
    slow = HeldStream()
    log, first = first_writer_held(monkeypatch, slow)
    log.info("queued")  # behind the held write
    runtime = STATE.runtime
    assert runtime is not None
    held = runtime._output.stream
    assert held is not None
    waits: list[float] = []
    settle = Combiner.settle

    def spy(self: Combiner[Any], timeout: float, *, patient: bool = False) -> tuple[int, bool]:
        if self is held._combiner and timeout > 0:
            waits.append(timeout)
        return settle(self, timeout, patient=patient)

    monkeypatch.setattr(Combiner, "settle", spy)
    obs.configure(format="json", stream="stderr", stdlib_bridge=False, logs_exporter="none")
    still_held = first.is_alive()  # its write is still held
    monkeypatch.setattr(Combiner, "settle", settle)
    obs.get_logger("t").info("after")
    slow.release.set()
    first.join(10)
    obs.flush()
    assert ([], True) == (waits, still_held), "configure waited behind another thread's write"
    events = [json.loads(line)["event"] for line in slow.getvalue().splitlines()]
    assert events == ["first", "queued", "after"]
