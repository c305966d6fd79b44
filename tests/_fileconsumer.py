"""Which lines the collector's filelog receiver reads from a directory, poll by poll.

No collector runs here, so this re-implements the part of opentelemetry-collector-contrib
``pkg/stanza/fileconsumer`` that decides what is read when files are rotated (at
00e930a9cb6bffc0eb7974f08aee464a51f7eaa0): each poll matches ``include`` minus ``exclude``
(``matcher``), skips empty files (no fingerprint yet), identifies a file by its
fingerprint (its first ``fingerprint_size`` bytes, default 1000) so a renamed file that
still matches keeps its reader and offset (``tracker``), reads every matched file to its
last complete line, and reads a file that was matched in the previous poll but is not any
more (renamed out of the pattern, deleted) to its end ONCE, then closes it
(``file_other.go`` ``readLostFiles``, ``postConsume``). A line appended to such a file
afterwards is never read.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["FileConsumer"]


class _Reader:
    """An open file, its fingerprint and how far it has been read."""

    def __init__(self, path: str, fingerprint: bytes, size: int) -> None:
        self.file = open(path, "rb")  # noqa: SIM115 - held across polls, as upstream does
        self.fingerprint = fingerprint
        self.size = size
        self.offset = 0

    def read_to_end(self) -> list[str]:
        self.file.seek(self.offset)
        data = self.file.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        if len(self.fingerprint) < self.size:  # the fingerprint grows with the file
            self.file.seek(0)
            self.fingerprint = self.file.read(self.size)
        return [line.decode() for line in complete.splitlines() if line]

    def close(self) -> None:
        self.file.close()


class FileConsumer:
    """The filelog receiver's file tracking, from its config (include, exclude,
    fingerprint_size, start_at)."""

    def __init__(self, receiver: Mapping[str, Any]) -> None:
        self.include: list[str] = list(receiver.get("include") or [])
        self.exclude: list[str] = list(receiver.get("exclude") or [])
        self.size = int(receiver.get("fingerprint_size", 1000))
        if receiver.get("start_at", "end") != "beginning":
            raise ValueError("modelled for start_at: beginning only")
        self.previous: list[_Reader] = []
        self.known: list[tuple[bytes, int]] = []  # closed readers: fingerprint, offset

    def _matches(self) -> list[str]:
        found: set[str] = set()
        for pattern in self.include:
            found.update(glob.glob(pattern))
        for pattern in self.exclude:
            found.difference_update(glob.glob(pattern))
        return sorted(p for p in found if os.path.isfile(p))

    def _reader(self, path: str) -> _Reader | None:
        with open(path, "rb") as f:
            fingerprint = f.read(self.size)
        if not fingerprint:
            return None  # empty: not read until it has a fingerprint
        for old in self.previous:
            if fingerprint.startswith(old.fingerprint):
                self.previous.remove(old)
                return old  # the same file, renamed or not: same reader, same offset
        reader = _Reader(path, fingerprint, self.size)
        for known_fp, offset in self.known:
            if fingerprint.startswith(known_fp):
                reader.offset = offset
                self.known.remove((known_fp, offset))
                break
        return reader

    def poll(self) -> list[str]:
        """One poll cycle: the lines read, lost files first (as upstream emits them)."""
        current = [r for r in (self._reader(p) for p in self._matches()) if r is not None]
        lines = []
        for lost in self.previous:  # matched last poll, not now: read to end once, close
            lines += lost.read_to_end()
            lost.close()
            self.known.append((lost.fingerprint, lost.offset))  # closePreviousFiles
        self.previous = []
        for reader in current:
            lines += reader.read_to_end()
        self.previous = current
        return lines

    def close(self) -> None:
        for reader in self.previous:
            reader.close()
        self.previous = []
