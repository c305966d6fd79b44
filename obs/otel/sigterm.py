"""``OBS_HANDLE_SIGTERM``: on SIGTERM, shut the export sink down within its budget, then
do what the process did before (die by the signal, or run the application's handler).

CPython runs a Python signal handler only when its main thread next runs bytecode. A main
thread inside a long C call (a collective that hangs in torch.distributed or NCCL, a C
library's wait) held SIGTERM back for as long as the call lasted: obs turned a death into
a hang. So the signal also wakes a watcher thread through the signal module's wakeup fd:
it flushes at once and, where the previous action was the default one, ends the process
by the signal itself. An application handler still runs on the main thread, as it would
without obs. The wakeup fd is one per process: where the application (an asyncio loop)
holds it, obs leaves it and relies on the main thread.
"""

from __future__ import annotations

__all__ = ["SigtermHook"]

import contextlib
import os
import signal
import threading
import weakref
from collections.abc import Callable
from typing import Any

from obs._sigmask import held

#: How long the watcher gives the process to die by the signal before it exits with the
#: shell's status for it (128 + 15) instead.
_DEATH_WAIT = 1.0


class SigtermHook:
    """The SIGTERM handler and its watcher thread; install and remove from the main thread."""

    __slots__ = (
        "__weakref__",
        "_budget",
        "_done",
        "_pipe",
        "_previous",
        "_shutdown",
        "_started",
    )

    def __init__(self, shutdown: Callable[[], object], budget: float) -> None:
        self._shutdown = shutdown
        self._budget = budget
        self._started = threading.Lock()
        self._done = threading.Event()
        self._previous: Any = None
        self._pipe: tuple[int, int] | None = None

    def install(self) -> None:
        """Take SIGTERM (remembering the previous handler) and watch the wakeup fd. The
        hook of an earlier ``configure()`` (its sink shuts down after this one is built)
        hands over what it took: the application's handler and the wakeup fd."""
        current = signal.getsignal(signal.SIGTERM)
        earlier = getattr(current, "__self__", None)
        if isinstance(earlier, SigtermHook):
            self._previous = earlier._previous
            earlier._unwatch()
        else:
            self._previous = current
        signal.signal(signal.SIGTERM, self.on_signal)
        self._watch()

    def remove(self) -> None:
        """Put the previous handler and wakeup fd back where ours are still installed."""
        with contextlib.suppress(Exception):
            if signal.getsignal(signal.SIGTERM) == self.on_signal:
                signal.signal(signal.SIGTERM, self._previous)
        self._unwatch()

    def after_fork(self) -> None:
        """In a forked child: the pipe is shared with the parent, whose watcher would take
        the child's SIGTERM for its own. Give the child its own pipe and watcher."""
        pipe = self._pipe
        if pipe is None:
            return
        with contextlib.suppress(Exception):
            self._unwatch()
            _close(pipe[0])  # the parent's watcher reads its own copy
            self._watch()

    def on_signal(self, signum: int, frame: Any) -> None:
        """The Python handler (main thread): flush, then chain as before obs."""
        self._flush_once()
        previous = self._previous
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def _flush_once(self) -> None:
        """Shut the sink down once, on a thread (the interrupted code may hold its lock),
        bounded; a second caller (the watcher, the main thread) waits for the first."""
        wait = self._budget + 0.5
        if not self._started.acquire(False):
            self._done.wait(wait)
            return
        try:
            worker = threading.Thread(target=self._quiet_shutdown, daemon=True)
            with held():
                worker.start()
            worker.join(wait)
        finally:
            self._done.set()

    def _quiet_shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self._shutdown()

    def _on_watched(self) -> None:
        """The watcher saw SIGTERM: flush now; die by it where that was the action."""
        if signal.getsignal(signal.SIGTERM) != self.on_signal:
            return  # the application took SIGTERM over since: its handler decides
        self._flush_once()
        previous = self._previous
        if callable(previous) or previous == signal.SIG_IGN:
            return  # the application's handler runs on the main thread, as without obs
        _die_by(signal.SIGTERM)

    def _watch(self) -> None:
        read, write = os.pipe()
        try:
            os.set_blocking(write, False)
            old = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except (OSError, ValueError):
            _close(read, write)
            return
        if old != -1:  # the application's (an asyncio loop's): leave it to it
            with contextlib.suppress(OSError, ValueError):
                signal.set_wakeup_fd(old)
            _close(read, write)
            return
        self._pipe = (read, write)
        thread = threading.Thread(
            target=_watcher, args=(weakref.ref(self), read), name="obs-sigterm", daemon=True
        )
        with held():
            thread.start()

    def _unwatch(self) -> None:
        pipe, self._pipe = self._pipe, None
        if pipe is None:
            return
        with contextlib.suppress(OSError, ValueError):
            current = signal.set_wakeup_fd(-1)
            if current not in (-1, pipe[1]):  # not ours any more: put it back
                signal.set_wakeup_fd(current)
        _close(pipe[1])  # the watcher reads the end of the pipe and closes its side


def _watcher(ref: weakref.ReferenceType[SigtermHook], read: int) -> None:
    """Read the signal numbers CPython writes to the wakeup fd; act on SIGTERM."""
    term = int(signal.SIGTERM)
    try:
        while True:
            try:
                data = os.read(read, 512)
            except OSError:
                return
            if not data:
                return
            if term in data:
                hook = ref()
                if hook is None:
                    return
                with contextlib.suppress(Exception):
                    hook._on_watched()
                del hook
    finally:
        _close(read)


def _die_by(signum: int) -> None:
    """End the process by ``signum``'s default action from a thread other than the main
    one (where Python cannot set a handler): through libc, else the shell's exit status."""
    with contextlib.suppress(Exception):
        import ctypes  # noqa: PLC0415 - only to die

        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
        libc.signal.restype = ctypes.c_void_p
        libc.signal(signum, None)  # SIG_DFL
        os.kill(os.getpid(), signum)
        threading.Event().wait(_DEATH_WAIT)
    os._exit(128 + signum)


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
