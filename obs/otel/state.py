"""The export worker's state machine: a :class:`State` is a :class:`Phase` and what is known
of the :class:`Collector`; :func:`transition` is the only way from one state to the next.

``collector_down`` turns on write-ahead (WARNING+ records go to the spool as they are
logged); ``closing`` makes exports a race against the shutdown deadline; ``gone`` (an
export failed or hung while closing) spools the rest without touching the network again;
``abandoned`` means shutdown took over what the thread held; ``closed`` disposes of anything
logged later at once.
"""

from __future__ import annotations

__all__ = [
    "CLOSING_PHASES",
    "COLLECTORS",
    "PHASES",
    "Collector",
    "Phase",
    "Signal",
    "State",
    "transition",
]

import enum
from typing import NamedTuple


class Phase(enum.Enum):
    """Where the worker is in its life."""

    RUNNING = "running"
    FLUSHING = "flushing"  #: a force_flush is waiting: its records and replays go first
    CLOSING = "closing"  #: shutdown: deliver what it can before the deadline, spool the rest
    ABANDONED = "abandoned"  #: shutdown gave up on a stuck thread and took over its records
    CLOSED = "closed"  #: shut down: anything logged now is spooled or counted at once


class Collector(enum.Enum):
    """What the last attempt said about the collector."""

    UP = "up"
    DOWN = "down"  #: an export failed: back off, write WARNING+ ahead to the spool
    GONE = "gone"  #: an export failed or hung while closing: no more network, spool


class Signal(enum.Enum):
    """What happened: the only inputs of :func:`transition`."""

    EXPORT_OK = "export_ok"
    EXPORT_FAILED = "export_failed"
    #: An export failed, but the collector answered server errors to single records (a
    #: record it fails on, or it fails on everything): reachable, so records keep queuing
    #: (no write-ahead) and a later one can prove it up; the worker backs off all the same.
    SERVER_ERROR = "server_error"
    GIVE_UP = "give_up"  #: shutdown interrupts an export that does not return
    FLUSH_BEGIN = "flush_begin"
    FLUSH_END = "flush_end"
    SHUTDOWN = "shutdown"
    ABANDON = "abandon"
    CLOSE = "close"
    FORK = "fork"  #: in the child, after fork


class State(NamedTuple):
    """The worker's state: its phase and what it knows of the collector."""

    phase: Phase
    collector: Collector

    @property
    def name(self) -> str:
        """One word: the phase, or ``collector_down`` while running with it down."""
        if self.phase is Phase.RUNNING and self.collector is not Collector.UP:
            return "collector_down"
        return self.phase.value


#: Phases in which shutdown has begun.
CLOSING_PHASES = frozenset({Phase.CLOSING, Phase.ABANDONED, Phase.CLOSED})
#: (phase, signal) -> phase; a pair not listed leaves the phase as it is.
PHASES: dict[tuple[Phase, Signal], Phase] = {
    (Phase.RUNNING, Signal.FLUSH_BEGIN): Phase.FLUSHING,
    (Phase.FLUSHING, Signal.FLUSH_END): Phase.RUNNING,
    (Phase.RUNNING, Signal.SHUTDOWN): Phase.CLOSING,
    (Phase.FLUSHING, Signal.SHUTDOWN): Phase.CLOSING,
    (Phase.CLOSING, Signal.ABANDON): Phase.ABANDONED,
    (Phase.RUNNING, Signal.CLOSE): Phase.CLOSED,
    (Phase.FLUSHING, Signal.CLOSE): Phase.CLOSED,
    (Phase.CLOSING, Signal.CLOSE): Phase.CLOSED,
    (Phase.RUNNING, Signal.FORK): Phase.RUNNING,
    (Phase.FLUSHING, Signal.FORK): Phase.RUNNING,  # the parent's waiters are not the child's
    (Phase.CLOSING, Signal.FORK): Phase.CLOSED,
    (Phase.ABANDONED, Signal.FORK): Phase.CLOSED,
}
#: (collector, signal) -> collector while not closing; GONE is final.
COLLECTORS: dict[tuple[Collector, Signal], Collector] = {
    (Collector.UP, Signal.EXPORT_FAILED): Collector.DOWN,
    (Collector.DOWN, Signal.EXPORT_OK): Collector.UP,
    (Collector.DOWN, Signal.SERVER_ERROR): Collector.UP,
    (Collector.UP, Signal.GIVE_UP): Collector.GONE,
    (Collector.DOWN, Signal.GIVE_UP): Collector.GONE,
    (Collector.UP, Signal.FORK): Collector.UP,
    (Collector.DOWN, Signal.FORK): Collector.UP,
    (Collector.GONE, Signal.FORK): Collector.UP,
}


def transition(state: State, signal: Signal) -> State:
    """The next state. While closing, a failed export (a server error too) means the
    collector is gone (spool the rest now); a signal that does not apply leaves the state
    unchanged."""
    phase = PHASES.get((state.phase, signal), state.phase)
    failed = signal is Signal.EXPORT_FAILED or signal is Signal.SERVER_ERROR
    if failed and state.phase in CLOSING_PHASES:
        collector = Collector.GONE
    else:
        collector = COLLECTORS.get((state.collector, signal), state.collector)
    return State(phase, collector)
