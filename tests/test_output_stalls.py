"""A stalled or slow reader costs a flush and exit their budget, no more; found by a
second adversarial review of the writer thread, and each test failed on 25c435f:
``obs.flush(timeout=1)`` and exit hung behind a stalled FIFO (the flush wrote the backlog
itself), exit spent the budget twice per sink, and a file sink stayed pinned after a
flush wrote its lines. (A forked child whose target returned before its threads did is
tested with the other forked child, in test_output_exit.)"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    print("ready", flush=True)  # the test's clock starts here, not at the interpreter's start
    if MODE == "flush":
        t0 = time.monotonic()
        ok = obs.flush(timeout=1.0)
        print("flush %r %.2f" % (ok, time.monotonic() - t0), flush=True)
        os._exit(0)
    print("exiting", flush=True)
    """
)


def _run_stall(tmp_path: Path, mode: str) -> tuple[float, bytes]:
    """Run _STALL: the seconds from its ``ready`` line (the flush or the exit begins) to
    its exit, and what it printed. The interpreter's start, the import and the 1400 calls
    before are not timed (under coverage on a loaded 2-core CI machine they took more than
    the bound by themselves); a child that never gets that far is killed after 60 s, one
    that does not end 20 s later counts as hung (the broken flush never returned)."""
    script = tmp_path / "stall.py"
    script.write_text(_STALL)
    proc = subprocess.Popen(
        [sys.executable, str(script), mode],
        stdout=subprocess.PIPE,
        env=_env(OBS_SHUTDOWN_TIMEOUT="1"),
        cwd=str(tmp_path),  # not the checkout (its obs would shadow PYTHONPATH)
    )
    timer = threading.Timer(60, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        t0 = time.monotonic()
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return float("inf"), ready
    finally:
        timer.cancel()
    assert b"ready\n" == ready, "the child ended before its flush or exit"
    return time.monotonic() - t0, out


def test_flush_with_a_timeout_returns_when_the_reader_stalls(tmp_path: Path) -> None:
    """A write blocked on a slow FIFO holds the file sink; 1000 lines queue behind it.
    obs.flush(timeout=1) sets _flushing, the blocked holder steps aside after its write,
    and the flush takes the lock and writes the whole backlog itself, in blocking writes:
    the reader stalls and flush never returns (2992a1c: returned after 1 s)."""
    elapsed, out = _run_stall(tmp_path, "flush")
    assert elapsed < 12, f"obs.flush(timeout=1.0) took {elapsed:.1f} s: {out!r}"


def test_exit_returns_when_the_reader_stalls(tmp_path: Path) -> None:
    """Same at exit: the threading exit hook's flush takes the backlog and blocks forever
    in os.write; the process never exits (2992a1c: exited after its 1 s flush)."""
    elapsed, out = _run_stall(tmp_path, "exit")
    assert elapsed < 12, f"exit took {elapsed:.1f} s (OBS_SHUTDOWN_TIMEOUT=1): {out!r}"


# -- 2. exit spends OBS_SHUTDOWN_TIMEOUT twice per stalled sink ------------------------

_EXIT_BUDGET = textwrap.dedent(
    """
    import atexit, os, sys, threading, time
    atexit.register(lambda: os.write(1, b"%.3f\\n" % (time.monotonic() - T0)))  # runs last
    import obs
    VARIANT = sys.argv[1]
    obs.configure(format="json", stream="stderr", stdlib_bridge=False, logs_exporter="none",
                  file="out.jsonl" if VARIANT == "file" else None)
    log = obs.get_logger("t")

    def fill():  # stderr is a pipe nobody reads: this write blocks, holding the sink
        for i in range(200):
            log.info("fill", i=i, pad="x" * 2000)

    def spin():  # lines keep reaching the file (which takes them) during exit
        while True:
            log.info("spin")
            time.sleep(0.05)

    def late():  # a non-daemon thread still logging while the process exits
        for i in range(10):
            log.info("late", i=i)
            time.sleep(0.01)

    threading.Thread(target=fill, daemon=True).start()
    time.sleep(0.3)
    if VARIANT == "file":
        threading.Thread(target=spin, daemon=True).start()
    if VARIANT == "late":
        threading.Thread(target=late).start()
    log.info("last")  # queued behind it; returns at once
    os.write(1, b"exiting\\n")
    T0 = time.monotonic()
    """
)


@pytest.mark.parametrize("variant", ["stderr", "file", "late"])
def test_exit_with_a_stalled_stderr_stays_within_the_shutdown_timeout(
    tmp_path: Path, variant: str
) -> None:
    """The threading._register_atexit hook waits the whole OBS_SHUTDOWN_TIMEOUT for the
    stalled sink, then atexit's shutdown() waited it again (and per sink: a stalled FIFO
    file doubled it once more): 2 s with OBS_SHUTDOWN_TIMEOUT=1, 6 s at the default 3
    (2992a1c: 1 s). Exit spends it once now. Found by the third review (each failed on
    67543a1): with a file sink taking lines meanwhile, the wait took the file's writes
    for progress on stderr and never ended; a thread logging ten lines during exit waited
    1 s per line for the stalled sink (9 s)."""
    script = tmp_path / "exit_budget.py"
    script.write_text(_EXIT_BUDGET)
    proc = subprocess.Popen(
        [sys.executable, str(script), variant],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # never read while the child runs
        env=_env(OBS_SHUTDOWN_TIMEOUT="2"),
        cwd=str(tmp_path),  # not the checkout (its obs would shadow PYTHONPATH)
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"exiting\n"
        with contextlib.suppress(subprocess.TimeoutExpired):  # hung: no figure below
            proc.wait(30)
        took = proc.stdout.readline().decode()
    finally:
        proc.kill()
        proc.communicate()
    # The child's clock, from "exiting" to its last exit handler (the interpreter's start
    # and teardown, coverage's included, are not timed). One budget (2 s) and the few
    # milliseconds of the hooks; spending it twice took 4 s and more.
    assert took, "the exit hooks never ended"
    assert float(took) < 3.5, f"exit took {took.strip()} s with OBS_SHUTDOWN_TIMEOUT=2"


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


# -- 6. third review (67543a1): a line left queued with no writer, a child stuck on fork ----


def test_a_line_queued_while_a_flush_holds_the_lock_is_written() -> None:
    """A nested call (a signal handler, a finaliser) that queues a line while a flush
    holds the lock leaves it to the holder; the flush released without looking, so the
    line sat queued until some later call (on 67543a1: never written here)."""
    from obs._combiner import Combiner

    written: list[str] = []

    def emit(batch: list[str]) -> int:
        written.extend(batch)
        batch.clear()
        return 0

    class Nested(Combiner[str]):
        __slots__ = ()

        def _take_failed(self) -> int:  # the flush holds the lock here: a signal lands
            if not written and not self.queue:
                assert self.submit("from_handler") == 0  # queued: the lock is held
            return super()._take_failed()

    combiner = Nested(emit)
    assert combiner.settle(1.0) == (0, True)
    deadline = time.monotonic() + 5
    while not written and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ["from_handler"] == written


_HANDLER = textwrap.dedent(
    """
    import os, random, signal, sys, time
    import obs
    path = sys.argv[1]
    obs.configure(format="json", file=path, stream="none", logs_exporter="none")
    log = obs.get_logger("s")
    fired = [0]

    def handler(signum, frame):
        log.warning("from_handler")
        fired[0] += 1

    signal.signal(signal.SIGALRM, handler)
    for k in range(300):
        signal.setitimer(signal.ITIMER_REAL, random.uniform(0.0001, 0.002))
        while fired[0] <= k:
            obs.flush(1.0)
        deadline = time.monotonic() + 2  # no log call, no flush: the writer must do it
        while time.monotonic() < deadline:
            with open(path, "rb") as f:
                if f.read().count(b'"event":"from_handler"') == k + 1:
                    break
            time.sleep(0.002)
        else:
            print("stranded at", k, flush=True)
            os._exit(1)
    print("ok", flush=True)
    os._exit(0)
    """
)


def test_a_signal_handler_line_during_flushes_reaches_the_file(tmp_path: Path) -> None:
    """The same with a real SIGALRM whose handler logs while the main thread loops on
    obs.flush(): every handler line reaches the file with no later call (67543a1
    stranded one within the first 50 iterations on every run)."""
    script = tmp_path / "handler.py"
    script.write_text(_HANDLER)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "h.jsonl")],
        capture_output=True,
        timeout=120,
        env=_env(),
        cwd=str(tmp_path),  # not the checkout (its obs would shadow PYTHONPATH)
        check=False,
    )
    assert (0, b"ok\n") == (proc.returncode, proc.stdout), proc.stderr[-2000:]


_FORK_IN_CONFIGURE = textwrap.dedent(
    """
    import os, signal, sys, threading
    import obs
    from obs._config import STATE
    obs.configure(format="json", stream="stderr", logs_exporter="none")
    inside, leave = threading.Event(), threading.Event()
    lock = STATE._locked() if sys.argv[1] == "holder" else STATE.bridge.adopt_lock

    def configuring():  # a parent thread inside configure() when the fork happens
        with lock:
            inside.set()
            leave.wait()

    threading.Thread(target=configuring, daemon=True).start()
    inside.wait()
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)  # a hung child dies of SIGALRM
        obs.configure(format="json", stream="stderr", logs_exporter="none")
        obs.get_logger("c").info("child_configured")
        obs.flush(5)
        os._exit(0)
    leave.set()
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX")
@pytest.mark.parametrize("lock", ["holder", "adopt"])
def test_a_child_forked_while_a_thread_configures_can_configure(tmp_path: Path, lock: str) -> None:
    """The holder's lock and the bridge's adopt lock (held across the walk of the
    loggers) are renewed in a forked child (on 67543a1 the child's configure() waited
    forever for the parent thread's hold, killed by its alarm; the adopt lock on
    9ca7d7c, found by the fourth review)."""
    script = tmp_path / "fork_configure.py"
    script.write_text(_FORK_IN_CONFIGURE)
    proc = subprocess.run(
        [sys.executable, str(script), lock],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        cwd=str(tmp_path),  # not the checkout (its obs would shadow PYTHONPATH)
        check=False,
    )
    assert "0" == proc.stdout.strip(), proc.stderr[-2000:]
    assert "child_configured" in proc.stderr


# -- 7. fourth review (9ca7d7c): a flush's own summary, the second sink at exit -------------

_SUMMARY_ON_A_FULL_PIPE = textwrap.dedent(
    """
    import os, time
    import obs
    obs.configure(format="json", stream="stderr", stdlib_bridge=False, logs_exporter="none")
    log = obs.get_logger("t")
    for _ in range(3):
        log.info_once("repeat")  # a counted repeat: a summary is due at flush
    os.set_blocking(2, False)  # another writer (a sibling process) fills the shared pipe
    try:
        while True:
            os.write(2, b"." * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(2, True)
    t0 = time.monotonic()
    ok = obs.flush(1)
    os.write(1, b"%r %.2f\\n" % (ok, time.monotonic() - t0))
    os._exit(0)
    """
)


def test_a_flush_with_a_summary_due_returns_within_its_timeout(tmp_path: Path) -> None:
    """obs.flush(1) wrote the pending repeat summary itself, in a blocking write to a full
    pipe: it never returned (9ca7d7c; exit likewise). The summary now goes to the writer
    thread and the timeout bounds the wait for it."""
    script = tmp_path / "summary.py"
    script.write_text(_SUMMARY_ON_A_FULL_PIPE)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # never read while the child runs
        env=_env(),
        cwd=str(tmp_path),  # not the checkout (its obs would shadow PYTHONPATH)
    )
    timer = threading.Timer(30, proc.kill)  # a hung flush: killed, its line never comes
    timer.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.readline().decode() or "hung 30"
    finally:
        timer.cancel()
        proc.kill()
        proc.communicate()
    ok, elapsed = out.split()
    assert ("False", True) == (ok, float(elapsed) < 10), out  # the child's clock; hung: never


_TWO_SLOW_READERS = textwrap.dedent(
    """
    import os, sys, threading, time
    import obs
    obs.configure(format="json", stream="stderr", stdlib_bridge=False, logs_exporter="none",
                  file=sys.argv[1])
    os.write(1, b"ready\\n")  # the FIFO is open: the readers' pause starts now
    log = obs.get_logger("t")
    stop = threading.Event()
    counts = [0] * 8

    def work(t):
        while not stop.is_set() and counts[t] < 1250:
            log.info("main", t=t, i=counts[t], pad="y" * 300)
            counts[t] += 1

    for t in range(8):
        threading.Thread(target=work, args=(t,), daemon=True).start()
    time.sleep(0.5)
    stop.set()
    time.sleep(0.05)
    os.write(1, b"%d\\n" % sum(counts))
    """
)


def test_exit_waits_for_a_second_sink_that_still_takes_lines(tmp_path: Path) -> None:
    """Both readers pause, then read slowly: exit's patient wait on stderr ran past the
    budget, and the file sink (a FIFO, still taking lines) got no wait at all: its lines
    were lost (9ca7d7c: 3,043 of 7,598 in the review's run). A sink that moved while
    another used the budget now gets its own patient wait."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    script = tmp_path / "two.py"
    script.write_text(_TWO_SLOW_READERS)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(OBS_SHUTDOWN_TIMEOUT="2"),
        cwd=str(tmp_path),  # not the checkout (its obs would shadow PYTHONPATH)
    )
    got: dict[str, bytes] = {}

    def slow(fd: int, name: str, rate: float) -> None:
        time.sleep(1.5)  # paused longer than the budget
        os.set_blocking(fd, True)
        data = b""
        while chunk := os.read(fd, 4096):
            data += chunk
            time.sleep(4096 / rate)
        got[name] = data

    assert proc.stderr is not None
    assert proc.stdout is not None
    # Not before: a read of the FIFO before the child opened it was an end of file (under
    # load the child's start took longer than the pause; CI's file reader got nothing).
    assert proc.stdout.readline() == b"ready\n"
    readers = [
        # Both still drain past the 2 s budget (the lines are about 3 MB), the file last.
        threading.Thread(target=slow, args=(proc.stderr.fileno(), "stderr", 3e6)),
        threading.Thread(target=slow, args=(rfd, "file", 1e6)),
    ]
    for t in readers:
        t.start()
    for t in readers:
        t.join(60)
    proc.wait(10)
    os.close(rfd)
    logged = int(proc.stdout.read())
    counts = {k: v.count(b'"event":"main"') for k, v in got.items()}
    # A daemon thread may finish one more line after the count was taken.
    assert counts["stderr"] == counts["file"] >= logged, (logged, counts)


# -- 7. a reader that never reads: a log call returns, exit keeps its budget -----------

_NOBODY_READS = textwrap.dedent(
    """
    import os, sys, time
    import obs
    obs.configure(format="json", stdlib_bridge=False, logs_exporter="none",
                  stream=sys.argv[1], file=sys.argv[2] or None)
    log = obs.get_logger("t")
    t0 = time.monotonic()
    for i in range(300):  # 300 KB: more than any pipe, socket or terminal buffer takes
        log.warning("w", i=i, pad="x" * 1000)
    os.write(int(sys.argv[3]), b"%.2f" % (time.monotonic() - t0))
    """
)


def _stalled_reader(kind: str, tmp_path: Path) -> tuple[dict[str, Any], list[int], Any]:
    """(Popen keywords, fds to close in the parent after the start, the reader end kept
    open and never read): a pipe, a terminal, a socket as stderr; a FIFO as OBS_FILE."""
    if kind == "pipe":
        r, w = os.pipe()
        return {"stderr": w}, [w], r
    if kind == "pty":
        master, slave = os.openpty()
        return {"stderr": slave}, [slave], master
    if kind == "socket":
        a, b = socket.socketpair()
        return {"stderr": b.fileno()}, [], (a, b)
    fifo = tmp_path / "ship.fifo"
    os.mkfifo(fifo)
    return {"stderr": subprocess.DEVNULL}, [], os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)


@pytest.mark.parametrize("kind", ["pipe", "pty", "socket", "fifo"])
def test_a_log_call_returns_when_nobody_reads(tmp_path: Path, kind: str) -> None:
    """A stuck log shipper (a pipe, a terminal, a socket as stderr, a FIFO as OBS_FILE,
    nobody reading): each log call returns at once, the lines it could not write wait
    for the sink's writer thread, and exit keeps OBS_SHUTDOWN_TIMEOUT. The call's own
    blocking write hung for ever (found by an adversarial review on 1cce7d3)."""
    script = tmp_path / "nobody.py"
    script.write_text(_NOBODY_READS)
    report_r, report_w = os.pipe()
    popen, close, keep = _stalled_reader(kind, tmp_path)
    stream, file = ("none", str(tmp_path / "ship.fifo")) if kind == "fifo" else ("stderr", "")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(script), stream, file, str(report_w)],
        stdout=subprocess.DEVNULL,
        env=_env(OBS_SHUTDOWN_TIMEOUT="1"),
        cwd=str(tmp_path),
        pass_fds=(report_w,),
        **popen,
    )
    for fd in (*close, report_w):
        os.close(fd)
    try:
        rc = proc.wait(timeout=40)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = None
    elapsed = time.monotonic() - t0
    logged = os.read(report_r, 64)
    os.close(report_r)
    with contextlib.suppress(Exception):
        if isinstance(keep, tuple):
            for s in keep:
                s.close()
        else:
            os.close(keep)
    assert rc is not None, f"hung: {elapsed:.1f} s, logging took {logged!r}"
    assert logged, f"the loop never ended: {elapsed:.1f} s"
    # Generous bounds (a loaded CI machine under coverage): a call blocked on the reader
    # never returned, and neither did the process.
    assert float(logged) < 10.0, f"300 calls took {logged!r} s against a stalled reader"
    assert elapsed < 30, f"exit took {elapsed:.1f} s with OBS_SHUTDOWN_TIMEOUT=1"


_SLOW_READER = textwrap.dedent(
    """
    import sys, threading
    import obs
    obs.configure(format="json", stdlib_bridge=False, logs_exporter="none")
    log = obs.get_logger("t")

    def work(t):
        for i in range(int(sys.argv[2])):
            log.warning("w", t=t, i=i, pad="y" * int(sys.argv[1]))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    """
)


@settings(max_examples=8, deadline=None)
@given(pad=st.sampled_from([10, 900, 3000, 6000]), lines=st.integers(50, 300))
def test_lines_behind_a_reader_that_stalls_then_reads_arrive_whole(pad: int, lines: int) -> None:
    """A reader that stops for a second, then reads everything: every line arrives once,
    whole (a line begun before the stall is finished first), each thread's in order."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "slow.py"
        script.write_text(_SLOW_READER)
        r, w = os.pipe()
        proc = subprocess.Popen(
            [sys.executable, str(script), str(pad), str(lines)],
            stderr=w,
            env=_env(OBS_SHUTDOWN_TIMEOUT="30"),
            cwd=tmp,
        )
        os.close(w)
        time.sleep(1.0)  # the pipe fills, the callers go on
        with os.fdopen(r, "rb") as reader:
            out = reader.read()
        assert 0 == proc.wait(timeout=60)
    records = [json.loads(line) for line in out.splitlines()]
    got = [(rec["t"], rec["i"]) for rec in records if rec.get("event") == "w"]
    assert sorted(got) == [(t, i) for t in range(3) for i in range(lines)]
    for t in range(3):
        assert list(range(lines)) == [i for tt, i in got if tt == t]
