"""When the export worker may talk to the collector again after a failure: its own
backoff (0.5 s doubling to 5 s) and the collector's "not before" (``Retry-After``,
``RetryInfo``), whichever is later. A flush skips obs' own backoff (the application asked
now), never the collector's; a flush or shutdown whose deadline comes first gives up on
the network (records stay spooled) instead of asking sooner or waiting past its deadline.
"""

from __future__ import annotations

__all__ = ["MAX_BACKOFF", "Pacing"]

#: The longest backoff of obs' own (the collector said nothing of when to come back).
MAX_BACKOFF = 5.0


class Pacing:
    """The backoff state of one worker (read and changed under its lock)."""

    __slots__ = ("backoff", "not_before", "until")

    def __init__(self) -> None:
        self.backoff = 0.0
        #: No request before this (monotonic), obs' backoff or the collector's wish.
        self.until = 0.0
        #: No request before this, as the collector asked (0: it did not).
        self.not_before = 0.0

    def failed(self, now: float, asked: float) -> None:
        """An export failed at ``now``; the collector asked to wait ``asked`` seconds."""
        self.backoff = min(max(self.backoff * 2, 0.5), MAX_BACKOFF)
        self.not_before = now + asked if asked > 0 else 0.0
        self.until = max(now + self.backoff, self.not_before)

    def ok(self) -> None:
        """An export succeeded: no waiting."""
        self.backoff = self.until = self.not_before = 0.0

    def asked_wait(self, now: float) -> bool:
        """Whether the collector asked not to be sent anything now."""
        return now < self.not_before
