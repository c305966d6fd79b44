"""Tests for obs._export_queue: bounded FIFO with lowest-severity-first eviction."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obs._export_queue import LEVEL_NAMES, SeverityQueue, level_class

DEBUG, INFO, WARNING, ERROR, CRITICAL = range(5)


class TestLevelClass:
    @pytest.mark.parametrize(
        ("level", "expected"),
        [
            (5, DEBUG),
            (10, DEBUG),
            (20, INFO),
            (25, INFO),
            (30, WARNING),
            (40, ERROR),
            (50, CRITICAL),
            (99, CRITICAL),
        ],
    )
    def test_maps_stdlib_levels(self, level: int, expected: int) -> None:
        """Stdlib level numbers map onto the five severity classes, in-between levels down."""
        assert expected == level_class(level)


class TestSeverityQueue:
    def test_fifo_when_not_full(self) -> None:
        """Below capacity, records come out in arrival order whatever their severity."""
        q: SeverityQueue[str] = SeverityQueue(10)
        for i, cls in enumerate([INFO, ERROR, DEBUG, WARNING]):
            assert q.put(cls, f"r{i}") is None
        batch, last = q.take(10)
        assert [(INFO, "r0"), (ERROR, "r1"), (DEBUG, "r2"), (WARNING, "r3")] == batch
        assert 4 == last
        assert 0 == len(q)

    def test_full_evicts_oldest_of_lowest_class(self) -> None:
        """A full queue gives up the oldest record of its lowest class for a higher one."""
        q: SeverityQueue[str] = SeverityQueue(3)
        q.put(INFO, "i1")
        q.put(DEBUG, "d1")
        q.put(DEBUG, "d2")
        assert (DEBUG, "d1") == q.put(ERROR, "e1")
        assert (DEBUG, "d2") == q.put(WARNING, "w1")
        assert (INFO, "i1") == q.put(ERROR, "e2")
        assert ["e1", "w1", "e2"] == [p for _, p in q.take(10)[0]]

    def test_newcomer_not_higher_is_rejected(self) -> None:
        """A record no higher than everything queued is itself the victim (tail drop)."""
        q: SeverityQueue[str] = SeverityQueue(2)
        q.put(ERROR, "e1")
        q.put(ERROR, "e2")
        assert (ERROR, "e3") == q.put(ERROR, "e3")
        assert (INFO, "i1") == q.put(INFO, "i1")
        assert {"ERROR": 2} == q.counts()

    def test_take_respects_limit_and_skips_evicted(self) -> None:
        """take() returns at most ``limit`` live records and passes evicted ones."""
        q: SeverityQueue[int] = SeverityQueue(3)
        for i in range(3):
            q.put(INFO, i)
        q.put(ERROR, 10)  # evicts 0
        q.put(ERROR, 11)  # evicts 1
        batch, _ = q.take(2)
        assert [(INFO, 2), (ERROR, 10)] == batch
        assert 1 == len(q)
        assert q.oldest_seq() == 5

    def test_drain_empties(self) -> None:
        """drain() returns every live record and leaves an empty queue."""
        q: SeverityQueue[int] = SeverityQueue(4)
        for i in range(4):
            q.put(WARNING, i)
        assert [0, 1, 2, 3] == [p for _, p in q.drain()]
        assert 0 == len(q)
        assert q.oldest_seq() is None

    def test_dead_entries_are_compacted(self) -> None:
        """Sustained eviction keeps the internal order list bounded (no unbounded growth)."""
        q: SeverityQueue[int] = SeverityQueue(8)
        for i in range(8):
            q.put(DEBUG, i)
        for i in range(10_000):
            q.put(INFO if i % 2 else DEBUG, i)
            q.put(WARNING, i)
        assert 8 == len(q)
        assert len(q._order) <= 8 + 64 + 8

    @settings(max_examples=200, deadline=None)
    @given(
        st.integers(min_value=1, max_value=16),
        st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=4)), max_size=200),
    )
    def test_accounting_property(self, capacity: int, ops: list[tuple[bool, int]]) -> None:
        """Every record put is exactly once either taken or returned as a victim, the queue
        never exceeds capacity, and a victim is never higher than what stays queued."""
        q: SeverityQueue[int] = SeverityQueue(capacity)
        seen: list[int] = []
        for n, (take, cls) in enumerate(ops):
            if take:
                seen.extend(p for _, p in q.take(3)[0])
                continue
            victim = q.put(cls, n)
            assert len(q) <= capacity
            if victim is not None:
                seen.append(victim[1])
                live = [item.level for item in q._order if item.payload is not None]
                assert victim[0] <= min(live)
        seen.extend(p for _, p in q.drain())
        assert sorted(seen) == [n for n, (take, _) in enumerate(ops) if not take]

    def test_level_names(self) -> None:
        """Class names are the stdlib level names used as ``dropped`` keys."""
        assert ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") == LEVEL_NAMES
