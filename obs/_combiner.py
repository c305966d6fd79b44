"""A sink's write queue: no caller waits on another thread's write, every call is bounded.

A line is queued on its sink's :class:`Combiner`; whichever thread holds the lock writes
every queued line, several per ``write``. A caller writes at most :data:`HOLDER_ROUNDS`
rounds for other threads, then hands the rest to the sink's writer thread (a raw
``_thread``, started whenever none runs). A flush never writes the backlog itself: it
queues a mark behind the lines logged before it and waits, with a deadline, for the
writer to pass it, so a slow or stalled reader costs a flush its timeout and no more.
"""

from __future__ import annotations

__all__ = ["HOLDER_ROUNDS", "QUEUE_MAX", "Combiner", "exiting", "on_writer_thread"]

import _thread
import contextlib
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

from obs._sigmask import held

T = TypeVar("T")
#: Queued lines past which a caller waits for the writer (backpressure on a slow reader).
#: Large: a writer the GIL preempts mid-write sees 31 other threads queue thousands of
#: lines in one switch interval, and a small bound turned that into a lock convoy again.
QUEUE_MAX = 65536
_BACKPRESSURE_SECONDS = 1.0
#: Rounds (each writes all that is queued then) a caller writes for other threads before
#: it hands the rest to the sink's writer thread: a call stays bounded in time even while
#: other threads log faster than the sink takes lines.
HOLDER_ROUNDS = 2
#: Set when the process is exiting (threading is about to join the threads, and a
#: multiprocessing child then ends with ``os._exit``): callers write what they queued
#: themselves, waiting for the writer, so joining them waits for their lines.
_EXITING = [False]


def exiting() -> None:
    """The process is exiting: from now on callers write their lines themselves."""
    _EXITING[0] = True


#: ``writer`` is set on the sinks' writer threads: only they wait on a reader that does
#: not read (a caller's write takes what the sink takes now; the writer the rest).
_THREAD = threading.local()


def on_writer_thread() -> bool:
    """Whether this thread is a sink's writer thread (its writes may wait on the reader)."""
    return getattr(_THREAD, "writer", False)


class _Mark:
    """A flush's place in the queue: released once every line before it was written."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = _thread.allocate_lock()
        self.done.acquire()


class Combiner(Generic[T]):
    """Lines queued by any thread, written by whichever thread holds the lock.

    ``submit`` never blocks on another thread's write (unless :data:`QUEUE_MAX` lines are
    already waiting behind a slow reader), nor on a reader that does not read (``emit``
    stops there on a caller's thread; the writer thread waits), and is safe in a signal
    handler or finaliser:
    the queue is a ``deque`` and the lock is only tried. ``emit`` writes a batch, removes
    from it what it wrote or counted, and returns how many lines failed; what an interrupt
    (``KeyboardInterrupt`` out of a write) leaves in a batch goes back on the queue.
    """

    __slots__ = (
        "__weakref__",
        "_alive",
        "_emit",
        "_failed",
        "_marked",
        "_owner",
        "_pin",
        "_stalled",
        "_wake",
        "blocked",
        "lock",
        "progress",
        "queue",
    )

    def __init__(
        self,
        emit: Callable[[list[T]], int],
        owner: object = None,
        progress: list[int] | None = None,
    ) -> None:
        self._emit = emit
        #: ``[writes, stopped]``: the writes done by ``emit`` (it counts them: a racy
        #: count, only whether it moves matters, to a patient flush; this sink's own), and
        #: set by ``emit`` when it stopped at a reader that takes no more now, leaving the
        #: rest of the batch in it (for the writer thread).
        self.progress = progress if progress is not None else [0, 0]
        #: At exit, a wait for the lock timed out: later callers do not wait again (a
        #: thread logging during exit would spend a second per line on a stalled sink).
        self._stalled = False
        #: What ``emit`` writes through, held weakly (a dropped sink closes its file), and
        #: strongly while the writer thread has its lines (they are written, not lost).
        self._owner = weakref.ref(owner) if owner is not None else None
        self._pin: object = None
        self.lock = threading.Lock()
        self.queue: deque[T] = deque()
        #: Lines the writer thread failed to write, reported by the next caller to write.
        self._failed = 0
        #: A flush has queued a mark here: batches are sifted for marks from now on.
        self._marked = False
        #: The last write stopped at a reader that takes no more now (the rest is queued
        #: for the writer thread): a caller does not try again.
        self.blocked = False
        self._alive, self._wake = _writer_locks()
        _AFTER_FORK.add(self)

    def submit(self, item: T) -> int:
        """Queue ``item`` and write what is queued if no other thread is; the number of
        lines that failed in the batches this call wrote."""
        queue, lock = self.queue, self.lock
        if not queue and lock.acquire(False):  # the common case: nobody else is writing
            try:
                batch = [item]
                self.progress[1] = 0
                failed = self._emit(batch)
                if self.progress[1] and batch:  # the sink takes no more now: the writer
                    queue.appendleft(batch[0])  # thread writes the rest
            finally:
                lock.release()
            return failed + self.drain() if queue else failed  # queued meanwhile: ours
        if self.blocked and not _EXITING[0]:  # a reader that takes no more: the backlog
            if len(queue) >= QUEUE_MAX:  # is the writer thread's, and bounded: counted
                return 1
            queue.append(item)
            self._hand_off()
            return 0
        queue.append(item)
        return self.drain()

    def post(self, item: T) -> int:
        """Queue ``item`` for the writer thread, never writing it here (a flush's own
        lines: the flush's timeout bounds the wait for them, not a blocking write)."""
        self.queue.append(item)
        return 0 if self._hand_off() else self.drain()  # no thread can start: write here

    def drain(self) -> int:
        """Write what is queued unless another thread holds the lock (it looks again after
        releasing), for at most :data:`HOLDER_ROUNDS` rounds; then the writer thread takes
        what is still queued. While exiting, until the queue is empty: what the reader
        does not take now, this call waits for the writer thread to write, while it makes
        progress (the process may end as soon as the call returns)."""
        queue, lock = self.queue, self.lock
        failed = 0
        exiting = _EXITING[0]
        rounds = 0
        try:
            while queue and (exiting or rounds < HOLDER_ROUNDS):
                if self.blocked and not exiting:  # the reader takes no more: the backlog
                    break  # is the writer thread's (taking it in hand costs its length)
                rounds += 1
                wait = self._lock_wait(exiting)
                seen = self.progress[0]
                if not (lock.acquire(True, wait) if wait else lock.acquire(False)):
                    if exiting and wait and self.progress[0] != seen:
                        break  # the holder writes to a slow reader: wait below
                    self._stalled = self._stalled or bool(exiting and wait)
                    return failed  # the holder writes it: it looks again after releasing
                try:
                    failed += self._write_queued()
                finally:
                    lock.release()
                if self.blocked:  # a reader that takes no more now: the writer waits on it
                    break
            if queue and exiting and not self._stalled:
                return failed + self.settle(_BACKPRESSURE_SECONDS, patient=True)[0]
        except BaseException:  # an interrupt: the rest is still written, by the writer
            if queue:
                self._hand_off()
            raise
        if queue:
            self._hand_off()
        return failed

    def settle(self, timeout: float, *, patient: bool = False) -> tuple[int, bool]:
        """Wait up to ``timeout`` until every line queued before this call is written (the
        writer thread writes them: a flush never blocks on a slow reader past its
        timeout). The lines that failed, and False when time ran out. ``patient`` (at
        exit): wait on while lines are being written, giving up after ``timeout``
        without progress. With no timeout (inside a log call) it only hands off."""
        queue, lock = self.queue, self.lock
        if not queue and lock.acquire(False):  # nothing queued, nothing being written
            try:
                return self._take_failed(), True
            finally:
                self._unlock()
        if timeout <= 0:
            if queue:
                self._hand_off()
            return 0, False
        mark = _Mark()
        self._marked = True
        queue.append(cast("T", mark))
        if not self._hand_off():  # no thread can start (interpreter shutdown): write here
            return self._write_here(timeout)
        progress = self.progress
        seen = progress[0]
        done = mark.done.acquire(True, timeout)
        while not done and patient and progress[0] != seen:  # still moving: wait on
            seen = progress[0]
            done = mark.done.acquire(True, timeout)
        if not done and patient:
            self._stalled = True  # exit gave up on this sink: later lines do not wait
        failed = 0
        if lock.acquire(False):
            try:
                failed = self._take_failed()
            finally:
                self._unlock()
        return failed, done

    def _write_here(self, timeout: float) -> tuple[int, bool]:
        """A flush's writes when no writer thread can start: all that is queued, what a
        nested call queues meanwhile too; (failed, False) when the reader takes no more."""
        if not self.lock.acquire(True, timeout):
            return 0, False
        try:
            failed = 0
            while self.queue:
                failed += self._write_queued()
                if self.blocked:
                    return failed, False
            return failed, True
        finally:
            self.lock.release()

    def _unlock(self) -> None:
        """Release the lock; a line queued meanwhile (its caller found the lock held and
        left it to the holder) goes to the writer thread."""
        self.lock.release()
        if self.queue:
            self._hand_off()

    def _lock_wait(self, exiting: bool) -> float:
        """How long a caller waits for the lock: past QUEUE_MAX (or while exiting, unless
        exit gave up on this sink) a little for the writer; never forever, so even a
        nested call could not hang on its own lock. Else not at all."""
        if exiting:
            return 0 if self._stalled else _BACKPRESSURE_SECONDS
        return _BACKPRESSURE_SECONDS if len(self.queue) > QUEUE_MAX else 0

    def _take_failed(self) -> int:
        failed, self._failed = self._failed, 0
        return failed

    def _write_queued(self) -> int:
        """Write everything queued now (the lock held); what an interrupt leaves unwritten
        goes back to the front of the queue, in order. The lines that failed, with those
        the writer thread failed since the last call. Releases the marks of flushes."""
        queue = self.queue
        failed = self._take_failed()
        batch = [queue.popleft() for _ in range(len(queue))]
        marks: list[Any] = []
        if self._marked:
            marks = [item for item in batch if type(item) is _Mark]
            if marks:
                batch = [item for item in batch if type(item) is not _Mark]
        self.progress[1] = 0
        try:
            if batch:
                failed += self._emit(batch)
        except BaseException:
            queue.extendleft(reversed(batch + marks))
            self._failed += failed
            raise
        self.blocked = bool(self.progress[1] and batch)
        if self.blocked:  # what the sink did not take now (a begun line's rest first), in order;
            queue.extendleft(reversed(batch + marks))  # the flushes' marks wait behind it
            return failed
        for mark in marks:
            mark.done.release()
        self._stalled = False
        if not queue:
            self._pin = None  # written: the sink may go now
        return failed

    def _hand_off(self) -> bool:
        """Wake the writer thread, starting one when none runs; False when none could
        start. Safe in a signal handler: a raw ``_thread`` start and lock release take no
        lock another frame could hold. An interrupt anywhere here leaves no stale state: a
        writer holds ``_alive`` while it runs, and a second one started in a race sees it
        held and ends at once."""
        owner = self._owner
        if owner is not None:
            self._pin = owner()
        if not self._alive.locked():
            try:
                with held():  # the process's signals are the application's
                    _thread.start_new_thread(
                        _write_behind, (weakref.ref(self), self._wake, self._alive)
                    )
            except Exception:  # no new thread (interpreter shutdown): a flush writes it
                return False
        _wake_up(self._wake)
        return True

    def _write_until_empty(self) -> None:
        """The writer thread's work: write what is queued until the queue stays empty
        (waiting for the lock is its job; callers only try it)."""
        queue = self.queue
        while queue:
            lock = self.lock
            lock.acquire()
            try:
                failed = self._write_queued()  # takes self._failed: add after the call
                self._failed += failed
            finally:
                lock.release()
            if self.blocked:  # not on this thread (it waits on the reader): never spin
                return

    def _after_fork(self) -> None:
        # A thread of the parent may have held the lock: the child would wait forever.
        # Lines queued by the parent's threads are the parent's to write; its writer thread
        # does not exist here, and starts afresh on first need.
        self.lock = threading.Lock()
        self.queue.clear()
        self._failed = 0
        self._pin = None
        self._stalled = False
        self._alive, self._wake = _writer_locks()


def _writer_locks() -> tuple[Any, Any]:
    """A combiner's ``alive`` lock (held by its writer thread while it runs) and ``wake``
    signal (released to wake it): raw locks, so neither ever waits on another frame."""
    wake = _thread.allocate_lock()
    wake.acquire()
    return _thread.allocate_lock(), wake


def _write_behind(ref: weakref.ReferenceType[Combiner[Any]], wake: Any, alive: Any) -> None:
    """A sink's writer thread: each time it is woken, write what is queued. It ends when its
    combiner is gone, or has a new signal (in a forked child, where it does not run)."""
    if not alive.acquire(False):
        return  # another writer runs (two hand-offs raced to start one)
    _THREAD.writer = True
    try:
        combiner = ref()
        if combiner is None:
            return
        weakref.finalize(combiner, _wake_up, wake)  # a dropped sink ends its thread
        del combiner
        while True:
            wake.acquire()
            combiner = ref()
            if combiner is None or combiner._wake is not wake:
                return
            with contextlib.suppress(BaseException):  # never dies: the rest stays queued
                combiner._write_until_empty()
            del combiner
    finally:
        alive.release()


def _wake_up(wake: Any) -> None:
    try:
        wake.release()
    except RuntimeError:
        return  # already woken


class _Registry:
    """Every combiner, reset in a forked child (one hook, registered on first use)."""

    def __init__(self) -> None:
        self._items: weakref.WeakSet[Combiner[Any]] = weakref.WeakSet()
        self._hooked = False

    def add(self, combiner: Combiner[Any]) -> None:
        if not self._hooked and hasattr(os, "register_at_fork"):
            self._hooked = True
            os.register_at_fork(after_in_child=self._after_fork)
        self._items.add(combiner)

    def _after_fork(self) -> None:
        _EXITING[0] = False  # a child forked at exit lives on
        for combiner in list(self._items):
            combiner._after_fork()


_AFTER_FORK = _Registry()
