"""A bounded FIFO that, when full, gives up its lowest severity first.

The SDK's ``BatchLogRecordProcessor`` drops the *oldest* record when its queue is full,
so an INFO flood pushes out the ERROR that explains it. :class:`SeverityQueue` keeps the
arrival order for export but, when full, hands back a victim from the lowest non-empty
severity class: the oldest record of a class lower than the newcomer, or the newcomer
itself when nothing queued is lower. The caller decides the victim's fate (WARNING and
above are spooled, lower ones counted as dropped), so nothing here does I/O or allocates
beyond one small object per record.

Not thread-safe by itself: the export sink calls it under its own lock.
"""

from __future__ import annotations

__all__ = ["LEVEL_NAMES", "WARNING_CLASS", "QueueItem", "SeverityQueue", "level_class"]

from collections import deque
from typing import Generic, TypeVar

from obs.levels import CLASS_NAMES as LEVEL_NAMES
from obs.levels import WARNING_CLASS, level_class

P = TypeVar("P")


class QueueItem(Generic[P]):
    """One queued record: arrival number, severity class and payload (None once evicted)."""

    __slots__ = ("level", "payload", "seq")

    def __init__(self, seq: int, level: int, payload: P) -> None:
        self.seq = seq
        self.level = level
        self.payload: P | None = payload


class SeverityQueue(Generic[P]):
    """Bounded FIFO with lowest-severity-first eviction (see the module docstring).

    ``_order`` holds every item in arrival order; ``_classes[c]`` holds the live items of
    class ``c`` in arrival order, so the oldest live item of a class is its deque's head.
    An evicted item stays in ``_order`` with ``payload = None`` until :meth:`take` passes
    it or a compaction removes it, which keeps :meth:`put` O(1).
    """

    __slots__ = ("_classes", "_dead", "_order", "_seq", "_size", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._order: deque[QueueItem[P]] = deque()
        self._classes: tuple[deque[QueueItem[P]], ...] = tuple(deque() for _ in LEVEL_NAMES)
        self._size = 0
        self._dead = 0
        self._seq = 0

    def __len__(self) -> int:
        return self._size

    @property
    def last_seq(self) -> int:
        """Arrival number of the newest record ever put (0 when none)."""
        return self._seq

    def put(self, level: int, payload: P) -> tuple[int, P] | None:
        """Append a record; when full return the ``(class, payload)`` that had to leave.

        The victim is the oldest record of the lowest queued class if that class is lower
        than ``level``; otherwise the newcomer itself is returned (and not queued).
        """
        if self._size >= self.capacity:
            lowest = self._lowest_class()
            if lowest >= level:
                return level, payload
            victim = self._classes[lowest].popleft()
            evicted = victim.payload
            victim.payload = None
            self._size -= 1
            self._dead += 1
            if self._dead > 64 and self._dead > len(self._order) // 2:
                self._compact()
            self._append(level, payload)
            return lowest, evicted  # type: ignore[return-value]
        self._append(level, payload)
        return None

    def _append(self, level: int, payload: P) -> None:
        self._seq += 1
        item = QueueItem(self._seq, level, payload)
        self._order.append(item)
        self._classes[level].append(item)
        self._size += 1

    def _lowest_class(self) -> int:
        for index, items in enumerate(self._classes):
            if items:
                return index
        return len(self._classes)

    def _compact(self) -> None:
        self._order = deque(item for item in self._order if item.payload is not None)
        self._dead = 0

    def take(self, limit: int) -> tuple[list[tuple[int, P]], int]:
        """Remove up to ``limit`` live records, oldest first; also the last arrival number
        passed (every record with a number up to it has left the queue)."""
        out: list[tuple[int, P]] = []
        order = self._order
        last = 0
        while order and len(out) < limit:
            item = order.popleft()
            last = item.seq
            if item.payload is None:
                self._dead -= 1
                continue
            self._classes[item.level].popleft()
            out.append((item.level, item.payload))
            self._size -= 1
        while order and order[0].payload is None:  # leave no evicted head behind
            last = order.popleft().seq
            self._dead -= 1
        return out, last

    def drain(self) -> list[tuple[int, P]]:
        """Remove and return every live record, oldest first."""
        out, _ = self.take(self._size)
        self._order.clear()
        self._dead = 0
        return out

    def oldest_seq(self) -> int | None:
        """Arrival number of the oldest live record, or None when empty."""
        for item in self._order:
            if item.payload is not None:
                return item.seq
        return None

    def counts(self) -> dict[str, int]:
        """Live records per severity class name."""
        pairs = zip(LEVEL_NAMES, self._classes, strict=True)
        return {name: len(items) for name, items in pairs if items}
