"""The sinks' write path: no caller waits on another thread's write, lines stay whole.

Issue 15 found that emitted lines from 32 threads cost up to 5x a single thread's: every line
took the stream's lock and threads convoyed on it. Lines are now queued and written by
whichever thread holds the lock. The first two tests failed on the commit before
(a caller waited for the slow write of another thread; a forked child hung on a lock its
parent's thread held); the Hypothesis tests cover every interleaving we can generate.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _streams import HeldStream, first_writer_held
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import obs
from obs import _combiner
from obs._output import Combiner, chunks

ROOT = Path(__file__).resolve().parents[1]
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_a_caller_never_waits_for_another_threads_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thread A is inside a slow write; the main thread's log call returns at once, and its
    line is written after A's, whole (on the old main it waited for A)."""
    slow = HeldStream()
    log, first = first_writer_held(monkeypatch, slow)
    second = threading.Thread(target=lambda: log.info("second", n=2))
    second.start()
    second.join(5)
    returned = not second.is_alive()
    slow.release.set()
    first.join(10)
    second.join(10)
    assert returned, "a caller waited for another thread's write"
    events = [json.loads(line)["event"] for line in slow.getvalue().splitlines()]
    assert ["first", "second"] == events


def test_flush_writes_what_other_threads_queued(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line queued behind another thread's slow write is written by the time
    ``obs.flush()`` returns (flush waits, bounded, for the writer; the call itself did not)."""
    slow = HeldStream()
    log, first = first_writer_held(monkeypatch, slow)
    log.info("queued")  # returns at once: the first thread is still writing
    threading.Timer(0.3, slow.release.set).start()
    obs.flush()
    events = [json.loads(line)["event"] for line in slow.getvalue().splitlines()]
    first.join(10)
    assert ["first", "queued"] == events


_FORK_CHILD = """
import os, sys, threading
import obs
from obs import _combiner, _output

obs.configure(format="json", stream="stderr", file=sys.argv[1], stdlib_bridge=False,
              logs_exporter="none")
log = obs.get_logger("fork")
log.info("before_fork")
runtime_file = obs._config.STATE.runtime._output.file
held = threading.Event()

def hold() -> None:  # a parent thread in the middle of a write when the process forks
    with _output._stream_combiner("stderr").lock, runtime_file._combiner.lock:
        held.set()
        threading.Event().wait(60)

threading.Thread(target=hold, daemon=True).start()
held.wait(10)
pid = os.fork()
if pid == 0:
    log.warning("in_child", pid=os.getpid())
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
os._exit(0)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX")
def test_a_forked_child_writes_though_a_parent_thread_held_the_sink(tmp_path: Path) -> None:
    """A child forked while another thread was writing gets fresh sinks: its line reaches
    the stream and the file (on the old main the child hung on the inherited lock)."""
    path = tmp_path / "fork.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", _FORK_CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert "0" == proc.stdout.strip(), proc.stderr[-2000:]
    stream_events = [json.loads(line)["event"] for line in proc.stderr.splitlines()]
    file_events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
    assert ["before_fork", "in_child"] == stream_events
    assert ["before_fork", "in_child"] == file_events


_LINE = st.binary(min_size=0, max_size=300).map(lambda b: b.replace(b"\n", b"") + b"\n")


@FEW
@given(st.lists(_LINE, max_size=60), st.integers(1, 2000))
def test_chunks_are_whole_lines_within_the_limit(lines: list[bytes], limit: int) -> None:
    """Chunks keep every byte in order, end at line ends, and stay within the limit unless
    one line alone is longer."""
    out = list(chunks(lines, limit))
    assert b"".join(lines) == b"".join(c for c, _ in out)
    assert len(lines) == sum(n for _, n in out)
    at = 0
    for chunk, n in out:
        assert chunk == b"".join(lines[at : at + n])
        assert len(chunk) <= limit or n == 1
        at += n


@FEW
@given(
    threads=st.integers(1, 12),
    per_thread=st.integers(1, 40),
    pauses=st.lists(st.sampled_from([0.0, 0.0, 0.0001, 0.001]), min_size=1, max_size=8),
    fail_every=st.sampled_from([0, 0, 3, 7]),
)
def test_every_line_is_written_once_in_order(
    threads: int, per_thread: int, pauses: list[float], fail_every: int
) -> None:
    """Any number of threads, any write speed: after they return, every line is written
    exactly once (none stranded in the queue), each thread's in its order, and the lines
    reported failed are exactly those whose batch failed."""
    written: list[bytes] = []
    failed_lines: list[bytes] = []
    batches = [0]

    def emit(lines: list[bytes]) -> int:
        batches[0] += 1
        time.sleep(pauses[batches[0] % len(pauses)])
        if fail_every and batches[0] % fail_every == 0:
            failed_lines.extend(lines)
            return len(lines)
        written.extend(lines)
        return 0

    combiner = Combiner(emit)
    reported = [0] * threads
    barrier = threading.Barrier(threads)

    def work(t: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            reported[t] += combiner.submit(f"{t}:{i}\n".encode())

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(30)
    end = time.monotonic() + 10  # what a caller handed to the writer thread: no call needed
    while len(written) + len(failed_lines) < threads * per_thread and time.monotonic() < end:
        time.sleep(0.01)
    everything = written + failed_lines
    assert sorted(everything) == sorted(
        f"{t}:{i}\n".encode() for t in range(threads) for i in range(per_thread)
    )
    # The writer thread's failures reach the next caller that writes (here a flush).
    assert len(failed_lines) == sum(reported) + combiner.settle(5.0)[0]
    for t in range(threads):
        mine = [int(x.split(b":")[1]) for x in written if x.startswith(f"{t}:".encode())]
        assert mine == sorted(mine)


def test_a_full_queue_waits_for_the_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind a writer held up by a slow reader the queue is bounded: past QUEUE_MAX a
    caller waits for the writer (never forever), and no line is lost."""
    monkeypatch.setattr(_combiner, "QUEUE_MAX", 3)
    gate = threading.Event()
    entered = threading.Event()
    written: list[bytes] = []

    def emit(lines: list[bytes]) -> int:
        entered.set()
        gate.wait(30)
        written.extend(lines)
        return 0

    combiner = Combiner(emit)
    holder = threading.Thread(target=combiner.submit, args=(b"0\n",))
    holder.start()
    assert entered.wait(10)
    for i in range(1, 5):
        combiner.submit(b"%d\n" % i)  # within the bound: returns at once
    waiter = threading.Thread(target=combiner.submit, args=(b"5\n",))
    waiter.start()
    waiter.join(0.2)
    was_waiting = waiter.is_alive()
    gate.set()
    holder.join(10)
    waiter.join(10)
    assert was_waiting
    assert [b"%d\n" % i for i in range(6)] == written


class _Stream(io.StringIO):
    def fileno(self) -> int:
        raise io.UnsupportedOperation


@pytest.mark.parametrize("threads", [2, 32])
def test_threads_share_one_stream_without_losing_a_line(
    monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    """Many threads through the real chain into one stream: every line one JSON object,
    none lost, each thread's in order."""
    stream = _Stream()
    monkeypatch.setattr(sys, "stderr", stream)
    obs.configure(format="json", stream="stderr", stdlib_bridge=False, logs_exporter="none")
    log = obs.get_logger("t")

    def work(t: int) -> None:
        for i in range(200):
            log.info("line", t=t, i=i)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(30)
    records: list[dict[str, Any]] = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert threads * 200 == len(records)
    for t in range(threads):
        assert list(range(200)) == [r["i"] for r in records if r["t"] == t]


def test_flush_from_inside_a_write_does_not_wait_on_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream whose write calls ``obs.flush()`` (as a finaliser or signal handler could,
    on the thread that holds the sink): the flush does not wait for the lock its own
    thread holds, and both lines are written."""
    waits: list[float] = []
    real_settle = Combiner.settle

    def settle(self: Combiner, timeout: float, **kw: bool) -> tuple[int, bool]:
        waits.append(timeout)
        return real_settle(self, timeout, **kw)

    class Reentrant(io.StringIO):
        def write(self, s: str) -> int:
            if "outer" in s:
                obs.flush()
            return super().write(s)

    stream = Reentrant()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(Combiner, "settle", settle)
    obs.configure(format="json", stream="stderr", stdlib_bridge=False, logs_exporter="none")
    obs.get_logger("t").info("outer")
    obs.flush()
    assert waits[0] == 0.0  # inside the write: no wait on its own lock
    assert waits[1] > 0  # the outer flush waits, within its budget
    assert ["outer"] == [json.loads(line)["event"] for line in stream.getvalue().splitlines()]


def test_a_file_sink_closes_when_dropped(tmp_path: Path) -> None:
    """The file closes as soon as the last holder drops its sink, without waiting for a GC
    pass (a reference cycle through the combiner kept it open until one)."""
    import gc
    import weakref

    from obs._output import FileSink

    gc.disable()
    try:
        sink = FileSink(str(tmp_path / "a.jsonl"))
        assert 0 == sink.write(b'{"event":"e"}\n')
        ref, fd = weakref.ref(sink), sink._fd
        del sink
        assert ref() is None
        with pytest.raises(OSError):
            os.fstat(fd)
    finally:
        gc.enable()
    assert b'{"event":"e"}\n' == (tmp_path / "a.jsonl").read_bytes()
