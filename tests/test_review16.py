"""Review 16: text read as a reader reads it (:mod:`obs._fold`) drops every default-ignorable
character, the ones ``str.isprintable`` counts printable (a combining grapheme joiner, a
variation selector) and those past the Basic Multilingual Plane (tag characters) too, and
reads every character whose compatibility form is an ASCII letter or digit as that (not
only those of a few blocks), so no such spelling writes a secret in the clear."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from _written import written
from hypothesis import given, settings
from hypothesis import strategies as st

from obs._fold import folded
from obs._secrets import scrub_text

SECRET = "Qx7hunter2Qx7"
#: Default-ignorable characters that main's fold missed: printable ones (U+034F, Khmer and
#: Mongolian marks, variation selectors) and astral ones (tags, shorthand format controls).
MISSED = [
    "\u034f", "\u17b4", "\u17b5", "\u180b", "\u180c", "\u180d", "\u180f", "\ufe00", "\ufe0f",
    "\U000e0041", "\U000e0001", "\U0001bca0", "\U0001d173",
]  # fmt: skip
#: Default-ignorable code points (Unicode's DerivedCoreProperties, unassigned ones included).
IGNORABLE = st.sampled_from(
    [
        *MISSED, "\u00ad", "\u061c", "\u200b", "\u2060", "\u206f", "\ufeff", "\ufff0",
        "\U000e0fff", "\U000e0100", "\U000e01ef",  # astral variation selectors: printable
    ]
)  # fmt: skip


def test_hidden_ignorable_in_a_pair_name_is_redacted_in_every_field() -> None:
    """``pass<U+034F>word=...`` (and each other missed character) in an event, a value and
    a field name: the secret is in no line (main wrote it in the clear)."""

    def call(log: Any) -> None:
        for c in MISSED:
            log.info(f"pass{c}word={SECRET}")  # noqa: G004 - the event is the text
            log.info("ev", msg=f"note pass{c}word={SECRET} end")  # noqa: G004
            log.info("ev", **{f"api{c}_key": SECRET})

    text = json.dumps(written(call))
    assert SECRET not in text


def test_every_compatibility_letter_and_digit_reads_as_ascii() -> None:
    """Each code point whose NFKC form is an ASCII letter or digit folds to it (main's
    table missed U+2C7C ``j``, U+A7F2 ``C``, U+107A5 ``q``, U+1FBF0 ``0``...)."""
    for code in (0x2C7C, 0x2C7D, 0xA7F2, 0xA7F3, 0xA7F4, 0x107A5, *range(0x1FBF0, 0x1FBFA)):
        c = chr(code)
        assert folded(f"x{c}y") == f"x{unicodedata.normalize('NFKC', c)}y", hex(code)
    assert SECRET not in scrub_text(f"se\ua7f2ret={SECRET}")  # modifier capital C


@settings(max_examples=60, deadline=None)
@given(
    word=st.sampled_from(["password", "secret", "api_key", "token", "credential"]),
    at=st.integers(1, 7),
    hidden=st.lists(IGNORABLE, min_size=1, max_size=3),
    lead=st.text(alphabet="模型加载\uff0c\uff1a。 ab\u26a0\ufe0f\U0001f600", max_size=8),
)
def test_any_ignorable_inside_a_secret_name_is_read_through(
    word: str, at: int, hidden: list[str], lead: str
) -> None:
    """A secret word with default-ignorable characters inside, in any text: redacted."""
    at = min(at, len(word) - 1)
    name = word[:at] + "".join(hidden) + word[at:]
    assert SECRET not in scrub_text(f"{lead} {name}={SECRET}")
