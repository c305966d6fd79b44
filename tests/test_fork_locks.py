"""A child forked while another thread of the parent is inside obs logs without waiting:
every lock obs takes on a log call is renewed in the child (a parent thread holding one at
the fork would hold it there forever). Real forks, each child under a deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import obs

    obs.configure(stream="stdout", file="out.jsonl")
    log = obs.get_logger("parent")
    stop = False

    def spin():  # new once keys and every_n counts: the once table's lock, taken and freed
        i = 0
        while not stop:
            i += 1
            log.info_once("first_time", n=i)
            log.info("counted", every_n=1000, n=i % 5)

    for _ in range(2):
        threading.Thread(target=spin, daemon=True).start()
    time.sleep(0.1)
    forks, hung = int(sys.argv[1]), 0
    for j in range(forks):
        pid = os.fork()
        if pid == 0:
            log.info_once("child_once", j=j)
            log.info("child_every", every_n=2, j=j)
            log.info("child_plain", j=j)
            os._exit(0)
        deadline = time.monotonic() + 5
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.monotonic() > deadline:
                hung += 1
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.002)
        if hung:
            break
    stop = True
    print("hung", hung, "of", j + 1, file=sys.stderr)
    sys.exit(1 if hung else 0)
    """
)


def test_child_forked_while_a_thread_holds_the_once_lock(tmp_path: Path) -> None:
    """A thread logs ``*_once`` with new keys and ``every_n`` calls (the once table's lock,
    held and released continuously) while the main thread forks 300 times; every child
    logs once-per-key calls and must exit within 5 s. On main a child hung in
    ``Deduper.admit`` on the lock the parent's thread held at the fork."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, "300"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert text.count('"event":"child_plain"') == 300
