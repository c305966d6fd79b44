"""Tests for obs.dedup: keys, once/every_n/every_seconds, capacity, summaries, threads."""

from __future__ import annotations

import datetime
import enum
import gc
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog import DropEvent

import obs
import obs._runtime
import obs.testing
from obs._config import STATE
from obs.dedup import OVERFLOW, Dedup, Deduper, key_text, make_key
from obs.stdlib import init_logger

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]
T0 = 1_750_000_000.0


class Clock:
    """A settable stand-in for time.time."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Color(str, enum.Enum):
    X = "x"


def iso(ts: float) -> str:
    """The ISO 8601 UTC form summaries use, computed independently."""
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """A fake clock that every Deduper obs.configure() builds from now on uses."""
    fake = Clock()
    monkeypatch.setattr(
        obs._runtime,
        "Deduper",
        lambda capacity, seconds: Deduper(capacity, seconds, clock=fake),
    )
    return fake


class Boom(Exception):
    """A weak-referenceable exception (builtin exception instances are not)."""


def _raise() -> None:
    raise Boom("boom")


def _error() -> Boom:
    try:
        _raise()
    except Boom as exc:
        return exc
    raise AssertionError


class EqRaises:
    """A scope value whose comparisons raise (like a numpy array's truth value)."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("ambiguous")

    __hash__ = object.__hash__


class TestMakeKey:
    def test_default_key_is_logger_level_event_fields(self) -> None:
        """The default key is (logger, level, event, sorted field/value pairs)."""
        assert ("lg", 30, "ev", "a", "x", "b", (int, 2)) == make_key(
            "lg", 30, "ev", {"b": 2, "a": "x"}
        )

    def test_control_and_rank_fields_are_not_key_parts(self) -> None:
        """scope/once/rank fields and ``_obs_*`` keys do not change the key."""
        fields = {"k": "v", "scope": "local", "rank": 3, "once": True, "_obs_level": 30}
        assert make_key("lg", 30, "ev", {"k": "v"}) == make_key("lg", 30, "ev", fields)

    def test_single_control_field_is_ignored(self) -> None:
        """A lone control field gives the field-less key."""
        assert ("lg", 30, "ev") == make_key("lg", 30, "ev", {"scope": "global"})

    def test_level_and_logger_are_part_of_the_key(self) -> None:
        """The same event at another level or from another logger is another key."""
        keys = {
            make_key("a", 30, "ev", {}),
            make_key("a", 40, "ev", {}),
            make_key("b", 30, "ev", {}),
        }
        assert 3 == len(keys)

    def test_once_key_str_ignores_event_and_fields(self) -> None:
        """once_key="name" makes one key whatever the event and the other fields."""
        assert make_key("lg", 30, "a", {"x": 1}, "k") == make_key("lg", 30, "b", {"y": 2}, "k")

    def test_once_key_tuple_keys_on_those_fields(self) -> None:
        """once_key=("backend",) keys on backend only: other fields do not matter."""
        one = make_key("lg", 30, "ev", {"backend": "mnnvl", "err": "a"}, ("backend",))
        two = make_key("lg", 30, "ev", {"backend": "mnnvl", "err": "b"}, ("backend",))
        three = make_key("lg", 30, "ev", {"backend": "trtllm", "err": "a"}, ("backend",))
        assert (True, False) == (one == two, one == three)

    def test_once_key_other_object(self) -> None:
        """A non-str, non-sequence once_key (an int) is a key of its own kind."""
        assert make_key("lg", 30, "a", {}, 7) == make_key("lg", 30, "b", {"z": 1}, 7)

    def test_one_float_true_are_distinct(self) -> None:
        """1, 1.0 and True are three keys (vLLM's lru_cache merges them)."""
        keys = {make_key("lg", 30, "ev", {"v": v}) for v in (1, 1.0, True)}
        assert 3 == len(keys)

    def test_str_and_repr_lookalike_are_distinct(self) -> None:
        """The string "[1]" and the list [1] are different keys."""
        assert make_key("lg", 30, "ev", {"v": "[1]"}) != make_key("lg", 30, "ev", {"v": [1]})

    def test_nan_is_one_key(self) -> None:
        """NaN values make equal keys (NaN != NaN would never dedup)."""
        nan = float("nan")
        assert make_key("lg", 30, "ev", {"v": nan, "w": 1}) == make_key(
            "lg", 30, "ev", {"v": float("nan"), "w": 1}
        )

    @pytest.mark.parametrize(
        "value", [[1, 2], {"a": [1]}, {1, 2}, bytearray(b"x"), object.__new__(type("O", (), {}))]
    )
    def test_unhashable_or_odd_values_never_raise(self, value: object) -> None:
        """Lists, dicts, sets, bytearrays and plain objects make hashable keys."""
        key = make_key("lg", 30, "ev", {"v": value, "w": 2})
        assert isinstance(hash(key), int)

    def test_broken_repr_value(self) -> None:
        """A value whose __repr__ raises still makes a hashable key."""

        class Broken:
            def __repr__(self) -> str:
                raise RuntimeError("no repr")

        assert isinstance(hash(make_key("lg", 30, "ev", {"v": Broken()})), int)

    def test_key_holds_no_reference_to_field_objects(self) -> None:
        """An exception used as a field is keyed by text: the key keeps it alive no longer."""
        exc = _error()
        ref = weakref.ref(exc)
        key = make_key("lg", 30, "ev", {"error": exc, "n": 1})
        del exc
        gc.collect()
        assert (None, True) == (ref(), "boom" in str(key))

    def test_key_text(self) -> None:
        """key_text renders ``logger:level:event field=value`` for summaries."""
        key = make_key("lg", 30, "ev", {"a": "x", "b": 2, "c": [1]})
        assert "lg:30:ev a=x b=2 c=[1]" == key_text(key)

    @settings(max_examples=300, deadline=None)
    @given(
        st.lists(
            st.one_of(
                st.integers(-(2**64), 2**64),
                st.booleans(),
                st.floats(allow_nan=False),
                st.none(),
                st.text(max_size=70),
            ),
            max_size=18,
        ),
        st.lists(st.sampled_from([0, 1, True, False, 0.0, 1.0, -0.0, "0", "1", None])),
        st.booleans(),
    )
    def test_sequence_keys_are_exact(self, a: list[Any], b: list[Any], as_tuple: bool) -> None:
        """A list or tuple value: two keys are equal exactly when the items are equal with
        the same types (1, 1.0 and True differ; [1] and (1,) write the same JSON and are
        one key), whichever form (items, or the bounded JSON text) keys it; the key text
        is the JSON form, as before."""

        def exact(values: list[Any]) -> list[Any]:  # -0.0 writes "-0.0": not 0.0 here
            return [(type(v), v, repr(v) if type(v) is float else None) for v in values]

        for x, y in ((a, b), (a, list(a)), (b, b[::-1]), ([0.0, 1], [-0.0, 1])):
            y_value = tuple(y) if as_tuple else y
            same = exact(x) == exact(y)
            ka, kb = make_key("lg", 30, "ev", {"v": x}), make_key("lg", 30, "ev", {"v": y_value})
            if len(repr(x)) < 150 and len(x) <= 16:  # within the JSON text's bound
                assert same == (ka == kb), (x, y_value)
            assert same <= (ka == kb)
            text = key_text(ka)
            assert text.startswith("lg:30:ev v=[") or "..." in text


class TestDeduperModes:
    def test_once(self) -> None:
        """Once mode: the first call emits, every repeat is suppressed and counted."""
        deduper = Deduper(summary_seconds=0)
        results = [deduper.admit(("k",)) for _ in range(5)]
        assert ([True, False, False, False, False], 4) == (results, deduper.suppressed(("k",)))

    def test_repeat_fast_path(self) -> None:
        """repeat() is False for an unknown key and True (counted) for a retained one."""
        deduper = Deduper(summary_seconds=0)
        first = deduper.repeat(("k",))
        deduper.admit(("k",))
        assert (False, True, True, 2) == (
            first,
            deduper.repeat(("k",)),
            deduper.repeat(("k",)),
            deduper.suppressed(("k",)),
        )

    def test_every_n(self) -> None:
        """every_n=3 emits calls 1, 4, 7 and suppresses the rest."""
        deduper = Deduper(summary_seconds=0)
        results = [deduper.admit(("k",), every_n=3) for _ in range(7)]
        assert [True, False, False, True, False, False, True] == results
        assert 4 == deduper.suppressed(("k",))

    def test_every_seconds(self) -> None:
        """every_seconds=10 emits at most once per 10 s of the clock."""
        clock = Clock()
        deduper = Deduper(summary_seconds=0, clock=clock)
        results = []
        for dt in (0, 5, 9.9, 10, 11, 25):
            clock.now = T0 + dt
            results.append(deduper.admit(("k",), every_seconds=10))
        assert [True, False, False, True, False, True] == results

    def test_suppressed_unknown_key(self) -> None:
        """suppressed() is 0 for a key never seen."""
        assert 0 == Deduper().suppressed(("nope",))

    def test_capacity_must_be_positive(self) -> None:
        """A Deduper of capacity 0 is refused."""
        with pytest.raises(ValueError, match="capacity must be >= 1"):
            Deduper(capacity=0)


class TestCapacity:
    def test_retained_key_never_refires(self) -> None:
        """A retained key stays suppressed however many other keys come after it."""
        deduper = Deduper(capacity=3, summary_seconds=0)
        deduper.admit(("a",))
        for i in range(1000):
            deduper.admit((i,))
        assert (False, 3) == (deduper.admit(("a",)), len(deduper))

    def test_overflow_slot(self) -> None:
        """Past capacity: the first new key is emitted as OVERFLOW, the next are suppressed."""
        clock = Clock()
        deduper = Deduper(capacity=2, summary_seconds=0, clock=clock)
        results = [deduper.admit((k,)) for k in ("a", "b", "c", "d", "e", "c")]
        assert [True, True, OVERFLOW, False, False, False] == results
        assert (2, True) == (len(deduper), deduper.capacity_reached)

    def test_overflow_slot_reopens_after_the_window(self) -> None:
        """One overflow event per window (max(summary period, 1 s)) is let through."""
        clock = Clock()
        deduper = Deduper(capacity=1, summary_seconds=5, clock=clock)
        deduper.admit(("a",))
        first = deduper.admit(("b",))
        clock.now += 4.9
        early = deduper.admit(("c",))
        clock.now += 0.1
        later = deduper.admit(("d",))
        assert (OVERFLOW, False, OVERFLOW) == (first, early, later)

    def test_overflow_window_is_one_second_without_periodic_summaries(self) -> None:
        """With summaries only at flush (period 0) the overflow window is 1 s."""
        clock = Clock()
        deduper = Deduper(capacity=1, summary_seconds=0, clock=clock)
        deduper.admit(("a",))
        deduper.admit(("b",))
        clock.now += 1.0
        assert OVERFLOW == deduper.admit(("c",))

    def test_overflow_repeats_are_summarised(self) -> None:
        """Suppressed overflow events are counted under the ``<overflow>`` summary."""
        deduper = Deduper(capacity=1, summary_seconds=0, clock=Clock())
        for k in ("a", "b", "c", "d"):
            deduper.admit((k,))
        assert [("<overflow>", "<overflow>", 2)] == [
            (s["dedup_key"], s["original_event"], s["suppressed_count"]) for s in deduper.drain()
        ]

    def test_capacity_reached_set_once(self) -> None:
        """capacity_reached is set by the first overflow only (the runtime clears it)."""
        deduper = Deduper(capacity=1, summary_seconds=0, clock=Clock())
        deduper.admit(("a",))
        deduper.admit(("b",))
        deduper.capacity_reached = False
        deduper.admit(("c",))
        assert deduper.capacity_reached is False


class TestDrain:
    def test_summary_fields(self) -> None:
        """drain() reports key, event, count, first/last seen, then resets the count."""
        clock = Clock()
        deduper = Deduper(summary_seconds=0, clock=clock)
        key = make_key("lg", 30, "flag_deprecated", {"flag": "x"})
        deduper.admit(key, event="flag_deprecated", level=30, logger="lg")
        clock.now += 2.5
        deduper.admit(key)
        clock.now += 1.0
        deduper.admit(key)
        expected = {
            "dedup_key": "lg:30:flag_deprecated flag=x",
            "original_event": "flag_deprecated",
            "suppressed_count": 2,
            "first_seen": iso(T0),
            "last_seen": iso(T0 + 3.5),
            "_obs_level": 30,
            "_obs_logger": "lg",
        }
        assert ([expected], []) == (deduper.drain(), deduper.drain())
        assert 2 == deduper.suppressed(key)

    def test_keys_without_repeats_are_not_summarised(self) -> None:
        """A key seen once produces no summary."""
        deduper = Deduper(summary_seconds=0)
        deduper.admit(("k",))
        assert [] == deduper.drain()

    def test_summary_due_after_the_period(self) -> None:
        """A repeat after the summary period sets summary_due; drain() clears it."""
        clock = Clock()
        deduper = Deduper(summary_seconds=10, clock=clock)
        deduper.admit(("k",))
        deduper.admit(("k",))
        before = deduper.summary_due
        clock.now += 10
        deduper.admit(("k",))
        due = deduper.summary_due
        deduper.drain()
        assert (False, True, False) == (before, due, deduper.summary_due)

    def test_period_zero_is_never_due(self) -> None:
        """With period 0 summaries are never due on their own (flush/shutdown only)."""
        clock = Clock()
        deduper = Deduper(summary_seconds=0, clock=clock)
        deduper.admit(("k",))
        clock.now += 10**6
        deduper.admit(("k",))
        assert deduper.summary_due is False


class TestDedupProcessor:
    def test_passes_events_without_control_keys(self) -> None:
        """An event with no once/every_* keys is returned untouched."""
        assert {"event": "e"} == Dedup()(None, "info", {"event": "e"})

    def test_once_then_drop(self) -> None:
        """once=True: the first event passes (control keys popped), the repeat is dropped."""
        dedup = Dedup(Deduper(summary_seconds=0))
        first = dedup(None, "info", {"event": "e", "once": True, "_obs_level": 20})
        with pytest.raises(DropEvent):
            dedup(None, "info", {"event": "e", "once": True, "_obs_level": 20})
        assert {"event": "e", "_obs_level": 20} == first

    def test_overflow_is_marked(self) -> None:
        """An event let through the overflow slot carries dedup_overflow=True."""
        dedup = Dedup(Deduper(capacity=1, summary_seconds=0))
        dedup(None, "info", {"event": "a", "once": True})
        out = dedup(None, "info", {"event": "b", "once": True})
        assert {"event": "b", "dedup_overflow": True} == out

    def test_default_deduper(self) -> None:
        """Without a Deduper the processor builds its own."""
        assert isinstance(Dedup().deduper, Deduper)


class TestInTheChain:
    def test_warning_once_and_flush_summary(self, configure_json: Configure) -> None:
        """warning_once writes one line; flush writes log_repeats_suppressed with the count."""
        read = configure_json()
        log = obs.get_logger("eng")
        for _ in range(5):
            log.warning_once("flag_deprecated", flag="x")
        assert ["flag_deprecated"] == [r["event"] for r in read()]
        obs.flush()
        (summary,) = read()
        assert (
            "log_repeats_suppressed",
            "WARNING",
            "eng",
            "flag_deprecated",
            4,
            "eng:30:flag_deprecated flag=x",
        ) == (
            summary["event"],
            summary["severity_text"],
            summary["logger"],
            summary["original_event"],
            summary["suppressed_count"],
            summary["dedup_key"],
        )
        assert summary["first_seen"] <= summary["last_seen"]

    def test_summary_at_shutdown(self, configure_json: Configure) -> None:
        """obs.shutdown() emits pending summaries too."""
        read = configure_json()
        log = obs.get_logger("eng")
        log.error_once("disk_full")
        log.error_once("disk_full")
        read()
        obs.shutdown()
        assert [("log_repeats_suppressed", "ERROR", 1)] == [
            (r["event"], r["severity_text"], r["suppressed_count"]) for r in read()
        ]

    def test_no_summary_without_repeats(self, configure_json: Configure) -> None:
        """flush() after events that never repeated writes nothing."""
        read = configure_json()
        obs.get_logger("eng").warning_once("once_only")
        read()
        obs.flush()
        assert [] == read()

    def test_periodic_summary(self, clock: Clock, configure_json: Configure) -> None:
        """With a 10 s period, the first repeat after 10 s emits the summary by itself."""
        read = configure_json(repeat_summary_seconds=10)
        log = obs.get_logger("eng")
        log.warning_once("retrying")
        log.warning_once("retrying")
        early = read()
        clock.now += 10
        log.warning_once("retrying")
        assert ["retrying"] == [r["event"] for r in early]
        assert [("log_repeats_suppressed", 2)] == [
            (r["event"], r["suppressed_count"]) for r in read()
        ]

    @pytest.mark.parametrize("scope", [{}, {"scope": "local"}, {"scope": "global"}])
    def test_periodic_summary_from_a_dropin_repeat(
        self, scope: dict[str, str], clock: Clock, configure_json: Configure
    ) -> None:
        """The same through vLLM's drop-in, the default scope spelled out or not: the
        repeats the once cache answers emit the due summary themselves."""
        read = configure_json(repeat_summary_seconds=10)
        logger = init_logger("eng.dropin")
        for _ in range(3):  # the third is answered by the once cache
            logger.warning_once("retrying %s", 1, **scope)
        early = read()
        clock.now += 10
        logger.warning_once("retrying %s", 1, **scope)
        assert ["retrying 1"] == [r["body"] for r in early]
        assert [("log_repeats_suppressed", 3)] == [
            (r["event"], r["suppressed_count"]) for r in read()
        ]

    def test_once_key_str(self, configure_json: Configure) -> None:
        """once_key="name" dedups events with different fields."""
        read = configure_json()
        log = obs.get_logger("eng")
        log.warning_once("cache_miss", block=1, once_key="cache")
        log.warning_once("cache_miss", block=2, once_key="cache")
        assert [1] == [r["block"] for r in read()]

    def test_once_key_tuple(self, configure_json: Configure) -> None:
        """once_key=("backend",) dedups per backend whatever the other fields."""
        read = configure_json()
        log = obs.get_logger("eng")
        for backend, err in (("mnnvl", "a"), ("mnnvl", "b"), ("trtllm", "a")):
            log.warning_once("attempt_failed", backend=backend, err=err, once_key=("backend",))
        assert [("mnnvl", "a"), ("trtllm", "a")] == [(r["backend"], r["err"]) for r in read()]

    def test_distinct_values_are_distinct_events(self, configure_json: Configure) -> None:
        """v=1, v=1.0 and v=True are three events, each once."""
        read = configure_json()
        log = obs.get_logger("eng")
        for v in (1, 1.0, True, 1, 1.0, True):
            log.info_once("value", v=v)
        assert [1, 1.0, True] == [r["v"] for r in read()]

    def test_every_n_in_chain(self, configure_json: Configure) -> None:
        """log.warning(..., every_n=3) writes calls 1, 4, 7 of the same key."""
        read = configure_json()
        log = obs.get_logger("eng")
        for _ in range(7):
            log.warning("retrying", every_n=3, peer="p")
        assert 3 == len(read())

    def test_every_seconds_in_chain(self, clock: Clock, configure_json: Configure) -> None:
        """log.warning(..., every_seconds=60) writes once per minute of the clock."""
        read = configure_json()
        log = obs.get_logger("eng")
        for dt in (0, 30, 59, 60, 90, 121):
            clock.now = T0 + dt
            log.warning("queue_full", every_seconds=60)
        assert 3 == len(read())

    def test_unhashable_fields_never_raise(self, configure_json: Configure) -> None:
        """warning_once with list/dict/set fields dedups without raising."""
        read = configure_json()
        log = obs.get_logger("eng")
        for _ in range(3):
            log.warning_once("shapes", dims=[1, 2], cfg={"a": [1]}, tags={"x"})
        assert [[1, 2]] == [r["dims"] for r in read()]

    @pytest.mark.parametrize(
        "kwargs", [{"stage": ["attempt"]}, {"once_key": (["unhashable"],)}, {"scope": EqRaises()}]
    )
    def test_bad_control_values_never_raise(
        self, kwargs: dict[str, Any], configure_json: Configure
    ) -> None:
        """warning_once with an unhashable stage/once_key or an odd scope still writes."""
        read = configure_json()
        obs.get_logger("eng").warning_once("odd_call", **kwargs)
        assert ["odd_call"] == [r["event"] for r in read() if r["event"] == "odd_call"][:1]

    def test_non_str_event_never_raises(self, configure_json: Configure) -> None:
        """A dict as the event of warning_once is dedup'd, and written as its text (``event``
        is a control field: always a string)."""
        read = configure_json()
        log = obs.get_logger("eng")
        log.warning_once({"not": "a str"})  # type: ignore[arg-type]
        log.warning_once({"not": "a str"})  # type: ignore[arg-type]
        assert ["{'not': 'a str'}"] == [r["event"] for r in read()]

    def test_field_objects_are_not_kept_alive(self, configure_json: Configure) -> None:
        """An exception passed as a field to *_once / once=True dies after gc."""
        read = configure_json()
        log = obs.get_logger("eng")
        exc = _error()
        ref = weakref.ref(exc)
        for _ in range(2):
            log.warning_once("failed", error=exc)
            log.warning("failed_plain", error=exc, once=True)
        del exc
        gc.collect()
        assert None is ref()
        assert ["failed", "failed_plain"] == [r["event"] for r in read()]

    def test_capacity_overflow_in_chain(self, configure_json: Configure) -> None:
        """Past capacity the first new key is written with dedup_overflow=True, the next are
        suppressed, and obs_dedup_capacity_reached is reported exactly once."""
        read = configure_json(dedup_capacity=2)
        log = obs.get_logger("eng")
        for key in ("a", "b", "c", "d", "a", "e"):
            log.warning_once("k", key=key)
        records = read()
        assert [("a", None), ("b", None), ("c", True)] == [
            (r["key"], r.get("dedup_overflow")) for r in records if r["event"] == "k"
        ]
        notices = [r for r in records if r["event"] == "obs_dedup_capacity_reached"]
        assert [(2, "WARNING")] == [(r["capacity"], r["severity_text"]) for r in notices]
        obs.flush()
        summaries = {r["dedup_key"]: r["suppressed_count"] for r in read()}
        assert {"<overflow>": 2, "eng:30:k key=a": 1} == summaries
        assert 2 == len(STATE.runtime.deduper)  # type: ignore[union-attr]

    def test_capacity_notice_not_repeated(self, configure_json: Configure) -> None:
        """obs_dedup_capacity_reached is written once however long the overflow lasts."""
        read = configure_json(dedup_capacity=1)
        log = obs.get_logger("eng")
        for i in range(50):
            log.info("k", once=True, i=i)
        obs.flush()
        assert 1 == len([r for r in read() if r["event"] == "obs_dedup_capacity_reached"])

    def test_reconfigure_keeps_the_table(self, configure_json: Configure) -> None:
        """configure() again with the same dedup settings keeps retained keys (no re-fire)."""
        read = configure_json()
        log = obs.get_logger("eng")
        log.warning_once("once_across_reconfigure")
        obs.configure(format="json", sdk_disabled=True, repeat_summary_seconds=0, level="DEBUG")
        log.warning_once("once_across_reconfigure")
        assert ["once_across_reconfigure"] == [
            r["event"] for r in read() if r["event"] == "once_across_reconfigure"
        ]


class TestThreads:
    def test_deduper_race(self) -> None:
        """16 threads x 10,000 admits of one key: one True, 159,999 counted."""
        deduper = Deduper(summary_seconds=0)
        wins: list[int] = []
        barrier = threading.Barrier(16)

        def work() -> None:
            barrier.wait()
            won = sum(1 for _ in range(10_000) if deduper.admit(("k",)))
            wins.append(won)

        threads = [threading.Thread(target=work) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert (1, 159_999) == (sum(wins), deduper.suppressed(("k",)))

    @pytest.mark.parametrize("lockfree", [True, False], ids=["gil-counter", "locked"])
    def test_repeat_race_with_drains(self, lockfree: bool) -> None:
        """8 threads x 20,000 repeat() of a retained key while another thread drains: the
        summaries add up to exactly 160,000 on both the lock-free and the locked path."""
        deduper = Deduper(summary_seconds=0)
        deduper._lockfree = lockfree  # the build decides this; test the other path too
        assert deduper.admit(("k",))
        barrier = threading.Barrier(9)
        done = threading.Event()
        drained: list[int] = []

        def work() -> None:
            barrier.wait()
            for _ in range(20_000):
                assert deduper.repeat(("k",))

        def drain() -> None:
            barrier.wait()
            while not done.is_set():
                drained.extend(s["suppressed_count"] for s in deduper.drain())

        threads = [threading.Thread(target=work) for _ in range(8)]
        drainer = threading.Thread(target=drain)
        for t in [*threads, drainer]:
            t.start()
        for t in threads:
            t.join()
        done.set()
        drainer.join()
        drained.extend(s["suppressed_count"] for s in deduper.drain())
        assert (160_000, 160_000) == (sum(drained), deduper.suppressed(("k",)))
        assert [] == deduper.drain()

    def test_warning_once_race(self, configure_json: Configure) -> None:
        """16 threads x 10,000 log.warning_once on one key: exactly one event, and the flush
        summary counts exactly 159,999 repeats."""
        configure_json(repeat_summary_seconds=0)
        log = obs.get_logger("race")
        barrier = threading.Barrier(16)

        def work() -> None:
            barrier.wait()
            for _ in range(10_000):
                log.warning_once("contended", shard=7)

        with obs.testing.capture_events() as events:
            threads = [threading.Thread(target=work) for _ in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            obs.flush()
        assert ["contended", "log_repeats_suppressed"] == [e["event"] for e in events]
        assert (159_999, "contended", "WARNING") == (
            events[1]["suppressed_count"],
            events[1]["original_event"],
            events[1]["severity_text"],
        )


class TestOnceCache:
    """The *_once fast path: a suppressed repeat of a plain call skips the full path, and
    never changes what is emitted or counted."""

    @staticmethod
    def _run(calls: Callable[[Any], None]) -> list[dict[str, Any]]:
        obs.configure(stream="none", repeat_summary_seconds=0)
        try:
            with obs.testing.capture_events() as events:
                calls(obs.get_logger("oc"))
                obs.flush()
        finally:
            obs.testing.reset()
        return events

    def test_repeats_hit_the_cache_and_count_exactly(self) -> None:
        """After the first repeat the cache serves the rest; the summary counts them all."""
        hits: list[bool] = []

        def calls(log: Any) -> None:
            for _ in range(50):
                log.warning_once("cached_event", flag="x", n=3)
            runtime = STATE.runtime
            assert runtime is not None
            hits.append(runtime.once_cache.repeat("oc", 30, "cached_event", {"flag": "x", "n": 3}))

        events = self._run(calls)
        summary = [e for e in events if e["event"] == "log_repeats_suppressed"]
        assert [True] == hits
        assert ([1], 50) == (
            [1 for e in events if e["event"] == "cached_event"],
            summary[0]["suppressed_count"],  # 49 repeats + the probe's own hit
        )

    @given(st.sampled_from([(1, True, 1.0), ("x", Color.X, "x"), (0, False, 0.0)]))
    @settings(max_examples=10, deadline=None)
    def test_equal_values_of_other_types_never_match(self, values: tuple[Any, ...]) -> None:
        """1, True and 1.0 (and a str Enum and its text) are different calls: each emits."""

        def calls(log: Any) -> None:
            for _ in range(3):
                for v in values:
                    log.warning_once("typed_event", v=v)

        events = self._run(calls)
        kinds = [type(e["v"]) for e in events if e["event"] == "typed_event"]
        assert len(set(map(type, values))) == len(kinds)

    def test_threads_count_every_repeat(self) -> None:
        """8 threads x 500 repeats through the cache: one emit, 3,999 suppressed."""

        def calls(log: Any) -> None:
            log.warning_once("threaded_event", k="v")

            def worker() -> None:
                for _ in range(500):
                    log.warning_once("threaded_event", k="v")

            threads = [threading.Thread(target=worker) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        events = self._run(calls)
        summary = [e for e in events if e["event"] == "log_repeats_suppressed"]
        assert (1, 4000) == (
            sum(e["event"] == "threaded_event" for e in events),
            sum(e["suppressed_count"] for e in summary),
        )

    def test_rank_change_drops_the_cache(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """When the rank info changes (a rank other than local rank 0 now), cached entries
        are not used: the default 'local' scope hides the call, as on the full path."""
        obs.configure(stream="none", repeat_summary_seconds=0)
        try:
            runtime = STATE.runtime
            assert runtime is not None
            log = obs.get_logger("oc")
            log.warning_once("ranked_event", a=1)
            log.warning_once("ranked_event", a=1)
            assert runtime.once_cache.repeat("oc", 30, "ranked_event", {"a": 1})
            monkeypatch.setenv("RANK", "3")
            monkeypatch.setenv("LOCAL_RANK", "1")
            monkeypatch.setenv("WORLD_SIZE", "4")
            runtime.resolver.refresh()
            assert not runtime.once_cache.repeat("oc", 30, "ranked_event", {"a": 1})
            with obs.testing.capture_events() as events:
                for _ in range(5):
                    log.warning_once("ranked_event", a=1)
                obs.flush()
        finally:
            obs.testing.reset()
        counted = sum(
            e["suppressed_count"] for e in events if e["event"] == "log_repeats_suppressed"
        )
        assert 2 == counted  # the two counted on rank 0; none of the hidden ones

    def test_reconfigure_and_shutdown_forget(self) -> None:
        """A new configuration starts with an empty cache; shutdown empties the old one."""
        obs.configure(stream="none")
        log = obs.get_logger("oc")
        log.warning_once("kept_event", a=1)
        log.warning_once("kept_event", a=1)
        old = STATE.runtime
        assert old is not None
        obs.configure(stream="none")
        new = STATE.runtime
        assert new is not None
        assert (False, False) == (
            new.once_cache.repeat("oc", 30, "kept_event", {"a": 1}),
            old.once_cache.repeat("oc", 30, "kept_event", {"a": 1}),
        )
        obs.testing.reset()

    def test_control_keywords_take_the_full_path(self) -> None:
        """A call with once_key/stage/body or a non-plain scope is never cached (its key
        or scope is not what the snapshot compares); a plain scope is kept in it."""

        def calls(log: Any) -> None:
            for _ in range(3):
                log.warning_once("ctl_event", a=1, once_key="a")
                log.warning_once("ctl_event", a=1, stage="attempt")
                log.warning_once("ctl_event", a=1, body="b")
                log.warning_once("ctl_event", a=1, scope={0})
            runtime = STATE.runtime
            assert runtime is not None
            assert {} == runtime.once_cache._table
            for _ in range(3):
                log.warning_once("ctl_event", a=1, scope="process")
            assert [{"a": 1, "scope": "process"}] == [
                row[0] for row in runtime.once_cache._table["ctl_event"]
            ]

        self._run(calls)

    def test_stdlib_drop_in_repeats_hit_the_cache(self) -> None:
        """init_logger(...).warning_once("x %s", 1): the same cache, exact counts."""
        import obs.stdlib

        def calls(log: Any) -> None:
            std = obs.stdlib.init_logger("oc.std")
            for _ in range(20):
                std.warning_once("std_event %s", 1)
            runtime = STATE.runtime
            assert runtime is not None
            assert runtime.once_cache.repeat("oc.std", 30, "std_event %s", (1,))
            assert not runtime.once_cache.repeat("oc.std", 30, "std_event %s", (True,))

        obs.configure(stream="none", repeat_summary_seconds=0)
        try:
            with obs.testing.capture_events() as events:
                calls(None)
                obs.flush()
        finally:
            obs.testing.reset()
        summary = [e for e in events if e["event"] == "log_repeats_suppressed"]
        assert 20 == summary[0]["suppressed_count"]  # 19 repeats + the probe's own hit

    def test_swapped_names_of_equal_values_never_match(self) -> None:
        """``a=1, b=1.0`` then ``b=1, a=1.0``: equal dicts with equal type sequences in call
        order but different names per type; both are logged (found by the perf review: the
        first cache compared types in call order, not per name)."""

        def calls(log: Any) -> None:
            for _ in range(3):
                log.warning_once("swap_event", a=1, b=1.0)
            log.warning_once("swap_event", b=1, a=1.0)

        events = self._run(calls)
        got = [(type(e["a"]), type(e["b"])) for e in events if e["event"] == "swap_event"]
        assert [(int, float), (float, int)] == got

    def test_a_value_whose_eq_raises_never_raises_into_the_caller(self) -> None:
        """A numpy array where a remembered call had a string: the call takes the full path
        and is logged, never raising (the first cache let ``==`` raise into the caller)."""
        np = pytest.importorskip("numpy")
        import obs.stdlib

        def calls(log: Any) -> None:
            dropin = obs.stdlib.init_logger("oc.dropin")
            for _ in range(3):
                log.warning_once("eq_event", v="x")
                dropin.warning_once("x %s", "x")
            log.warning_once("eq_event", v=np.array([1, 2]))
            dropin.warning_once("x %s", np.array([1, 2]))

        events = self._run(calls)
        assert 2 == sum(e["event"] == "eq_event" for e in events)


class TestKeyTextPositional:
    SECRET = "SECRET-MARKER-9c1e"

    def test_positional_args_read_as_the_body(self) -> None:
        """A drop-in call's arguments are shown formatted into the message, as the body
        shows them, not as ``0=value``."""
        key = make_key("lg", 30, "loaded %s in %d s", {"0": "m", "1": 3})
        assert "lg:30:loaded m in 3 s" == key_text(key)

    @settings(max_examples=300, deadline=None)
    @given(
        st.sampled_from(
            [
                "login with password=%s",
                "token: %s, user %s",
                "%s",
                "x %s y %r",
                "headers=%s",
                "api_key %s",
                "%d items",
            ]
        ),
        st.lists(
            st.one_of(
                st.sampled_from(
                    [SECRET, f"Bearer {SECRET}", f"http://u:{SECRET}@h/x", f"a:{SECRET}@b"]
                ),
                st.text(max_size=20),
                st.integers(),
                st.lists(st.integers(), max_size=3),
            ),
            min_size=1,
            max_size=12,
        ),
    )
    def test_positional_args_show_no_more_than_the_body(
        self, template: str, args: list[Any]
    ) -> None:
        """Whatever the template and arguments (up to 12: "10" sorts before "2"), the key
        text of a drop-in call holds a secret only where the record's own body does."""
        from obs._format import format_body

        key = make_key("lg", 30, template, {str(i): a for i, a in enumerate(args)})
        if self.SECRET not in format_body(template, tuple(args)):
            assert self.SECRET not in key_text(key)


_EQUAL_BUT_DIFFERENT = [0, 1, True, False, 0.0, -0.0, 1.0, "0", "0.0", "-0.0", None]


def _written(value: Any) -> tuple[type, str]:
    """What a value is written as: -0.0 writes "-0.0", 0.0 "0.0" (and 1, 1.0, True apart)."""
    return (type(value), repr(value))


class TestScalarKeysAreExact:
    """A scalar value keys as a sequence of it does: -0.0 and 0.0 write different lines,
    so they are different keys (as [-0.0] and [0.0] already were), on every path."""

    @settings(max_examples=200, deadline=None)
    @given(
        st.sampled_from(_EQUAL_BUT_DIFFERENT),
        st.sampled_from(_EQUAL_BUT_DIFFERENT),
        st.booleans(),
    )
    def test_make_key(self, a: Any, b: Any, with_other_field: bool) -> None:
        other = {"n": 1} if with_other_field else {}
        ka = make_key("lg", 30, "ev", {"v": a, **other})
        kb = make_key("lg", 30, "ev", {"v": b, **other})
        assert (_written(a) == _written(b)) == (ka == kb), (a, b)
        assert (_written(a) == _written(b)) == (
            make_key("lg", 30, "ev", {}, once_key=a) == make_key("lg", 30, "ev", {}, once_key=b)
        )

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.sampled_from([0.0, -0.0, 0, False]), min_size=1, max_size=8))
    def test_every_api_writes_each_zero(self, values: list[Any]) -> None:
        """A bound logger's warning_once (the once cache's path), with another field (the
        full key), and the drop-in's positional form: one line per value as written."""
        obs.testing.reset()
        obs.configure(level="DEBUG", format="json", sdk_disabled=True, repeat_summary_seconds=0)
        std = init_logger("t.zero")
        with obs.testing.capture_events() as captured:
            log = obs.get_logger("t.zero")
            for v in values:
                log.warning_once("zero_kw", x=v)
                log.warning_once("zero_two", x=v, y="a")
                std.warning_once("zero_pos %s", v)  # type: ignore[attr-defined]
            obs.flush()
        distinct = list(dict.fromkeys(map(_written, values)))
        for event in ("zero_kw", "zero_two"):
            lines = [e for e in captured if e["event"] == event]
            assert distinct == [_written(e["x"]) for e in lines], event
        firsts: dict[tuple[type, str], Any] = {}
        for v in values:
            firsts.setdefault(_written(v), v)
        bodies = [e["body"] for e in captured if e["event"].startswith("zero_pos")]
        assert [f"zero_pos {v}" for v in firsts.values()] == bodies
        for event in ("zero_kw", "zero_two", "zero_pos %s"):  # one summary per key
            assert len(values) - len(distinct) == sum(
                e["suppressed_count"]
                for e in captured
                if e["event"] == "log_repeats_suppressed" and e["original_event"] == event
            ), event
