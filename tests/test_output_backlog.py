"""A console pipe nobody reads: once a line waits for the reader, the backlog is the sink's
writer thread's. A caller queues its own line and returns; it never takes the whole backlog
off the queue and puts it back (that made every call cost the backlog's length: 20,000
lines took 25 s instead of 0.2 s, O(n^2))."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]

#: A child's first lines: its stderr pipe filled (nobody reads it), left blocking.
_FILL_STDERR = textwrap.dedent(
    """
    flags = fcntl.fcntl(2, fcntl.F_GETFL)
    fcntl.fcntl(2, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        while True:
            os.write(2, b"x" * 4096)
    except BlockingIOError:
        pass
    fcntl.fcntl(2, fcntl.F_SETFL, flags)
    """
)

#: Fills its stderr pipe, then logs; prints how many queued lines callers took in hand.
_CHILD = textwrap.dedent(
    """
    import fcntl, os, sys, threading
    sys.setswitchinterval(30)  # the GIL changes hands only where obs itself waits
    FILL_STDERR
    import obs, obs._combiner as c
    callers = set()
    taken = [0]
    original = c.Combiner._write_queued
    def spy(self):  # counts what a logging thread (not the writer) takes off the queue
        if threading.get_ident() in callers:
            taken[0] += len(self.queue)
        return original(self)
    c.Combiner._write_queued = spy
    obs.configure(format="json", stream="stderr", logs_exporter="none")
    log = obs.get_logger("t")
    def run():
        callers.add(threading.get_ident())
        for i in range(LINES):
            log.info("line", i=i)
    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(taken[0], flush=True)
    os._exit(0)
    """
).replace("FILL_STDERR\n", _FILL_STDERR.lstrip("\n"))


def taken_by_callers(lines: int, threads: int) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT)
    code = _CHILD.replace("LINES", str(lines)).replace("THREADS", str(threads))
    with subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:  # stderr is never read
        try:
            out = proc.stdout.readline()  # type: ignore[union-attr]
        finally:
            proc.kill()
    return int(out)


@pytest.mark.timeout(60)
def test_a_caller_never_takes_the_backlog_of_a_stalled_pipe() -> None:
    """2,000 lines behind a full pipe: the callers took fewer queued lines in hand than
    they logged (on main they took each backlog back on every call: ~2,000,000)."""
    assert taken_by_callers(2000, 1) <= 2000


@given(lines=st.integers(50, 1500), threads=st.integers(1, 4))
@settings(max_examples=5, deadline=None)
def test_callers_stay_off_the_backlog_with_any_threads(lines: int, threads: int) -> None:
    """Any number of lines from 1 to 4 threads behind a full pipe: callers together take
    at most one queued line in hand per line logged."""
    assert taken_by_callers(lines, threads) <= lines * threads


_BOUNDED = textwrap.dedent(
    """
    import fcntl, os, sys
    FILL_STDERR
    import obs, obs._combiner as c
    from obs._config import STATE
    obs.configure(format="json", stream="stderr", logs_exporter="none")
    log = obs.get_logger("t")
    for i in range(c.QUEUE_MAX + 500):
        log.info("line", i=i)
    combiner = STATE.runtime.output.stream._combiner
    print(len(combiner.queue), c.QUEUE_MAX, STATE.runtime.output.dropped, flush=True)
    os._exit(0)
    """
).replace("FILL_STDERR\n", _FILL_STDERR.lstrip("\n"))


@pytest.mark.timeout(120)
def test_the_backlog_of_a_stalled_pipe_is_bounded_and_counted() -> None:
    """QUEUE_MAX + 500 lines behind a pipe nobody reads: at most QUEUE_MAX wait (each a
    compact copy), the rest is counted as dropped, and no call waits (on main each call
    past QUEUE_MAX waited a second for the writer, which waits on the reader forever)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT)
    with subprocess.Popen(
        [sys.executable, "-c", _BOUNDED], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:  # stderr is never read
        try:
            queued, limit, dropped = map(int, proc.stdout.readline().split())  # type: ignore[union-attr]
        finally:
            proc.kill()
    assert queued <= limit
    assert 400 <= dropped <= 500  # a few went into the writer's batch before the limit
