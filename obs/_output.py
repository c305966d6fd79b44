"""Where rendered lines go: the console stream and the JSON-lines file.

Every line leaves in one ``write`` of whole bytes: threads are serialised by one lock per
stream (shared by every runtime, so a reconfiguration cannot interleave either), and the
file is opened ``O_APPEND`` so processes sharing it never interleave inside a line. The
stream is looked up on each write (redirection works); when it has a file descriptor the
bytes go straight to it after the text layer is flushed, so a 10 KB line is never split
by the text layer's buffer.

The file is a shipping sink: it is created 0600, reopened when logrotate renames it (its
inode changes), and never closed while a thread may still write to it: it closes when the
last runtime holding it is gone.
"""

from __future__ import annotations

__all__ = ["FileSink", "Output", "StreamSink", "build_output", "colors_ok", "console_line"]

import os
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from structlog.typing import EventDict

from obs.rank import RankInfo
from obs.render import ConsoleRenderer
from obs.settings import Settings

#: One lock per stream name: every runtime writing to ``sys.stderr`` shares it.
_STREAM_LOCKS = {"stderr": threading.Lock(), "stdout": threading.Lock()}
_REOPEN_CHECK_SECONDS = 1.0


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written < len(data):  # a pipe or a signal cut it short: finish the same line
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


class StreamSink:
    """``sys.stderr``/``sys.stdout`` (looked up per write), one whole line per write."""

    __slots__ = ("_fd", "_lock", "_name", "_pipe", "_stream")

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = _STREAM_LOCKS[name]
        self._stream: Any = None
        self._fd = -1
        self._pipe = False

    def stream(self) -> Any:
        """The stream written to now."""
        return getattr(sys, self._name)

    def _fd_of(self, stream: Any) -> int:
        if stream is not self._stream:
            fd, pipe = -1, False
            try:
                fd = stream.fileno() if hasattr(stream, "buffer") else -1
                if fd >= 0:
                    mode = os.fstat(fd).st_mode
                    pipe = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
            except Exception:
                fd = -1
            self._stream, self._fd, self._pipe = stream, fd, pipe
        return self._fd

    def is_pipe(self) -> bool:
        """True when the stream is a pipe or socket: the kernel keeps a write whole there
        only up to PIPE_BUF bytes, so longer lines must be cut to stay whole."""
        try:
            stream = getattr(sys, self._name)
            if stream is not self._stream:
                with self._lock:
                    self._fd_of(stream)
        except Exception:
            return False
        else:
            return self._pipe

    def write(self, data: bytes) -> bool:
        """Write one line (bytes, newline included); False when it could not be written."""
        stream = getattr(sys, self._name)
        if stream is None:
            return False
        with self._lock:  # never taken re-entrantly: the runtime defers nested calls
            fd = self._fd if stream is self._stream else self._fd_of(stream)
            if fd >= 0:
                stream.flush()  # what the app printed before comes first
                _write_all(fd, data)
            else:  # a text stream without a descriptor (pytest's capture, StringIO)
                stream.write(data.decode("utf-8", "replace"))
            return True

    def flush(self) -> None:
        """Flush the stream's text layer (never raises)."""
        try:
            stream = getattr(sys, self._name)
            if stream is not None:
                stream.flush()
        except Exception:
            return


class FileSink:
    """An ``O_APPEND`` JSON-lines file, reopened when its path's inode changes."""

    __slots__ = (
        "__weakref__",
        "_fd",
        "_finalizer",
        "_force",
        "_id",
        "_lock",
        "_next_check",
        "path",
    )

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd = -1
        self._id: tuple[int, int] = (0, 0)
        self._finalizer: Any = None
        self._next_check = 0.0
        self._force = False
        self._open()

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

    def write(self, data: bytes) -> bool:
        """Append one line; False when it could not be written."""
        with self._lock:
            if time.monotonic() >= self._next_check:
                self._next_check = time.monotonic() + _REOPEN_CHECK_SECONDS
                if self._force or self._rotated():
                    self._force = False
                    self._open()
            _write_all(self._fd, data)
            return True

    def request_reopen(self) -> None:
        """Reopen the path before the next line (safe in a signal handler: no lock, no I/O)."""
        self._force = True
        self._next_check = 0.0

    def reopen(self) -> None:
        """Reopen the path now (after a SIGHUP or an external rotation)."""
        with self._lock:
            self._open()


def _is_regular_or_char(mode: int) -> bool:
    import stat  # noqa: PLC0415 - tiny, only on open

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
            if console is not None and stream is not None and not stream.write(console):
                self.dropped += 1
        except Exception:  # one sink failing must not cost the other its line
            self.dropped += 1
        try:
            if line is not None and file is not None and not file.write(line):
                self.dropped += 1
        except Exception:
            self.dropped += 1

    def stream_is_pipe(self) -> bool:
        """True when the console stream is a pipe or socket (see StreamSink.is_pipe)."""
        return self.stream is not None and self.stream.is_pipe()

    def flush(self) -> None:
        """Flush the stream's text layer (file writes are unbuffered)."""
        if self.stream is not None:
            self.stream.flush()


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
