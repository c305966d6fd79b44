"""The readable text of a dedup key, as ``log_repeats_suppressed`` summaries show it.

Apart from :mod:`obs.dedup` so the key table stays one concern: building and reading
summaries' text (scrubbed, bounded) is not on the dedup hot path.
"""

from __future__ import annotations

__all__ = ["iso_time", "key_text"]

import time
from typing import Any

from obs._format import format_body
from obs._secrets import cut_tail
from obs.encode import REDACTED, is_secret_key, safe_repr, scrub_text, to_jsonable

Key = tuple[Any, ...]


def key_text(key: Key) -> str:
    """A readable form of a key for summaries: ``logger:level:event field=value ...``,
    scrubbed before it is cut.

    A drop-in ``*_once(msg, *args)`` call's arguments (fields ``0``, ``1``, ...) are shown
    as the record's body shows them, formatted into ``msg`` and scrubbed, never as
    ``0=value``: a value is only ever redacted by its name, and theirs say nothing.
    """
    try:
        return _key_text(key)
    except Exception:  # never raises into a log call: a hostile part reads as its repr
        return safe_repr(key, 300)


def _key_text(key: Key) -> str:
    parts = [p if type(p) is str else safe_repr(p, 200) for p in key[:3]]  # never str()
    rest = key[3:]
    if rest and len(rest) % 2 == 0:
        args = dict(zip(rest[0::2], map(_key_value, rest[1::2]), strict=True))
        if args.keys() == {str(i) for i in range(len(args))}:  # fields 0 .. n-1
            parts[2] = format_body(key[2], tuple(args[str(i)] for i in range(len(args))))
            rest = ()
    pairs = []
    for i in range(0, len(rest) - 1, 2):
        name, value = rest[i], rest[i + 1]
        shown = REDACTED if is_secret_key(name) else _shown(value)
        shown = shown if type(shown) is str else safe_repr(shown, 200)
        pairs.append(f"{safe_repr(name, 100) if type(name) is not str else name}={shown}")
    if len(rest) % 2:
        pairs.append(rest[-1] if type(rest[-1]) is str else safe_repr(rest[-1], 200))
    text = ":".join(parts) + (" " + " ".join(pairs) if pairs else "")
    text = scrub_text(text if len(text) <= 600 else cut_tail(text[:600]))  # no half credential
    return text if len(text) <= 300 else text[:300] + "..."


def _key_value(value: object) -> object:
    """The argument a key part stands for, as far as the key kept it (see :func:`_kv`)."""
    if isinstance(value, tuple) and value:
        if value[0] == "long":
            return f"{value[2]}...[{value[1]} chars]"
        if len(value) == 3 and value[0] == "seq":
            return list(value[1])
        if len(value) == 2 or value[0] is float:  # a float zero keeps its sign third
            return value[1]
    return value


def _shown(value: object) -> object:
    """A key part's value as a summary shows it."""
    if isinstance(value, tuple) and value and value[0] == "long":
        return f"{value[2]}...[{value[1]} chars]"
    if isinstance(value, tuple) and len(value) == 3 and value[0] == "seq":
        return safe_repr(to_jsonable(list(value[1])), 200)  # as the repr form reads
    if isinstance(value, tuple) and (len(value) == 2 or (value and value[0] is float)):
        return value[1] if value[0] == "repr" else safe_repr(value[1], 100)
    return value


def iso_time(ts: float) -> str:
    micros = round(ts * 1e6)
    secs, frac = divmod(micros, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{frac:06d}Z"
