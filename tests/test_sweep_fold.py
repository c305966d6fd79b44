"""Credentials whose shape is given by punctuation a reader reads as ASCII: a JWT whose
dots are fullwidth (U+FF0E), a percent escape whose ``%`` is fullwidth (U+FF05) or small
(U+FE6A) spelling a secret name (``to%6Ben=x``, the ``%`` fullwidth, reads as ``token=x``). Text
whose only folded characters are punctuation is read as read when such a shape may be
there; Chinese text with fullwidth commas is kept byte for byte."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from typing import Any

import pytest
from _written import written
from hypothesis import given, settings
from hypothesis import strategies as st

SECRET = "Qx7hunter2Qx7"
JWT_PARTS = ("eyJhbGciOiJIUzI1NiJ9", "eyJzdWIiOiIxMjM0NTY3ODkwIn0", "SflKxwRJSMeKKF2QT4fwpMeJf36")
#: What a reader reads as ``.`` and ``%`` (NFKC).
DOTS = ["\uff0e", "\ufe52"]
PERCENTS = ["\uff05", "\ufe6a"]


def _read(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _every_route(text: str) -> Callable[[Any], None]:
    def call(log: Any) -> None:
        import logging

        log.error("workspace_terminal_failure", detail=text, n=1)
        log.info("got " + text)
        log.info("nested", cfg=[{"v": text}])
        logging.getLogger("vllm.fold").warning("got %s", text)

    return call


@pytest.mark.parametrize("dot", DOTS)
def test_a_jwt_with_fullwidth_dots_is_redacted(dot: str) -> None:
    """A JWT whose dots read as dots is redacted on every route (failed before: written
    whole, its payload and signature too)."""
    lines = written(_every_route(dot.join(JWT_PARTS)))
    assert 4 == len(lines)
    assert ("workspace_terminal_failure", 1) == (lines[0]["event"], lines[0]["n"])
    shown = _read(json.dumps(lines, ensure_ascii=False))
    assert JWT_PARTS[1] not in shown
    assert JWT_PARTS[2] not in shown


@pytest.mark.parametrize("percent", PERCENTS)
def test_a_name_spelled_with_a_fullwidth_percent_escape_is_redacted(percent: str) -> None:
    """``to%6Ben=x`` with a fullwidth ``%`` reads as a percent-encoded ``token=x``:
    redacted as that is (failed before: written as logged)."""
    lines = written(
        _every_route(f"to{percent}6Ben={SECRET} p{percent}61ss{percent}77ord\uff1a{SECRET}")
    )
    assert 4 == len(lines)
    assert SECRET not in _read(json.dumps(lines, ensure_ascii=False))


_NAMES = ["token", "password", "api_key", "hf_token", "client_secret"]


@st.composite
def _escaped_names(draw: st.DrawFn) -> str:
    """A secret name with some of its characters as percent escapes, each ``%`` spelled
    as ASCII, fullwidth or small."""
    name = draw(st.sampled_from(_NAMES))
    out = []
    for char in name:
        if draw(st.booleans()):
            out.append(f"{draw(st.sampled_from(['%', *PERCENTS]))}{ord(char):02X}")
        else:
            out.append(char)
    return "".join(out)


@settings(max_examples=40)
@given(
    name=_escaped_names(),
    dot=st.sampled_from([".", *DOTS]),
    around=st.sampled_from(["", "配置\uff1a", "ログ\uff0c", "x "]),
    sep=st.sampled_from(["=", "\uff1d", ": ", "\uff1a"]),
)
def test_punctuation_read_as_ascii_hides_no_credential(
    name: str, dot: str, around: str, sep: str
) -> None:
    """Any mix of such punctuation: neither the pair's value nor the JWT's body is shown."""
    text = f"{around}{name}{sep}{SECRET} {dot.join(JWT_PARTS)}"
    lines = written(lambda log: log.info("e", detail=text))
    shown = _read(json.dumps(lines, ensure_ascii=False))
    assert SECRET not in shown
    assert JWT_PARTS[2] not in shown


def test_chinese_text_with_fullwidth_punctuation_is_kept() -> None:
    """Text whose folded characters are only punctuation, with no secret word or token
    head, is written byte for byte."""
    text = "模型加载完成\uff0c耗时\uff1a\uff13秒\uff05\uff08\uff27\uff30\uff35\uff10\uff09\uff0e"
    (line,) = written(lambda log: log.info("e", detail=text, note="完成\uff0c耗时\uff1a3秒\uff0e"))
    assert (text, "完成\uff0c耗时\uff1a3秒\uff0e") == (line["detail"], line["note"])


def _wide(text: str) -> str:
    """``text`` in fullwidth forms (U+FF01 to U+FF5E)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


#: Credentials whose head or delimiters are spelled in fullwidth forms.
_CUT_SECRETS = [
    _wide("hf_") + "abcdefghijklmnopqrstuvwxyz0123456789",
    _wide("sk-") + "abcdefghijklmnopqrstuvwxyz0123456789",
    "https\uff1a//user\uff1aabcdefghijklmnopqrstuvwxyz\uff20host/",
    _wide("Bearer") + "\u3000abcdefghijklmnopqrstuvwxyz0123",
]


def _fail(text: str) -> None:
    raise ValueError(text)


def _raise(text: str) -> Callable[[Any], None]:
    def call(log: Any) -> None:
        try:
            _fail(text)
        except ValueError:
            log.exception("boom")

    return call


@pytest.mark.parametrize("secret", _CUT_SECRETS)
@pytest.mark.parametrize("into", [5, 14, 25])
def test_no_part_of_a_fullwidth_credential_is_left_at_the_cut(secret: str, into: int) -> None:
    """Text past 16 KiB is scrubbed to the cut plus a margin; the credential the margin's
    end cuts is dropped whole though its head is fullwidth, also where invisible characters
    before it make the text read shorter than the cut (failed before: ``hf_abcdefghijk``
    written)."""
    head = f"{_wide('password')}=x " + "\u200b" * 17_000 + " "
    text = head + "y" * (17_408 - len(head) - 1 - into) + " " + secret
    routes = [lambda log: log.info(text), _raise(text)]
    lines = written(lambda log: [route(log) for route in routes])
    assert 2 == len(lines)
    assert "abcdefghij" not in _read(json.dumps(lines, ensure_ascii=False))


@settings(max_examples=25)
@given(
    secret=st.sampled_from(_CUT_SECRETS),
    wide=st.sets(st.integers(0, 12), max_size=6),
    into=st.integers(1, 30),
    hidden=st.sampled_from(["\u200b", "\u00ad", "\u2060", "\ufeff"]),
)
def test_any_such_credential_at_the_cut_is_dropped(
    secret: str, wide: set[int], into: int, hidden: str
) -> None:
    """Any of its first characters fullwidth or not, any invisible padding: no part of
    the credential's body the cut leaves is shown."""
    secret = "".join(_wide(c) if i in wide else _read(c) for i, c in enumerate(secret))
    head = f"{_wide('password')}=x " + hidden * 17_000 + " "
    text = head + "y" * (17_408 - len(head) - 1 - into) + " " + secret
    lines = written(lambda log: log.info(text))
    assert "abcdefghij" not in _read(json.dumps(lines, ensure_ascii=False))
