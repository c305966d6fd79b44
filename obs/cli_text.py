"""What obs' and comm's command-line tools print: scrubbed as obs' own lines are.

A tool echoes what it was given or received: a path or URL argument (``--log-dir
/runs/token=...``), an argparse error quoting a bad value, a received record's body,
attributes and resource. Any of them may hold a credential, and a line break in one would
split a line a script reads. :func:`shown` is the one-line text of any value,
:func:`scrub_tree` a JSON document's values and keys (secret-named fields redacted), and
:class:`ScrubbingParser` an ``argparse`` parser whose errors quote no secret. Public:
comm's ``python -m comm probe`` prints through it too.
"""

from __future__ import annotations

__all__ = ["Base64Text", "ScrubbingParser", "one_line", "scrub_tree", "shown"]

import argparse
import base64
from typing import Any, NoReturn

from obs.encode import REDACTED, is_secret_key, is_secret_pair_name, safe_repr, scrub_text

#: How deep :func:`scrub_tree` goes; what is deeper is shown as its scrubbed repr.
_MAX_DEPTH = 32
#: A record naming its own value (an env var, an OTLP KeyValue): as the log walk has them.
_NAMED_VALUES = (("name", "value"), ("key", "value"), ("Name", "Value"), ("Key", "Value"))


class Base64Text(str):
    """Bytes written as base64 text by :func:`scrub_tree` (a summary line quotes them, so
    they read as data, not as a word)."""

    __slots__ = ()


def one_line(text: str) -> str:
    """``text`` with every character that is not printable (a line break, a tab, an
    escape) written as its backslash escape, so the text stays on its line."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c == " " else c.encode("unicode_escape").decode() for c in text
    )


def shown(value: object) -> str:
    """``value`` as a tool prints it: its text (a str as is, anything else its bounded
    repr), scrubbed of credentials and secret pairs, on one line. Never raises."""
    try:
        text = value if type(value) is str else safe_repr(value)
        return one_line(scrub_text(text))
    except Exception:
        return REDACTED


def scrub_tree(obj: Any, depth: int = 0) -> Any:
    """A copy of a JSON-like document (dicts, lists, scalars) as a tool prints it, with
    the log walk's rules (:mod:`obs.encode`): every str (keys too) scrubbed, the value of
    a secret-named key, of a ``{"name": "HF_TOKEN", "value": ...}`` record, of a
    ``("X-Api-Key", value)`` pair or after a ``--hf-token`` option redacted; bytes as
    base64 text (:class:`Base64Text`; none when they hold a credential). The structure is
    kept whole (no cut: a report's or a record's size is its own). Never raises."""
    try:
        if obj is None or isinstance(obj, (bool, int, float)):
            return obj
        if isinstance(obj, (str, bytes, bytearray)):
            return scrub_text(obj) if isinstance(obj, str) else _bytes(bytes(obj))
        if depth < _MAX_DEPTH and isinstance(obj, dict):
            return _mapping(obj, depth)
        if depth < _MAX_DEPTH and isinstance(obj, (list, tuple)):
            return _sequence(obj, depth)
        return shown(obj)
    except Exception:
        return REDACTED


def _bytes(raw: bytes) -> str:
    """Bytes as base64 text, or ``[REDACTED]`` when their text holds a credential (base64
    would carry it on, encoded)."""
    text = raw.decode("latin-1")
    if scrub_text(text) != text:
        return REDACTED
    return Base64Text(base64.b64encode(raw).decode("ascii"))


def _mapping(obj: dict[Any, Any], depth: int) -> dict[str, Any]:
    """:func:`scrub_tree` of a dict: keys scrubbed (two that read the same are both kept),
    secret-named keys' and named records' values redacted."""
    out: dict[str, Any] = {}
    for i, (key, value) in enumerate(obj.items()):
        name = scrub_text(key) if isinstance(key, str) else shown(key)
        if name in out:
            name = f"{name}.{i}"
        out[name] = REDACTED if is_secret_key(key) else scrub_tree(value, depth + 1)
    for name_key, value_key in _NAMED_VALUES:
        if value_key in out and is_secret_pair_name(out.get(name_key)):
            out[value_key] = REDACTED
    return out


def _sequence(items: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
    """:func:`scrub_tree` of a list: a secret (name, value, ...) pair keeps its name only,
    an item after a secret-named option (``["--hf-token", value]``) is redacted."""
    if len(items) >= 2 and is_secret_pair_name(items[0]):
        return [scrub_tree(items[0], depth + 1)] + [REDACTED] * (len(items) - 1)
    out: list[Any] = []
    after_option = False
    for item in items:
        out.append(REDACTED if after_option else scrub_tree(item, depth + 1))
        after_option = (
            not after_option
            and isinstance(item, str)
            and item[:1] == "-"
            and "=" not in item
            and is_secret_key(item)
        )
    return out


class ScrubbingParser(argparse.ArgumentParser):
    """An ``argparse`` parser whose usage errors are scrubbed before they are printed:
    argparse quotes the refused value (``invalid choice: 'token=...'``, ``unrecognized
    arguments: --hf-token hf_...``)."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and the scrubbed one-line ``message``; exit 2."""
        super().error(shown(message))
