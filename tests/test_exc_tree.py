"""An exception's notes and an exception group's members in ``exception.stacktrace``.

The stdlib's traceback shows both (``add_note`` context, a ``TaskGroup``'s failures); a
stack trace without them hides what failed. Shown scrubbed, and bounded whatever the tree.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest
from _cpu import cpu_bound, least_cpu
from _exc import raised
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
from obs._exc_tree import MAX_FRAMES, MAX_SHOWN, MAX_TB, SPENT_ROOM, frame_lines, innermost
from obs.encode import MAX_STACK, format_exception

if sys.version_info < (3, 11):  # pragma: no cover - notes and groups are 3.11's
    pytest.skip("exception notes and groups are Python 3.11's", allow_module_level=True)
from builtins import ExceptionGroup


def _trace(exc: BaseException) -> str:
    fields = format_exception(exc)
    assert fields is not None
    return fields["exception.stacktrace"]


def test_notes_are_shown_after_the_exception_line() -> None:
    exc = ValueError("allreduce workspace failed")
    exc.add_note("rank 3: NVLink down")
    exc.add_note("tried mnnvl then trtllm")
    trace = _trace(raised(exc))
    assert "ValueError: allreduce workspace failed\nrank 3: NVLink down\n" in trace
    assert trace.endswith("tried mnnvl then trtllm\n")


def test_a_groups_members_are_shown_with_their_tracebacks() -> None:
    def fail(exc: BaseException) -> BaseException:
        return raised(exc)

    group = raised(ExceptionGroup("two ranks", [fail(ValueError("a")), fail(TypeError("b"))]))
    trace = _trace(group)
    assert "ExceptionGroup: two ranks (2 sub-exceptions)" in trace
    assert "| ValueError: a\n" in trace
    assert "| TypeError: b\n" in trace
    assert "in _raise" in trace.split("ValueError: a")[0].split("two ranks")[1]


def test_nested_groups_causes_and_notes_inside_members() -> None:
    inner = ValueError("inner cause")
    member = RuntimeError("member")
    member.__cause__ = inner
    member.add_note("member's note")
    group = ExceptionGroup("outer", [ExceptionGroup("nested", [member]), KeyError("k")])
    trace = _trace(group)
    for text in ("outer (2 sub-exceptions)", "nested (1 sub-exception)", "inner cause"):
        assert text in trace
    assert "RuntimeError: member\n" in trace
    assert "member's note" in trace
    assert "direct cause" in trace
    assert "| KeyError: " in trace


def test_secrets_in_notes_and_members_are_scrubbed() -> None:
    exc = ValueError("x")
    exc.add_note("retry with password=hunter2")
    member = ConnectionError("https://u:s3cr3tpw@collector:4318 refused")
    member.add_note("Authorization: Bearer abcdefgh12345678")
    trace = _trace(ExceptionGroup("g", [exc, member]))
    for secret in ("hunter2", "s3cr3tpw", "abcdefgh12345678"):
        assert secret not in trace
    assert "password=" in trace
    assert "refused" in trace


class _BadNotes(Exception):
    @property
    def __notes__(self) -> Any:  # type: ignore[override]
        raise RuntimeError("notes are broken")


class _BadMembers(ExceptionGroup):  # type: ignore[type-arg]
    @property
    def exceptions(self) -> Any:  # type: ignore[override]
        raise RuntimeError("members are broken")


def test_hostile_notes_and_members_never_raise() -> None:
    odd = ValueError("odd notes")
    odd.__notes__ = 5  # type: ignore[attr-defined]
    many = ValueError("non-str notes")
    many.__notes__ = [object(), b"bytes", None, "kept"]  # type: ignore[attr-defined]
    assert "odd notes" in _trace(odd)
    assert "kept" in _trace(many)
    assert "notes are broken" not in _trace(_BadNotes("bad"))
    assert "_BadNotes: bad" in _trace(_BadNotes("bad"))
    trace = _trace(_BadMembers("bad group", [ValueError("m")]))
    assert "bad group" in trace


class _RaisingList(list):  # type: ignore[type-arg]
    def __len__(self) -> int:
        raise RuntimeError("len is broken")

    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError("getitem is broken")

    def __iter__(self) -> Any:
        raise RuntimeError("iter is broken")


class _RaisingTuple(tuple):  # type: ignore[type-arg]
    __slots__ = ()

    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError("getitem is broken")


@given(
    kind=st.sampled_from(["list", "tuple"]),
    grouped=st.booleans(),
)
@settings(max_examples=10, deadline=None)
def test_a_notes_list_whose_methods_raise_keeps_the_trace(kind: str, grouped: bool) -> None:
    """A ``__notes__`` list (or tuple) whose ``len``/indexing raises costs its notes only:
    the exception's type, message and traceback are still shown, as the stdlib shows an
    error getting ``__notes__`` (failed before: the whole exception became ``unknown``
    with no stack trace)."""
    exc = ValueError("workspace lost")
    notes = _RaisingList(["n"]) if kind == "list" else _RaisingTuple(("n",))
    exc.__notes__ = notes  # type: ignore[attr-defined]
    shown: BaseException = ExceptionGroup("ranks", [exc]) if grouped else exc
    fields = format_exception(raised(shown))
    assert fields is not None
    assert fields["exception.type"] == ("ExceptionGroup" if grouped else "ValueError")
    bar = "| " if grouped else ""  # a member's lines are boxed
    trace = fields["exception.stacktrace"]
    assert f"{bar}ValueError: workspace lost\n{bar}Ignored error getting __notes__" in trace
    assert "in _raise" in trace


def test_a_huge_tree_is_bounded() -> None:
    wide = ExceptionGroup("wide", [ValueError(f"m{i}") for i in range(10_000)])
    deep: BaseException = ValueError("leaf")
    for i in range(2_000):
        deep = ExceptionGroup(f"level {i}", [deep, deep])
    many_notes = ValueError("noted")
    for i in range(10_000):
        many_notes.add_note(f"note {i} " + "x" * 1000)
    for exc, more in (
        (wide, "and 9985 more exceptions"),
        (deep, "max depth"),
        (many_notes, "more notes"),
    ):
        trace = _trace(exc)
        assert len(trace) <= MAX_STACK + 100
        assert more in trace


# A tree of exceptions: leaves with a message and notes, groups of trees.
_leaf = st.builds(
    lambda cls, msg, notes: (cls, msg, notes),
    st.sampled_from([ValueError, TypeError, RuntimeError, OSError]),
    st.text("abcdefgh ", min_size=1, max_size=12),
    st.lists(st.text("ijklmnop ", min_size=1, max_size=12), max_size=3),
)
_tree = st.recursive(_leaf, lambda kids: st.lists(kids, min_size=1, max_size=4), max_leaves=12)


def _build(spec: Any) -> BaseException:
    if isinstance(spec, list):
        return ExceptionGroup("group", [_build(s) for s in spec])
    cls, msg, notes = spec
    exc = cls(msg)
    for note in notes:
        exc.add_note(note)
    return exc


@settings(max_examples=60)
@given(_tree)
def test_every_line_the_stdlib_shows_for_a_small_tree_is_shown(spec: Any) -> None:
    """Within the bounds, each exception line and note the stdlib prints is there, in order."""
    exc = raised(_build(spec))
    ours = _trace(exc)
    theirs = traceback.format_exception(exc)
    wanted = [
        line.strip(" |+-\n")
        for chunk in theirs
        for line in chunk.splitlines()
        if not line.strip(" |+-").startswith(("File ", "Traceback", "Exception Group Traceback"))
        and line.strip(" |+-")
        and "raise exc" not in line
        and "_raise(exc)" not in line
        and not line.strip(" |+-").isdigit()
    ]
    position = 0
    for line in wanted:
        found = ours.find(line, position)
        assert found >= 0, (line, ours)
        position = found + len(line)


def test_the_json_line_and_stdlib_records_carry_the_members(tmp_path: Path) -> None:
    """Through the real chain: log.error(exc_info=...) and logging.exception in a group."""
    path = tmp_path / "f.jsonl"
    obs.configure(file=str(path), format="json")
    members = [ValueError("rank 1 nccl"), OSError("rank 2 io")]
    group = raised(ExceptionGroup("ranks failed", members))
    obs.get_logger("t").error("workspace_terminal_failure", exc_info=group)
    try:
        raise group
    except ExceptionGroup:
        logging.getLogger("vllm.test").exception("engine died")
    obs.flush()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    traces = [line["exception.stacktrace"] for line in lines if "exception.stacktrace" in line]
    assert len(traces) == 2
    for trace in traces:
        assert "ValueError: rank 1 nccl" in trace
        assert "OSError: rank 2 io" in trace


def _deep(depth: int) -> BaseException:
    """An exception raised ``depth`` frames down (a RecursionError's traceback is 1000)."""

    def down(n: int) -> None:
        if n == 0:
            raise ValueError("innermost")
        down(n - 1)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, depth + 200))
    try:
        down(depth)
    except ValueError as exc:
        return exc
    finally:
        sys.setrecursionlimit(limit)
    raise AssertionError("not raised")


def test_deep_tracebacks_cost_their_innermost_frames_only() -> None:
    """A group of 56 members each raised 3000 frames down: the trace shows each one's
    innermost 50 frames, as the stdlib's ``limit=-50`` does, while the trace shows at most
    ``MAX_FRAMES`` frames, in well under the 0.8 s it took (every frame's code position was
    computed, then all but 50 thrown away; about 4 ms now: a recursion's collapsed frames
    are not formatted either; the bound is 10x the 5 ms budget)."""
    deep = _deep(3000)
    group = ExceptionGroup("ranks", [ExceptionGroup(f"node {i}", [deep] * 14) for i in range(4)])
    assert least_cpu(lambda: format_exception(group)) < cpu_bound(0.05)
    trace = _trace(deep)
    shown = traceback.format_list(traceback.extract_tb(deep.__traceback__, limit=-50))
    assert "".join(shown) in trace
    assert trace.endswith("ValueError: innermost\n")
    assert _trace(group).count("ValueError: innermost") == 56
    assert f"[frames not shown: this trace showed {MAX_FRAMES}]" in _trace(group)


def test_a_tree_of_long_notes_is_bounded() -> None:
    """64 exceptions with 16 notes of 4 KB full of credentials each (4 MB of notes): the
    trace is bounded, what lies past its cut is not made and its pieces are scrubbed within
    a budget (past it a piece is ``[REDACTED]``, and the trace stops soon after), in well
    under the 1.1 s it took (about 4.5 ms now; the bound is 10x the 5 ms budget); no
    credential is written."""
    note = ("token=hunter2 Bearer abcdefghijkl hf_" + "a" * 30 + " ") * 80

    def member(i: int) -> BaseException:
        exc = ValueError(f"member {i}")
        for _ in range(16):
            exc.add_note(note)
        return exc

    group = ExceptionGroup(
        "ranks", [ExceptionGroup(f"node {k}", [member(i) for i in range(15)]) for k in range(5)]
    )
    assert least_cpu(lambda: format_exception(group)) < cpu_bound(0.05)
    trace = _trace(group)
    assert len(trace) <= MAX_STACK + 100
    assert "member 0" in trace
    for secret in ("hunter2", "abcdefghijkl", "a" * 30):
        assert secret not in trace


@settings(max_examples=25, deadline=None)
@given(
    depth=st.integers(0, 400),
    width=st.integers(1, 20),
    nested=st.integers(1, 4),
    note_count=st.integers(0, 20),
    note_size=st.integers(0, 6000),
)
def test_any_tree_of_deep_members_and_notes_is_bounded_and_clean(
    depth: int, width: int, nested: int, note_count: int, note_size: int
) -> None:
    """Whatever the traceback depth, group width and nesting, and the notes: each member
    shows at most its innermost ``MAX_TB`` frames, the trace at most ``MAX_FRAMES`` and
    ``MAX_SHOWN`` exceptions, its size is bounded, and no credential is written."""
    leaf = _deep(depth)
    leaf.add_note("password=hunter2")
    for _ in range(note_count):
        leaf.add_note(
            ("hf_" + "b" * 30 + " token=hunter2 ")[: max(note_size, 1)] * (note_size // 48 + 1)
        )
    exc: BaseException = leaf
    for level in range(nested):
        exc = ExceptionGroup(f"level {level}", [exc] * width)
    trace = _trace(exc)
    assert len(trace) <= MAX_STACK + 100
    assert trace.count("ValueError: innermost") <= MAX_SHOWN
    assert "hunter2" not in trace
    assert "b" * 30 not in trace
    innermost = traceback.format_list(traceback.extract_tb(leaf.__traceback__, limit=-MAX_TB))
    flat = "\n".join(line.lstrip("| ") for line in trace.splitlines())
    if note_count * note_size < 30_000:  # the first member is not cut off
        assert "\n".join(line.lstrip(" ") for line in "".join(innermost).splitlines()) in flat


def _recursion(depth: int, period: int) -> BaseException:
    """An exception raised ``depth`` frames down through ``period`` functions in turn."""

    def down(n: int) -> None:
        if n == 0:
            raise ValueError("bottom")
        (down if n % period else other)(n - 1)

    def other(n: int) -> None:
        down(n - 1) if n else down(0)

    try:
        down(depth)
    except ValueError as exc:
        return exc
    raise AssertionError("not raised")


def test_frames_a_run_of_repeats_hides_are_not_formatted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recursion's innermost 50 frames show 3 of its repeated line and how many more:
    only those are formatted (3.11's ``StackSummary.format`` formatted all 50, each frame's
    code position and carets, then dropped 47; failed before the fix: 50 formatted)."""
    formatted: list[object] = []
    real = traceback.StackSummary.format_frame_summary

    def counting(self: traceback.StackSummary, frame: Any) -> Any:
        formatted.append(frame)
        return real(self, frame)

    monkeypatch.setattr(traceback.StackSummary, "format_frame_summary", counting)
    trace = _trace(_recursion(300, 10**6))
    assert len(formatted) <= 2 * 3 + 1
    assert "[Previous line repeated" in trace


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(0, 120), period=st.integers(1, 6), limit=st.integers(1, 60))
def test_frame_lines_are_the_stdlibs(depth: int, period: int, limit: int) -> None:
    """Whatever the recursion, ``frame_lines`` of a traceback's innermost entries is what
    ``format_list(extract_tb(...))`` shows, repeats collapsed the same way."""
    tb = innermost(_recursion(depth, period).__traceback__, limit)
    assert traceback.format_list(traceback.extract_tb(tb)) == frame_lines(tb)


def test_a_tree_past_the_scrub_budget_stops_soon() -> None:
    """Once the scrub budget has run out on a piece (every piece that may hold a
    credential is ``[REDACTED]`` from there on), the trace shows at most ``SPENT_ROOM``
    more characters: 60 members with 16 notes of 4 KB of pairs made 900 ``[REDACTED]``
    notes, each at its scrub's setup cost (failed before the fix: 942 of them)."""
    noted = ValueError("noted")
    for _ in range(16):
        noted.add_note(("token=hunter2 Bearer abcdefghijkl hf_" + "a" * 30 + " ") * 60)
    group = ExceptionGroup("g", [ExceptionGroup("n", [noted] * 15) for _ in range(4)])
    trace = _trace(group)
    assert "ValueError: noted" in trace
    assert "more exceptions" in trace
    assert trace.count("[REDACTED]\n") < SPENT_ROOM // 10
    for secret in ("hunter2", "abcdefghijkl", "a" * 30):
        assert secret not in trace
