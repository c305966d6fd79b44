"""The probe when a rank dies: a real forked rank killed by a real signal, or exiting with
a status of its own, before it reports; or the launcher failing to start a rank. The
result names the rank and how it ended, and the run ends soon after (the ranks left
waiting for it in the rendezvous are stopped), far before --timeout."""

from __future__ import annotations

import importlib
import json
import os
import signal
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from comm import probe
from comm.probe import ProbeSpec
from comm.probe.report import failure_causes, result_json

#: The launcher and the ranks leave through ``os._exit``: coverage never saves their data.
pytestmark = pytest.mark.usefixtures("untraced_children")


def _short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """One rank ends and the rest wait for it forever: a grace of 1 s (the product's 5 s
    also collects later deaths) stops them as surely."""
    launch_module = importlib.import_module("comm.probe.launch")  # comm.probe.launch: a function
    monkeypatch.setattr(launch_module, "DEATH_GRACE_S", 1.0)


#: Loaded by the launcher (sitecustomize, through PYTHONPATH): the named ranks end as told
#: as soon as they start, before joining the process group.
_SITECUSTOMIZE = textwrap.dedent(
    """
    import importlib, os, signal

    _plan = {int(r): how for r, _, how in
             (p.partition(":") for p in os.environ.get("PROBE_TEST_DEATHS", "").split(",") if p)}
    if _plan:
        _launch = importlib.import_module("comm.probe.launch")
        _real = _launch.rank_main

        def _rank_main(spec, rank, fd):
            how = _plan.get(rank)
            if how is not None:
                if how.startswith("SIG"):  # the signal's own action, at once: a handler
                    # preloaded with flashinfer (tvm_ffi's) symbolizes a stack on SIGSEGV
                    # first: seconds on a loaded machine, past the grace rank 2's exit set
                    if how != "SIGKILL":  # (whose action cannot be set)
                        signal.signal(getattr(signal, how), signal.SIG_DFL)
                    os.kill(os.getpid(), getattr(signal, how))
                os._exit(int(how))
            return _real(spec, rank, fd)

        _launch.rank_main = _rank_main

    _fail_fork = os.environ.get("PROBE_TEST_FORK_FAILS_AT")
    if _fail_fork:  # the launcher's fork of that rank fails as with RLIMIT_NPROC (EAGAIN)
        import errno
        _real_fork, _forks = os.fork, [0]

        def _fork():
            _forks[0] += 1
            if _forks[0] == int(_fail_fork) + 1:
                raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))
            return _real_fork()

        os.fork = _fork
    """
)


@pytest.mark.parametrize(
    ("deaths", "said"),
    [
        ({1: "SIGKILL"}, {1: "killed by SIGKILL"}),
        ({1: "SIGSEGV", 2: "7"}, {1: "killed by SIGSEGV", 2: "exited with status 7"}),
    ],
)
def test_a_rank_that_dies_is_named_with_how_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deaths: dict[int, str], said: dict[int, str]
) -> None:
    """Rank 1 killed by SIGKILL (the OOM killer) or SIGSEGV, rank 2 exiting with status 7,
    right after starting: the causes (screen and --json) say so for those ranks, and the
    ranks that waited for them are stopped soon after, not at --timeout (60 s: the run
    waited all of it before), and said to be stopped because of the dead rank."""
    if len(deaths) == 1:
        _short_grace(monkeypatch)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("PROBE_TEST_DEATHS", ",".join(f"{r}:{h}" for r, h in deaths.items()))
    started = time.monotonic()
    result = probe.launch(ProbeSpec(world_size=3, timeout=60.0, log_dir=str(tmp_path / "run")))
    assert time.monotonic() - started < 30
    assert (0, 1, 2) == result.missing
    assert (1, False) == (result.exit_code, result.timed_out)
    causes = failure_causes(result)
    for rank, text in said.items():
        assert any(c.startswith(f"rank {rank}: ") and text in c for c in causes), causes
    waited = [r for r in range(3) if r not in deaths]
    assert any(
        c.startswith(f"rank{'s' if len(waited) > 1 else ''} {probe.format_ranks(waited)}: ")
        and "stopped" in c
        and any(f"rank {r} " in c for r in deaths)
        for c in causes
    ), causes
    for cause in causes:
        if cause.startswith("rank ") and int(cause.split()[1].rstrip(":")) in deaths:
            assert "timed out" not in cause, cause
    statuses = {
        r: -getattr(signal, h) if h.startswith("SIG") else int(h) for r, h in deaths.items()
    }
    doc = json.loads(json.dumps(result_json(result), default=str))
    assert {str(r): s for r, s in statuses.items()} == {
        r: s for r, s in doc["exits"].items() if int(r) in deaths
    }, doc["exits"]
    assert doc["causes"] == causes


def _dead_rank_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(site))
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_a_rank_killed_from_outside_ends_the_run_soon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGKILL sent from outside (the OOM killer) to rank 2 once it has started:
    the others, blocked in the rendezvous or a collective waiting for it, are stopped and
    the run reports well before --timeout (it waited all 60 s before)."""
    killed: list[int] = []

    def on_message(message: Mapping[str, Any]) -> None:
        if message.get("kind") == "started" and message.get("rank") == 2 and not killed:
            killed.append(int(message["pid"]))
            os.kill(int(message["pid"]), signal.SIGKILL)

    _short_grace(monkeypatch)
    started = time.monotonic()
    result = probe.launch(
        ProbeSpec(world_size=3, timeout=60.0, log_dir=str(tmp_path / "run")),
        on_message=on_message,
    )
    assert killed
    assert time.monotonic() - started < 30
    assert (1, False, -signal.SIGKILL) == (result.exit_code, result.timed_out, result.exits[2])
    causes = failure_causes(result)
    assert any(c.startswith("rank 2: ") and "killed by SIGKILL" in c for c in causes), causes
    assert not any("timed out" in c for c in causes), causes
    assert "rank 2" in str(result_json(result)["stopped"])


def test_a_rank_the_launcher_cannot_start_ends_the_run_soon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher's fork of rank 1 fails (EAGAIN, as under RLIMIT_NPROC): rank 0, already
    waiting in the rendezvous for it, is stopped and the run reports at once with the
    launcher's error, not after --timeout (the launcher died with a traceback and the
    parent waited all 60 s for rank 0)."""
    _dead_rank_env(tmp_path, monkeypatch, PROBE_TEST_FORK_FAILS_AT="1")
    _short_grace(monkeypatch)
    started = time.monotonic()
    result = probe.launch(ProbeSpec(world_size=3, timeout=60.0, log_dir=str(tmp_path / "run")))
    assert time.monotonic() - started < 30
    assert ((0, 1, 2), 1, False) == (result.missing, result.exit_code, result.timed_out)
    causes = failure_causes(result)
    assert any("Resource temporarily unavailable" in c for c in causes), causes
    assert not any("timed out" in c for c in causes), causes
