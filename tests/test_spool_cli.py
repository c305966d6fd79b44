"""Tests for ``python -m obs spool`` (obs._spool_cli): list, replay, purge, as a real
subprocess against a real spool directory and a real OTLP receiver."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from _spooled import spooled_doc

from obs._receiver import OTLPReceiver
from obs._spool import Spool

ROOT = Path(__file__).resolve().parents[1]


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
        spool.append([spooled_doc(i, "trainer") for i in range(3)] + [spooled_doc(9, "server")])
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
        spool.append([spooled_doc(5, "trainer")])
        purged = obs_cli("purge", "--dir", str(directory))
        assert 0 == purged.returncode, purged.stderr
        assert not spool.pending()
        assert "(empty)" in obs_cli("list", "--dir", str(directory)).stdout

    def test_replay_refused_for_good_says_so(self, tmp_path: Path) -> None:
        """A collector that refuses the spooled records for good (HTTP 400): replay says how
        many it gave up, and exits 1 (not everything was delivered). It printed "replayed
        N records" and exited 0, as if they had been delivered."""
        directory = tmp_path / "spool"
        Spool(str(directory), 1 << 20).append([spooled_doc(i, "trainer") for i in range(3)])
        with OTLPReceiver(grpc=False) as rx:
            rx.set_fault(fail=True, http_status=400)
            replayed = obs_cli("replay", "--dir", str(directory), "--endpoint", rx.http_endpoint)
        assert (1, []) == (replayed.returncode, rx.records), replayed.stderr
        assert "gave up 3 records" in replayed.stdout
        assert "rejected" in replayed.stderr

    def test_unsafe_directory_is_an_error_not_a_crash(self, tmp_path: Path) -> None:
        """A symlinked spool directory is refused with exit status 1 and a message."""
        (tmp_path / "real").mkdir(mode=0o700)
        (tmp_path / "link").symlink_to(tmp_path / "real")
        listed = obs_cli("list", "--dir", str(tmp_path / "link"))
        assert 1 == listed.returncode
        assert "symlink" in listed.stderr


class TestReplayErrorsAreSafe:
    """What ``replay`` prints when the endpoint is bad or unreachable: a message and an
    exit status, never a traceback, never a secret of the endpoint's."""

    SECRET = "s3cr3t-Tok-9f8e7d"

    def test_bad_endpoint_is_a_usage_error(self, tmp_path: Path) -> None:
        """A ConfigError (a bad scheme or port; a password in it) exits 2 with one line."""
        directory = tmp_path / "spool"
        Spool(str(directory), 1 << 20).append([spooled_doc(0, "svc")])
        for endpoint in (
            f"grpc://u:{self.SECRET}@h",
            f"ftp://u:{self.SECRET}@127.0.0.1:4317",
            f"http://u:{self.SECRET}@127.0.0.1:notaport",
        ):
            done = obs_cli("replay", "--dir", str(directory), "--endpoint", endpoint)
            assert 2 == done.returncode, (endpoint, done.stderr)
            assert "Traceback" not in done.stderr, done.stderr
            assert self.SECRET not in done.stderr + done.stdout

    def test_unreachable_endpoint_never_prints_its_token(self, tmp_path: Path) -> None:
        """The OTel SDK's and urllib3's own warnings about a closed port quote the URL (a
        query token too): the replay process writes them scrubbed."""
        directory = tmp_path / "spool"
        Spool(str(directory), 1 << 20).append([spooled_doc(0, "svc")])
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        for endpoint in (
            f"http://127.0.0.1:{port}/?token={self.SECRET}",
            f"http://u:{self.SECRET}@127.0.0.1:{port}/v1/logs",
        ):
            done = obs_cli(
                "replay", "--dir", str(directory), "--endpoint", endpoint, "--timeout", "2"
            )
            assert 1 == done.returncode, done.stderr
            assert self.SECRET not in done.stderr + done.stdout, done.stderr
