"""The spool: WARNING+ records that could not be delivered, kept on disk for replay.

Layout of the spool directory (created 0700; files 0600, opened with ``O_NOFOLLOW``):

``spool.jsonl``
    Where writers append, one JSON object per line. Every process sharing the directory
    (all ranks of a node, the next run) appends here under an exclusive ``flock`` on the
    file, after checking the locked inode is still the one at the path.
``spool.replay.jsonl`` and ``spool.replay.offset``
    A replayer, holding ``replay.lock`` (exclusive, non-blocking: a second process simply
    skips), renames ``spool.jsonl`` to ``spool.replay.jsonl`` (atomic; new writers start a
    fresh ``spool.jsonl``), takes the renamed file's lock once so in-flight writers finish,
    then exports it batch by batch, recording the byte offset reached after each exported
    batch (write + ``os.replace``). A replay that fails or dies resumes at that offset;
    at the end both files are removed. So a record is replayed at most once, except a
    batch exported just before a crash that could not record its offset; every record
    carries a unique ``log.record.uid`` so even that window can be deduplicated downstream.

The size bound (``spool_max_bytes``) counts ``spool.jsonl`` plus the unreplayed part of
``spool.replay.jsonl``; lines that do not fit are refused and counted by the caller.
"""

from __future__ import annotations

__all__ = ["ReplayResult", "Spool"]

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

_SPOOL = "spool.jsonl"
_REPLAY = "spool.replay.jsonl"
_OFFSET = "spool.replay.offset"
_LOCK = "replay.lock"
_FLAGS = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_CREAT
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


@dataclasses.dataclass
class ReplayResult:
    """What one :meth:`Spool.replay` call did."""

    replayed: int = 0
    corrupt: int = 0
    failed: bool = False
    skipped: bool = False  # another process holds the replay lock


class Spool:
    """Append-only JSON-lines spool with a crash-safe, single-replayer protocol."""

    __slots__ = ("directory", "max_bytes")

    def __init__(self, directory: str, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _ensure_dir(self) -> None:
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        st = os.stat(self.directory)
        if st.st_uid != os.getuid():
            raise PermissionError(
                errno.EPERM, "spool directory owned by another user", self.directory
            )
        if st.st_mode & 0o077:
            os.chmod(self.directory, 0o700)

    def pending(self) -> bool:
        """True when there is anything to replay (cheap: two ``stat`` calls)."""
        try:
            if os.stat(self._path(_SPOOL)).st_size > 0:
                return True
        except OSError:
            pass
        return os.path.exists(self._path(_REPLAY))

    def size(self) -> int:
        """Bytes waiting for replay (the quantity ``max_bytes`` bounds)."""
        total = 0
        with contextlib.suppress(OSError):
            total += os.stat(self._path(_SPOOL)).st_size
        with contextlib.suppress(OSError):
            total += os.stat(self._path(_REPLAY)).st_size - self._read_offset()
        return total

    def append(self, records: Sequence[dict[str, Any]]) -> int:
        """Append records as JSON lines; return how many fit (the rest are refused)."""
        if not records:
            return 0
        self._ensure_dir()
        lines = [
            json.dumps(r, separators=(",", ":"), default=str).encode() + b"\n" for r in records
        ]
        with self._locked_spool() as fd:
            used = os.fstat(fd).st_size
            with contextlib.suppress(OSError):
                used += os.stat(self._path(_REPLAY)).st_size - self._read_offset()
            room = self.max_bytes - used
            chunk: list[bytes] = []
            for line in lines:
                if len(line) > room:
                    break
                chunk.append(line)
                room -= len(line)
            if chunk:
                data = b"".join(chunk)
                while data:
                    written = os.write(fd, data)
                    data = data[written:]
            return len(chunk)

    @contextlib.contextmanager
    def _locked_spool(self) -> Iterator[int]:
        """The current ``spool.jsonl``, open for append and exclusively locked."""
        path = self._path(_SPOOL)
        for _ in range(100):
            fd = os.open(path, _FLAGS, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    same = os.fstat(fd).st_ino == os.stat(path).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    try:
                        yield fd
                    finally:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                    return
            finally:
                os.close(fd)
        raise OSError(errno.EAGAIN, "spool file keeps being rotated", path)

    def _read_offset(self) -> int:
        try:
            with open(self._path(_OFFSET), "rb") as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def _write_offset(self, offset: int) -> None:
        tmp = self._path(f"{_OFFSET}.{os.getpid()}.tmp")
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600
        )
        try:
            os.write(fd, str(offset).encode())
        finally:
            os.close(fd)
        os.replace(tmp, self._path(_OFFSET))

    def replay(
        self,
        export: Callable[[list[dict[str, Any]]], bool],
        batch_size: int,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> ReplayResult:
        """Export spooled records in batches through ``export`` (True = delivered).

        Holds ``replay.lock`` for the duration; returns ``skipped`` when another process
        holds it. Stops at the first failed batch (resumable) or when ``should_stop()``.
        """
        result = ReplayResult()
        if not self.pending():
            return result
        self._ensure_dir()
        lock_fd = os.open(
            self._path(_LOCK), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600
        )
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                result.skipped = True
                return result
            for _ in range(2):  # the leftover replay file, then the current spool once
                if not self._claim():
                    break
                if not self._replay_file(export, batch_size, should_stop, result):
                    break
        finally:
            os.close(lock_fd)  # releases the flock
        return result

    def _claim(self) -> bool:
        """Make sure ``spool.replay.jsonl`` exists (rotating the spool into it)."""
        replay = self._path(_REPLAY)
        if os.path.exists(replay):
            return True
        spool = self._path(_SPOOL)
        try:
            if os.stat(spool).st_size == 0:
                return False
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(_OFFSET))
            os.rename(spool, replay)
        except FileNotFoundError:
            return False
        fd = os.open(replay, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:  # wait for writers that locked the old inode before the rename
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        return True

    def _replay_file(
        self,
        export: Callable[[list[dict[str, Any]]], bool],
        batch_size: int,
        should_stop: Callable[[], bool],
        result: ReplayResult,
    ) -> bool:
        """Replay ``spool.replay.jsonl`` from the recorded offset; True when finished."""
        replay = self._path(_REPLAY)
        offset = self._read_offset()
        with open(replay, "rb") as f:
            f.seek(offset)
            while True:
                if should_stop():
                    return False
                batch: list[dict[str, Any]] = []
                end = offset
                for raw in f:
                    end += len(raw)
                    try:  # a torn last line (a writer died mid-write) fails to parse
                        doc = json.loads(raw) if raw.endswith(b"\n") else None
                    except ValueError:
                        doc = None
                    if isinstance(doc, dict):
                        batch.append(doc)
                    else:
                        result.corrupt += 1
                    if len(batch) >= batch_size:
                        break
                if not batch:
                    if end != offset:
                        self._write_offset(end)
                    break
                if not export(batch):
                    result.failed = True
                    return False
                result.replayed += len(batch)
                offset = end
                self._write_offset(offset)
        os.unlink(replay)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(_OFFSET))
        return True
