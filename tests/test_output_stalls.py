"""A stalled or slow reader costs a flush and exit their budget, no more; found by a
second adversarial review of the writer thread, and each test failed on 25c435f:
``obs.flush(timeout=1)`` and exit hung behind a stalled FIFO (the flush wrote the backlog
itself), exit spent the budget twice per sink, and a file sink stayed pinned after a
flush wrote its lines. (A forked child whose target returned before its threads did is
tested with the other forked child, in test_output_exit.)"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


# -- 1. a flush (or exit) that takes over a slow reader's backlog: unbounded / forever ---

_STALL = textwrap.dedent(
    """
    import os, sys, threading, time, tempfile
    import obs
    MODE = sys.argv[1]
    d = tempfile.mkdtemp(); a = os.path.join(d, "a.fifo"); os.mkfifo(a)
    rfd = os.open(a, os.O_RDONLY | os.O_NONBLOCK)  # a log shipper
    obs.configure(format="json", stream="none", file=a, stdlib_bridge=False,
                  logs_exporter="none")
    log = obs.get_logger("t")

    def fill():  # fills the pipe; its last write blocks, holding the sink
        for i in range(400):
            log.info("fill", i=i, pad="x" * 200)

    threading.Thread(target=fill, daemon=True).start()
    time.sleep(0.3)
    for i in range(1000):
        log.info("queued", i=i, pad="x" * 200)  # queued behind it: returns at once

    def reader():  # the shipper reads 64 KB more, then stalls for good (stopped, wedged)
        time.sleep(0.3)
        os.set_blocking(rfd, True)
        for _ in range(16):
            os.read(rfd, 4096)

    threading.Thread(target=reader, daemon=True).start()
    if MODE == "flush":
        t0 = time.monotonic()
        ok = obs.flush(timeout=1.0)
        print("flush %r %.2f" % (ok, time.monotonic() - t0), flush=True)
        os._exit(0)
    print("exiting", flush=True)
    """
)


def _run_stall(tmp_path: Path, mode: str) -> tuple[float, bytes]:
    script = tmp_path / "stall.py"
    script.write_text(_STALL)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(script), mode],
        stdout=subprocess.PIPE,
        env=_env(OBS_SHUTDOWN_TIMEOUT="1"),
        cwd=str(tmp_path),  # not the checkout (its obs would shadow PYTHONPATH)
    )
    try:
        out, _ = proc.communicate(timeout=8)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return float("inf"), b""
    return time.monotonic() - t0, out


def test_flush_with_a_timeout_returns_when_the_reader_stalls(tmp_path: Path) -> None:
    """A write blocked on a slow FIFO holds the file sink; 1000 lines queue behind it.
    obs.flush(timeout=1) sets _flushing, the blocked holder steps aside after its write,
    and the flush takes the lock and writes the whole backlog itself, in blocking writes:
    the reader stalls and flush never returns (2992a1c: returned after 1 s)."""
    elapsed, out = _run_stall(tmp_path, "flush")
    assert elapsed < 4, f"obs.flush(timeout=1.0) took {elapsed:.1f} s: {out!r}"


def test_exit_returns_when_the_reader_stalls(tmp_path: Path) -> None:
    """Same at exit: the threading exit hook's flush takes the backlog and blocks forever
    in os.write; the process never exits (2992a1c: exited after its 1 s flush)."""
    elapsed, out = _run_stall(tmp_path, "exit")
    assert elapsed < 4, f"exit took {elapsed:.1f} s (OBS_SHUTDOWN_TIMEOUT=1): {out!r}"


# -- 2. exit spends OBS_SHUTDOWN_TIMEOUT twice per stalled sink ------------------------

_EXIT_BUDGET = textwrap.dedent(
    """
    import os, threading, time
    import obs
    obs.configure(format="json", stream="stderr", stdlib_bridge=False, logs_exporter="none")
    log = obs.get_logger("t")

    def fill():  # stderr is a pipe nobody reads: this write blocks, holding the sink
        for i in range(200):
            log.info("fill", i=i, pad="x" * 2000)

    threading.Thread(target=fill, daemon=True).start()
    time.sleep(0.3)
    log.info("last")  # queued behind it; returns at once
    os.write(1, b"exiting\\n")
    """
)


def test_exit_with_a_stalled_stderr_stays_within_the_shutdown_timeout(tmp_path: Path) -> None:
    """The threading._register_atexit hook waits the whole OBS_SHUTDOWN_TIMEOUT for the
    stalled sink, then atexit's shutdown() waited it again (and per sink: a stalled FIFO
    file doubled it once more): 2 s with OBS_SHUTDOWN_TIMEOUT=1, 6 s at the default 3
    (2992a1c: 1 s). Exit spends it once now."""
    script = tmp_path / "exit_budget.py"
    script.write_text(_EXIT_BUDGET)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # never read while the child runs
        env=_env(OBS_SHUTDOWN_TIMEOUT="2"),
        cwd=str(tmp_path),  # not the checkout (its obs would shadow PYTHONPATH)
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"exiting\n"
        t0 = time.monotonic()
        proc.wait(15)
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
        proc.communicate()
    # One budget (2 s) and the interpreter's exit; spending it twice took 4 s and more.
    assert elapsed < 3.2, f"exit took {elapsed:.2f} s with OBS_SHUTDOWN_TIMEOUT=2"


# -- 4. the pin outlives the lines: FileSink <-> Combiner cycle ----------------------------


def test_the_pin_is_dropped_once_the_lines_are_written(tmp_path: Path) -> None:
    """The writer thread steps aside for a flush with lines still queued, so it leaves
    _pin set; the flush writes them but never clears it. The FileSink stays referenced
    by its own combiner (a cycle), its fd and writer thread live until a GC pass (never
    with gc disabled), which _weak_emitter exists to avoid."""
    from obs._output import FileSink

    path = tmp_path / "a.jsonl"
    sink = FileSink(str(path))
    sink_ref = weakref.ref(sink)
    combiner = sink._combiner
    weak_emit, submit = combiner._emit, combiner.submit
    me = threading.current_thread()
    fed, flushers = [0], []

    def feed(line: bytes) -> None:
        t = threading.Thread(target=submit, args=(line,))
        t.start()
        t.join()

    def emit(lines: list[bytes]) -> int:
        n = weak_emit(lines)
        if threading.current_thread() is me and fed[0] < 3:  # others log during its rounds
            fed[0] += 1
            feed(b"fed %d\n" % fed[0])
        elif threading.current_thread() is not me and not flushers:  # the writer thread
            feed(b"late\n")  # one more line, and a flush starts waiting, while it writes
            flusher = threading.Thread(target=sink_ref().flush, args=(5.0,))  # type: ignore[union-attr]
            flusher.start()
            flushers.append(flusher)
            while not combiner._flushing:
                time.sleep(0.001)
        return n

    combiner._emit = emit
    gc.disable()
    try:
        sink.write(b"mine\n")  # two rounds, then the hand-off to the writer thread
        deadline = time.monotonic() + 5
        while not flushers and time.monotonic() < deadline:
            time.sleep(0.01)
        flushers[0].join(5)
        time.sleep(0.2)
        assert path.read_bytes().splitlines() == [b"mine", b"fed 1", b"fed 2", b"fed 3", b"late"]
        assert not combiner.queue
        del sink, flushers[:]
        assert sink_ref() is None, "everything written, yet the combiner still pins its sink"
    finally:
        gc.enable()


def test_a_flush_writes_itself_when_no_writer_thread_can_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At interpreter shutdown a new thread may not start (Python 3.12+ refuses): a flush
    then writes what is queued itself instead of waiting for a writer that never comes."""
    from obs import _combiner

    def refuse(*args: object) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(_combiner._thread, "start_new_thread", refuse)
    written: list[bytes] = []
    combiner: _combiner.Combiner[bytes] = _combiner.Combiner(
        lambda lines: written.extend(lines) or 0
    )
    combiner.queue.append(b"queued\n")  # left by a caller, as a hand-off that failed would
    assert combiner.settle(1.0) == (0, True)
    assert written == [b"queued\n"]
