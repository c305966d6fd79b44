"""The spool: WARNING+ records that could not be delivered, kept on disk for replay.

Layout of the spool directory (created 0700; files 0600, opened with ``O_NOFOLLOW``):

``spool.jsonl``
    Where writers append, one JSON object per line. Every process sharing the directory
    (all ranks of a node, the next run) appends here under an exclusive ``flock`` on the
    file, after checking the locked inode is still the one at the path.
``spool.other.jsonl``
    Lines another spool format version wrote (their ``"v"`` is not 1: a newer obs shared
    the directory): never replayed as this version's records, which could misread them;
    the replayer moves them here, as they were, for the version that wrote them, and
    counts them (:attr:`ReplayResult.kept`). They count against the size bound; ``purge``
    deletes them.
``spool.lost.json``
    obs' own loss reports the spool had no room for (a small bound, a long outage), one
    per kind, the counts of a kind merged (``keep_lost``): the count of what a full spool
    refused is persisted, never itself lost; a replay exports them first.
``spool.replay.jsonl`` and ``spool.replay.offset``
    A replayer, holding ``replay.lock`` (exclusive, non-blocking: a second process skips),
    renames ``spool.jsonl`` to ``spool.replay.jsonl`` (atomic; writers start a fresh one),
    takes the renamed file's lock once so in-flight writers finish, then exports it batch
    by batch, recording the offset reached after each (write + ``os.replace``; in memory
    too, where the disk refuses it). A replay that fails or dies resumes there; at the
    end both files are removed. So a record is replayed at most once, except a batch
    exported just before a crash (or a disk refusing the offset) that could not record it;
    every record carries a unique ``log.record.uid`` so that window can be deduplicated.

Safety against other local users (the default directory lives in the shared ``$TMPDIR``):
the directory is opened once with ``O_DIRECTORY|O_NOFOLLOW`` and every file is reached
relative to that descriptor (``dir_fd=``); a directory that is a symlink, is not owned by
the current uid, or is group/other-writable is refused (:class:`SpoolRefused`), and obs
never changes the mode of a directory it did not create. A spool file not owned by the
current uid or readable/writable by anyone else is never appended to nor replayed: it is
renamed aside (``refused.<name>.<inode>``) and counted in :attr:`ReplayResult.refused`.

The size bound (``spool_max_bytes``) counts ``spool.jsonl``, the unreplayed part of
``spool.replay.jsonl`` and ``spool.other.jsonl``; lines that do not fit are refused and
counted by the caller.
"""

from __future__ import annotations

__all__ = [
    "VERSION",
    "PartialAppend",
    "ReplayResult",
    "Spool",
    "SpoolRefused",
    "open_spool_dir",
    "other_version",
    "service_dir",
]

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

from obs._reentry import marked

_SPOOL = "spool.jsonl"
_REPLAY = "spool.replay.jsonl"
_OFFSET = "spool.replay.offset"
_OTHER = "spool.other.jsonl"
_LOST = "spool.lost.json"
#: The kept loss reports a replay took (renamed from ``_LOST``): unlinked once the
#: collector took them, so a process killed while they are on the wire loses none.
_LOST_REPLAY = "spool.lost.replay.json"
#: Kinds of loss reports ``spool.lost.json`` keeps (reasons, places of failure): a bound.
_MAX_LOST = 64
#: How a kept loss report and a newer one of its kind become one.
Merge = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
#: The spool line format this version writes and replays (a line without "v" is one).
VERSION = 1
_LOCK = "replay.lock"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC


def _torn(fd: int) -> bool:
    """Whether the open spool file ends inside a line (its last byte is not a newline)."""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


class SpoolRefused(PermissionError):
    """The spool directory or one of its files is unsafe (symlink, foreign owner, loose mode)."""


class PartialAppend(OSError):
    """A spool write failed part way (disk full, a file size limit): the first ``lines``
    lines were written whole (they are replayed: spooled, not lost), the rest not, or torn
    (a torn line is replayed as corrupt, alone)."""

    def __init__(self, exc: OSError, lines: int) -> None:
        super().__init__(exc.errno, exc.strerror)
        self.lines = lines


class _SetAside(OSError):
    """A spool file was unsafe and has been renamed aside."""


@dataclasses.dataclass
class ReplayResult:
    """What one :meth:`Spool.replay` call did."""

    replayed: int = 0
    corrupt: int = 0
    failed: bool = False
    skipped: bool = False  # another process holds the replay lock
    refused: int = 0  # files set aside: not ours, or readable by others
    kept: int = 0  # lines of another format version, moved to spool.other.jsonl
    versions: set[str] = dataclasses.field(default_factory=set)  # their "v", as text
    error: OSError | None = None  # the disk refused the replay's progress (kept in memory)


def open_spool_dir(directory: str) -> int:
    """Create (0700) or open ``directory`` without following a symlink; refuse one that is
    not a directory, not owned by the current uid, or group/other-writable. Returns its fd."""
    parent = os.path.dirname(os.path.abspath(directory))
    if parent:
        os.makedirs(parent, mode=0o700, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise SpoolRefused(
                errno.EPERM, "spool directory is a symlink or not a directory", directory
            ) from None
        raise
    why = _unsafe(os.fstat(fd), dir_mode=True)
    if why:
        os.close(fd)
        raise SpoolRefused(errno.EPERM, f"spool directory {why}", directory)
    return fd


def _unsafe(st: os.stat_result, *, dir_mode: bool) -> str:  # noqa: PLR0911 - a reason per check
    """Why a directory / spool file must not be used ("" when it may)."""
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not {os.getuid()}"
    if dir_mode:
        if not stat.S_ISDIR(st.st_mode):
            return "is not a directory"
        if st.st_mode & 0o022:
            return f"is group/other-writable (mode {stat.S_IMODE(st.st_mode):o})"
        return ""
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_mode & 0o077:
        return f"is accessible to others (mode {stat.S_IMODE(st.st_mode):o})"
    return ""


def service_dir(root: str, service: str) -> str:
    """The per-service spool directory under ``root`` (a file-name-safe service name)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", service)[:100].strip(".") or "unknown_service"
    return os.path.join(root, safe)


class Spool:
    """Append-only JSON-lines spool with a crash-safe, single-replayer protocol."""

    __slots__ = ("_dir_fd", "_dir_id", "_progress", "_safe_parent", "directory", "max_bytes")

    def __init__(self, directory: str, max_bytes: int, *, safe_parent: bool = False) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._safe_parent = safe_parent  # the parent gets the same checks (shared $TMPDIR)
        self._dir_fd: int | None = None
        self._dir_id: tuple[int, int] = (0, 0)
        #: How far this process replayed which replay file (identity, offset): see _advance.
        self._progress: tuple[tuple[int, ...], int] = ((), 0)

    def _dir(self) -> int:
        """The directory's fd, opened once and reopened (re-checked) only when the path no
        longer names the same directory (removed by a tmp cleaner, replaced by a link)."""
        fd = self._dir_fd
        if fd is not None:
            try:
                st = os.lstat(self.directory)
                if (st.st_dev, st.st_ino) == self._dir_id:
                    return fd
            except OSError:
                pass
            self._dir_fd = None
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._safe_parent:
            os.close(open_spool_dir(os.path.dirname(os.path.abspath(self.directory))))
        fd = open_spool_dir(self.directory)
        st = os.fstat(fd)
        self._dir_fd, self._dir_id = fd, (st.st_dev, st.st_ino)
        return fd

    def close(self) -> None:
        """Close the directory descriptor (reopened on the next use)."""
        fd, self._dir_fd = self._dir_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _stat(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self._dir(), follow_symlinks=False)

    def _exists(self, name: str) -> bool:
        try:
            self._stat(name)
        except FileNotFoundError:
            return False
        return True

    def pending(self) -> bool:
        """True when there is anything to replay (cheap: a few ``stat`` calls)."""
        try:
            if self._stat(_SPOOL).st_size > 0:
                return True
        except OSError:
            pass
        try:
            return self._exists(_REPLAY) or self._exists(_LOST) or self._exists(_LOST_REPLAY)
        except OSError:
            return False

    def size(self) -> int:
        """Bytes waiting for replay (the quantity ``max_bytes`` bounds)."""
        total = 0
        with contextlib.suppress(OSError):
            total += self._stat(_SPOOL).st_size
        with contextlib.suppress(OSError):
            total += self._stat(_REPLAY).st_size - self._read_offset()
        return total + self._other_size()

    def _other_size(self) -> int:
        """Bytes of lines kept for another format version (``spool.other.jsonl``)."""
        try:
            return self._stat(_OTHER).st_size
        except OSError:
            return 0

    def kept(self) -> int:
        """How many lines of another format version are kept (not replayed)."""
        try:
            f = self._open_read(_OTHER)
        except OSError:
            return 0
        if f is None:
            return 0
        with f:
            return sum(1 for raw in f if raw.endswith(b"\n"))

    @property
    def reserve(self) -> int:
        """Bytes of ``max_bytes`` kept for obs' own loss reports (``reserved=True``), so the
        count of what a full spool refused is never itself refused."""
        return min(64 * 1024, self.max_bytes // 8)

    def append(self, records: Sequence[dict[str, Any]], *, reserved: bool = False) -> int:
        """Append records as JSON lines; return how many fit (the rest are refused).
        ``reserved`` lines may use the :attr:`reserve`; others stop short of it."""
        if not records:
            return 0
        lines = [
            json.dumps(r, separators=(",", ":"), default=str).encode() + b"\n" for r in records
        ]
        return self.append_lines(lines, reserved=reserved)

    def append_lines(self, lines: Sequence[bytes], *, reserved: bool = False) -> int:
        """Append already encoded lines (each ending in a newline); return how many fit."""
        limit = self.max_bytes if reserved else self.max_bytes - self.reserve
        # Marked: a finaliser that logs meanwhile on this thread is deferred, never waits
        # on the flock this thread holds (flock locks per open file, not per process).
        with marked(self._locked_spool()) as fd:
            used = os.fstat(fd).st_size + self._other_size()
            with contextlib.suppress(OSError):
                used += self._stat(_REPLAY).st_size - self._read_offset()
            room = limit - used
            chunk: list[bytes] = []
            for line in lines:
                if len(line) > room:
                    break
                chunk.append(line)
                room -= len(line)
            if chunk:
                data = b"".join(chunk)
                lead = 1 if used and _torn(fd) else 0  # a writer died mid-line: end that
                data = b"\n" * lead + data  # line first, so it alone is corrupt, not the next
                done = 0
                try:
                    while done < len(data):
                        done += os.write(fd, data[done:])
                except OSError as exc:  # how many lines went whole: those are spooled
                    whole, end = 0, lead
                    for line in chunk:
                        end += len(line)
                        whole += end <= done
                    raise PartialAppend(exc, whole) from exc
            return len(chunk)

    @contextlib.contextmanager
    def _locked_spool(self) -> Iterator[int]:
        """The current ``spool.jsonl``, open for append and exclusively locked."""
        dir_fd = self._dir()
        for _ in range(100):
            fd = os.open(_SPOOL, _FLAGS, 0o600, dir_fd=dir_fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                st = os.fstat(fd)
                try:
                    same = st.st_ino == self._stat(_SPOOL).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    why = _unsafe(st, dir_mode=False)
                    if why:  # planted: set it aside, start a fresh one
                        self._set_aside(_SPOOL, st)
                        continue
                    try:
                        yield fd
                    finally:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                    return
            finally:
                os.close(fd)
        raise OSError(errno.EAGAIN, "spool file keeps being rotated", self.directory)

    def _set_aside(self, name: str, st: os.stat_result) -> None:
        """Rename an unsafe file out of the protocol's way (never read, never deleted)."""
        dir_fd = self._dir()
        with contextlib.suppress(FileNotFoundError):
            os.rename(name, f"refused.{name}.{st.st_ino}", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def _open_read(self, name: str) -> IO[bytes] | None:
        """``name`` open for reading when it is a regular file of ours (0600); None when it
        is missing; an unsafe one is set aside and :class:`_SetAside` raised."""
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=self._dir())
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            self._set_aside(name, self._stat(name))
            raise _SetAside(errno.EPERM, "a symlink", name) from None
        st = os.fstat(fd)
        if _unsafe(st, dir_mode=False):
            os.close(fd)
            self._set_aside(name, st)
            raise _SetAside(errno.EPERM, _unsafe(st, dir_mode=False), name)
        return os.fdopen(fd, "rb")

    def _read_offset(self) -> int:
        try:
            f = self._open_read(_OFFSET)
            if f is None:
                return 0
            with f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def _write_offset(self, offset: int) -> None:
        dir_fd = self._dir()
        tmp = f"{_OFFSET}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600, dir_fd=dir_fd)
        try:
            os.write(fd, str(offset).encode())
        finally:
            os.close(fd)
        os.replace(tmp, _OFFSET, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def _resume(self, fd: int, offset: int) -> tuple[tuple[int, ...], int]:
        """The replay file's identity, and ``offset`` (from disk) or, where that starts no line
        (damaged: it raised, or skipped records), 0: sent twice, never lost; or our progress."""
        st = os.fstat(fd)  # a replay file is not written once claimed
        file, size = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns), st.st_size
        starts = 0 < offset < size and os.pread(fd, 1, offset - 1) == b"\n"
        if not (starts or offset in (0, size)):
            offset = 0
        if self._progress[0] == file:
            offset = max(offset, self._progress[1])
        return file, offset

    def _advance(self, file: tuple[int, ...], offset: int, result: ReplayResult) -> None:
        """Record ``file`` replayed up to ``offset``: on disk, and in memory where the disk
        refuses it (full, read-only): the replay raised, resending its first batch for ever."""
        self._progress = (file, offset)
        try:
            self._write_offset(offset)
        except OSError as exc:
            result.error = exc

    def _unlink(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self._dir())
        if name == _REPLAY:  # its inode may be reused: the progress kept is no one's
            self._progress = ((), 0)

    def scan(self) -> Iterator[dict[str, Any]]:
        """The records waiting for replay, oldest first (read-only, without the replay lock:
        a concurrent replay may have delivered some of them already)."""
        for name in (_REPLAY, _SPOOL):
            f = self._open_read(name)
            if f is None:
                continue
            with f:
                if name == _REPLAY:
                    f.seek(self._read_offset())
                for raw in f:
                    doc = _parse(raw) if raw.endswith(b"\n") else None
                    if isinstance(doc, dict) and other_version(doc) is None:
                        yield doc

    def purge(self) -> bool:
        """Delete every spooled record (under the replay lock); False when a replay holds
        the lock, so nothing is deleted under a replayer's feet."""
        with self._replay_lock() as held:
            if not held:
                return False
            for name in (_SPOOL, _REPLAY, _OFFSET, _OTHER, _LOST, _LOST_REPLAY):
                self._unlink(name)
            return True

    def keep_lost(self, docs: dict[str, dict[str, Any]], merge: Merge) -> None:
        """Persist loss reports the spool had no room for in ``spool.lost.json``, one per
        key (a report of a kept key is merged into it); at most ``_MAX_LOST`` keys."""
        with marked(self._locked_spool()):
            table = self._read_lost()
            for key, doc in docs.items():
                if key in table:
                    table[key] = merge(table[key], doc)
                elif len(table) < _MAX_LOST:
                    table[key] = doc
            self._write_lost(table)

    def _read_lost(self, name: str = _LOST) -> dict[str, dict[str, Any]]:
        try:
            f = self._open_read(name)
            if f is None:
                return {}
            with f:
                table = _parse(f.read())
        except OSError:
            return {}
        if not isinstance(table, dict):
            return {}
        return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, dict)}

    def _write_lost(self, table: dict[str, dict[str, Any]], name: str = _LOST) -> None:
        dir_fd = self._dir()
        tmp = f"{name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600, dir_fd=dir_fd)
        try:
            data = json.dumps(table, separators=(",", ":"), default=str).encode()
            done = 0
            while done < len(data):
                done += os.write(fd, data[done:])
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def _replay_lost(
        self,
        export: Callable[[list[dict[str, Any]]], bool | int],
        merge: Merge,
        result: ReplayResult,
    ) -> bool:
        """Export the kept loss reports: those a replay took before it (left by a process
        killed meanwhile), then the file kept now. Each stays on disk until the collector
        took it; ``merge`` is the keeper's (reports kept meanwhile go to ``_LOST``)."""
        for _ in range(2):
            with marked(self._locked_spool()):
                if not self._exists(_LOST_REPLAY):
                    if not self._exists(_LOST):
                        return True
                    dir_fd = self._dir()
                    os.rename(_LOST, _LOST_REPLAY, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            table = self._read_lost(_LOST_REPLAY)  # only the replay lock's holder writes it
            keys = list(table)
            done = export([table[k] for k in keys]) if keys else True
            n = len(keys) if done is True else min(max(int(done), 0), len(keys))
            result.replayed += n
            if n < len(keys):
                if n:
                    self._write_lost({k: table[k] for k in keys[n:]}, _LOST_REPLAY)
                return False
            self._unlink(_LOST_REPLAY)
        return True

    @contextlib.contextmanager
    def _replay_lock(self) -> Iterator[bool]:
        """Hold ``replay.lock`` (non-blocking) for the block: True, or False when another
        process holds it."""
        lock_fd = os.open(
            _LOCK, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=self._dir()
        )
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(lock_fd)  # releases the flock

    def replay(
        self,
        export: Callable[[list[dict[str, Any]]], bool | int],
        batch_size: int,
        should_stop: Callable[[], bool] = lambda: False,
        merge: Merge | None = None,
    ) -> ReplayResult:
        """Export spooled records in batches through ``export``: True = all delivered,
        False = none, an int n = the first n done (the rest not delivered: a collector
        that took part of a split batch, then failed). Progress is kept up to the last
        record done, so what the collector took is never sent again.

        Holds ``replay.lock`` for the duration; returns ``skipped`` when another process
        holds it. Stops at the first failed batch (resumable) or when ``should_stop()``.
        With ``merge``, the kept loss reports (:meth:`keep_lost`) are exported first.
        """
        result = ReplayResult()
        if not self.pending():
            return result
        with self._replay_lock() as held:
            if not held:
                result.skipped = True
                return result
            if merge is not None and not self._replay_lost(export, merge, result):
                result.failed = True
                return result
            for _ in range(3):  # the leftover replay file, then the current spool once
                if not self._claim(result):
                    break
                if not self._replay_file(export, batch_size, should_stop, result):
                    break
        return result

    def _claim(self, result: ReplayResult) -> bool:
        """Make sure ``spool.replay.jsonl`` exists (rotating the spool into it)."""
        if self._exists(_REPLAY):
            return True
        dir_fd = self._dir()
        try:
            st = self._stat(_SPOOL)
            if st.st_size == 0:
                return False
            if _unsafe(st, dir_mode=False):
                self._set_aside(_SPOOL, st)
                result.refused += 1
                return False
            self._unlink(_OFFSET)
            os.rename(_SPOOL, _REPLAY, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except FileNotFoundError:
            return False
        fd = os.open(_REPLAY, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
        try:  # wait for writers that locked the old inode before the rename
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        return True

    def _replay_file(
        self,
        export: Callable[[list[dict[str, Any]]], bool | int],
        batch_size: int,
        should_stop: Callable[[], bool],
        result: ReplayResult,
    ) -> bool:
        """Replay ``spool.replay.jsonl`` from the recorded offset; True when finished."""
        offset = self._read_offset()
        try:
            f = self._open_read(_REPLAY)
        except _SetAside:  # planted by someone else: never replayed
            result.refused += 1
            self._unlink(_OFFSET)
            return True
        if f is None:
            return True
        with f:
            file, offset = self._resume(f.fileno(), offset)
            f.seek(offset)
            while True:
                if should_stop():
                    return False
                corrupt = result.corrupt
                batch, marks, end, others = _read_batch(f, offset, batch_size, result)
                if not batch:
                    if end != offset:
                        self._keep(others, result)
                        self._advance(file, end, result)
                    break
                answer = export(batch)
                done = len(batch) if answer is True else min(max(int(answer), 0), len(batch))
                if done < len(batch):  # keep what was done; the rest is read again
                    result.failed = True
                    if done > 0:
                        offset, result.corrupt = marks[done - 1]
                        result.replayed += done
                        self._keep([o for o in others if o[0] < done], result)
                        self._advance(file, offset, result)
                    else:
                        result.corrupt = corrupt
                    return False
                result.replayed += len(batch)
                offset = end
                self._keep(others, result)
                self._advance(file, offset, result)
        self._unlink(_REPLAY)
        self._unlink(_OFFSET)
        return True

    def _keep(self, others: list[tuple[int, bytes, str]], result: ReplayResult) -> None:
        """Append lines of another format version to ``spool.other.jsonl`` (before the
        replay offset passes them: a crash in between keeps a line twice, never loses it);
        when that file cannot be written they are counted corrupt (lost, counted)."""
        if not others:
            return
        try:
            fd = os.open(_OTHER, _FLAGS, 0o600, dir_fd=self._dir())
            try:
                st = os.fstat(fd)
                if _unsafe(st, dir_mode=False):
                    self._set_aside(_OTHER, st)
                    result.refused += 1
                    raise _SetAside(errno.EPERM, "spool.other.jsonl is unsafe", _OTHER)
                data = b"".join(raw for _, raw, _ in others)
                if st.st_size and _torn(fd):
                    data = b"\n" + data
                while data:
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)
        except OSError:
            result.corrupt += len(others)
            return
        result.kept += len(others)
        result.versions.update(v for _, _, v in others)


def _parse(raw: bytes) -> object:
    """The JSON value of spool bytes; None when not JSON or nested past the recursion
    limit (RecursionError: a replay raised at such a line for ever, stranding the spool)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def other_version(doc: dict[str, Any]) -> str | None:
    """The ``"v"`` of a spool line another format version wrote, as text (bounded); None
    for this version's lines (``"v": 1``, or no ``"v"``)."""
    if "v" not in doc:
        return None
    v = doc["v"]
    if type(v) is int and v == VERSION:
        return None
    return json.dumps(v, default=str)[:32]


def _read_batch(
    f: IO[bytes], offset: int, batch_size: int, result: ReplayResult
) -> tuple[list[dict[str, Any]], list[tuple[int, int]], int, list[tuple[int, bytes, str]]]:
    """Up to ``batch_size`` records from ``f`` (at ``offset``), lines that are not one
    counted in ``result.corrupt``; with, per record, the offset past its line and the
    corrupt count then (where a replay that stops after it resumes), the end offset, and
    the lines of another format version (how many records precede each, the raw line, its
    version)."""
    batch: list[dict[str, Any]] = []
    marks: list[tuple[int, int]] = []
    others: list[tuple[int, bytes, str]] = []
    end = offset
    for raw in f:
        end += len(raw)
        # a torn last line (a writer died mid-write) is not a record either
        doc = _parse(raw) if raw.endswith(b"\n") else None
        if not isinstance(doc, dict):
            result.corrupt += 1
        elif (version := other_version(doc)) is not None:
            others.append((len(batch), raw, version))
        else:
            batch.append(doc)
            marks.append((end, result.corrupt))
        if len(batch) >= batch_size:
            break
    return batch, marks, end, others
