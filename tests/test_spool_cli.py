"""Tests for ``python -m obs spool`` (obs._spool_cli): list, replay, purge, as a real
subprocess against a real spool directory and a real OTLP receiver."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from obs._receiver import OTLPReceiver
from obs._spool import Spool

ROOT = Path(__file__).resolve().parents[1]


def _doc(service: str, i: int) -> dict[str, Any]:
    now = time.time_ns()
    return {
        "v": 1,
        "cls": 3,
        "ts": now,
        "ots": now,
        "sn": 17,
        "st": "ERROR",
        "body": f"spooled {i}",
        "name": "spooled_error",
        "attrs": {"i": i},
        "res": {"service.name": service, "host.name": "node-7", "rank": 2},
    }


def obs_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "obs", "spool", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


class TestSpoolCommand:
    def test_list_replay_purge(self, tmp_path: Path) -> None:
        """list counts the waiting records per service; replay delivers them with their
        original resource and empties the spool; purge deletes what is left."""
        directory = tmp_path / "spool"
        spool = Spool(str(directory), 1 << 20)
        spool.append([_doc("trainer", i) for i in range(3)] + [_doc("server", 9)])
        listed = obs_cli("list", "--dir", str(directory))
        assert 0 == listed.returncode, listed.stderr
        assert "server: 1 records" in listed.stdout
        assert "trainer: 3 records" in listed.stdout
        with OTLPReceiver() as rx:
            replayed = obs_cli("replay", "--dir", str(directory), "--endpoint", rx.http_endpoint)
            assert 0 == replayed.returncode, replayed.stderr
            got = rx.wait_for(4, predicate=lambda r: r["event_name"] == "spooled_error")
        assert ["server", "trainer", "trainer", "trainer"] == sorted(
            r["resource"]["service.name"] for r in got
        )
        assert {("node-7", 2)} == {(r["resource"]["host.name"], r["resource"]["rank"]) for r in got}
        assert not spool.pending()
        spool.append([_doc("trainer", 5)])
        purged = obs_cli("purge", "--dir", str(directory))
        assert 0 == purged.returncode, purged.stderr
        assert not spool.pending()
        assert "(empty)" in obs_cli("list", "--dir", str(directory)).stdout

    def test_unsafe_directory_is_an_error_not_a_crash(self, tmp_path: Path) -> None:
        """A symlinked spool directory is refused with exit status 1 and a message."""
        (tmp_path / "real").mkdir(mode=0o700)
        (tmp_path / "link").symlink_to(tmp_path / "real")
        listed = obs_cli("list", "--dir", str(tmp_path / "link"))
        assert 1 == listed.returncode
        assert "symlink" in listed.stderr
