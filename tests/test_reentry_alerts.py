"""Alerts logged re-entrantly (a signal handler that runs while obs writes a record that a
signal handler logged while obs wrote one ...) are written up to a bound generation; other
re-entrant records past the second generation are counted, as before (a ``__repr__`` that
logs would otherwise recurse)."""

from __future__ import annotations

import os
import signal

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._reentry import MAX_ALERT_GEN

#: The alert's event and another one, as a signal handler would log them.
ALERT, PLAIN = "workspace_terminal_failure", "workspace_attempt_failed"


class Ring:
    """A value whose text rings SIGUSR1 once (delivered at once, to this thread): the
    handler then logs while obs is writing the record that holds this value."""

    def __init__(self, ring: bool) -> None:
        self.ring = ring

    def __repr__(self) -> str:
        if self.ring:
            self.ring = False
            os.kill(os.getpid(), signal.SIGUSR1)
        return "Ring()"


def expected(events: list[str]) -> list[int]:
    """The handlers' records written: the n-th is generation n of re-entrant records; a
    plain one past generation 1 is dropped (and its value never rings the next)."""
    written = []
    for n, event in enumerate(events):
        if event != ALERT and n >= 2:
            break
        written.append(n)
    return written


@settings(max_examples=30, deadline=None)
@given(events=st.lists(st.sampled_from([ALERT, PLAIN]), min_size=1, max_size=MAX_ALERT_GEN))
def test_alerts_from_nested_signal_handlers_are_written(events: list[str]) -> None:
    """Each handler's record holds a value that rings the next signal while it is written.
    Every alert of the chain is written (on 507be21 an alert past generation 1 was
    dropped: counted, never written); a plain record past generation 1 is counted."""
    calls: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        n = len(calls)
        calls.append(n)
        ring = Ring(n + 1 < len(events))
        obs.get_logger("handler").error(events[n], chain="fi_ar", ring=ring, n=n)

    previous = signal.signal(signal.SIGUSR1, on_signal)
    try:
        with obs.testing.capture_events() as captured:
            obs.get_logger("main").info("outer", ring=Ring(True))
            obs.get_logger("main").info("after")  # drops are reported after a write
        written = [e["n"] for e in captured if e["event"] in (ALERT, PLAIN)]
        dropped = [e for e in captured if e["event"] == "obs_records_dropped"]
        assert (expected(events), len(expected(events)) < len(events)) == (
            sorted(written),
            bool(dropped),
        )
    finally:
        signal.signal(signal.SIGUSR1, previous)
        obs.testing.reset()


def test_an_alert_that_logs_itself_is_bounded() -> None:
    """An alert whose value logs the alert again whenever it is written: at most
    ``MAX_ALERT_GEN`` records, then counted (no recursion to the stack's end)."""

    class Again:
        def __repr__(self) -> str:
            obs.get_logger("again").error(ALERT, chain="fi_ar", v=Again())
            return "Again()"

    try:
        with obs.testing.capture_events() as captured:
            obs.get_logger("main").error(ALERT, chain="fi_ar", v=Again())
            obs.get_logger("main").info("after")  # drops are reported after a write
        alerts = [e for e in captured if e["event"] == ALERT]
        dropped = [e for e in captured if e["event"] == "obs_records_dropped"]
        assert (True, True) == (1 < len(alerts) <= MAX_ALERT_GEN + 1, bool(dropped))
    finally:
        obs.testing.reset()
