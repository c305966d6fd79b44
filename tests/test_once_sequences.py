"""``*_once`` repeats with list and tuple values: the once table answers them as it does
scalars (obs._once_cache), with exact item types, a snapshot of the list and the same
counts as the full path, whichever of the event's rows the repeat matches."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._config import STATE
from obs._once_cache import _same, _shape
from obs.dedup import key_text
from obs.stdlib import init_logger

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]

#: Few values, so that equal items of other types (1, 1.0, True; 0, 0.0, -0.0, False) meet.
_ITEM = st.sampled_from([0, 1, 2**64, 0.0, -0.0, 1.0, 2.5, True, False, None, "", "a", "1"])
_LEAF = st.one_of(st.lists(_ITEM, max_size=3), st.lists(_ITEM, max_size=3).map(tuple))
_VALUE = st.one_of(
    _ITEM,
    _LEAF,
    st.lists(st.one_of(_ITEM, _LEAF), max_size=3),  # nested: the full path
    st.lists(st.one_of(_ITEM, _LEAF), max_size=3).map(tuple),
    st.just(list(range(17))),  # longer than the table keeps
)


def _canon(value: object) -> object:
    """The reference: items equal with exact types (1, 1.0, True and 0.0, -0.0 differ);
    a list and a tuple of the same items are one key, as their JSON is."""
    if type(value) is list or type(value) is tuple:
        return ("seq", tuple(map(_canon, value)))  # type: ignore[call-overload]
    return (type(value), repr(value))


@contextmanager
def _frames() -> Iterator[list[str]]:
    """The Python frames entered while the block runs."""
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(None)


def _summaries(read: Callable[[], list[dict[str, Any]]]) -> dict[str, int]:
    obs.flush()
    return {
        r["dedup_key"]: r["suppressed_count"]
        for r in read()
        if r["event"] == "log_repeats_suppressed"
    }


class TestOlderRows:
    def test_a_repeat_of_an_older_row_is_answered_inline(self, configure_json: Configure) -> None:
        """The benchmark's shape: a list call, then a str call of the same event (its row is
        the newest), then repeats of the list call: each is answered by the logger's own
        frame and counted (on main each took ``OnceCache.repeat`` and ``_same`` too: 2.9x
        the str call's cost)."""
        read = configure_json()
        log = obs.get_logger("fast")
        for _ in range(2):
            log.warning_once("evt", ranks=[0, "a"])
            log.warning_once("evt", ranks="a")
            log.warning_once("evt", ranks=(1, None))
        with _frames() as calls:
            for _ in range(10):
                log.warning_once("evt", ranks=[0, "a"])
                log.warning_once("evt", ranks=(1, None))
        assert ["once"] * 20 == [c for c in calls if c in ("once", "repeat", "_same", "log_once")]
        expected = {"[0, 'a']": 11, "a": 1, "[1, None]": 11}
        assert {f"fast:30:evt ranks={k}": n for k, n in expected.items()} == _summaries(read)

    def test_exact_counts_under_threads_on_older_rows(self, configure_json: Configure) -> None:
        """8 threads repeating three calls of one event (rows in every position, each
        thread's order its own): one line each, every other call counted once."""
        read = configure_json()
        log = obs.get_logger("fast")
        values: list[object] = [[1, "a"], (1, "a"), "a", [1.0, "a"]]
        threads, per_thread = 8, 500
        barrier = threading.Barrier(threads)

        def work(shift: int) -> None:
            barrier.wait()
            for i in range(per_thread):
                log.warning_once("evt", v=values[(i + shift) % len(values)])

        pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        # [1, "a"] and (1, "a") are one key (their JSON is one); [1.0, "a"] is another.
        assert 3 == len([r for r in read() if r["event"] == "evt"])
        counts = _summaries(read)
        total = threads * per_thread
        assert sorted([total // 2 - 1, total // 4 - 1, total // 4 - 1]) == sorted(counts.values())


class _Text(str):
    """A str subclass: equal to its text, never its repeat."""

    __slots__ = ()


#: Equal items of other exact types (and a str subclass), which a repeat must not take
#: for each other.
_EQUALS: list[list[Any]] = [[0, 0.0, -0.0, False], [1, 1.0, True], ["a", _Text("a")], [None]]


class TestShape:
    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), max_size=5),
        st.sampled_from([list, tuple]),
        st.sampled_from([list, tuple]),
    )
    def test_a_shape_matches_exactly_the_equal_values_of_the_same_types(
        self, picks: list[tuple[int, int, int]], kind: Any, other_kind: Any
    ) -> None:
        """Of two equal flat values, the second matches the first's remembered shape only
        when both are lists or both tuples and every item is of the same type (0, 0.0,
        -0.0, False differ; a str subclass is not str); a text built at run time (not
        interned) matches an interned one."""
        pairs = [(_EQUALS[k], a % len(_EQUALS[k]), b % len(_EQUALS[k])) for k, a, b in picks]
        first = kind(group[a] for group, a, _ in pairs)
        second = other_kind(
            "".join(list(group[b])) if type(group[b]) is str else group[b]  # not interned
            for group, _, b in pairs
        )
        shape = _shape(first)
        if shape is None:  # a zero float or the str subclass: never remembered
            assert any(type(x) in (float, _Text) and (not x or type(x) is _Text) for x in first)
            return
        assert first == second or kind is not other_kind
        exact = kind is other_kind and list(map(type, first)) == list(map(type, second))
        assert exact == _same(second, shape)
        assert _same(first, shape)


class TestSnapshots:
    def test_a_list_changed_after_the_call_is_not_what_was_remembered(
        self, configure_json: Configure
    ) -> None:
        """The table keeps a copy: the caller's list changed afterwards is a new key."""
        read = configure_json()
        log = obs.get_logger("fast")
        ids: list[object] = [1, 2]
        for _ in range(2):
            log.warning_once("evt", ids=ids)
        ids[1] = 2.0
        for _ in range(2):
            log.warning_once("evt", ids=ids)
        ids.append(3)
        log.warning_once("evt", ids=ids)
        assert [[1, 2], [1, 2.0], [1, 2.0, 3]] == [r["ids"] for r in read()]
        assert {"fast:30:evt ids=[1, 2]": 1, "fast:30:evt ids=[1, 2.0]": 1} == _summaries(read)

    def test_a_huge_list_is_never_remembered(self, configure_json: Configure) -> None:
        """A 1M-item list where a short list of the same start is remembered: compared by
        length first, keyed by the full path, never held by the table."""
        read = configure_json()
        log = obs.get_logger("fast")
        for _ in range(2):
            log.warning_once("evt", ids=[0, 1])
        big = list(range(1_000_000))
        for _ in range(3):
            log.warning_once("evt", ids=big)
        assert STATE.runtime is not None
        assert 1 == len(STATE.runtime.once_cache)
        assert [2] == [len(r["ids"]) for r in read() if r["event"] == "evt"][:1]
        assert [1, 2] == sorted(_summaries(read).values())

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(st.one_of(_VALUE, st.lists(_ITEM, min_size=1, max_size=3)), min_size=1),
        st.lists(
            st.one_of(
                st.tuples(st.just("call"), st.integers(0, 9), st.sampled_from(["a", "b"])),
                st.tuples(st.just("change"), st.integers(0, 9), _ITEM),
            ),
            max_size=40,
        ),
    )
    def test_counts_equal_the_exact_type_reference(
        self, pool: list[Any], steps: list[tuple[str, int, Any]]
    ) -> None:
        """Calls with nested lists and tuples of mixed exact types, from the bound logger
        and the drop-in, each twice in a row, the caller changing its lists in between: one
        key per distinct value of the reference, each counted its calls less one, as a
        runtime whose table is emptied before each call counts them."""
        try:
            written, counts = self._run(pool, steps, clear=False)
            assert (written, counts) == self._run(pool, steps, clear=True)
            expected: dict[object, int] = {}
            values = [list(v) if type(v) is list else v for v in pool]
            for op, index, arg in steps:
                value = values[index % len(values)]
                if op == "change":
                    if type(value) is list and value:
                        value[len(repr(arg)) % len(value)] = arg
                    continue
                for api in ("bound", "dropin"):
                    key = (api, arg, _canon(value))
                    expected[key] = expected.get(key, -1) + 2
            assert len(expected) == len(counts) == len(written)
            assert sorted(expected.values()) == sorted(counts.values())
        finally:
            obs.testing.reset()

    @staticmethod
    def _run(
        pool: list[Any], steps: list[tuple[str, int, Any]], *, clear: bool
    ) -> tuple[list[Any], dict[str, int]]:
        obs.testing.reset()  # a new deduper too
        obs.configure(format="json", sdk_disabled=True, stream="none", repeat_summary_seconds=0)
        rt = STATE.runtime
        assert rt is not None
        log, dropin = obs.get_logger("fast"), init_logger("fast.dropin")
        values = [list(v) if type(v) is list else v for v in pool]  # the caller's, changed
        with obs.testing.capture_events() as events:
            for op, index, arg in steps:
                value = values[index % len(values)]
                if op == "change":
                    if type(value) is list and value:
                        value[len(repr(arg)) % len(value)] = arg
                    continue
                for _ in range(2):
                    if clear:
                        rt.once_cache.clear()
                    log.warning_once(arg, v=value)
                for _ in range(2):
                    if clear:
                        rt.once_cache.clear()
                    dropin.warning_once(f"{arg} %s", value)
        written = [(e.get("logger"), e.get("event"), repr(e.get("v"))) for e in events]
        counts = {key_text(k): rt.deduper.suppressed(k) for k in list(rt.deduper._entries)}
        return written, counts
