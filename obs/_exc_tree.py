"""An exception's notes and an exception group's members, laid out as the stdlib's
traceback shows them: a stack trace without them hides what failed (``add_note`` context,
each failure of a ``TaskGroup``). Bounded whatever the tree: width, depth and a count of
exceptions shown in one trace, shared by the whole tree."""

from __future__ import annotations

__all__ = [
    "MAX_DEPTH",
    "MAX_NOTES",
    "MAX_SHOWN",
    "MAX_WIDTH",
    "Tree",
    "is_group",
    "members",
    "notes",
]

import builtins
import sys
from collections.abc import Callable

#: Notes shown after an exception's line.
MAX_NOTES = 16
#: Members shown per group, and groups nested (the stdlib's ``max_group_width``/``depth``).
MAX_WIDTH = 15
MAX_DEPTH = 10
#: Exceptions formatted in one trace: members, their causes and contexts together.
MAX_SHOWN = 64

_RULE = "+------------------------------------\n"
_MORE = "+---------------- ... ----------------\n"


class Tree:
    """What one trace may still show: exceptions left to format, and the group depth."""

    __slots__ = ("depth", "left")

    def __init__(self) -> None:
        self.left = MAX_SHOWN
        self.depth = 0

    def take(self) -> bool:
        """One more exception formatted, if any are left."""
        self.left -= 1
        return self.left >= 0


def is_group(exc: BaseException) -> bool:
    """Whether ``exc`` is an exception group: the builtin's (3.11) or, on 3.10, the
    ``exceptiongroup`` backport's (anyio's and trio's)."""
    cls = getattr(builtins, "BaseExceptionGroup", None)
    if cls is None:
        cls = getattr(sys.modules.get("exceptiongroup"), "BaseExceptionGroup", None)
    return cls is not None and isinstance(exc, cls)


def notes(exc: BaseException, text: Callable[[object], str]) -> str:
    """The lines of ``exc.__notes__`` (each ``text``-ed: scrubbed and cut), as the stdlib
    prints them; a ``__notes__`` that raises (reading it, its length or its items) or is
    not a list shows what it is."""
    try:
        raw = getattr(exc, "__notes__", None)
        if raw is None:
            return ""
        if not isinstance(raw, (list, tuple)):
            return f"{text(raw)}\n"
        count = len(raw)
        out = [f"{text(note)}\n" for note in raw[:MAX_NOTES]]
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
            if tree.left <= 0 or not isinstance(member, BaseException):
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
