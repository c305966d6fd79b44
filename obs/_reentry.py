"""Re-entrancy: a log call made while the same thread is inside one (a signal handler, a
finaliser, a ``__repr__`` that logs) is deferred and written by the outer call, never
blocks on a lock the thread holds. One mark per thread, shared by every runtime."""

from __future__ import annotations

__all__ = [
    "LOCAL",
    "MAX_ALERT_GEN",
    "MAX_DEFERRED",
    "MAX_GEN",
    "Local",
    "MarkedLock",
    "defer",
    "defer_built",
    "drain",
    "marked",
    "while_building",
]

import _thread
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from obs.callsite import AddCallsite
from obs.severity import alert_level

if TYPE_CHECKING:
    from structlog.typing import EventDict

    from obs._runtime import Runtime

#: Events deferred by re-entrant calls on one thread before further ones are counted.
MAX_DEFERRED = 256
#: Generations of re-entrant records written: 2, and for the alert's records (a signal
#: handler's, logged while obs writes a record a signal handler logged ...) more, bounded.
MAX_GEN, MAX_ALERT_GEN = 2, 8


class Local(threading.local):
    """Per-thread re-entrancy state: inside a log call, and what nested calls deferred.

    ``deferred`` is one list per thread, never replaced, so a signal handler appending to
    it at any bytecode boundary is never lost; ``gen`` is the deferral generation of the
    event being written (0 outside a drain).
    """

    busy = False
    gen = 0
    #: Building a re-entrant call's event (formatting its %-args): a call made by that
    #: user code is counted, not built in turn (it would recurse to the stack's end).
    building = False

    def __init__(self) -> None:
        self.deferred: list[tuple[Runtime, str, EventDict, int]] = []
        #: ``busy`` as it was when each :class:`MarkedLock` this thread holds was taken.
        self.outer: list[bool] = []


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
            level = event_dict.get("stacklevel")  # the chain drops it: found here
            where = AddCallsite().locate(1, level if type(level) is int else 1)
            if where is not None:
                event_dict["code.file.path"] = where[0]
                event_dict["code.line.number"] = where[1]
                event_dict["code.function.name"] = where[2]
        event_dict.setdefault("_obs_time_ns", time.time_ns())
    except Exception:
        event_dict.pop("code.file.path", None)
    deferred.append((runtime, method, event_dict, local.gen))


def while_building(runtime: Runtime, fn: Callable[..., object], *args: Any) -> None:
    """Run ``fn(*args)``, which builds a re-entrant call's event (user code may run: a
    ``__repr__`` of its %-args); a call that logs meanwhile is counted as dropped, not
    built in turn (it would recurse to the stack's end)."""
    local = LOCAL
    if local.building:
        runtime.reentrant_dropped += 1
        runtime.drops_due = True
        return
    local.building = True
    try:
        fn(*args)
    finally:
        local.building = False


def defer_built(runtime: Runtime, method: str, build: Callable[..., EventDict], *args: Any) -> None:
    """:func:`defer` the event ``build(*args)`` makes, built :func:`while_building`."""
    while_building(runtime, lambda: defer(runtime, build(*args), method))


def _alert(runtime: Runtime, event_dict: EventDict) -> bool:
    """Whether a deferred event is the alert's: an alert stage, or an event named after one."""
    try:
        stage = event_dict.get("stage")
        rule = runtime.policy.rule(stage) if type(stage) is str else None
        if rule is not None and rule.alert:
            return True
        return alert_level(runtime.policy, event_dict.get("event")) is not None
    except Exception:
        return False


def drain(local: Local) -> None:
    """Write what re-entrant calls deferred, in order. What a deferred event's writing
    logs in turn is written too (generation 1); past that it is counted as dropped, but for
    the alert's records, written up to :data:`MAX_ALERT_GEN` (never lost to a storm of
    signals whose handlers log)."""
    deferred = local.deferred
    while deferred:
        local.busy = True
        try:
            while deferred:
                runtime, method, event_dict, gen = deferred.pop(0)
                if gen >= MAX_GEN and (gen >= MAX_ALERT_GEN or not _alert(runtime, event_dict)):
                    runtime.reentrant_dropped += 1
                    runtime.drops_due = True  # reported after the next write
                    continue
                local.gen = gen + 1
                runtime._process(method, event_dict)
        finally:
            local.gen = 0
            local.busy = False


class MarkedLock:
    """A lock whose holder is marked as inside a log call (``with`` only): a signal handler
    or finaliser that logs on the thread holding it (inside ``obs.flush()``, ``delivery()``,
    the export thread) is deferred until it is released, never waits on it. ``raw`` is the
    plain lock, for a caller already marked (the chain's own submit), and for Condition."""

    __slots__ = ("acquire", "locked", "raw", "release")

    def __init__(self) -> None:
        self.raw = raw = _thread.allocate_lock()
        self.acquire, self.release, self.locked = raw.acquire, raw.release, raw.locked

    def __enter__(self) -> bool:
        local = LOCAL
        local.outer.append(local.busy)
        local.busy = True  # before the lock is held: an interrupt after is deferred
        try:
            return self.raw.acquire()
        except BaseException:  # KeyboardInterrupt out of the wait: not held, not marked
            self._unmark(local)
            raise

    def __exit__(self, *exc: object) -> None:
        self.raw.release()
        self._unmark(LOCAL)

    @staticmethod
    def _unmark(local: Local) -> None:
        outer = local.outer.pop() if local.outer else False
        if not outer:
            local.busy = False
            if local.deferred:
                drain(local)

    def __repr__(self) -> str:
        return f"<obs MarkedLock {'locked' if self.raw.locked() else 'unlocked'}>"


def marked(lock: Any) -> Any:
    """``lock`` (any context manager) held with this thread marked, as :class:`MarkedLock`
    does: for what obs holds outside a log call that a nested log call would wait on."""
    return _Marked(lock)


class _Marked:
    __slots__ = ("_cm",)

    def __init__(self, cm: Any) -> None:
        self._cm = cm

    def __enter__(self) -> Any:
        local = LOCAL
        local.outer.append(local.busy)
        local.busy = True
        try:
            return self._cm.__enter__()
        except BaseException:
            MarkedLock._unmark(local)
            raise

    def __exit__(self, *exc: object) -> Any:
        try:
            return self._cm.__exit__(*exc)
        finally:
            MarkedLock._unmark(LOCAL)
