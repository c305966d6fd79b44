"""Signals sent to the process are the application's: obs' threads never take them.

Linux hands a process-directed signal (``kill``, a terminal's Ctrl-C, a supervisor's
SIGTERM) to any thread that does not block it. CPython runs the Python handler only in the
main thread, and only wakes it when the main thread itself was interrupted: if one of
obs' busy threads took the signal, a main thread asleep in a C call (``time.sleep``, a
lock, a C extension's wait) slept on, and an ``OBS_HANDLE_SIGTERM`` shutdown or the
application's own handler ran only when that call returned (a minute, in the first
finding: ``test_otel_exit.py::test_sigterm_flushes_then_chains`` hung its 30 s).

Each child here starts every thread obs has (the OTLP export thread, its write-ahead
thread, an HTTP request thread or gRPC's own threads stuck on a blackholed collector, the
console writer thread stuck on a full pipe, the SIGTERM watcher), then blocks each
asynchronous signal in its
main thread and sends it to the process: no thread of obs may take it (it stays pending
until the main thread unblocks it, and only then does the handler run). Every thread's
own mask is read from ``/proc`` as well.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from obs._sigmask import _asynchronous

ROOT = Path(__file__).resolve().parents[2]

#: The asynchronous signals, from obs' own table (the synchronous ones stay with the
#: thread that caused them); real-time signals past SIGRTMIN/SIGRTMAX have no name here.
_NAMES = {int(s): s.name for s in signal.Signals}
ASYNC = sorted(_NAMES[s] for s in _asynchronous() if s in _NAMES)

CHILD = r"""
import json, os, signal, sys, threading, time
import obs
url, protocol, spool, out, names = sys.argv[1:6]
taken = []
for name in names.split(","):
    signal.signal(getattr(signal, name), lambda s, f: taken.append(s))
obs.configure(logs_exporter="otlp", otlp_endpoint=url, otlp_protocol=protocol,
              spool_dir=spool, stream="stdout", shutdown_timeout=1.0, otlp_timeout=30.0)
log = obs.get_logger("child")
for i in range(3000):  # fills the stdout pipe (nobody reads it yet) and the export queue
    log.error("burst_error", i=i, pad="x" * 200)
time.sleep(1.0)  # the export hangs on the blackhole; the writer waits for room
threads = sorted(t.name for t in threading.enumerate())

def masks():
    result = {}
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == threading.main_thread().native_id:
            continue
        with open(f"/proc/self/task/{tid}/status") as f:
            fields = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
        with open(f"/proc/self/task/{tid}/comm") as f:
            result[f.read().strip() + "/" + tid] = int(fields["SigBlk"], 16)
    return result

report = {"threads": threads, "masks": masks(), "signals": {}}
for name in names.split(","):
    signum = getattr(signal, name)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    del taken[:]
    os.kill(os.getpid(), signum)
    time.sleep(0.05)
    for _ in range(20):  # bytecodes: a handler tripped on another thread would run here
        pass
    early = list(taken)
    pending = signum in signal.sigpending()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    for _ in range(20):
        pass
    report["signals"][name] = {"early": bool(early), "pending": pending, "ran": bool(taken)}
with open(out, "w") as f:
    json.dump(report, f)
os._exit(0)
"""


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_obs_threads_leave_process_signals_to_the_application(
    blackhole: str, tmp_path: Path, protocol: str
) -> None:
    """Every asynchronous signal sent to the process while the main thread blocks it
    stays pending (no thread of obs takes it), and its handler runs once the main thread
    unblocks it; every thread obs started (and gRPC's, started from them) blocks it."""
    out = tmp_path / "report.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            blackhole,
            protocol,
            str(tmp_path / "spool"),
            str(out),
            ",".join(ASYNC),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OBS_HANDLE_SIGTERM": "1"},
    )
    try:
        # Read nothing until the report exists: the child's console writer stays blocked.
        deadline = time.monotonic() + 60.0
        while not out.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert out.exists(), err.decode()[-3000:]
    report = json.loads(out.read_text())
    names = report["threads"]
    assert any(n.startswith("obs-otel-export") for n in names), names
    assert len(report["masks"]) >= 2, report  # the export thread and at least one more
    wrong = {
        name: [s for s in ASYNC if not (mask >> (getattr(signal, s) - 1)) & 1]
        for name, mask in report["masks"].items()
    }
    wrong = {k: v for k, v in wrong.items() if v}
    assert {} == wrong, f"threads that take the application's signals: {wrong}"
    taken = {
        n: r
        for n, r in report["signals"].items()
        if r != {"early": False, "pending": True, "ran": True}
    }
    assert {} == taken, f"signals taken by another thread or lost: {taken}"
