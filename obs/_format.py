"""Bounded text for event names and %-formatted messages.

Formatting a message (``log.info("x %s", arg)`` or a stdlib record's ``msg % args``) must
never cost more than a bounded amount nor leak a credential, whatever the arguments are.
"""

from __future__ import annotations

__all__ = ["format_body", "plain_text", "safe_text"]

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

from obs._lazy_re import lazy
from obs._secrets import cut_head
from obs.encode import MAX_STR, REDACTED, is_secret_key, safe_repr, scrubbed_text, to_jsonable


def plain_text(value: object) -> str:
    """An event name as a plain, bounded str (a str subclass or a huge str made safe)."""
    return str(to_jsonable(value)) if issubclass(type(value), str) else safe_repr(value, 1000)


#: A %-format width or precision of 1000 or more (or ``*``): formatting it could build a
#: string of any size, so such a template is shown with its arguments instead.
_WIDE_FORMAT = lazy(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d{4,})|%[-#0 +]*\d*\.(?:\*|\d{4,})")


class _BoundedArg:
    """A positional argument that is not a plain number or short str: its ``%s`` / ``%r``
    text is bounded (reprlib for containers), so a million-item list costs nothing."""

    __slots__ = ("_value",)

    def __init__(self, value: object) -> None:
        self._value = value

    def __str__(self) -> str:
        value = self._value
        if issubclass(type(value), (list, tuple, dict, set, frozenset)):
            return safe_repr(value, 1000)
        return safe_text(value)

    def __repr__(self) -> str:
        return safe_repr(self._value, 1000)


def safe_text(value: object) -> str:
    """``str(value)``, bounded; a repr when ``__str__`` raises or returns a non-str."""
    try:
        text = str(value)
    except BaseException:
        return safe_repr(value, 1000)
    return text if type(text) is str and len(text) <= MAX_STR else safe_repr(text, MAX_STR)


def _bounded_arg(value: Any) -> Any:
    """An argument as %-formatting may take it: numbers and short text as they are."""
    if issubclass(type(value), (int, float)) and type(value) is not bool:
        return (
            value if type(value) is not int or -(10**300) < value < 10**300 else _BoundedArg(value)
        )
    if value is None or type(value) is bool:
        return value
    if type(value) is str:  # what the body shows of it, and what is scrubbed past the cut
        return value if len(value) <= MAX_STR else cut_head(value, MAX_STR) + "..."
    if hasattr(type(value), "__index__") or hasattr(type(value), "__float__"):
        return value  # numpy scalars and the like: %d / %f need the number itself
    return _BoundedArg(value)


def _redacted_mapping(mapping: Mapping[Any, Any]) -> dict[Any, Any]:
    """A ``%(name)s`` mapping as the format may show it: a value under a secret-looking
    key is ``[REDACTED]``, a container is shown through the redacting walk (a secret key
    nested in it is redacted too), at most 256 items."""
    out: dict[Any, Any] = {}
    for k, v in itertools.islice(mapping.items(), 256):
        if is_secret_key(k):
            out[k] = REDACTED
        elif _is_a(v, (Mapping, list, tuple, set, frozenset)) or _has_fields(v):
            out[k] = _BoundedArg(to_jsonable(v))
        else:
            out[k] = _bounded_arg(v)
    return out


def _is_a(value: object, cls: type | tuple[type, ...]) -> bool:
    """``isinstance(value, cls)``, False when it raises: it reads ``value.__class__``, which
    a proxy may answer with an error (a lazy object whose target failed to load)."""
    try:
        return isinstance(value, cls)
    except Exception:
        return False


def _has_fields(value: object) -> bool:
    """A dataclass, attrs class or named tuple instance: walked by field, never by repr."""
    cls = type(value)
    return dataclasses.is_dataclass(cls) or hasattr(cls, "__attrs_attrs__")


def format_body(event: object, args: tuple[Any, ...]) -> str:
    """``event % args`` as stdlib does, bounded (each argument's text, the width, the
    result) and scrubbed of credentials before it is cut; a readable fallback when the
    format does not fit."""
    template = event if type(event) is str else safe_text(event)
    try:
        if len(template) > MAX_STR or _WIDE_FORMAT.search(template):
            raise ValueError("format too wide")  # noqa: TRY301 - the one fallback below
        if len(args) == 1 and _is_a(args[0], Mapping):  # as LogRecord takes one
            text = template % _redacted_mapping(args[0])
        else:
            text = template % tuple(_bounded_arg(a) for a in args)
    except BaseException as exc:
        if len(args) == 1 and _is_a(args[0], Mapping):
            args = (to_jsonable(args[0]),)  # shown redacted by key, as formatted
        text = (
            f"{safe_repr(event, 1000)} % {safe_repr(args, 1000)}"
            f" (formatting failed: {type(exc).__name__})"
        )
    return scrubbed_text(text, MAX_STR)  # scrubbed before the cut: no half credential
