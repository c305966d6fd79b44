"""obs' threads leave the process's signals to the application's threads.

Linux hands a signal sent to the process (``kill``, Ctrl-C, a supervisor's SIGTERM) to any
thread that does not block it, and CPython wakes its main thread to run the Python handler
only when the main thread was the one interrupted. A busy obs thread that took SIGTERM left
a main thread asleep in a C call (``time.sleep``, a lock, a C extension) asleep, handler
and all. So every thread obs starts (and every thread those start, or that a library
starts while obs builds it: gRPC's) begins with the asynchronous signals blocked; the
signals the kernel sends to the thread that caused them (a fault, a broken pipe) stay as
they are.
"""

from __future__ import annotations

__all__ = ["held"]

import contextlib
import functools
import signal
from collections.abc import Iterator

#: Sent to the thread that caused them, never redirected: blocking them changes nothing
#: for the application and would turn a fault in obs' thread into a kill.
_SYNCHRONOUS = frozenset(
    (
        "SIGSEGV",
        "SIGBUS",
        "SIGFPE",
        "SIGILL",
        "SIGTRAP",
        "SIGSYS",
        "SIGABRT",
        "SIGPIPE",
        "SIGXFSZ",
        "SIGKILL",
        "SIGSTOP",
    )
)


@functools.cache
def _asynchronous() -> frozenset[int]:
    """Every signal a process can be sent that is not a synchronous one (real-time ones
    included); empty where threads have no signal mask (Windows)."""
    if not hasattr(signal, "pthread_sigmask"):
        return frozenset()
    return frozenset(
        int(s) for s in signal.valid_signals() if getattr(s, "name", "") not in _SYNCHRONOUS
    )


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Block the asynchronous signals in the calling thread while threads are started from
    it (a new thread inherits the mask), then put the mask back: a signal sent meanwhile
    stays pending and is delivered then, to a thread of the application."""
    wanted = _asynchronous()
    if not wanted:
        yield
        return
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    except (OSError, ValueError):  # no mask here: start the threads as they come
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
