"""Secrets at a cut: wherever obs cuts a text short (a %-formatted body, a stdlib record's
message, a long value a repeat summary's ``dedup_key`` shows the start of, a repr), the
text is scrubbed before it is cut, and a credential the cut leaves without its end (a URL
password before its ``@``, a bearer token of a few characters) is not shown at all."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._secrets import cut_tail
from obs.encode import MAX_STR, safe_repr, scrubbed_text

SECRET = "Qx7hunter2Qx7"
#: Credentials whose end decides what they are: userinfo ends at its ``@``, a bearer token
#: is one from its sixth character; and pairs, which a cut leaves recognisable.
CREDENTIALS = ["https://user:{s}@host/p", "user:{s}@host", "https://{s}@github.com/o/r",
               "Authorization: Bearer {s}", "Bearer {s}", "basic {s}", "password={s}",
               '{{"api_key": "{s}"}}', "--hf-token {s}"]  # fmt: skip


def _leaks(text: str) -> bool:
    """Whether any five characters of the secret are in ``text``."""
    return any(SECRET[i : i + 5] in text for i in range(len(SECRET) - 4))


def _written(call: Callable[[Any], None]) -> str:
    """What ``call(log)`` and obs' own events after it (summaries at shutdown) write to
    OBS_FILE; obs reset afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        obs.configure(format="json", sdk_disabled=True, file=path, stream="none")
        try:
            call(obs.get_logger("app"))
            obs.shutdown(5)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        finally:
            obs.testing.reset()
    assert text.strip()
    for line in text.splitlines():
        json.loads(line)
    return text


def _around(limit: int, credential: str, offset: int) -> str:
    """Blank-separated filler, then ``credential`` starting ``offset`` characters before
    ``limit`` (so the cut at ``limit`` lands inside it), then more text."""
    start = max(limit - offset, 1)
    return ("a " * limit)[: start - 1] + " " + credential + " " + "b" * 64


@given(
    shape=st.sampled_from(CREDENTIALS),
    offset=st.integers(1, 40),
    how=st.sampled_from(["positional", "template", "stdlib", "stdlib mapping"]),
)
@settings(max_examples=150)
def test_a_formatted_body_cut_inside_a_credential(shape: str, offset: int, how: str) -> None:
    """``log.info("%s", text)`` and a stdlib ``msg % args`` longer than the body's limit:
    the cut at the limit lands inside a credential, none of which is written."""
    credential = shape.format(s=SECRET)
    prefix = "" if how != "template" else "request failed: "
    text = _around(MAX_STR - len(prefix), credential, offset)

    def call(log: Any) -> None:
        if how == "positional":
            log.warning("%s", text)
        elif how == "template":
            log.warning("request failed: %s", text)
        elif how == "stdlib":
            logging.getLogger("vllm.x").warning("%s", text)
        else:
            logging.getLogger("vllm.x").warning("%(detail)s", {"detail": text})

    written = _written(call)
    assert '"body":"' in written
    assert not _leaks(written)


@given(
    shape=st.sampled_from(CREDENTIALS),
    offset=st.integers(1, 40),
    how=st.sampled_from(["field", "once_key", "key field", "positional"]),
)
@settings(max_examples=150)
def test_a_repeat_summary_shows_no_part_of_a_credential(shape: str, offset: int, how: str) -> None:
    """A once key's long value (over 1,024 characters) is kept by its first 256 and a
    hash, and the ``log_repeats_suppressed`` summary shows that start: a cut inside a
    credential there shows none of it (the secret went out as ``...Qx7hunter2Qx`` before)."""
    text = _around(256, shape.format(s=SECRET), offset) + "c" * 1200

    def call(log: Any) -> None:
        for _ in range(3):
            if how == "field":
                log.warning_once("retrying", detail=text)
            elif how == "once_key":
                log.warning_once("retrying", once_key=text)
            elif how == "key field":
                log.warning_once("retrying", once_key=("detail",), detail=text, n=1)
            else:
                log.warning_once("retrying %s", text)

    written = _written(call)
    assert '"log_repeats_suppressed"' in written
    assert not _leaks(written)


@given(
    shape=st.sampled_from(CREDENTIALS),
    size=st.sampled_from([0, 1100, 5000]),
    limit=st.sampled_from([200, 1000, MAX_STR]),
    how=st.sampled_from(["text", "repr"]),
)
@settings(max_examples=150)
def test_a_cut_past_the_scrub_margin(shape: str, size: int, limit: int, how: str) -> None:
    """A credential longer than what is scrubbed past the cut (a URL password of
    thousands of characters, its ``@`` far away) is not shown either: the scrubbed head
    ends inside it, and its start is left out."""
    credential = shape.format(s=SECRET + "p" * size)
    text = "x " * (limit // 4) + credential + " tail"
    shown = scrubbed_text(text, limit) if how == "text" else safe_repr(text, limit)
    assert not _leaks(shown)
    assert shown.startswith(("x x x", "'x x x"))


def test_cut_tail_keeps_text_that_needs_no_end() -> None:
    """Only a last token that may be a credential cut short goes: a word, a number or a
    pair (recognised without its end) stays."""
    assert cut_tail("loaded model m in 3") == "loaded model m in 3"
    assert cut_tail("retry ok, n=12") == "retry ok, n=12"
    assert cut_tail("GET https://user:pw") == "GET "
    assert cut_tail("GET https://tok") == "GET "
    assert cut_tail("sent Bearer ab") == "sent Bearer "
    assert cut_tail("sent 'a%3Ab") == "sent '"
    assert cut_tail("") == ""


class _Config:
    """An object whose repr is long, a secret pair in it (reprlib shortens it)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Config({self.text})"


@given(
    shape=st.sampled_from(CREDENTIALS),
    after=st.integers(60, 110),
    kind=st.sampled_from(["str", "object", "bytes"]),
    how=st.sampled_from(["obs", "stdlib", "tuple", "repr"]),
)
@settings(max_examples=200)
def test_a_short_repr_of_an_argument_cuts_no_name_off(
    shape: str, after: int, kind: str, how: str
) -> None:
    """A list or tuple argument (``log.info("cfg %s", [text])``) is shown through a
    bounded repr that shortens each long item; it kept an item's head and tail around
    ``...``, so a cut through a pair's name left its value behind a piece of the name
    (``'aaa...word=<secret>bbb'``, written as it was). A long item keeps its head only."""
    text = "a" * 150 + " " + shape.format(s=SECRET) + " " + "b" * after
    item: Any = {"str": text, "object": _Config(text), "bytes": text.encode()}[kind]

    def call(log: Any) -> None:
        if how == "obs":
            log.warning("cfg %s", [item])
        elif how == "stdlib":
            logging.getLogger("vllm.x").warning("cfg %s", [item, 1])
        elif how == "tuple":
            log.warning("cfg %s %s", (item,), 2)
        else:
            log.warning("cfg %r", (item,))

    assert not _leaks(_written(call))
    assert not _leaks(safe_repr([item]))


@given(
    shape=st.sampled_from(CREDENTIALS),
    offset=st.integers(1, 40),
    field=st.sampled_from(["error_message", "reason"]),
    items=st.booleans(),
)
@settings(max_examples=150)
def test_a_typed_event_body_cut_inside_a_credential(
    shape: str, offset: int, field: str, items: bool
) -> None:
    """A typed event's body shows each field's text cut to 1,000 characters; the cut
    came before the scrub, so a credential it cut short (``https://user:<secret>`` without
    its ``@``) was written in the body. The field itself was always scrubbed."""
    from obs.events import ChainAttemptFailed, emit

    text = _around(1000, shape.format(s=SECRET), offset)
    values = {"error_message": "boom", "reason": "error"}
    values[field] = text if not items else (text,)  # type: ignore[assignment]

    def call(log: Any) -> None:
        emit(ChainAttemptFailed(chain="c", backend="b", attempt=1, error_type="E",
                                duration_ms=1.0, **values))  # fmt: skip

    written = _written(call)
    assert '"chain_attempt_failed"' in written
    assert not _leaks(written)


@given(
    shape=st.sampled_from(CREDENTIALS),
    offset=st.integers(1, 40),
    how=st.sampled_from(["field", "str subclass", "stdlib extra", "bound"]),
)
@settings(max_examples=150)
def test_a_long_field_name_cut_inside_a_credential(shape: str, offset: int, how: str) -> None:
    """A field name over 256 characters is written cut to 256; the cut came before the
    name was scrubbed, so a URL password it cut short (before its ``@``) was written as
    the field's name."""
    name = _around(256, shape.format(s=SECRET), offset)

    class Name(str):
        __slots__ = ()

    def call(log: Any) -> None:
        if how == "field":
            log.warning("workspace_attempt", **{name: 1})
        elif how == "str subclass":
            log.warning("workspace_attempt", **{Name(name): 1})
        elif how == "stdlib extra":
            logging.getLogger("vllm.x").warning("workspace_attempt", extra={name: 1})
        else:
            log.bind(**{name: 1}).warning("workspace_attempt")

    written = _written(call)
    assert '"workspace_attempt"' in written
    assert not _leaks(written)


@given(shape=st.sampled_from(CREDENTIALS), offset=st.integers(1, 40))
@settings(max_examples=60)
def test_a_long_exception_type_name_cut_inside_a_credential(shape: str, offset: int) -> None:
    """``exception.type`` is cut to 256 characters: scrubbed before the cut, as a field
    name is (a class made at run time may be named after anything)."""
    error = type(_around(256, shape.format(s=SECRET), offset), (Exception,), {})

    def call(log: Any) -> None:
        log.error("workspace_terminal_failure", exc_info=error("boom"))

    written = _written(call)
    assert '"exception.type"' in written
    assert not _leaks(written)


@given(
    shape=st.sampled_from(CREDENTIALS),
    size=st.sampled_from([1100, 5000]),
    positional=st.booleans(),
)
@settings(max_examples=60)
def test_a_long_bytes_once_value_is_not_shown_encoded(
    shape: str, size: int, positional: bool
) -> None:
    """A bytes value over 1,024 bytes in a once key is kept by its start and a hash; the
    summary showed that start as hex, the secret with it (hex is the secret, spelled
    otherwise, and no scrubber reads it). It is kept as text now, and scrubbed."""
    data = shape.format(s=SECRET).encode() + b" " + b"x" * size

    def call(log: Any) -> None:
        for _ in range(3):
            if positional:
                log.warning_once("retrying %s", data)
            else:
                log.warning_once("retrying", data=data)

    written = _written(call)
    assert '"log_repeats_suppressed"' in written
    assert not _leaks(written)
    assert SECRET.encode()[:5].hex() not in written


class _Text(str):
    """A str subclass: the redactor walks it as it walks a long str."""

    __slots__ = ()


@given(
    shape=st.sampled_from(CREDENTIALS),
    offset=st.integers(1, 40),
    how=st.sampled_from(["str", "str subclass", "beside a short one", "as the body"]),
)
@settings(max_examples=120)
def test_a_long_value_cut_inside_a_credential(shape: str, offset: int, how: str) -> None:
    """A field value longer than the cap (scrubbed by the walk that cuts it, not scanned
    again): no part of a credential at the cut, at its start, or in a short value beside
    it (which the rest of the event's scrub still reads) is written."""
    credential = shape.format(s=SECRET)
    text = credential + " " + _around(MAX_STR, credential, offset)
    value = _Text(text) if how == "str subclass" else text

    def call(log: Any) -> None:
        if how == "beside a short one":
            log.warning("evt", v=value, w=credential)
        elif how == "as the body":
            log.warning("evt", body=value)
        else:
            log.warning("evt", v=value)

    written = _written(call)
    assert not _leaks(written)
    assert "[truncated" in written
