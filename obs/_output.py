"""Where rendered lines go: the console stream and the JSON-lines file.

Every line leaves whole. Threads never wait on each other to log: a line is queued on its
sink's :class:`~obs._combiner.Combiner` and whichever thread holds the sink's lock (or the
sink's writer thread) writes every queued line, several per ``write``. Chunks are cut at
line ends and, on a pipe or socket, kept within ``PIPE_BUF`` so the kernel keeps them whole
against other processes; the file is opened ``O_APPEND`` so processes sharing it never
interleave inside a line. The stream is looked up on each write (redirection works); when it
has a file descriptor the bytes go straight to it after the text layer is flushed, so a 10
KB line is never split by the text layer's buffer.

The file is a shipping sink: it is created 0600, reopened when logrotate renames it (its
inode changes), and never closed while a thread may still write to it: it closes when the
last runtime holding it is gone.
"""

from __future__ import annotations

__all__ = [
    "HOLDER_ROUNDS",
    "QUEUE_MAX",
    "Combiner",
    "FileSink",
    "Output",
    "StreamSink",
    "build_output",
    "chunks",
    "colors_ok",
    "console_line",
]

import os
import select
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from obs._combiner import HOLDER_ROUNDS, QUEUE_MAX, Combiner, on_writer_thread
from obs.rank import RankInfo
from obs.render import PIPE_LINE_MAX, ConsoleRenderer
from obs.settings import Settings

if TYPE_CHECKING:
    from structlog.typing import EventDict

_REOPEN_CHECK_SECONDS = 1.0
#: The most bytes one ``write`` carries to a regular file or a terminal (a batch of
#: thousands of lines in one or a few writes).
CHUNK_MAX = 1 << 20


def _write_all(fd: int, data: bytes) -> None:
    try:
        written = os.write(fd, data)
    except BlockingIOError:  # the application's O_NONBLOCK descriptor, full: "later"
        written = 0
    if written < len(data):  # a pipe or a signal cut it short: finish the same line
        view = memoryview(data)[written:]
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:  # wait for room, as a blocking write would
                _wait_writable(fd)


def _wait_writable(fd: int) -> None:
    """Wait (up to a second: the caller tries again) until ``fd`` takes a write; only the
    writer thread and writes to regular files, which never stall, get here."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    poller.poll(1000)


def _ready(fd: int) -> bool:
    """Whether ``fd`` takes a write of up to ``PIPE_BUF`` bytes now, without waiting."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return bool(poller.poll(0))


def _write_ready(fd: int, data: bytes) -> int:
    """Write what ``fd`` takes now and return how many bytes were written: a caller never
    waits on a stalled reader (a pipe, terminal or socket nobody reads); the writer thread
    writes the rest. A pipe or socket ``PIPE_BUF`` bytes at a time, each when ready (what
    a ready pipe takes whole); a terminal through its own non-blocking handle."""
    alias = _char_alias(fd)
    if alias >= 0:
        try:
            return os.write(alias, data)
        except BlockingIOError:
            return 0
    written = 0
    try:
        while written < len(data) and _ready(fd):
            written += os.write(fd, data[written : written + PIPE_LINE_MAX])
    except BlockingIOError:  # O_NONBLOCK, and another process filled it since the poll
        pass
    return written


#: Character device (st_rdev) -> our own non-blocking handle on it: a terminal's room is
#: unknown to poll (a write larger than it waits), and O_NONBLOCK on the application's
#: descriptor would change it for the application too. One per device, kept open.
_ALIASES: dict[int, int] = {}
_ALIAS_FLAGS = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
_ALIAS_FLAGS |= getattr(os, "O_CLOEXEC", 0)


def _char_alias(fd: int) -> int:
    """Our non-blocking handle on the character device ``fd`` is now (looked up on each
    write: the application may have redirected ``fd``), or -1 for anything else."""
    st = os.fstat(fd)
    if not stat.S_ISCHR(st.st_mode):
        return -1
    alias = _ALIASES.get(st.st_rdev)
    if alias is None:
        try:
            alias = os.open(f"/proc/self/fd/{fd}", _ALIAS_FLAGS)
        except OSError:
            alias = -1  # no /proc: poll, as for a pipe
        known = _ALIASES.setdefault(st.st_rdev, alias)
        if known != alias and alias >= 0:
            os.close(alias)  # another thread opened one meanwhile
        alias = known
    return alias


def _out(fd: int, data: bytes, wait: bool) -> int:
    """Write ``data`` to ``fd``: all of it when ``wait``, else what it takes now."""
    if wait:
        _write_all(fd, data)
        return len(data)
    return _write_ready(fd, data)


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


class StreamSink:
    """``sys.stderr``/``sys.stdout`` (looked up per write), whole lines per write."""

    __slots__ = ("_combiner", "_name", "_seen")

    def __init__(self, name: str) -> None:
        self._name = name
        #: One combiner per stream name: every runtime writing to ``sys.stderr`` shares it,
        #: so a reconfiguration cannot interleave either.
        self._combiner = _stream_combiner(name)
        #: (stream, fd, is a pipe or socket, can make a writer wait: not a regular file)
        self._seen: tuple[Any, int, bool, bool] = (None, -1, False, False)

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
            if combiner.blocked:  # it waits for a reader: a copy without orjson's spare room
                data = bytes(memoryview(data))  # (8 KB a line otherwise, for as long)
            return combiner.submit((stream, data))  # another thread is writing: it takes it
        failed = 0
        try:
            seen = self._seen
            if stream is not seen[0]:
                seen = self._seen = (stream, *_describe(stream))
            if seen[1] >= 0:
                if seen[3] and not _ready(seen[1]):  # a reader that does not read now:
                    combiner.queue.appendleft((stream, data))  # the writer thread waits
                else:
                    try:  # noqa: SIM105 - suppress() costs a call per line here
                        stream.flush()  # what the app printed before comes first
                    except BlockingIOError:  # O_NONBLOCK: the app's text stays buffered
                        pass
                    written = _out(seen[1], data, not seen[3])
                    if written < len(data):  # the rest, before any other line
                        combiner.queue.appendleft((stream, data[written:]))
            else:  # a text stream without a descriptor (pytest's capture, StringIO)
                stream.write(data.decode("utf-8", "replace"))
        except Exception:
            failed = 1
        finally:
            lock.release()
        return failed + combiner.drain() if combiner.queue else failed

    def post(self, data: bytes) -> int:
        """Queue one line for the writer thread (see :meth:`Combiner.post`)."""
        stream = getattr(sys, self._name)
        return 1 if stream is None else self._combiner.post((stream, data))

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


def _describe(stream: Any) -> tuple[int, bool, bool]:
    """The stream's file descriptor (-1 for a text stream without one), whether it is a
    pipe or socket, and whether a write to it can wait on a reader (see :func:`_stalls`)."""
    try:
        fd = stream.fileno() if hasattr(stream, "buffer") else -1
        if fd < 0:
            return -1, False, False
        st = os.fstat(fd)
    except Exception:
        return -1, False, False
    mode = st.st_mode
    return fd, stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode), _stalls(st)


def _stalls(st: os.stat_result) -> bool:
    """Whether a write can wait on a reader: a pipe, socket or terminal can, for ever when
    nobody reads it; a regular file or one of the memory devices (/dev/null) cannot."""
    if stat.S_ISREG(st.st_mode):
        return False
    return not (stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1)


def _write_chunks(fd: int, lines: list[bytes], limit: int, progress: list[int], wait: bool) -> int:
    """Write ``lines`` in whole-line chunks of at most ``limit`` bytes, removing them from
    ``lines`` once written or counted (an interrupt leaves the rest there); the lines that
    failed. Few chunks: each ``write`` gives up the GIL, and while other threads run Python
    the writer waits a switch interval (5 ms) to get it back. Not ``wait``: what ``fd``
    does not take now stays in ``lines`` (a line begun, as its rest) for the writer
    thread, and ``progress[1]`` says so (see :attr:`Combiner.progress`)."""
    failed = done = 0  # progress counts writes: a patient flush waits on while it moves
    try:
        batches = [(b"".join(lines), len(lines))] if sum(map(len, lines)) <= limit else None
        for chunk, count in batches or list(chunks(lines, limit)):
            try:
                written = _out(fd, chunk, wait)
            except Exception:
                failed += count
                written = len(chunk)
            if written:
                progress[0] += 1
            if written == len(chunk):
                done += count
                continue
            while written >= len(lines[done]):  # whole lines written, then a part of one
                written -= len(lines[done])
                done += 1
            if written:
                lines[done] = lines[done][written:]
            progress[1] = 1  # stopped at the reader: the rest is the writer thread's
            return failed
        return failed
    finally:
        del lines[:done]


def _stream_emitter(progress: list[int]) -> Callable[[list[tuple[Any, bytes]]], int]:
    """Write a batch of ``(stream, line)`` to their streams, consecutive lines for the same
    stream together; the number of lines that failed."""
    seen: list[Any] = [None, -1, False, False]  # only touched under the combiner's lock

    def emit(items: list[tuple[Any, bytes]]) -> int:
        failed = 0
        while items:
            stream = items[0][0]
            count = 1
            while count < len(items) and items[count][0] is stream:
                count += 1
            lines = [line for _, line in items[:count]]
            try:
                failed += _to_stream(stream, lines, seen, progress)
            finally:  # written or counted: off the batch (an interrupt leaves the rest)
                del items[: count - len(lines)]
                if lines:  # the stream does not take more now: the rest waits, in order
                    items[0] = (stream, lines[0])
            if lines:
                return failed
        return failed

    return emit


def _to_stream(stream: Any, lines: list[bytes], seen: list[Any], progress: list[int]) -> int:
    """Write ``lines`` to ``stream`` (removing them from the list as they go); the number
    that failed."""
    try:
        if stream is not seen[0]:
            seen[:] = [stream, *_describe(stream)]
        fd, pipe, stalls = seen[1], seen[2], seen[3]
        wait = not stalls or on_writer_thread()
        if fd >= 0:
            if not wait and not _ready(fd):
                progress[1] = 1  # nothing taken now: all of it waits for the writer thread
                return 0
            try:  # noqa: SIM105 - as in StreamSink.write
                stream.flush()  # what the app printed before comes first
            except BlockingIOError:  # O_NONBLOCK: the app's text stays buffered
                pass
        else:  # a text stream without a descriptor (pytest's capture, StringIO)
            stream.write(b"".join(lines).decode("utf-8", "replace"))
            lines.clear()
            return 0
    except Exception:
        failed = len(lines)
        lines.clear()
        return failed
    return _write_chunks(fd, lines, PIPE_LINE_MAX if pipe else CHUNK_MAX, progress, wait)


_STREAMS: dict[str, Combiner[tuple[Any, bytes]]] = {}
_STREAMS_LOCK = threading.Lock()


def _stream_combiner(name: str) -> Combiner[tuple[Any, bytes]]:
    """The one combiner of ``sys.<name>``, made on first use (nothing happens at import)."""
    with _STREAMS_LOCK:
        combiner = _STREAMS.get(name)
        if combiner is None:
            progress = [0, 0]
            combiner = _STREAMS[name] = Combiner(_stream_emitter(progress), progress=progress)
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
        "_progress",
        "_stalls",
        "path",
    )

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1
        self._fifo = False
        self._stalls = False  # a FIFO or terminal: callers do not wait on its reader
        self._id: tuple[int, int] = (0, 0)
        self._finalizer: Any = None
        self._next_check = 0.0
        self._force = False
        self._open()
        self._progress = [0, 0]  # this sink's writes (see Combiner.progress)
        self._combiner = Combiner(_weak_emitter(self), owner=self, progress=self._progress)

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
        self._stalls = _stalls(st)
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
        limit = PIPE_LINE_MAX if self._fifo else CHUNK_MAX
        wait = not self._stalls or on_writer_thread()
        return _write_chunks(self._fd, lines, limit, self._progress, wait)

    def write(self, data: bytes) -> int:
        """Append one line; the number of lines that failed (this one, and any this call
        wrote for other threads)."""
        return self._combiner.submit(data)

    def post(self, data: bytes) -> int:
        """Queue one line for the writer thread (see :meth:`Combiner.post`)."""
        return self._combiner.post(data)

    def flush(self, timeout: float = 1.0, *, patient: bool = False) -> tuple[int, bool]:
        """Write the queued lines (see :meth:`Combiner.settle`); the number that failed,
        and whether the wait for a write in progress ended in time."""
        return self._combiner.settle(timeout, patient=patient)

    def request_reopen(self) -> None:
        """Reopen the path before the next line (safe in a signal handler: no lock, no I/O)."""
        self._force = True
        self._next_check = 0.0


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

    __slots__ = ("_flushed_dropped", "dropped", "file", "json", "posting", "stream")

    def __init__(self, stream: StreamSink | None, file: FileSink | None, *, json: bool) -> None:
        self.stream = stream
        self.file = file
        self.json = json
        #: Lines that could not be written anywhere they were due.
        self.dropped = 0
        self._flushed_dropped = 0  # ``dropped`` at the last flush: a flush since lost any?
        #: Lines go to the writer threads, never written by the caller (see :meth:`posted`).
        self.posting = False

    def write(self, console: bytes | None, line: bytes | None) -> None:
        """Write the console form to the stream and the JSON line to the file."""
        stream, file = self.stream, self.file
        posting = self.posting
        try:
            if console is not None and stream is not None:
                self.dropped += (stream.post if posting else stream.write)(console)
        except Exception:  # one sink failing must not cost the other its line
            self.dropped += 1
        try:
            if line is not None and file is not None:
                self.dropped += (file.post if posting else file.write)(line)
        except Exception:
            self.dropped += 1

    def posted(self, emit: Callable[[], None], *, post: bool = True) -> None:
        """Run ``emit`` with its lines queued for the writer threads: a flush's own lines
        (repeat summaries) must not block the flush in a write to a full pipe; its
        timeout bounds the wait for them instead. ``post`` False (a reconfiguration,
        which does not wait for the sinks it hands on): written as any line is, before
        the new runtime's."""
        if not post:
            emit()
            return
        self.posting = True
        try:
            emit()
        finally:
            self.posting = False

    def stream_is_pipe(self) -> bool:
        """True when the console stream is a pipe or socket (see StreamSink.is_pipe)."""
        return self.stream is not None and self.stream.is_pipe()

    def flush(
        self, timeout: float = 1.0, successor: Output | None = None, *, patient: bool = False
    ) -> bool:
        """Write what other threads queued and flush the stream's text layer, waiting up
        to ``timeout`` (one budget for both sinks) for what was logged before to be written
        (failed lines are counted in ``dropped``); False when time ran out or a line was
        lost since the last flush (no sink took it: the caller is the one left to tell). Sinks that
        ``successor`` writes through too are left to it: their queue goes on.
        ``patient``: see :meth:`Combiner.settle`."""
        kept = () if successor is None else successor._combiners()
        done = True
        deadline = time.monotonic() + timeout  # one budget for both sinks
        sinks = [s for s in (self.stream, self.file) if s is not None]
        moved = [s._combiner.progress[0] for s in sinks]
        for sink, seen in zip(sinks, moved, strict=True):
            if not any(sink._combiner is c for c in kept):
                left = max(0.0, deadline - time.monotonic()) if timeout > 0 else 0.0
                if patient and not left and timeout > 0 and sink._combiner.progress[0] != seen:
                    left = timeout  # it took lines while another sink used the budget
                failed, in_time = sink.flush(left, patient=patient)
                self.dropped += failed
                done = done and in_time
        lost, self._flushed_dropped = self.dropped - self._flushed_dropped, self.dropped
        return done and not lost

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
