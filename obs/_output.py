"""Where rendered lines go: the console stream and the JSON-lines file.

Every line leaves whole. Threads never wait on each other to log: a line is queued on its
sink's :class:`Combiner` and whichever thread holds the sink's lock writes every queued
line, several per ``write`` (a caller that finds the lock taken returns at once; the holder
re-checks after it lets go, so no line is stranded). Chunks are cut at line ends and, on a
pipe or socket, kept within ``PIPE_BUF`` so the kernel keeps them whole against other
processes; the file is opened ``O_APPEND`` so processes sharing it never interleave inside a
line. The stream is looked up on each write (redirection works); when it has a file
descriptor the bytes go straight to it after the text layer is flushed, so a 10 KB line is
never split by the text layer's buffer.

The file is a shipping sink: it is created 0600, reopened when logrotate renames it (its
inode changes), and never closed while a thread may still write to it: it closes when the
last runtime holding it is gone.
"""

from __future__ import annotations

__all__ = [
    "Combiner",
    "FileSink",
    "Output",
    "StreamSink",
    "build_output",
    "chunks",
    "colors_ok",
    "console_line",
]

import _thread
import contextlib
import os
import stat
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from obs.rank import RankInfo
from obs.render import PIPE_LINE_MAX, ConsoleRenderer
from obs.settings import Settings

if TYPE_CHECKING:
    from structlog.typing import EventDict

T = TypeVar("T")
_REOPEN_CHECK_SECONDS = 1.0
#: The most bytes one ``write`` carries to a regular file or a terminal (a batch of
#: thousands of lines in one or a few writes).
CHUNK_MAX = 1 << 20
#: Queued lines past which a caller waits for the writer (backpressure on a slow reader).
#: Large: a writer the GIL preempts mid-write sees 31 other threads queue thousands of
#: lines in one switch interval, and a small bound turned that into a lock convoy again.
QUEUE_MAX = 65536
_BACKPRESSURE_SECONDS = 1.0
#: Rounds (each writes all that is queued then) a caller writes for other threads before
#: it hands the rest to the sink's writer thread: a call stays bounded in time even while
#: other threads log faster than the sink takes lines.
HOLDER_ROUNDS = 2
#: Chunks written in multi-chunk batches (a racy count: only whether it moves matters).
_PROGRESS = [0]


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written < len(data):  # a pipe or a signal cut it short: finish the same line
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def chunks(lines: list[bytes], limit: int) -> Iterator[tuple[bytes, int]]:
    """``lines`` joined into chunks of at most ``limit`` bytes, each cut at a line end (a
    longer line goes alone), with the number of lines in each."""
    start, size = 0, 0
    for i, line in enumerate(lines):
        if size and size + len(line) > limit:
            yield b"".join(lines[start:i]), i - start
            start, size = i, 0
        size += len(line)
    if start < len(lines):
        yield b"".join(lines[start:]), len(lines) - start


class Combiner(Generic[T]):
    """Lines queued by any thread, written by whichever thread holds the lock.

    ``submit`` never blocks on another thread's write (unless :data:`QUEUE_MAX` lines are
    already waiting behind a slow reader), and is safe in a signal handler or finaliser:
    the queue is a ``deque`` and the lock is only tried. ``emit`` writes a batch, removes
    from it what it wrote or counted, and returns how many lines failed; what an interrupt
    (``KeyboardInterrupt`` out of a write) leaves in a batch goes back on the queue.

    A call writes at most :data:`HOLDER_ROUNDS` rounds for other threads; what they keep
    queueing after that goes to the sink's writer thread (started on first need), so no
    call runs for as long as other threads keep logging faster than the sink writes.
    """

    __slots__ = (
        "__weakref__",
        "_alive",
        "_emit",
        "_failed",
        "_flushing",
        "_owner",
        "_pin",
        "_wake",
        "lock",
        "queue",
    )

    def __init__(self, emit: Callable[[list[T]], int], owner: object = None) -> None:
        self._emit = emit
        #: What ``emit`` writes through, held weakly (a dropped sink closes its file), and
        #: strongly while the writer thread has its lines (they are written, not lost).
        self._owner = weakref.ref(owner) if owner is not None else None
        self._pin: object = None
        self.lock = threading.Lock()
        self.queue: deque[T] = deque()
        #: Lines the writer thread failed to write, reported by the next caller to write.
        self._failed = 0
        #: A flush waits for the lock: other writers step aside between rounds (a lock is
        #: not fair; a busy writer thread would take it back every time).
        self._flushing = False
        self._alive, self._wake = _writer_locks()
        _AFTER_FORK.add(self)

    def submit(self, item: T) -> int:
        """Queue ``item`` and write what is queued if no other thread is; the number of
        lines that failed in the batches this call wrote."""
        queue, lock = self.queue, self.lock
        if not queue and lock.acquire(False):  # the common case: nobody else is writing
            try:
                failed = self._emit([item])
            finally:
                lock.release()
            return failed + self.drain() if queue else failed
        queue.append(item)
        return self.drain()

    def drain(self) -> int:
        """Write what is queued unless another thread holds the lock (it looks again after
        releasing), for at most :data:`HOLDER_ROUNDS` rounds; then the writer thread takes
        what is still queued."""
        queue, lock = self.queue, self.lock
        failed = 0
        try:
            for _ in range(HOLDER_ROUNDS):
                if not queue or self._flushing:
                    return failed  # nothing left, or a waiting flush writes it next
                # Past QUEUE_MAX wait a little for the writer (a slow reader holds it up);
                # never forever, so even a nested call could not hang on its own lock.
                wait = _BACKPRESSURE_SECONDS if len(queue) > QUEUE_MAX else 0
                if not (lock.acquire(True, wait) if wait else lock.acquire(False)):
                    return failed  # the holder writes it: it looks again after releasing
                try:
                    failed += self._write_queued()
                finally:
                    lock.release()
        except BaseException:  # an interrupt: the rest is still written, by the writer
            if queue:
                self._hand_off()
            raise
        if queue:
            self._hand_off()
        return failed

    def settle(self, timeout: float, *, patient: bool = False) -> tuple[int, bool]:
        """Wait up to ``timeout`` for a write in progress (it may hold lines already taken
        off the queue) and write what is queued: when a flush returns, what was logged
        before it is written. The number of lines that failed, and False when the wait
        timed out (those lines may still be in flight). ``patient`` (at exit): wait on
        while the writer makes progress, giving up after ``timeout`` without any (a slow
        reader gets every line, a stalled one costs ``timeout``)."""
        lock = self.lock
        if timeout > 0:
            self._flushing = True
            try:
                got = lock.acquire(True, timeout)
                while not got and patient:
                    seen = _PROGRESS[0]
                    got = lock.acquire(True, timeout)
                    if _PROGRESS[0] == seen:
                        break
            finally:
                self._flushing = False
        else:
            got = lock.acquire(False)
        if not got:  # the writer still holds it (or this thread does): it looks again,
            return (self.drain() if self.queue else 0), False  # and so does this call
        try:
            failed = self._write_queued()
        finally:
            lock.release()
        return (failed + self.drain() if self.queue else failed), True

    def _write_queued(self) -> int:
        """Write everything queued now (the lock held); what an interrupt leaves unwritten
        goes back to the front of the queue, in order. The lines that failed, with those
        the writer thread failed since the last call."""
        queue = self.queue
        failed, self._failed = self._failed, 0
        batch = [queue.popleft() for _ in range(len(queue))]
        if not batch:
            return failed
        try:
            return failed + self._emit(batch)
        except BaseException:
            queue.extendleft(reversed(batch))
            self._failed += failed
            raise

    def _hand_off(self) -> None:
        """Wake the writer thread, starting one when none runs. Safe in a signal handler: a
        raw ``_thread`` start and lock release take no lock another frame could hold. An
        interrupt anywhere here leaves no stale state: a writer holds ``_alive`` while it
        runs, and a second one started in a race sees it held and ends at once."""
        owner = self._owner
        if owner is not None:
            self._pin = owner()
        if not self._alive.locked():
            try:
                _thread.start_new_thread(
                    _write_behind, (weakref.ref(self), self._wake, self._alive)
                )
            except Exception:  # no new thread (interpreter shutdown): flush writes the rest
                return
        _wake_up(self._wake)

    def _write_until_empty(self) -> None:
        """The writer thread's work: write what is queued until the queue stays empty
        (waiting for the lock is its job; callers only try it)."""
        queue = self.queue
        try:
            while queue and not self._flushing:  # a waiting flush goes first, hands back
                lock = self.lock
                lock.acquire()
                try:
                    failed = self._write_queued()  # takes self._failed: add after the call
                    self._failed += failed
                finally:
                    lock.release()
        finally:
            if not queue:
                self._pin = None  # written: the sink may go now

    def _after_fork(self) -> None:
        # A thread of the parent may have held the lock: the child would wait forever.
        # Lines queued by the parent's threads are the parent's to write; its writer thread
        # does not exist here, and starts afresh on first need.
        self.lock = threading.Lock()
        self.queue.clear()
        self._failed = 0
        self._flushing = False
        self._pin = None
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
        for combiner in list(self._items):
            combiner._after_fork()


_AFTER_FORK = _Registry()


class StreamSink:
    """``sys.stderr``/``sys.stdout`` (looked up per write), whole lines per write."""

    __slots__ = ("_combiner", "_name", "_seen")

    def __init__(self, name: str) -> None:
        self._name = name
        #: One combiner per stream name: every runtime writing to ``sys.stderr`` shares it,
        #: so a reconfiguration cannot interleave either.
        self._combiner = _stream_combiner(name)
        self._seen: tuple[Any, int, bool] = (None, -1, False)  # (stream, fd, is a pipe)

    def stream(self) -> Any:
        """The stream written to now."""
        return getattr(sys, self._name)

    def is_pipe(self) -> bool:
        """True when the stream is a pipe or socket: the kernel keeps a write whole there
        only up to PIPE_BUF bytes, so longer lines must be cut to stay whole."""
        stream = getattr(sys, self._name, None)
        seen = self._seen  # one tuple: read and replaced whole, without a lock
        if stream is not seen[0]:
            seen = self._seen = (stream, *_describe(stream))
        return seen[2]

    def write(self, data: bytes) -> int:
        """Write one line (bytes, newline included) to the stream in effect now; the
        number of lines that failed (this one, and any this call wrote for other threads).

        :meth:`Combiner.submit`'s fast path, inlined (two frames fewer per line): when no
        line is queued and the lock is free, this line is written now, here. Otherwise it
        is queued with the stream it is for (a ``redirect_stderr`` block gets its lines).
        """
        stream = getattr(sys, self._name)
        if stream is None:
            return 1
        combiner = self._combiner
        lock = combiner.lock
        if combiner.queue or not lock.acquire(False):
            return combiner.submit((stream, data))  # another thread is writing: it takes it
        failed = 0
        try:
            seen = self._seen
            if stream is not seen[0]:
                seen = self._seen = (stream, *_describe(stream))
            if seen[1] >= 0:
                stream.flush()  # what the app printed before comes first
                _write_all(seen[1], data)
            else:  # a text stream without a descriptor (pytest's capture, StringIO)
                stream.write(data.decode("utf-8", "replace"))
        except Exception:
            failed = 1
        finally:
            lock.release()
        return failed + combiner.drain() if combiner.queue else failed

    def flush(self, timeout: float = 1.0, *, patient: bool = False) -> tuple[int, bool]:
        """Write the queued lines (see :meth:`Combiner.settle`), then flush the stream's
        text layer; the number of lines that failed, and whether the wait for a write in
        progress ended in time. Never raises."""
        failed, done = self._combiner.settle(timeout, patient=patient)
        try:
            stream = getattr(sys, self._name)
            if stream is not None:
                stream.flush()
        except Exception:
            return failed, done
        return failed, done


def _describe(stream: Any) -> tuple[int, bool]:
    """The stream's file descriptor (-1 for a text stream without one) and whether it is a
    pipe or socket."""
    try:
        fd = stream.fileno() if hasattr(stream, "buffer") else -1
        if fd < 0:
            return -1, False
        mode = os.fstat(fd).st_mode
    except Exception:
        return -1, False
    return fd, stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _write_chunks(fd: int, lines: list[bytes], limit: int) -> int:
    """Write ``lines`` in whole-line chunks of at most ``limit`` bytes, removing them from
    ``lines`` once written or counted (an interrupt leaves the rest there); the lines that
    failed. Few chunks: each ``write`` gives up the GIL, and while other threads run Python
    the writer waits a switch interval (5 ms) to get it back."""
    failed = done = 0
    try:
        if sum(map(len, lines)) <= limit:  # the usual batch: one write
            try:
                _write_all(fd, b"".join(lines))
            except Exception:
                failed = len(lines)
            done = len(lines)
            return failed
        for chunk, count in list(chunks(lines, limit)):
            try:
                _write_all(fd, chunk)
            except Exception:
                failed += count
            done += count
            _PROGRESS[0] += 1  # a patient flush waits on while this moves
        return failed
    finally:
        del lines[:done]


def _stream_emitter() -> Callable[[list[tuple[Any, bytes]]], int]:
    """Write a batch of ``(stream, line)`` to their streams, consecutive lines for the same
    stream together; the number of lines that failed."""
    seen: list[Any] = [None, -1, False]  # only touched under the combiner's lock

    def emit(items: list[tuple[Any, bytes]]) -> int:
        failed = 0
        while items:
            stream = items[0][0]
            count = 1
            while count < len(items) and items[count][0] is stream:
                count += 1
            lines = [line for _, line in items[:count]]
            try:
                failed += _to_stream(stream, lines, seen)
            finally:  # written or counted: off the batch (an interrupt leaves the rest)
                del items[: count - len(lines)]
        return failed

    return emit


def _to_stream(stream: Any, lines: list[bytes], seen: list[Any]) -> int:
    """Write ``lines`` to ``stream`` (removing them from the list as they go); the number
    that failed."""
    try:
        if stream is not seen[0]:
            seen[:] = [stream, *_describe(stream)]
        fd, pipe = seen[1], seen[2]
        if fd >= 0:
            stream.flush()  # what the app printed before comes first
        else:  # a text stream without a descriptor (pytest's capture, StringIO)
            stream.write(b"".join(lines).decode("utf-8", "replace"))
            lines.clear()
            return 0
    except Exception:
        failed = len(lines)
        lines.clear()
        return failed
    return _write_chunks(fd, lines, PIPE_LINE_MAX if pipe else CHUNK_MAX)


_STREAMS: dict[str, Combiner[tuple[Any, bytes]]] = {}
_STREAMS_LOCK = threading.Lock()


def _stream_combiner(name: str) -> Combiner[tuple[Any, bytes]]:
    """The one combiner of ``sys.<name>``, made on first use (nothing happens at import)."""
    with _STREAMS_LOCK:
        combiner = _STREAMS.get(name)
        if combiner is None:
            combiner = _STREAMS[name] = Combiner(_stream_emitter())
        return combiner


class FileSink:
    """An ``O_APPEND`` JSON-lines file, reopened when its path's inode changes."""

    __slots__ = (
        "__weakref__",
        "_combiner",
        "_fd",
        "_fifo",
        "_finalizer",
        "_force",
        "_id",
        "_next_check",
        "path",
    )

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1
        self._fifo = False
        self._id: tuple[int, int] = (0, 0)
        self._finalizer: Any = None
        self._next_check = 0.0
        self._force = False
        self._open()
        self._combiner = Combiner(_weak_emitter(self), owner=self)

    def _open(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        # O_NONBLOCK: opening a FIFO with no reader fails (ENXIO) instead of blocking forever.
        fd = os.open(self.path, flags | os.O_NONBLOCK, 0o600)
        st = os.fstat(fd)
        os.set_blocking(fd, True)  # a FIFO with a reader, a file: ordinary writes from now
        if not _is_regular_or_char(st.st_mode):
            os.close(fd)
            raise IsADirectoryError(f"{self.path} is not a regular file")
        old, self._fd = self._fd, fd
        self._fifo = stat.S_ISFIFO(st.st_mode)
        self._id = (st.st_dev, st.st_ino)
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _close_quietly, fd)
        self._finalizer.atexit = False  # atexit handlers that log after obs' shutdown still write
        if old >= 0:
            _close_quietly(old)
        self._next_check = time.monotonic() + _REOPEN_CHECK_SECONDS

    def _rotated(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            return True  # renamed away and not recreated yet: start a new file
        return (st.st_dev, st.st_ino) != self._id

    def _emit(self, lines: list[bytes]) -> int:
        """Append a batch (under the combiner's lock); the number of lines that failed."""
        try:
            if time.monotonic() >= self._next_check:
                self._next_check = time.monotonic() + _REOPEN_CHECK_SECONDS
                if self._force or self._rotated():
                    self._force = False
                    self._open()
        except Exception:
            failed = len(lines)
            lines.clear()
            return failed
        return _write_chunks(self._fd, lines, PIPE_LINE_MAX if self._fifo else CHUNK_MAX)

    def write(self, data: bytes) -> int:
        """Append one line; the number of lines that failed (this one, and any this call
        wrote for other threads)."""
        return self._combiner.submit(data)

    def flush(self, timeout: float = 1.0, *, patient: bool = False) -> tuple[int, bool]:
        """Write the queued lines (see :meth:`Combiner.settle`); the number that failed,
        and whether the wait for a write in progress ended in time."""
        return self._combiner.settle(timeout, patient=patient)

    def request_reopen(self) -> None:
        """Reopen the path before the next line (safe in a signal handler: no lock, no I/O)."""
        self._force = True
        self._next_check = 0.0

    def reopen(self) -> None:
        """Reopen the path now (after a SIGHUP or an external rotation)."""
        with self._combiner.lock:
            self._open()


def _weak_emitter(sink: FileSink) -> Callable[[list[bytes]], int]:
    """``sink._emit`` without a reference to the sink: a bound method would make a cycle
    (sink -> combiner -> method -> sink) and the file would stay open until a GC pass."""
    ref = weakref.ref(sink)

    def emit(lines: list[bytes]) -> int:
        target = ref()
        return target._emit(lines) if target is not None else len(lines)

    return emit


def _is_regular_or_char(mode: int) -> bool:
    return stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        return


class Output:
    """The runtime's sinks: the stream (console scope) and the file (shipping rule)."""

    __slots__ = ("dropped", "file", "json", "stream")

    def __init__(self, stream: StreamSink | None, file: FileSink | None, *, json: bool) -> None:
        self.stream = stream
        self.file = file
        self.json = json
        #: Lines that could not be written anywhere they were due.
        self.dropped = 0

    def write(self, console: bytes | None, line: bytes | None) -> None:
        """Write the console form to the stream and the JSON line to the file."""
        stream, file = self.stream, self.file
        try:
            if console is not None and stream is not None:
                self.dropped += stream.write(console)  # lines of other threads' too
        except Exception:  # one sink failing must not cost the other its line
            self.dropped += 1
        try:
            if line is not None and file is not None:
                self.dropped += file.write(line)
        except Exception:
            self.dropped += 1

    def stream_is_pipe(self) -> bool:
        """True when the console stream is a pipe or socket (see StreamSink.is_pipe)."""
        return self.stream is not None and self.stream.is_pipe()

    def flush(
        self, timeout: float = 1.0, successor: Output | None = None, *, patient: bool = False
    ) -> bool:
        """Write what other threads queued and flush the stream's text layer, waiting up
        to ``timeout`` per sink for a write in progress (failed lines are counted in
        ``dropped``); False when a wait timed out. Sinks that ``successor`` writes through
        too are left to it: their queue goes on. ``patient``: see :meth:`Combiner.settle`."""
        kept = () if successor is None else successor._combiners()
        done = True
        for sink in (self.stream, self.file):
            if sink is not None and not any(sink._combiner is c for c in kept):
                failed, in_time = sink.flush(timeout, patient=patient)
                self.dropped += failed
                done = done and in_time
        return done

    def _combiners(self) -> tuple[Combiner[Any], ...]:
        return tuple(s._combiner for s in (self.stream, self.file) if s is not None)


# -- building the output of a configuration ------------------------------------------


def console_line(renderer: ConsoleRenderer) -> Callable[[EventDict], bytes]:
    """The console renderer as a function from an event dict to the bytes of one line."""

    def render(ed: EventDict) -> bytes:
        return (renderer(None, "", ed) + "\n").encode("utf-8", "backslashreplace")

    return render


def colors_ok(stream: Any, settings: Settings) -> bool:
    """Colours on a tty, unless ``NO_COLOR`` is set; ``FORCE_COLOR`` turns them on
    anywhere, e.g. under ``less -R``."""
    if settings.no_color:
        return False
    if settings.force_color:
        return True
    try:
        return bool(stream.isatty())
    except Exception:
        return False


def build_output(settings: Settings, rank: RankInfo, reuse: Output | None = None) -> Output:
    """The stream and file sinks for ``settings`` (the file of ``reuse`` kept if same path).

    Raises ``OSError``/``ValueError`` for a file that cannot be opened: the holder turns that
    into a :class:`obs.ConfigError` naming the variable.
    """
    stream = StreamSink(settings.stream) if settings.stream != "none" else None
    fmt = settings.format
    if fmt == "auto":
        try:
            fmt = "console" if stream is not None and stream.stream().isatty() else "json"
        except Exception:
            fmt = "json"
    file = None
    if settings.file:
        path = settings.file.format(
            rank=rank.rank,
            local_rank=rank.local_rank,
            node_rank=rank.node_rank,
            host=rank.host,
            pid=os.getpid(),
        )
        if reuse is not None and reuse.file is not None and reuse.file.path == path:
            file = reuse.file
        else:
            file = FileSink(path)
    return Output(stream, file, json=fmt == "json")
