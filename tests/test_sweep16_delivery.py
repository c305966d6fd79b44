"""obs' own entry points re-entered on the thread that is inside them: a signal handler (or
a finaliser) that calls ``obs.configure()`` while that thread is in the middle of a
``configure()``. Real processes, each under a deadline (faulthandler ends a hung one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing

ROOT = Path(__file__).resolve().parents[1]

#: Configures obs (INFO) with a profile hook that, at the n-th call into obs during that
#: configure() (counted from its first look at the settings), raises SIGUSR1: its handler
#: configures obs again (WARNING, the later call), logs, or flushes. argv: the handler's
#: action, then where (fractions of the calls one configure() makes: 0.5 is half way).
CHILD = textwrap.dedent(
    """
    import faulthandler, json, os, signal, sys
    import obs
    from obs._config import STATE

    faulthandler.dump_traceback_later(30, exit=True)
    obs.configure(format="json", stream="stdout", level="INFO")
    log = obs.get_logger("reentry")
    action = sys.argv[1]
    where = os.path.dirname(obs.__file__)

    def handler(signum, frame):
        if action in ("configure", "both"):
            obs.configure(format="json", stream="stdout", level="WARNING")
        if action in ("log", "both"):
            log.error("in_handler")
        if action == "flush":
            obs.flush(1.0)

    signal.signal(signal.SIGUSR1, handler)
    state = {"count": 0, "at": -1}
    settings_py = os.path.join(where, "settings.py")

    def hook(frame, event, arg):  # counts from configure()'s first look at the settings
        if event == "call" and frame.f_code.co_filename.startswith(where):
            if state["count"] == 0 and frame.f_code.co_filename != settings_py:
                return
            state["count"] += 1
            if state["count"] == state["at"]:
                sys.setprofile(None)
                signal.raise_signal(signal.SIGUSR1)

    sys.setprofile(hook)
    obs.configure(format="json", stream="stdout", level="INFO")
    sys.setprofile(None)
    calls = state["count"]
    levels = []
    for fraction in map(float, sys.argv[2:]):
        state["count"], state["at"] = 0, max(1, int(fraction * calls))
        sys.setprofile(hook)
        obs.configure(format="json", stream="stdout", level="INFO")
        sys.setprofile(None)
        levels.append(STATE.runtime.settings.level)
        obs.configure(format="json", stream="stdout", level="INFO")
        log.info("after")
    obs.flush(5.0)
    print("RESULT", json.dumps({"calls": calls, "levels": levels}), file=sys.stderr)
    """
)


def _run(action: str, fractions: list[float]) -> tuple[int, list[dict[str, object]], str]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, action, *map(str, fractions)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    return proc.returncode, lines, proc.stderr


def _result(stderr: str) -> dict[str, list[int]]:
    line = next(line for line in stderr.splitlines() if line.startswith("RESULT "))
    result: dict[str, list[int]] = json.loads(line.removeprefix("RESULT "))
    return result


def test_configure_from_a_signal_handler_inside_configure_returns() -> None:
    """A signal handler calls ``obs.configure()`` while the main thread is inside
    ``configure()``, at points spread over the whole call: both return, and the later
    call (the handler's) is the configuration in force. Inside the walk that adopts the
    console loggers the handler's configure() waited for ever on a lock its own thread
    held (the process hung)."""
    fractions = [i / 40 for i in range(40)]
    rc, lines, stderr = _run("configure", fractions)
    assert rc == 0, stderr[-3000:]
    result = _result(stderr)
    assert result["levels"] == [30] * len(fractions)
    assert [r["event"] for r in lines].count("after") == len(fractions)


@settings(max_examples=6, deadline=None)
@given(
    action=st.sampled_from(["configure", "log", "both", "flush"]),
    fractions=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=12),
)
def test_obs_called_from_a_signal_handler_anywhere_in_configure(
    action: str, fractions: list[float]
) -> None:
    """Whatever a signal handler calls on obs (configure, log, flush) wherever the main
    thread is inside ``configure()``: the process goes on, every line is one JSON object,
    the handler's record is written, and a configure() the handler made is the one in force."""
    rc, lines, stderr = _run(action, fractions)
    assert rc == 0, stderr[-3000:]
    events = [r["event"] for r in lines]
    assert events.count("after") == len(fractions)
    if action in ("log", "both"):
        assert events.count("in_handler") == len(fractions)
    want = 30 if action in ("configure", "both") else 20
    assert _result(stderr)["levels"] == [want] * len(fractions)


#: The first configure() of a process (obs' runtime modules not imported yet), with a
#: profile hook that raises SIGUSR1 at the n-th call into obs (argv[1]; 0: count only);
#: the handler logs an ERROR.
FIRST = textwrap.dedent(
    """
    import faulthandler, os, signal, sys
    import obs

    faulthandler.dump_traceback_later(30, exit=True)
    log = obs.get_logger("first")
    where = os.path.dirname(obs.__file__)
    signal.signal(signal.SIGUSR1, lambda signum, frame: log.error("in_handler"))
    state = {"count": 0, "at": int(sys.argv[1])}

    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(where):
            state["count"] += 1
            if state["count"] == state["at"]:
                sys.setprofile(None)
                signal.raise_signal(signal.SIGUSR1)

    sys.setprofile(hook)
    obs.configure(format="json", stream="stdout")
    sys.setprofile(None)
    log.info("after")
    obs.flush(5.0)
    print("COUNT", state["count"], file=sys.stderr)
    """
)


def _first(at: int) -> tuple[int, list[str], str]:
    """Run FIRST; its return code, the events of its JSON lines (both streams), stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", FIRST, str(at)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    events = [
        json.loads(line)["event"]
        for line in (proc.stdout + proc.stderr).splitlines()
        if line.startswith("{")
    ]
    return proc.returncode, events, proc.stderr


def _first_calls() -> int:
    rc, _, stderr = _first(0)
    assert rc == 0, stderr[-3000:]
    return int(next(line for line in stderr.splitlines() if line.startswith("COUNT ")).split()[1])


@settings(max_examples=3, deadline=None)
@given(fractions=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=3))
def test_a_signal_handler_logging_during_the_first_configure(fractions: list[float]) -> None:
    """A signal handler logs while the process's first ``configure()`` is importing obs'
    runtime modules (or anywhere else in that call): the handler's record and the app's
    next one are written, and configure() returns. The handler's log call found
    ``obs._runtime`` half imported and raised ImportError into the handler, out of the
    configure() it interrupted: the application's configure() failed."""
    calls = _first_calls()
    for fraction in [0.02, 0.05, 0.1, *fractions]:
        rc, events, stderr = _first(max(1, int(fraction * calls)))
        assert rc == 0, stderr[-3000:]
        assert (events.count("in_handler"), events.count("after")) == (1, 1), stderr[-3000:]


def test_a_configure_deferred_past_a_reset_runs_the_after_configure_hooks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``configure()`` re-entered on the thread inside ``reset()`` (a signal handler's,
    made here at the seam right after reset's work) is applied after it, and the
    ``after_configure`` hooks (vLLM's plugin keeps one) run for it, as for any configure.
    They did not: only configure() ran them, after its own call."""
    from obs._config import STATE, Holder

    calls: list[int] = []

    def hook() -> None:
        calls.append(1)

    obs.configure(sdk_disabled=True, stream="none")
    STATE.after_configure.append(hook)
    original = Holder._reset

    def reentered(self: Holder) -> None:
        original(self)
        obs.configure(sdk_disabled=True, stream="none", level="WARNING")  # the handler's

    try:
        monkeypatch.setattr(Holder, "_reset", reentered)
        STATE.reset()
        monkeypatch.undo()
        assert calls == [1]
        assert STATE.runtime is not None
        assert STATE.runtime.settings.level == 30
    finally:
        monkeypatch.undo()
        STATE.after_configure.remove(hook)
        obs.testing.reset()
