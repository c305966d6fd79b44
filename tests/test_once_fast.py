"""The ``*_once`` fast path (obs._once_cache.OnceCache): same output and counts as the full path.

Every test drives the real logger and the real stdlib drop-in through a configured runtime
and reads the JSON lines written; the table is only an accelerator, so each expectation is
what the full path gives.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _children import untraced
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs._runtime
import obs.testing
from obs._config import STATE
from obs._once_cache import _MAX_KEYS as MAX_EVENTS
from obs._once_cache import _PER_EVENT as PER_EVENT
from obs.dedup import key_text
from obs.rank import RankResolver
from obs.stdlib import init_logger

ROOT = Path(__file__).resolve().parent.parent

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]


class Color(str, enum.Enum):
    RED = "red"


def _summaries(read: Callable[[], list[dict[str, Any]]]) -> dict[str, int]:
    return dict(_summary_list(read))


def _summary_list(read: Callable[[], list[dict[str, Any]]]) -> list[tuple[str, int]]:
    obs.flush()
    return [
        (r["dedup_key"], r["suppressed_count"])
        for r in read()
        if r["event"] == "log_repeats_suppressed"
    ]


def _table_size() -> int:
    assert STATE.runtime is not None
    return len(STATE.runtime.once_cache)


class TestExactness:
    def test_repeats_take_the_table_and_count_exactly(self, configure_json: Configure) -> None:
        """The first repeat fills the table, later ones hit it; the count is every repeat."""
        read = configure_json()
        log = obs.get_logger("fast")
        for _ in range(10):
            log.warning_once("evt", n=1)
        assert ["evt"] == [r["event"] for r in read()]
        assert 1 == _table_size()
        assert {"fast:30:evt n=1": 9} == _summaries(read)

    @pytest.mark.parametrize(
        "values",
        [
            [1, 1.0, True],
            [0, 0.0, False],
            ["red", Color.RED],
            [1, np.int64(1), np.float64(1.0)],
            [1.5, np.float64(1.5)],
        ],
    )
    def test_equal_values_of_other_types_never_match(
        self, configure_json: Configure, values: list[Any]
    ) -> None:
        """1, 1.0, True (and str Enums, numpy scalars) are separate keys: each is logged."""
        read = configure_json()
        log = obs.get_logger("fast")
        for _ in range(3):  # fill the table with every value's snapshot first
            for value in values:
                log.warning_once("evt", v=value)
        assert len(values) == len([r for r in read() if r["event"] == "evt"])
        assert [2] * len(values) == [n for _, n in _summary_list(read)]

    def test_dropin_equal_args_of_other_types_never_match(self, configure_json: Configure) -> None:
        """The stdlib drop-in: ``warning_once("x %s", 1)`` and ``(... , True)`` are two keys."""
        read = configure_json()
        logger = init_logger("fast.dropin")
        for _ in range(3):
            for value in (1, 1.0, True, "1"):
                logger.warning_once("x %s", value)
        assert ["x 1", "x 1.0", "x True", "x 1"] == [r["body"] for r in read()]
        assert [2, 2, 2, 2] == [n for _, n in _summary_list(read)]

    def test_field_order_and_types_per_name(self, configure_json: Configure) -> None:
        """Swapped values of equal-comparing types under swapped names never match."""
        read = configure_json()
        log = obs.get_logger("fast")
        for _ in range(3):
            log.warning_once("evt", a=1, b=1.0)
        log.warning_once("evt", b=1, a=1.0)
        assert 2 == len(read())

    @pytest.mark.parametrize("position", [1, 2])
    def test_a_later_value_of_another_type_never_matches(
        self, configure_json: Configure, position: int
    ) -> None:
        """``n=1, k=1`` then ``n=1, k=True`` (``k`` second: checked inline; third: in the
        loop), with ``scope="global"``: equal dicts whose later value's type differs are
        two keys."""
        read = configure_json()
        log = obs.get_logger("fast")
        for value in (1, True, 1.0, 1, True, 1.0):
            fields: dict[str, Any] = {"n": 1, "scope": "global"}
            fields = dict(
                [*list(fields.items())[:position], ("k", value), *list(fields.items())[position:]]
            )
            log.warning_once("evt", **fields)
        assert 3 == len([r for r in read() if r["event"] == "evt"])
        assert [1, 1, 1] == [n for _, n in _summary_list(read)]

    def test_swapped_names_of_equal_values_never_match(self, configure_json: Configure) -> None:
        """``a=1, b=1.0`` then ``b=1, a=1.0``: equal dicts, equal type sequences in call
        order, different keys; both are logged (a compare of the types in call order, not
        per name, took the second for a repeat)."""
        read = configure_json()
        log = obs.get_logger("fast")
        for _ in range(3):
            log.warning_once("evt", a=1, b=1.0)
        log.warning_once("evt", b=1, a=1.0)
        assert [(1, 1.0), (1.0, 1)] == [(r["a"], r["b"]) for r in read()]
        assert [2] == [n for _, n in _summary_list(read)]

    def test_a_value_whose_eq_raises_never_raises_into_the_caller(
        self, configure_json: Configure
    ) -> None:
        """A numpy array where a remembered plain call had a string: compared, its ``==``
        raises; the call takes the full path and is logged (and never raises)."""
        read = configure_json()
        log = obs.get_logger("fast")
        dropin = init_logger("fast.dropin")
        for _ in range(3):
            log.warning_once("evt", v="x")
            dropin.warning_once("x %s", "x")
        log.warning_once("evt", v=np.array([1, 2]))
        dropin.warning_once("x %s", np.array([1, 2]))
        values = [r["v"] for r in read() if r["event"] == "evt"]
        assert 2 == len(values)
        assert "x" == values[0]

    def test_bound_context_is_part_of_the_match(self, configure_json: Configure) -> None:
        """Loggers bound to different values never share a snapshot."""
        read = configure_json()
        one, two = obs.get_logger("fast").bind(job=1), obs.get_logger("fast").bind(job=2)
        for _ in range(3):
            one.warning_once("evt")
            two.warning_once("evt")
        assert [1, 2] == [r["job"] for r in read()]
        assert {"fast:30:evt job=1": 2, "fast:30:evt job=2": 2} == _summaries(read)

    def test_older_rows_equal_names_and_context_count_exactly(
        self, configure_json: Configure
    ) -> None:
        """A repeat of an older snapshot (the inline hit checks the newest only), from a
        logger whose equal name is another object, or from one with context of the same
        name, is counted on its own key exactly."""
        read = configure_json()
        plain = obs.get_logger("fast")
        other = obs.get_logger("fastX"[:4])  # equal, not the same object
        bound = obs.get_logger("fast").bind(job=1)
        assert plain.name is not other.name
        for _ in range(3):
            for n in (1, 2, 3):
                plain.warning_once("evt", n=n)
                other.warning_once("evt", n=n)
            bound.warning_once("evt", n=1)
        assert [1, 2, 3, 1] == [r["n"] for r in read() if r["event"] == "evt"]
        expected = {"fast:30:evt n=1": 5, "fast:30:evt n=2": 5, "fast:30:evt n=3": 5}
        assert {**expected, "fast:30:evt job=1 n=1": 2} == _summaries(read)

    def test_calls_that_are_not_plain_stay_on_the_full_path(
        self, configure_json: Configure
    ) -> None:
        """A non-plain value or a control keyword is never remembered."""
        configure_json()
        log = obs.get_logger("fast")
        for _ in range(3):
            log.warning_once("evt", v=[[1], 2])  # nested
            log.warning_once("evt1", v=[1] * 17, w=(float("nan"),), u=("y" * 65,))
            log.warning_once("evt2", v=Color.RED)
            log.warning_once("evt3", v="x", scope={0, 1})
            log.warning_once("evt4", v="y" * 5000)
            log.warning_once("evt5 %s", 1)
        assert 0 == _table_size()

    def test_same_output_as_a_runtime_without_the_table(self, configure_json: Configure) -> None:
        """Lines and summaries are what the full path writes (the table emptied each call)."""
        calls = [("evt", {"n": 1}), ("evt", {"n": 1.0}), ("evt", {"n": 1}), ("other", {})] * 4

        def run(clear: bool) -> list[dict[str, Any]]:
            obs.testing.reset()  # a new deduper too (configure keeps the old one)
            read = configure_json()
            log = obs.get_logger("fast")
            for event, kw in calls:
                if clear:
                    assert STATE.runtime is not None
                    STATE.runtime.once_cache.clear()
                log.warning_once(event, **kw)
            obs.flush()
            return [{k: v for k, v in r.items() if k not in _VOLATILE} for r in read()]

        assert run(clear=True) == run(clear=False)

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b"]),
                st.lists(  # few values, so that equal ones of other types meet often
                    st.sampled_from([1, 1.0, True, 0, False, None, "red", Color.RED]),
                    min_size=1,
                    max_size=4,
                ),
            ),
            max_size=30,
        )
    )
    def test_counts_match_the_deduper_for_any_calls(
        self, calls: list[tuple[str, list[Any]]]
    ) -> None:
        """Any sequence of once calls with one to four fields (each position checked: the
        first two inline, the rest in a loop): suppressed counts equal each key's repeats."""
        obs.configure(format="json", sdk_disabled=True, stream="none", repeat_summary_seconds=0)
        try:
            log = obs.get_logger("fast")
            for event, values in calls:  # each twice: the second fills the table
                for _ in range(2):
                    log.warning_once(event, **{f"v{i}": v for i, v in enumerate(values)})
            rt = STATE.runtime
            assert rt is not None
            total = sum(rt.deduper.suppressed(k) for k in list(rt.deduper._entries))
            assert 2 * len(calls) - len(rt.deduper) == total
            keys = {(event, tuple((type(v), v) for v in values)) for event, values in calls}
            assert len(keys) == len(rt.deduper)  # no repeat counted on an equal call's key
        finally:
            obs.testing.reset()


_VOLATILE = {"timestamp", "first_seen", "last_seen", "code.line.number"}


class TestThreads:
    @pytest.mark.parametrize(
        ("value", "scope"),
        [(1, "local"), ([1, "a"], "global"), ((2.5, None), "process"), (True, 0)],
    )
    def test_exact_counts_under_threads(
        self, configure_json: Configure, value: object, scope: object
    ) -> None:
        """8 threads repeating the same call (plain, scoped, with a list or tuple value):
        one line, every other call counted once."""
        read = configure_json()
        log = obs.get_logger("fast")
        dropin = init_logger("fast.dropin")
        threads, per_thread = 8, 2000
        barrier = threading.Barrier(threads)

        def work() -> None:
            barrier.wait()
            for _ in range(per_thread):
                log.warning_once("evt", n=value, scope=scope)
                dropin.warning_once("x %s", value, scope=scope)

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert ["evt", "x %s"] == sorted(r["event"] for r in read())
        counts = _summaries(read)
        assert [threads * per_thread - 1] * 2 == sorted(counts.values())

    def test_quiet_ranks_stay_quiet_under_threads(
        self, configure_json: Configure, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """On a rank the scope keeps quiet, 8 threads repeating calls write and count
        nothing, from the table as from the full path."""
        monkeypatch.setenv("RANK", "1")
        monkeypatch.setenv("LOCAL_RANK", "1")
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        read = configure_json()
        log, dropin = obs.get_logger("fast"), init_logger("fast.dropin")
        barrier = threading.Barrier(8)

        def work() -> None:
            barrier.wait()
            for _ in range(1000):
                log.warning_once("evt", n=[1])
                dropin.warning_once("x %s", 1, scope="global")

        pool = [threading.Thread(target=work) for _ in range(8)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert 2 == _table_size()  # both answered by the table
        assert ([], {}) == (read(), _summaries(read))


class TestInvalidation:
    def test_reconfigure_starts_an_empty_table(self, configure_json: Configure) -> None:
        """A new runtime has a new table; the deduper (kept) still counts the repeats."""
        configure_json()
        log = obs.get_logger("fast")
        for _ in range(3):
            log.warning_once("evt")
        assert 1 == _table_size()
        read = configure_json()
        assert 0 == _table_size()
        log.warning_once("evt")
        assert [] == read()

    def test_shutdown_empties_the_table(self, configure_json: Configure) -> None:
        """``obs.shutdown()`` drops the snapshots."""
        configure_json()
        log = obs.get_logger("fast")
        for _ in range(3):
            log.warning_once("evt")
        obs.shutdown()
        assert 0 == _table_size()

    def test_rank_change_is_seen(
        self, configure_json: Configure, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """After the rank info changes to a non-first local rank, a repeat is neither
        written nor counted (the scope decides again, as on the full path). With
        torch.distributed loaded, so a hit takes the inline check (this failed when it
        compared only the process group: refresh() recomputes at once)."""
        import torch.distributed  # noqa: F401 - the resolver finds torch's group holder

        read = configure_json()
        log = obs.get_logger("fast")
        for _ in range(3):
            log.info_once("evt")
        read()
        monkeypatch.setenv("RANK", "1")
        monkeypatch.setenv("LOCAL_RANK", "1")
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        assert STATE.runtime is not None
        STATE.runtime.resolver.refresh()
        for _ in range(5):
            log.info_once("evt")
        assert {"fast:20:evt": 2} == _summaries(read)

    @pytest.mark.parametrize("api", ["bound", "dropin"])
    def test_a_refresh_while_the_table_syncs_is_not_lost(
        self, configure_json: Configure, monkeypatch: pytest.MonkeyPatch, api: str
    ) -> None:
        """The rank moves (another thread's refresh) after the table read the rank info
        and before it recorded what it checked: the next repeat looks again and is kept
        quiet at local rank 1 (a hit compares only the holder, so the table hears of the
        move from the resolver and records nothing it did not check)."""
        import torch.distributed  # noqa: F401 - the resolver finds torch's group holder

        for name in _RANK_ENV:
            monkeypatch.delenv(name, raising=False)
        read = configure_json()
        log, dropin = obs.get_logger("fast"), init_logger("fast.dropin")
        call = (
            (lambda: log.info_once("evt", n=1))
            if api == "bound"
            else (lambda: dropin.info_once("evt %s", 1))
        )
        call()
        call()  # remembered, then counted by the table
        real = RankResolver.current
        armed = [True]

        def moved_after(self: RankResolver) -> Any:
            info = real(self)
            if armed[0]:  # the other thread: the rank moves before the table records
                armed[0] = False
                for name, value in zip(_RANK_ENV, ("1", "1", "2", "2"), strict=True):
                    monkeypatch.setenv(name, value)
                self._stale = True
                real(self)
            return info

        assert STATE.runtime is not None
        STATE.runtime.once_cache.invalidate()  # nothing changed: the next hit syncs
        monkeypatch.setattr(RankResolver, "current", moved_after)
        call()  # syncs: the info read is the old rank's, so this one is still counted
        monkeypatch.setattr(RankResolver, "current", real)
        for _ in range(5):
            call()  # local rank 1 now: neither written nor counted
        assert [2] == list(_summaries(read).values())

    def test_process_group_init_and_destroy_are_seen(
        self, configure_json: Configure, tmp_path: Path
    ) -> None:
        """A real gloo group initialised, then destroyed, between hits: the next hit sees
        each change (the cache compares torch's default group inline, without calling the
        resolver) and the repeats are still counted exactly."""
        import torch.distributed as dist

        read = configure_json()
        log = obs.get_logger("fast")
        rt = STATE.runtime
        assert rt is not None
        for _ in range(3):
            log.warning_once("evt")
        seen = [rt.once_cache._info.source if rt.once_cache._info else None]
        dist.init_process_group(
            "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
        )
        try:
            for _ in range(4):
                log.warning_once("evt")
            seen.append(rt.once_cache._info.source if rt.once_cache._info else None)
        finally:
            dist.destroy_process_group()
        for _ in range(5):
            log.warning_once("evt")
        seen.append(rt.once_cache._info.source if rt.once_cache._info else None)
        assert ["single", "torch.distributed", "single"] == seen
        assert {"fast:30:evt": 11} == _summaries(read)

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
    def test_fork_drops_the_table(self, configure_json: Configure) -> None:
        """In a forked child the rank info is recomputed, so the parent's snapshots are
        not used: the child's first repeat goes the full path (and is still suppressed)."""
        configure_json()
        log = obs.get_logger("fast")
        for _ in range(3):
            log.warning_once("evt")
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                rt = STATE.runtime
                assert rt is not None
                before = rt.resolver.current() is rt.once_cache._info
                log.warning_once("evt")
                os.write(
                    write_fd,
                    json.dumps([before, rt.deduper.suppressed(("fast", 30, "evt"))]).encode(),
                )
            finally:
                os._exit(0)
        os.close(write_fd)
        os.waitpid(pid, 0)
        with os.fdopen(read_fd) as f:
            assert [False, 3] == json.load(f)


_SCOPES: list[Any] = [_OMIT := object(), "local", "global", "process", "bogus", 0, 1, -1]
_ODD_SCOPES: list[Any] = [True, 1.0, [0, 1], None, Color.RED]
_RANKS = [(0, 0), (1, 1), (1, 0), (3, 1)]  # (rank, local_rank): first, neither, local, neither


def _set_rank(rank: int, local_rank: int) -> None:
    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(local_rank), WORLD_SIZE="4", LOCAL_WORLD_SIZE="2"
    )
    assert STATE.runtime is not None
    STATE.runtime.resolver.refresh()


_RANK_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


_SCALAR = st.one_of(
    st.integers(-1, 1), st.booleans(), st.floats(width=16), st.none(), st.sampled_from(["1", "x"])
)
_VALUES = st.one_of(
    _SCALAR,
    st.lists(_SCALAR, max_size=3),
    st.lists(_SCALAR, max_size=3).map(tuple),
    st.lists(st.lists(_SCALAR, max_size=2), max_size=2),  # nested: the full path
    st.just(["y" * 65]),
    st.just(list(range(17))),
)


@contextlib.contextmanager
def _probes() -> Iterator[list[int]]:
    """Count the rank resolver's probes while the block runs."""
    probes: list[int] = []
    real = RankResolver.current

    def counted(self: RankResolver) -> Any:
        probes.append(1)
        return real(self)

    RankResolver.current = counted  # type: ignore[method-assign]
    try:
        yield probes
    finally:
        RankResolver.current = real  # type: ignore[method-assign]


class TestSequences:
    """Short lists and tuples of plain scalars are keyed by items and types (cheaply) and
    kept by the table; anything else keeps the full path."""

    @pytest.mark.parametrize("value", [[1, 2], (1, "a"), ["x"], (), [None, 1.5, True]])
    def test_a_sequence_repeat_probes_nothing(
        self, configure_json: Configure, value: object
    ) -> None:
        """On main every repeat with a list value took the full path (15x a plain one)."""
        read = configure_json()
        log, dropin = obs.get_logger("fast"), init_logger("fast.dropin")
        for _ in range(2):
            log.warning_once("evt", v=value)
            dropin.warning_once("x %s", value)
        assert 2 == _table_size()
        with _probes() as probes:
            for _ in range(5):
                log.warning_once("evt", v=value)
                dropin.warning_once("x %s", value)
        assert [] == probes
        assert ["evt", "x %s"] == sorted(r["event"] for r in read())
        assert [6, 6] == sorted(_summaries(read).values())

    def test_a_changed_list_is_a_new_call_and_the_key_reads_as_before(
        self, configure_json: Configure
    ) -> None:
        """The table keeps a copy: changing the caller's list makes a new key; 1, 1.0 and
        True inside never match each other; the summary's key text is the JSON form."""
        read = configure_json()
        log = obs.get_logger("fast")
        value: list[Any] = [1, "a"]
        for _ in range(3):
            log.warning_once("evt", v=value)
        value.append(2)
        for v in (value, [1, "a"], [True, "a"], [1.0, "a"], (1, "a")):
            for _ in range(3):
                log.warning_once("evt", v=v)
        assert [[1, "a"], [1, "a", 2], [True, "a"], [1.0, "a"]] == [r["v"] for r in read()]
        assert {
            "fast:30:evt v=[1, 'a']": 8,  # (1, "a") writes the same JSON: one key
            "fast:30:evt v=[1, 'a', 2]": 2,
            "fast:30:evt v=[True, 'a']": 2,
            "fast:30:evt v=[1.0, 'a']": 2,
        } == _summaries(read)


class TestScopes:
    """Scoped calls (any str or int scope, both APIs) take the table too, and so do calls
    the scope keeps quiet on this rank: a hit answers without the rank probe."""

    @pytest.fixture(autouse=True)
    def _rank_env(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in _RANK_ENV:
            monkeypatch.delenv(name, raising=False)

    @pytest.mark.parametrize("rank", _RANKS)
    @pytest.mark.parametrize("scope", ["local", "global", "process", 0, 1, -1, "bogus"])
    def test_a_scoped_repeat_probes_nothing(
        self, configure_json: Configure, rank: tuple[int, int], scope: object
    ) -> None:
        """After two calls, repeats (written or kept quiet by the scope) never ask the
        resolver (on main every scoped repeat did, and every repeat on a rank the scope
        keeps quiet), and the lines and counts are what the scope decides."""
        read = configure_json()
        _set_rank(*rank)
        log, dropin = obs.get_logger("fast"), init_logger("fast.dropin")
        for _ in range(2):
            log.warning_once("evt", v=1, scope=scope)
            dropin.warning_once("x %s", 1, scope=scope)
        with _probes() as probes:
            for _ in range(5):
                log.warning_once("evt", v=1, scope=scope)
                dropin.warning_once("x %s", 1, scope=scope)
        assert [] == probes
        assert STATE.runtime is not None
        shown = obs.scope.scope_allows(scope, STATE.runtime.resolver.current())
        written = sorted(r["event"] for r in read() if r["logger"] != "obs")  # not a report
        assert (["evt", "x %s"] if shown else []) == written
        assert ([6, 6] if shown else []) == sorted(_summaries(read).values())

    @pytest.mark.parametrize("rank", _RANKS)
    def test_an_equal_scope_text_shares_the_literals_slot(
        self, configure_json: Configure, rank: tuple[int, int]
    ) -> None:
        """The drop-in answers the literal ``"global"`` by identity; an equal text built at
        run time (another object) is the same scope: one line at most, one count."""
        read = configure_json()
        _set_rank(*rank)
        dropin = init_logger("fast.dropin")
        built = "".join(["glo", "bal"])  # noqa: FLY002 - another object, the point
        assert built == "global"
        assert built is not "global"  # noqa: F632 - the point
        for i in range(8):
            dropin.warning_once("x %s", 1, scope="global" if i % 2 else built)
        assert STATE.runtime is not None
        shown = obs.scope.scope_allows("global", STATE.runtime.resolver.current())
        written = [r["event"] for r in read() if r["logger"] != "obs"]
        assert (["x %s"] if shown else []) == written
        assert ([7] if shown else []) == list(_summaries(read).values())

    @pytest.mark.parametrize("api", ["bound", "dropin"])
    def test_a_rank_change_during_the_decision_is_not_kept(
        self, configure_json: Configure, monkeypatch: pytest.MonkeyPatch, api: str
    ) -> None:
        """Another thread moves the rank between a call's scope decision and the table
        keeping it: the row (decided for the old rank) is not kept for the new one, so the
        next call is decided again (on 64ce6cc it was answered "quiet" at local rank 0 and
        never written; found by review)."""
        read = configure_json()
        _set_rank(1, 1)  # scope "local" keeps local rank 1 quiet
        real = obs._runtime.scope_allows
        armed = [True]

        def moved_meanwhile(scope: object, info: Any) -> bool:
            allowed = real(scope, info)
            if armed[0]:
                armed[0] = False
                _set_rank(0, 0)
            return allowed

        monkeypatch.setattr(obs._runtime, "scope_allows", moved_meanwhile)
        log, dropin = obs.get_logger("fast"), init_logger("fast.dropin")
        call = (
            (lambda: log.info_once("evt", n=1, scope="local"))
            if api == "bound"
            else (lambda: dropin.info_once("evt %s", 1, scope="global"))
        )
        call()
        monkeypatch.setattr(obs._runtime, "scope_allows", real)
        for _ in range(3):
            call()
        assert 1 == len([r for r in read() if r["event"].startswith("evt")])

    @settings(max_examples=80, deadline=None)
    @given(
        st.lists(
            st.one_of(
                st.tuples(
                    st.sampled_from(["bound", "dropin"]),
                    st.sampled_from(["a %s", "b %s"]),
                    _VALUES,
                    st.sampled_from(_SCOPES + _ODD_SCOPES),
                ),
                st.sampled_from(_RANKS),  # the rank changes between calls
            ),
            max_size=40,
        )
    )
    def test_same_lines_and_counts_as_without_the_table(self, steps: list[Any]) -> None:
        """Any sequence of scoped calls from both APIs, with the rank changing between
        them: the events written and every key's count equal those of a runtime whose
        table is emptied before each call."""
        saved = {k: os.environ.get(k) for k in _RANK_ENV}
        try:
            assert self._run(steps, clear=True) == self._run(steps, clear=False)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            obs.testing.reset()

    @staticmethod
    def _run(steps: list[Any], *, clear: bool) -> tuple[list[Any], dict[str, int]]:
        obs.testing.reset()  # a new deduper too
        obs.configure(format="json", sdk_disabled=True, stream="none", repeat_summary_seconds=0)
        rt = STATE.runtime
        assert rt is not None
        _set_rank(0, 0)
        log, dropin = obs.get_logger("fast"), init_logger("fast.dropin")
        with obs.testing.capture_events() as events:
            for step in steps:
                if len(step) == 2:
                    _set_rank(*step)
                    continue
                api, event, value, scope = step
                if clear:
                    rt.once_cache.clear()
                extra = {} if scope is _OMIT else {"scope": scope}
                if api == "bound":
                    log.warning_once(event, v=value, **extra)
                else:
                    dropin.warning_once(event, value, **extra)
        written = [(e.get("logger"), e.get("event"), e.get("v")) for e in events]
        counts = {key_text(k): rt.deduper.suppressed(k) for k in list(rt.deduper._entries)}
        return written, counts


class TestBounds:
    def test_snapshots_per_event_and_events_are_bounded(self, configure_json: Configure) -> None:
        """At most PER_EVENT snapshots per event and MAX_EVENTS events are held."""
        configure_json(dedup_capacity=100_000)
        log = obs.get_logger("fast")
        for i in range(PER_EVENT * 3):
            log.warning_once("evt", i=i)
            log.warning_once("evt", i=i)
        assert PER_EVENT == _table_size()
        for i in range(MAX_EVENTS + 10):
            log.warning_once(f"e{i}")
            log.warning_once(f"e{i}")
        assert _table_size() <= MAX_EVENTS + PER_EVENT

    def test_overflow_repeats_are_not_remembered(self, configure_json: Configure) -> None:
        """Keys past the dedup capacity have no entry of their own: never in the table."""
        configure_json(dedup_capacity=1)
        log = obs.get_logger("fast")
        log.warning_once("kept")
        for _ in range(3):
            log.warning_once("other")
        assert 0 == _table_size()


def test_stdlib_logger_level_still_checked(configure_json: Configure) -> None:
    """The drop-in's level check comes before the table (a quiet logger stays quiet)."""
    read = configure_json()
    logger = init_logger("fast.quiet")
    for _ in range(3):
        logger.warning_once("x %s", 1)
    logging.getLogger("fast.quiet").setLevel(logging.ERROR)
    try:
        logger.warning_once("x %s", 1)
    finally:
        logging.getLogger("fast.quiet").setLevel(logging.NOTSET)
    read()
    assert {"fast.quiet:30:x 1": 2} == _summaries(read)


_BEFORE_TORCH = r"""
import json, sys
import obs
from obs._config import STATE
from obs.rank import RankResolver

mode, store = sys.argv[1], sys.argv[2]
obs.configure(format="json", sdk_disabled=True, repeat_summary_seconds=0)
log = obs.get_logger("fast")
probes = []
real = RankResolver.current
def counted(self):
    probes.append(1)
    return real(self)
rt = STATE.runtime

def source():
    return rt.once_cache._info.source if rt.once_cache._info else None

if mode == "unavailable":  # a torch built without distributed support
    import torch.distributed as dist
    dist.is_available = lambda: False
for _ in range(3):  # the first is written, the second fills the table
    log.warning_once("evt")
RankResolver.current = counted
for _ in range(100):
    log.warning_once("evt")
calls = []
def profile(frame, event, arg):
    if event == "call":  # a Python frame (C calls are "c_call")
        calls.append(frame.f_code.co_name)
sys.setprofile(profile)
for _ in range(10):
    log.warning_once("evt")
sys.setprofile(None)
out = {"probes": len(probes), "seen": [source()], "frames": [sorted(set(calls)), len(calls)]}
RankResolver.current = real
if mode == "import":
    import torch.distributed as dist
    for _ in range(4):
        log.warning_once("evt")
    out["seen"].append(source())
    dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
    try:
        for _ in range(4):
            log.warning_once("evt")
        out["seen"].append(source())
    finally:
        dist.destroy_process_group()
    for _ in range(5):
        log.warning_once("evt")
    out["seen"].append(source())
out["count"] = rt.deduper.suppressed(("fast", 30, "evt"))
print(json.dumps(out))
"""


_HALF_IMPORTED = r"""
import json, os, sys, types
os.environ.update(RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
import obs
import obs.testing

store = sys.argv[1]
obs.configure(format="json", sdk_disabled=True, repeat_summary_seconds=0)
log = obs.get_logger("fast")
placeholder = types.ModuleType("torch.distributed")  # another thread is importing it
sys.modules["torch.distributed"] = placeholder
for _ in range(2):
    log.info_once("q")  # local rank 1: quiet, kept
del sys.modules["torch.distributed"]
import torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
with obs.testing.capture_events() as events:
    for _ in range(3):
        log.info_once("q")  # rank 0, local rank 0 now: written once
dist.destroy_process_group()
print(json.dumps([e["event"] for e in events]))
"""


_WATCHED = r"""
import json, sys, types
import obs
from obs._config import STATE
from obs.rank import _ImportWatch

obs.configure(format="json", sdk_disabled=True, repeat_summary_seconds=0)
log = obs.get_logger("fast")
mode = sys.argv[1]
for _ in range(3):
    log.warning_once("evt")
cache = STATE.runtime.once_cache
out = {"holder": type(cache._world).__name__, "first": sys.meta_path[0] is cache._world}
if mode.startswith("finder"):  # a finder ahead of the watch imports torch.distributed
    class Claim:
        def find_spec(self, name, path=None, target=None):
            if not name.startswith("torch.distributed"):
                return None
            for finder in sys.meta_path:
                if finder is not self and not isinstance(finder, _ImportWatch):
                    spec = getattr(finder, "find_spec", lambda *a: None)(name, path, target)
                    if spec is not None:
                        return spec
            return None
    sys.meta_path.insert(0, Claim())
    import torch  # torch.distributed and its modules come through Claim: the watch never sees it
    if mode == "finder":
        log.info("a plain line")  # its rank probe finds torch.distributed
elif mode == "import":
    import torch.distributed
for _ in range(2):
    log.warning_once("evt")
out["after"] = type(cache._world).__name__
out["count"] = STATE.runtime.deduper.suppressed(("fast", 30, "evt"))
print(json.dumps(out))
"""


def _child(script: str, *args: str, cwd: Path) -> Any:
    """Run ``script`` in a fresh interpreter (this one has torch loaded); its JSON output."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(cwd),  # not the checkout (its obs would shadow PYTHONPATH)
        # Untraced: torch's import under coverage's tracer costs seconds, and coverage data
        # written in a temporary folder was never combined anyway.
        env=untraced({**os.environ, "PYTHONPATH": str(ROOT)}),
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr[-2000:]
    return json.loads(proc.stdout)


class TestBeforeTorch:
    def test_a_table_filled_while_torch_distributed_was_half_imported_sees_the_group(
        self, tmp_path: Path
    ) -> None:
        """The table is first filled while ``torch.distributed`` is in ``sys.modules`` but
        not usable yet; after the import and a group's init the next hit decides again
        (on 64ce6cc the stand-in read as settled and the quiet row answered for good;
        found by review)."""
        out = _child(_HALF_IMPORTED, str(tmp_path / "store"), cwd=tmp_path)
        assert ["q"] == out

    @pytest.mark.parametrize(
        ("mode", "seen", "count"),
        [
            ("import", ["single", "single", "torch.distributed", "single"], 125),
            ("unavailable", ["single"], 112),
        ],
    )
    def test_a_hit_probes_nothing_and_later_groups_are_seen(
        self, tmp_path: Path, mode: str, seen: list[str], count: int
    ) -> None:
        """Before torch.distributed is imported (or where torch has none), a hit answers
        without asking the resolver (on main each hit recomputed the rank probe: 2.7x the
        cost with torch loaded); importing it and a gloo group initialised then destroyed
        are still seen on the next hit, and the repeats counted exactly. A hit runs the
        one Python frame it runs with torch loaded (the method), no second (on 910b464
        the stand-in's ``_default_pg`` was a Python property: a frame per hit, 1.35x the
        instructions of the torch-loaded hit; on 7bc339d the table's own ``repeat`` was a
        second). A fresh process: this one has torch loaded."""
        out = _child(_BEFORE_TORCH, mode, str(tmp_path / "store"), cwd=tmp_path)
        frames = [["once"], 10]
        assert {"probes": 0, "seen": seen, "count": count, "frames": frames} == out

    @pytest.mark.parametrize(
        ("mode", "after"),
        [
            ("none", "_ImportWatch"),
            ("import", "_World"),
            ("finder", "_World"),
            ("finder-quiet", "_ImportWatch"),  # the limit: nothing else looked for torch
        ],
    )
    def test_without_torch_a_hit_reads_the_import_watch(
        self, tmp_path: Path, mode: str, after: str
    ) -> None:
        """Where torch was never imported, the table's world holder is the import watch
        (first on ``sys.meta_path``; a plain attribute per hit, not a ``sys.modules`` probe
        through a property); importing torch.distributed is seen on the next hit, also
        when another finder ahead of the watch imports it and a plain line's rank probe
        finds it (without that line the watch does not know), and repeats stay exact
        (fails with the watch removed: the holder is the ``sys.modules`` stand-in)."""
        out = _child(_WATCHED, mode, cwd=tmp_path)
        expected = {"holder": "_ImportWatch", "first": True, "after": after, "count": 4}
        assert expected == out
