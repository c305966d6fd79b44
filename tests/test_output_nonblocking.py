"""A console stream whose descriptor is non-blocking (``O_NONBLOCK`` set by the application,
an event loop, or inherited from the parent that made the pipe or socket) behind a reader
that is slow: a write the reader has no room for fails with ``EAGAIN`` instead of waiting.
Every line still arrives once and whole, in each thread's order, and nothing is counted as
lost: ``EAGAIN`` means "later", as a blocking write's wait does, never "failed"."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]

_CHILD = textwrap.dedent(
    """
    import sys, threading
    import obs
    obs.configure(format="json", stream=sys.argv[3], stdlib_bridge=False,
                  logs_exporter="none")
    log = obs.get_logger("t")

    def work(t):
        for i in range(int(sys.argv[2])):
            log.error("workspace_terminal_failure", t=t, i=i, pad="y" * int(sys.argv[1]))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ok = obs.flush(30)
    print(f"flush={ok} lost={obs.delivery()['not_written']}", file=sys.__stdout__
          if sys.argv[3] == "stderr" else sys.__stderr__, flush=True)
    """
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    env.update(PYTHONPATH=str(ROOT), OBS_SHUTDOWN_TIMEOUT="30")
    return env


@settings(max_examples=10, deadline=None)
@given(
    kind=st.sampled_from(["pipe", "socket"]),
    stream=st.sampled_from(["stdout", "stderr"]),
    pad=st.sampled_from([10, 900, 3000, 6000]),
    lines=st.integers(100, 300),
)
def test_a_non_blocking_stream_behind_a_slow_reader_loses_no_line(
    kind: str, stream: str, pad: int, lines: int
) -> None:
    """On main ``EAGAIN`` was taken as a failed write: with the reader a second late, ~90%
    of the lines were dropped (counted in ``not_written``) and ``obs.flush`` said False."""
    if kind == "pipe":
        r, w = os.pipe()
        reader = os.fdopen(r, "rb")
    else:
        a, b = socket.socketpair()
        w = os.dup(b.fileno())
        b.close()
        reader = a.makefile("rb")
        a.close()
    os.set_blocking(w, False)  # the write end the child inherits is non-blocking
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(_CHILD)
        other_r, other_w = os.pipe()  # where the child reports
        proc = subprocess.Popen(
            [sys.executable, str(script), str(pad), str(lines), stream],
            **{stream: w, "stdout" if stream == "stderr" else "stderr": other_w},  # type: ignore[arg-type]
            env=_env(),
            cwd=tmp,
        )
        os.close(w)
        os.close(other_w)
        time.sleep(1.0)  # the pipe fills, the callers go on
        with reader:
            out = reader.read()
        with os.fdopen(other_r, "rb") as report:
            said = report.read().decode()
        assert proc.wait(timeout=60) == 0, said
    records = [json.loads(line) for line in out.splitlines()]
    got = [(rec["t"], rec["i"]) for rec in records if rec["event"] == "workspace_terminal_failure"]
    assert sorted(got) == [(t, i) for t in range(3) for i in range(lines)], said
    for t in range(3):
        assert list(range(lines)) == [i for tt, i in got if tt == t]
    assert "flush=True lost=0" in said
