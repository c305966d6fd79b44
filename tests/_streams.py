"""A text stream whose first writes block until released: another thread is "inside a
write" for as long as a test needs (tests of the sinks' combiner)."""

from __future__ import annotations

import io
import threading
from typing import Any


class HeldStream(io.StringIO):
    """Write ``n`` (counted from 0) for ``n < held`` blocks until ``gates[n]`` is set,
    after ``entered[n]``; ``store_first``: the text is stored before blocking (a writer held
    after its bytes went out); ``broken``: every write raises ``OSError`` (after its gate).
    ``entered``/``release`` name the first write's events."""

    def __init__(self, held: int = 1, *, store_first: bool = False, broken: bool = False):
        super().__init__()
        self.entered = [threading.Event() for _ in range(held)]
        self.gates = [threading.Event() for _ in range(held)]
        self.store_first = store_first
        self.broken = broken
        self.calls = 0

    @property
    def release(self) -> threading.Event:
        """The first write's gate."""
        return self.gates[0]

    def write(self, s: str) -> int:
        n = self.calls
        self.calls += 1
        stored = 0
        if self.store_first and not self.broken:
            stored = super().write(s)
        if n < len(self.gates):
            self.entered[n].set()
            self.gates[n].wait(30)
        if self.broken:
            raise OSError("stream broken")
        return stored if self.store_first else super().write(s)


def first_writer_held(monkeypatch: Any, stream: HeldStream) -> tuple[Any, threading.Thread]:
    """obs configured on ``stream`` as stderr, and a thread inside its first write (until
    ``stream.release``): the logger and that thread."""
    import sys

    import obs

    monkeypatch.setattr(sys, "stderr", stream)
    obs.configure(format="json", stream="stderr", stdlib_bridge=False, logs_exporter="none")
    log = obs.get_logger("t")
    first = threading.Thread(target=lambda: log.info("first"))
    first.start()
    assert stream.entered[0].wait(10)
    return log, first
