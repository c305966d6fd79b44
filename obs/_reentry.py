"""Re-entrancy: a log call made while the same thread is inside one (a signal handler, a
finaliser, a ``__repr__`` that logs) is deferred and written by the outer call, never
blocks on a lock the thread holds. One mark per thread, shared by every runtime."""

from __future__ import annotations

__all__ = ["LOCAL", "MAX_DEFERRED", "Local", "defer", "drain"]

import threading
import time
from typing import TYPE_CHECKING

from obs.callsite import AddCallsite

if TYPE_CHECKING:
    from structlog.typing import EventDict

    from obs._runtime import Runtime

#: Events deferred by re-entrant calls on one thread before further ones are counted.
MAX_DEFERRED = 256


class Local(threading.local):
    """Per-thread re-entrancy state: inside a log call, and what nested calls deferred.

    ``deferred`` is one list per thread, never replaced, so a signal handler appending to
    it at any bytecode boundary is never lost; ``gen`` is the deferral generation of the
    event being written (0 outside a drain).
    """

    busy = False
    gen = 0

    def __init__(self) -> None:
        self.deferred: list[tuple[Runtime, str, EventDict, int]] = []


LOCAL = Local()


def defer(runtime: Runtime, event_dict: EventDict, method: str) -> None:
    """Keep a re-entrant call's event for the outer call to write (never blocks)."""
    local = LOCAL
    deferred = local.deferred
    if len(deferred) >= MAX_DEFERRED:
        runtime.reentrant_dropped += 1
        runtime.drops_due = True  # reported after the next write (rate-limited)
        return
    try:
        if "code.file.path" not in event_dict:
            where = AddCallsite().locate(1)
            if where is not None:
                event_dict["code.file.path"] = where[0]
                event_dict["code.line.number"] = where[1]
                event_dict["code.function.name"] = where[2]
        event_dict.setdefault("_obs_time_ns", time.time_ns())
    except Exception:
        event_dict.pop("code.file.path", None)
    deferred.append((runtime, method, event_dict, local.gen))


def drain(local: Local) -> None:
    """Write what re-entrant calls deferred, in order. What a deferred event's writing
    logs in turn is written too (generation 1); past that it is counted as dropped."""
    deferred = local.deferred
    while deferred:
        local.busy = True
        try:
            while deferred:
                runtime, method, event_dict, gen = deferred.pop(0)
                if gen >= 2:
                    runtime.reentrant_dropped += 1
                    runtime.drops_due = True  # reported after the next write
                    continue
                local.gen = gen + 1
                runtime._process(method, event_dict)
        finally:
            local.gen = 0
            local.busy = False
