"""Child programs for tests/integration/test_hardening.py: each mode is one real process that
logs under a hostile condition (signals, finalisers, threads on a pipe, several processes on
one file, atexit after shutdown, reconfiguration under load) and exits 0 when it finished.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

import obs

SECRET = "SECRET-MARKER-7f3a"


def _traceback_text() -> Exception:
    def deep(n: int) -> None:
        if n == 0:
            raise RuntimeError("x" * 6000)
        deep(n - 1)

    try:
        deep(40)
    except RuntimeError as exc:
        return exc
    raise AssertionError("unreachable")


def signal_mode(path: str) -> None:
    """The main thread logs with OBS_FILE set while SIGALRM fires every 0.5 ms and logs too."""
    obs.configure(format="json", file=path, sdk_disabled=True)
    log = obs.get_logger("main")
    handled = [0]

    def handler(signum: int, frame: Any) -> None:
        handled[0] += 1
        log.warning("from_signal", n=handled[0], password=SECRET)
        log.warning_once("from_signal_once", n=handled[0] % 3)
        logging.getLogger("lib").warning("from_signal_stdlib %d", handled[0])

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
    deadline = time.monotonic() + 1.5
    i = 0
    while time.monotonic() < deadline:
        log.info("main_loop", i=i, blob="y" * 3000)
        log.warning_once("main_once", i=i % 5)
        i += 1
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    obs.shutdown()
    print(f"handled={handled[0]} main={i}", file=sys.stdout, flush=True)


class _Finalised:
    """Logs from ``__del__``: the collector may run it in the middle of any log call."""

    log = obs.get_logger("finaliser")

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        _Finalised.log.warning_once("finalised", where="__del__")
        _Finalised.log.error("finalised_error", token=SECRET)


class _CollectsOnRepr:
    """A field value whose repr runs the garbage collector, so finalisers run mid-call."""

    def __repr__(self) -> str:
        for _ in range(3):
            _Finalised()
        gc.collect()
        return "<collects>"


def gc_mode(path: str) -> None:
    """Finalisers that log run inside log calls (and inside the dedup table's lock)."""
    obs.configure(format="json", file=path, sdk_disabled=True)
    log = obs.get_logger("main")
    gc.set_threshold(2, 1, 1)  # collect often: the finalisers land inside obs' own code
    for i in range(300):
        for _ in range(5):
            _Finalised()
        log.warning_once("with_object", value=_CollectsOnRepr(), i=i % 7)
        log.info("plain", value=_CollectsOnRepr())
    obs.shutdown()
    print("done", flush=True)


def threads_mode() -> None:
    """8 threads log records with ~10 KB tracebacks to stderr (a pipe in the parent)."""
    obs.configure(format="json", sdk_disabled=True)
    log = obs.get_logger("threads")
    error = _traceback_text()

    def work(t: int) -> None:
        for i in range(60):
            log.error("big_error", thread=t, i=i, exc_info=error)
            log.info("small", thread=t, i=i, blob=str(t) * (i * 1500))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    obs.shutdown()


def slow_reader_mode() -> None:
    """16 threads log 1-3 KB lines to stderr, a pipe the parent reads slowly: the kernel's
    buffer fills, writes block, lines queue behind the writer and go out in batches."""
    obs.configure(format="json", sdk_disabled=True)
    log = obs.get_logger("slow")

    def work(t: int) -> None:
        for i in range(150):
            log.info("slow_line", thread=t, i=i, blob=chr(97 + t) * (1000 + 13 * i))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    obs.shutdown()


def shared_file_mode(path: str, tag: str) -> None:
    """One of several processes appending large lines to the same OBS_FILE."""
    obs.configure(format="json", file=path, stream="none", sdk_disabled=True)
    log = obs.get_logger("shared")
    for i in range(150):
        log.warning("shared_line", tag=tag, i=i, blob=tag * (2000 + 37 * i))
    obs.shutdown()


def atexit_mode(path: str) -> None:
    """An atexit handler registered before configure logs an ERROR after obs' own shutdown."""
    log = obs.get_logger("exit")

    def late() -> None:
        log.error("late_error", stage="terminal_failure")

    atexit.register(late)
    obs.configure(format="json", file=path, sdk_disabled=True)
    log.info("early")
    obs.shutdown()
    log.error("after_shutdown")


def reconfigure_mode(path: str) -> None:
    """4 threads log while the main thread reconfigures 30 times: every line once."""
    obs.configure(format="json", file=path, stream="none", sdk_disabled=True)
    log = obs.get_logger("race")
    stop = threading.Event()
    counts = [0] * 4

    def work(t: int) -> None:
        while not stop.is_set():
            log.info("race_line", thread=t, i=counts[t])
            counts[t] += 1

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for n in range(30):
        obs.configure(
            format="json", file=path, stream="none", sdk_disabled=True, dedup_capacity=100 + n
        )
        time.sleep(0.005)
    stop.set()
    for th in threads:
        th.join()
    obs.shutdown()
    print(" ".join(str(c) for c in counts), flush=True)


class _Unreadable(logging.LogRecord):
    """A record whose ``msg`` raises when read (a broken LogRecord subclass)."""

    @property  # type: ignore[override]
    def msg(self) -> str:
        raise RuntimeError("unreadable")

    @msg.setter
    def msg(self, value: object) -> None:
        self.__dict__["msg"] = value


class _SignallingStream:
    """stderr without a descriptor whose first write raises SIGUSR1 (mid-write)."""

    def __init__(self, real: Any) -> None:
        self.real, self.writes = real, 0

    def write(self, text: str) -> int:
        self.writes += 1
        if self.writes == 1:
            os.kill(os.getpid(), signal.SIGUSR1)
        return int(self.real.write(text))

    def flush(self) -> None:
        self.real.flush()


def fallback_signal_mode() -> None:
    """A signal arrives while obs writes a record through its fallback path; the handler
    logs. No hang; both records written."""
    obs.configure(format="json", sdk_disabled=True)
    log = obs.get_logger("app")
    signal.signal(signal.SIGUSR1, lambda s, f: log.error("from_signal_handler"))
    sys.stderr = _SignallingStream(sys.__stderr__)
    record = _Unreadable("lib", logging.ERROR, __file__, 1, "job_failed", (), None)
    logging.getLogger("lib").handle(record)
    sys.stderr.flush()
    print("done", flush=True)


def pipe_big_mode() -> None:
    """100 records of ~20 KB with a deep traceback, to a stderr shared with other processes."""
    obs.configure(format="json", sdk_disabled=True)
    log = obs.get_logger("big")
    exc = _traceback_text()
    for i in range(100):
        log.error("big_record", i=i, pad="x" * 20000, exc_info=exc)
    obs.shutdown()


def main() -> None:
    """Run the mode named on the command line."""
    mode, *args = sys.argv[1:]
    {
        "signal": signal_mode,
        "gc": gc_mode,
        "threads": threads_mode,
        "shared_file": shared_file_mode,
        "slow_reader": slow_reader_mode,
        "atexit": atexit_mode,
        "reconfigure": reconfigure_mode,
        "fallback_signal": fallback_signal_mode,
        "pipe_big": pipe_big_mode,
    }[mode](*args)


if __name__ == "__main__":
    os.environ.pop("OBS_FILE", None)
    main()
