"""``OBS_HANDLE_SIGTERM`` with the main thread inside a long C call.

CPython runs a Python handler only when the main thread next runs bytecode. A rank whose
main thread hangs in a collective (here: a real ``torch.distributed`` gloo rendezvous
missing its peer, and a C mutex wait through ctypes) is exactly the process an operator
sends SIGTERM to; without obs it dies at once. With obs' handler it used to live on until
the C call returned (minutes for a real collective). Now obs' watcher thread flushes at
once and, where SIGTERM's action was the default one, ends the process by the signal;
an application's own handler still runs on the main thread, as it would without obs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_otel_exit import assert_accounted, spooled_lines

from obs._receiver import OTLPReceiver

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]
#: How long the child's C call would block: far past every bound asserted here.
BLOCK_SECONDS = 40

CHILD = r"""
import ctypes, datetime, os, signal, socket, sys, time
import obs
url, spool, n, wait, previous, block = sys.argv[1:7]
def handler(signum, frame):
    sys.stderr.write("APP HANDLER\n")
    sys.stderr.flush()
    os._exit(7)
if previous == "default":  # whatever a harness installed (coverage's sigterm = true)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
elif previous == "handler":
    signal.signal(signal.SIGTERM, handler)
elif previous == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
obs.configure(logs_exporter="otlp", otlp_endpoint=url, spool_dir=spool, stream="none",
              shutdown_timeout=2.0, otlp_timeout=2.0, blrp_max_queue_size=4096)
if previous == "after":  # the application takes SIGTERM over after configure
    signal.signal(signal.SIGTERM, handler)
log = obs.get_logger("child")
for i in range(int(n)):
    log.error("burst_error", i=i)
BLOCK = int(block)
if wait == "gloo":
    import torch.distributed as dist
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    sys.stderr.write("READY\n"); sys.stderr.flush()
    try:  # rank 0 of 2, its peer never comes: blocks in C++ until the timeout
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=2, timeout=datetime.timedelta(seconds=BLOCK))
    except Exception:
        pass
else:
    libc = ctypes.CDLL(None)
    class Timespec(ctypes.Structure):
        _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
    mutex = ctypes.create_string_buffer(64)
    libc.pthread_mutex_init(mutex, None)
    libc.pthread_mutex_lock(mutex)
    until = Timespec(int(time.time()) + BLOCK, 0)
    sys.stderr.write("READY\n"); sys.stderr.flush()
    libc.pthread_mutex_timedlock(mutex, ctypes.byref(until))  # not interrupted by signals
sys.stderr.write("RETURNED\n"); sys.stderr.flush()
time.sleep(0.5)
sys.stderr.write("ALIVE\n"); sys.stderr.flush()
"""


def start(url: str, spool: Path, n: int, wait: str, previous: str, *, block: int) -> Any:
    """Start CHILD; return once it is inside its C call."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, str(spool), str(n), wait, previous, str(block)],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "OBS_HANDLE_SIGTERM": "1", "PYTHONPATH": str(ROOT)},
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("READY"):
            break
    time.sleep(1.0)  # well inside the C call
    return proc


def run_child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with OBS_HANDLE_SIGTERM on, to its end (60 s at most)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "OBS_HANDLE_SIGTERM": "1", "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )


def signalled(url: str, spool: Path, n: int, wait: str) -> tuple[int, float, str]:
    """SIGTERM a CHILD with the default action inside its C call: (exit status, seconds
    from the signal to its end, its stderr)."""
    proc = start(url, spool, n, wait, "default", block=BLOCK_SECONDS)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, rest = proc.communicate(timeout=BLOCK_SECONDS + 30)
    finally:
        proc.kill()
    return proc.returncode, time.monotonic() - sent, rest


@pytest.mark.parametrize("wait", ["mutex", "gloo"])
def test_sigterm_ends_a_process_stuck_in_c_within_the_budget(
    blackhole: str, tmp_path: Path, wait: str
) -> None:
    """The default action: the process dies by SIGTERM within the shutdown budget (2 s)
    plus a margin, not when the C call returns, and the burst it had queued is spooled
    or counted."""
    n = 2000
    code, took, err = signalled(blackhole, tmp_path / "spool", n, wait)
    assert -signal.SIGTERM == code, err
    assert took < 12.0, (took, err)  # the C call would have lasted BLOCK_SECONDS
    lines = spooled_lines(tmp_path / "spool")
    assert_accounted(lines, lines, n)


def wait_spooled(spool: Path, n: int, seconds: float) -> list[dict[str, Any]]:
    """The spool's lines once it holds all ``n`` burst records (or after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while True:
        lines = spooled_lines(spool) if spool.exists() else []
        if sum(d.get("name") == "burst_error" for d in lines) == n:
            return lines
        if time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


@pytest.mark.parametrize("previous", ["handler", "ignore", "after"])
def test_the_applications_own_sigterm_stays_on_the_main_thread(
    blackhole: str, tmp_path: Path, previous: str
) -> None:
    """An application handler (set before configure) or SIG_IGN: the burst is spooled or
    counted while the C call still blocks, and obs never ends the process itself; the
    handler runs when the main thread is back, as without obs. A handler set after
    configure owns SIGTERM outright: obs' watcher does nothing."""
    n, block = 1000, 8
    spool = tmp_path / "spool"
    proc = start(blackhole, spool, n, "mutex", previous, block=block)
    try:
        proc.send_signal(signal.SIGTERM)
        lines = wait_spooled(spool, n, 5.0 if previous != "after" else 2.0)
        assert proc.poll() is None, "obs ended a process whose SIGTERM is the application's"
        if previous != "after":  # flushed while the main thread is still in C
            assert_accounted(lines, lines, n)
        _, rest = proc.communicate(timeout=block + 30)
    finally:
        proc.kill()
    if previous == "ignore":
        assert (0, True) == (proc.returncode, "ALIVE" in rest), rest
    else:
        assert (7, True) == (proc.returncode, "APP HANDLER" in rest), rest


FORK_CHILD = r"""
import json, os, signal, sys, time
import obs
url, out = sys.argv[1:3]
obs.configure(logs_exporter="otlp", otlp_endpoint=url, otlp_protocol="grpc", stream="none",
              shutdown_timeout=2.0)
log = obs.get_logger("parent")
pid = os.fork()
if pid == 0:
    time.sleep(60)
    os._exit(0)
time.sleep(1.0)
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
time.sleep(1.0)  # a parent watcher that took the child's SIGTERM would end us here
log.error("parent_alive")
delivered = obs.flush(timeout=10.0)
with open(out, "w") as f:
    json.dump({"child_signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
               "delivered": delivered}, f)
"""


def test_a_forked_childs_sigterm_stays_the_childs(tmp_path: Path) -> None:
    """A forked child shares its parent's pipes: its SIGTERM must end the child (its own
    watcher) and leave the parent's sink running."""
    out = tmp_path / "out.json"
    with OTLPReceiver(grpc_port=0) as rx:
        proc = run_child(FORK_CHILD, f"http://127.0.0.1:{rx.grpc_port}", str(out))
        assert 0 == proc.returncode, proc.stderr
        report = json.loads(out.read_text())
        assert {"child_signal": signal.SIGTERM, "delivered": True} == report
        assert "parent_alive" in [r["event_name"] for r in rx.records]


APP_FD_CHILD = r"""
import os, signal, socket, sys
import obs
a, b = socket.socketpair()
a.setblocking(False)
signal.set_wakeup_fd(a.fileno())  # the application's (what an asyncio loop does)
obs.configure(logs_exporter="otlp", otlp_endpoint=sys.argv[1], stream="none")
print(signal.set_wakeup_fd(-1) == a.fileno())
"""


def test_the_applications_wakeup_fd_is_left_alone(blackhole: str) -> None:
    """The wakeup fd is one per process: where the application holds it, obs keeps off."""
    proc = run_child(APP_FD_CHILD, blackhole)
    assert (0, "True") == (proc.returncode, proc.stdout.strip()), proc.stderr


RECONFIGURE_CHILD = r"""
import os, signal, sys, threading, time
import obs
def mine(signum, frame):
    pass
signal.signal(signal.SIGTERM, mine)
for _ in range(3):  # each configure replaces the sink: one hook at a time
    obs.configure(logs_exporter="otlp", otlp_endpoint=sys.argv[1], stream="none",
                  shutdown_timeout=0.5)
    assert signal.getsignal(signal.SIGTERM) is not mine
watchers = [t for t in threading.enumerate() if t.name == "obs-sigterm"]
obs.shutdown()
time.sleep(0.2)
print(len(watchers), signal.getsignal(signal.SIGTERM) is mine, signal.set_wakeup_fd(-1),
      sum(t.name == "obs-sigterm" for t in threading.enumerate()))
"""


def test_configure_again_and_shutdown_give_sigterm_back(blackhole: str) -> None:
    """Configured three times, one watcher runs; shut down, the application's handler
    and an unset wakeup fd are back, and the watcher has ended."""
    proc = run_child(RECONFIGURE_CHILD, blackhole)
    assert (0, "1 True -1 0") == (proc.returncode, proc.stdout.strip()), proc.stderr
