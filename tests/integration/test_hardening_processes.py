"""Issue 10 with real processes, signals, finalisers, pipes and shared files.

Each case runs ``_hardening_worker.py`` in a child interpreter under a timeout (a hang is a
failure, never a stuck test run) and checks everything the child wrote: every line one JSON
object with its control fields, nothing secret, nothing lost or doubled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("_hardening_worker.py")
ROOT = Path(__file__).resolve().parents[2]
SECRET = "SECRET-MARKER-7f3a"
CONTROL = ("timestamp", "severity_text", "severity_number", "event", "logger", "rank")


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The worker in a fresh interpreter; a hang fails the test at ``timeout``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, str(WORKER), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def lines_of(text: str) -> list[dict[str, Any]]:
    """Every line as one JSON object with intact control fields (the test fails otherwise)."""
    out = []
    for line in text.splitlines():
        record = json.loads(line)
        assert isinstance(record, dict), line[:200]
        for key in CONTROL:
            assert key in record, (key, line[:300])
        assert isinstance(record["event"], str)
        out.append(record)
    return out


class TestNoHang:
    def test_signal_handler_logging_mid_call(self, tmp_path: Path) -> None:
        """SIGALRM every 0.5 ms logs while the main thread logs to OBS_FILE: no hang (fails on
        the first release: the file lock was taken again by the handler), every line whole."""
        path = tmp_path / "sig.jsonl"
        proc = run("signal", str(path))
        assert 0 == proc.returncode, proc.stderr[-3000:]
        handled = int(proc.stdout.split()[0].split("=")[1])
        records = lines_of(path.read_text())
        lines_of(proc.stderr)
        events = Counter(r["event"] for r in records)
        dropped = sum(r["count"] for r in records if r["event"] == "obs_records_dropped")
        assert handled > 10, proc.stdout
        written = events["from_signal"]
        # Never doubled, never lost uncounted. The drop count also covers the handler's own
        # deferred ``from_signal_once`` records, so it bounds from above, not exactly.
        assert written <= handled <= written + dropped, (handled, written, dropped)
        stdlib = events["from_signal_stdlib %d"]  # through the bridge: deferred, not dropped
        assert stdlib <= handled <= stdlib + dropped, (handled, stdlib, dropped)
        assert SECRET not in path.read_text() + proc.stderr

    def test_signal_during_a_fallback_write(self) -> None:
        """A bridged record obs cannot read goes out through the fallback writer; a signal
        handler that logs during that write is deferred, not blocked on the stream lock
        (a03ec0c and the first hardening hung here)."""
        proc = run("fallback_signal", timeout=30)
        assert (0, "done\n") == (proc.returncode, proc.stdout), proc.stderr[-3000:]
        records = lines_of(proc.stderr)
        assert [("job_failed", "ERROR"), ("from_signal_handler", "ERROR")] == [
            (r["event"], r["severity_text"]) for r in records if r["logger"] in ("lib", "app")
        ]

    def test_processes_sharing_a_pipe_with_big_records(self) -> None:
        """4 processes write 20 KB records with tracebacks into one pipe: every line is one
        JSON object (96-126 of 1,200 were broken: a pipe keeps only PIPE_BUF bytes whole),
        the event intact, the cut said in ``truncated``, the traceback's tail kept."""
        read_fd, write_fd = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        env["PYTHONPATH"] = str(ROOT)
        procs = [
            subprocess.Popen([sys.executable, str(WORKER), "pipe_big"], stderr=write_fd, env=env)
            for _ in range(4)
        ]
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            data = pipe.read()
        for proc in procs:
            assert 0 == proc.wait(timeout=60)
        records = lines_of(data.decode())
        big = [r for r in records if r["event"] == "big_record"]
        assert 400 == len(big)
        assert all(len(json.dumps(r)) < 4096 for r in big)
        assert all("PIPE_BUF" in r["truncated"] for r in big)
        assert all(r["exception.type"] == "RuntimeError" for r in big)
        assert all(r["exception.stacktrace"].startswith("...") for r in big)  # the tail kept

    def test_finaliser_logging_inside_obs(self, tmp_path: Path) -> None:
        """Finalisers that log run inside obs' own calls (dedup lock, file write): no hang."""
        path = tmp_path / "gc.jsonl"
        proc = run("gc", str(path))
        assert (0, "done\n") == (proc.returncode, proc.stdout), proc.stderr[-3000:]
        records = lines_of(path.read_text())
        events = Counter(r["event"] for r in records)
        assert events["finalised_error"] >= 1500
        assert 1 == events["finalised"]
        assert SECRET not in path.read_text()


class TestWholeLines:
    def test_threads_on_a_pipe(self) -> None:
        """8 threads, ~10 KB tracebacks, stderr read through a pipe: 0 broken lines (about 20%
        were broken on the first release)."""
        proc = run("threads")
        assert 0 == proc.returncode, proc.stderr[-2000:]
        records = lines_of(proc.stderr)
        events = Counter(r["event"] for r in records)
        assert (480, 480) == (events["big_error"], events["small"])
        big = [r for r in records if r["event"] == "big_error"]
        # ~10 KB each: cut to PIPE_BUF on a pipe (it may be shared with other processes)
        assert all("PIPE_BUF" in r["truncated"] for r in big)

    def test_threads_behind_a_slow_reader(self) -> None:
        """16 threads, 2,400 lines of 1-3 KB, stderr a pipe read 4 KB at a time with pauses:
        the writer blocks on the full pipe while the others queue; every line arrives whole,
        once, each thread's in order."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        env["PYTHONPATH"] = str(ROOT)
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "slow_reader"], stderr=subprocess.PIPE, env=env
        )
        assert proc.stderr is not None
        chunks = []
        while True:
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                break
            chunks.append(chunk)
            if len(chunks) % 50 == 0:
                time.sleep(0.01)
        assert 0 == proc.wait(timeout=60)
        records = lines_of(b"".join(chunks).decode())
        assert 16 * 150 == len(records)
        for t in range(16):
            mine = [r for r in records if r["thread"] == t]
            assert list(range(150)) == [r["i"] for r in mine]
            assert all(r["blob"] == chr(97 + t) * (1000 + 13 * r["i"]) for r in mine)

    def test_processes_sharing_one_file(self, tmp_path: Path) -> None:
        """4 processes append 2-8 KB lines to one OBS_FILE: no line interleaves another."""
        path = tmp_path / "shared.jsonl"
        procs = [
            subprocess.Popen(
                [sys.executable, str(WORKER), "shared_file", str(path), tag],
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stderr=subprocess.PIPE,
            )
            for tag in "abcd"
        ]
        for p in procs:
            assert 0 == p.wait(timeout=60), p.stderr.read() if p.stderr else ""
        records = lines_of(path.read_text())
        assert dict.fromkeys("abcd", 150) == Counter(r["tag"] for r in records)
        assert all(set(r["blob"]) == {r["tag"]} for r in records)


class TestAroundShutdown:
    def test_atexit_and_after_shutdown_reach_the_file(self, tmp_path: Path) -> None:
        """Records after obs.shutdown() and an atexit handler's ERROR reach OBS_FILE too (the
        first release closed the file at shutdown and they reached only the stream)."""
        path = tmp_path / "exit.jsonl"
        proc = run("atexit", str(path))
        assert 0 == proc.returncode, proc.stderr[-2000:]
        file_events = [r["event"] for r in lines_of(path.read_text())]
        stream_events = [r["event"] for r in lines_of(proc.stderr)]
        expected = ["early", "after_shutdown", "late_error"]
        assert (expected, expected) == (file_events, stream_events)
        late = lines_of(path.read_text())[-1]
        assert ("ERROR", "failure") == (late["severity_text"], late["outcome"])

    def test_reconfigure_under_load_writes_every_line_once(self, tmp_path: Path) -> None:
        """4 threads log while configure() runs 30 times: no line lost, none doubled (the first
        release lost ~1,000 and doubled ~900: 'I/O operation on closed file')."""
        path = tmp_path / "race.jsonl"
        proc = run("reconfigure", str(path))
        assert 0 == proc.returncode, proc.stderr[-2000:]
        counts = [int(c) for c in proc.stdout.split()]
        records = [r for r in lines_of(path.read_text()) if r["event"] == "race_line"]
        seen = Counter((r["thread"], r["i"]) for r in records)
        assert [] == [k for k, n in seen.items() if n > 1]
        assert counts == [len({i for (t, i) in seen if t == th}) for th in range(4)]
        assert all(c > 0 for c in counts)
