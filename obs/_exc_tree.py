"""An exception's notes and an exception group's members, laid out as the stdlib's
traceback shows them: a stack trace without them hides what failed (``add_note`` context,
each failure of a ``TaskGroup``). Bounded whatever the tree: width, depth, a count of
exceptions and the text shown in one trace, shared by the whole tree, and each traceback's
innermost frames (the outer ones are never looked at). Also what ``exc_info`` names
and how long a cause chain is: the exception-shaped facts :mod:`obs.encode` formats."""

from __future__ import annotations

__all__ = [
    "MAX_DEPTH",
    "MAX_FRAMES",
    "MAX_NOTES",
    "MAX_SHOWN",
    "MAX_TB",
    "MAX_WIDTH",
    "SPENT_ROOM",
    "ExcInfo",
    "Tree",
    "chain_rest",
    "exc_tuple",
    "frame_lines",
    "innermost",
    "is_group",
    "members",
    "notes",
]

import builtins
import sys
import traceback
from collections import deque
from collections.abc import Callable
from types import TracebackType

from obs._secrets import budget_refused

#: Notes shown after an exception's line.
MAX_NOTES = 16
#: Members shown per group, and groups nested (the stdlib's ``max_group_width``/``depth``).
MAX_WIDTH = 15
MAX_DEPTH = 10
#: Exceptions formatted in one trace: members, their causes and contexts together.
MAX_SHOWN = 64
#: Frames shown per traceback (its innermost), and in one trace (each costs tens of
#: microseconds: its code position, source line and the carets under it).
MAX_TB = 50
MAX_FRAMES = 200

#: What a trace may still show once the log call's scrub budget has run out on a piece
#: (every piece that may hold a credential is ``[REDACTED]`` from there on): a few more
#: lines, not thousands of ``[REDACTED]`` notes, each of which cost its scrub's setup.
SPENT_ROOM = 1024

_RULE = "+------------------------------------\n"
_MORE = "+---------------- ... ----------------\n"


class Tree:
    """What one trace may still show: exceptions and frames left to format, the group
    depth, and ``room``: characters left before the cut (what lies past it is not made,
    or scrubbed), :data:`SPENT_ROOM` at most once the scrub budget ran out."""

    __slots__ = ("depth", "frames", "left", "room")

    def __init__(self, room: int) -> None:
        self.left = MAX_SHOWN
        self.frames = MAX_FRAMES
        self.depth = 0
        self.room = room

    def traceback(self, tb: TracebackType) -> TracebackType | None:
        """The innermost entries of ``tb`` this trace still shows (see :func:`innermost`)."""
        limit = min(MAX_TB, self.frames)
        if limit <= 0:
            return None
        copy = innermost(tb, limit)
        self.frames -= limit
        return copy

    def take(self) -> bool:
        """One more exception formatted, if any are left and there is room."""
        self.left -= 1
        return self.left >= 0 and self.room > 0

    def add(self, out: list[str], text: str) -> bool:
        """``text`` appended to ``out``, spending room; False once none is left."""
        out.append(text)
        self.room -= len(text)
        if self.room > SPENT_ROOM and budget_refused():
            self.room = SPENT_ROOM
        return self.room > 0


def innermost(tb: TracebackType | None, limit: int) -> TracebackType | None:
    """A copy of the last ``limit`` entries of ``tb``: what ``extract_tb(tb, -limit)`` shows,
    whose code positions (a scan of each frame's bytecode) are then found for those only."""
    kept: deque[TracebackType] = deque(maxlen=limit)
    while tb is not None:
        kept.append(tb)
        tb = tb.tb_next
    copy = None
    for entry in reversed(kept):
        copy = TracebackType(copy, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return copy


#: Repeats of one frame a traceback shows before ``[Previous line repeated N more times]``
#: (the stdlib's cutoff).
_REPEATS = 3


def frame_lines(tb: TracebackType | None) -> list[str]:
    """``traceback.format_list(traceback.extract_tb(tb))``, the frames a run of repeats hides
    neither extracted nor formatted: 3.11 finds every frame's code position and carets
    first (a recursion's 50 innermost frames cost 50 of each, for 3 lines shown)."""
    out: list[str] = []
    run: list[TracebackType] = []
    last: tuple[str, int, str] | None = None
    count = 0
    while tb is not None:
        code = tb.tb_frame.f_code
        key = (code.co_filename, tb.tb_lineno, code.co_name)  # what the stdlib compares
        if key != last:
            _run_lines(out, run, count)
            last, run, count = key, [], 0
        count += 1
        if count <= _REPEATS:
            run.append(tb)
        tb = tb.tb_next
    _run_lines(out, run, count)
    return out


def _run_lines(out: list[str], run: list[TracebackType], count: int) -> None:
    """The formatted frames of one run of repeats, and how many more it holds."""
    copy = None
    for entry in reversed(run):
        copy = TracebackType(copy, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    out.extend(traceback.format_list(traceback.extract_tb(copy)))
    if count > _REPEATS:
        more = count - _REPEATS
        out.append(f"  [Previous line repeated {more} more time{'s' if more > 1 else ''}]\n")


def is_group(exc: BaseException) -> bool:
    """Whether ``exc`` is an exception group: the builtin's (3.11) or, on 3.10, the
    ``exceptiongroup`` backport's (anyio's and trio's)."""
    cls = getattr(builtins, "BaseExceptionGroup", None)
    if cls is None:
        cls = getattr(sys.modules.get("exceptiongroup"), "BaseExceptionGroup", None)
    return cls is not None and isinstance(exc, cls)


def notes(exc: BaseException, text: Callable[[object], str], tree: Tree) -> str:
    """The lines of ``exc.__notes__`` (each ``text``-ed: scrubbed and cut), as the stdlib
    prints them, while ``tree`` has room; a ``__notes__`` that raises (reading it, its
    length or its items) or is not a list shows what it is."""
    out: list[str] = []
    try:
        raw = getattr(exc, "__notes__", None)
        if raw is None:
            return ""
        if not isinstance(raw, (list, tuple)):
            return f"{text(raw)}\n"
        count = len(raw)
        for note in raw[:MAX_NOTES]:
            if not tree.add(out, f"{text(note)}\n"):
                return "".join(out)
    except BaseException as err:
        return f"Ignored error getting __notes__: {text(type(err).__name__)}\n"
    if count > MAX_NOTES:
        out.append(f"[{count - MAX_NOTES} more notes]\n")
    return "".join(out)


def members(group: BaseException, chain: Callable[[BaseException, Tree], str], tree: Tree) -> str:
    """The members of an exception group, each as ``chain`` formats it (its traceback and
    causes), boxed and indented as the stdlib does; past the bounds, how many are not."""
    try:
        found = group.exceptions  # type: ignore[attr-defined]
        items = found[:MAX_WIDTH] if isinstance(found, (list, tuple)) else ()
        count = len(found)
    except BaseException:
        return ""
    if tree.depth >= MAX_DEPTH:
        return f"{_MORE}| ... (groups nested past max depth {MAX_DEPTH})\n{_RULE}"
    out: list[str] = []
    shown = 0
    tree.depth += 1
    try:
        for member in items:
            if tree.left <= 0 or tree.room <= 0 or not isinstance(member, BaseException):
                break
            shown += 1
            out.append(f"+---------------- {shown} ----------------\n")
            out.extend(f"| {line}\n" for line in chain(member, tree).splitlines())
    finally:
        tree.depth -= 1
    if count > shown:
        out.append(f"{_MORE}| and {count - shown} more exceptions\n")
    out.append(_RULE)
    return "".join(out)


ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def exc_tuple(value: object) -> ExcInfo | None:
    """``exc_info`` as logging takes it (True, an exception, a 3-tuple) as a 3-tuple; None
    for anything else (or True outside an ``except`` block)."""
    if value is True:
        info = sys.exc_info()
        return info if info[1] is not None else None
    if isinstance(value, BaseException):
        return (type(value), value, value.__traceback__)
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        return value
    return None


def chain_rest(exc: BaseException) -> str:
    """How many exceptions of a cause chain start at ``exc`` (``1000+`` past a thousand)."""
    count = 0
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and count < 1000:
        seen.add(id(cur))
        count += 1
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return f"{count}+" if cur is not None else str(count)
