"""Text as a reader reads it: a character whose compatibility form (NFKC) is ASCII
written as that (``password`` in fullwidth, mathematical or circled letters, a fullwidth
``=``, a no-break space) and invisible characters dropped (a zero-width space, a soft
hyphen, a word joiner: Unicode's default-ignorable code points), so that no spelling a
reader still reads as a secret name hides it from the scrubber. A table built on first
use (a few milliseconds) and ``str.translate``: NFKC itself costs up to 5 us a character
(``U+FDFA``), a hostile value's bound."""

from __future__ import annotations

__all__ = ["fold_hint", "folded", "last_read_as", "read_hint", "read_secret_hint"]

import re
import unicodedata
from collections.abc import Iterable

from obs._lazy_re import lazy
from obs._secret_hints import credential_hint, pair_hint, secret_hint
from obs._tokens import token_hint

#: Unicode's default-ignorable code points (DerivedCoreProperties): not shown, or shown
#: as nothing, so ``pass\u200bword`` reads ``password``.
_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
#: The blocks whose characters may read as ASCII (Latin-1 and extended letters, modifier
#: and phonetic letters, spaces, letterlike and enclosed forms, CJK compatibility,
#: ligatures, small and fullwidth forms, mathematical alphanumerics, enclosed supplement).
_BLOCKS = (
    (0x00A0, 0x02FF), (0x1D00, 0x1DBF), (0x2000, 0x2BFF), (0x2C60, 0x2C7F),
    (0x3000, 0x33FF), (0xA700, 0xA7FF), (0xFB00, 0xFB4F), (0xFE10, 0xFE6F),
    (0xFF00, 0xFFEF), (0x10780, 0x107BF), (0x1D400, 0x1D7FF), (0x1F100, 0x1F1FF),
    (0x1FBF0, 0x1FBF9),
)  # fmt: skip


class _Table:
    """The translation table, and the characters that read as a name's, built on first use."""

    table: dict[int, str | None] | None = None
    spells: re.Pattern[str] | None = None
    #: Runs of the table's Basic Multilingual Plane characters (a bitmap class).
    runs: re.Pattern[str] | None = None
    #: The characters read as each ASCII character (``"\u3000"`` and others for a blank).
    reads: dict[str, str] | None = None


def _build() -> dict[int, str | None]:
    table: dict[int, str | None] = {}
    for low, high in _BLOCKS:
        for code in range(low, high + 1):
            read = _normalize("NFKC", chr(code))
            if read.isascii() and read != chr(code):
                table[code] = read
    for low, high in _IGNORABLE:
        table.update(dict.fromkeys(range(low, high + 1)))
    spells = "".join(
        re.escape(chr(code))
        for code, read in table.items()
        if code < 0x10000 and (read is None or any(c.isalnum() or c in "_-@%" for c in read))
    )
    _Table.spells = re.compile(f"[{spells}]")  # a BMP class: the regex engine's bitmap
    bmp = "".join(re.escape(chr(code)) for code in table if code < 0x10000)
    _Table.runs = re.compile(f"[{bmp}]+")
    reads: dict[str, str] = {}
    for code, shown in table.items():
        if shown is not None and len(shown) == 1:
            reads[shown] = reads.get(shown, "") + chr(code)
    _Table.reads = reads
    _Table.table = table
    return table


_normalize = unicodedata.normalize
_is_normalized = unicodedata.is_normalized


def fold_hint(text: str) -> bool:
    """Whether :func:`folded` may change ``text``: False at once for ASCII text (a flag
    CPython keeps on every str), else C-level passes (NFKC's quick check: a compatibility
    form; a character not printable, then a search for a format one such as ``U+200B``)."""
    return not text.isascii() and (
        not _is_normalized("NFKC", text)
        or (_FORMAT.search(text) is not None if not text.isprintable() else _in_word(text))
    )


def _in_word(text: str) -> bool:
    """Whether a default-ignorable character that ``str.isprintable`` counts printable
    follows a letter or digit (``pass\ufe0fword``); after an emoji (``U+26A0 U+FE0F``,
    its presentation) it hides no name: that text is not folded. Bitmap searches first;
    the astral variation selectors only in text with a character past the BMP."""
    for shown in (_SHOWN, _SHOWN_ASTRAL):
        if shown is _SHOWN_ASTRAL and _ASTRAL.search(text) is None:
            break
        for found in shown.finditer(text):
            at = found.start()
            if at and (text[at - 1].isalnum() or text[at - 1] in "_-"):
                return True
    return False


#: The default-ignorable characters (searched in text with a character not printable).
_FORMAT = lazy(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
#: ... and those that ``str.isprintable`` counts printable (combining marks, variation
#: selectors, Hangul fillers): in other text, only these can be there. The Basic
#: Multilingual Plane's only (a bitmap, about 8 ns a character; U+E0100 to U+E01EF, astral
#: variation selectors, are not searched: a class with them costs half as much again).
_SHOWN = lazy("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\ufe00-\ufe0f]")
#: ... and the astral variation selectors (U+E0100 to U+E01EF), searched only in text
#: that holds a character past the BMP.
_SHOWN_ASTRAL = lazy("[\U000e0100-\U000e01ef]")


def folded(text: str) -> str:
    """``text`` as a reader reads it, or ``text`` itself, the same object, when that
    changes nothing (the caller bounds its length: about 0.1 us a character)."""
    if not fold_hint(text):
        return text
    table = _Table.table or _build()
    runs = _Table.runs
    if runs is None or _ASTRAL.search(text) is not None:
        shown = text.translate(table)  # about 80 ns a character, each looked up
    else:  # only the runs that fold (a fullwidth ``GPU0`` in Japanese text), each translated
        shown = runs.sub(lambda run: run[0].translate(table), text)
    return text if shown == text else shown


def last_read_as(text: str, chars: Iterable[str]) -> int:
    """The index of ``text``'s last character read as one of ``chars`` (ASCII ones) in
    another form (a fullwidth ``"`` or an ideographic space for ``" "``), or -1."""
    if text.isascii():
        return -1
    reads = _Table.reads
    if reads is None:
        _build()
        reads = _Table.reads or {}
    return max((text.rfind(form) for char in chars for form in reads.get(char, "")), default=-1)


def read_secret_hint(text: str) -> bool:
    """Whether ``text`` read as read may hold what the scrubber redacts: :func:`read_hint`,
    then the scrubber's own hints on the reading (a credential, a secret pair, a token).
    Japanese text with fullwidth letters (a fullwidth ``GPU0``) reads as plain text: not
    scrubbed."""
    if not read_hint(text):
        return False
    shown = folded(text)
    return shown is not text and (credential_hint(shown) or pair_hint(shown))


#: Any character past the Basic Multilingual Plane (an emoji too), then those of its blocks
#: that read as a letter or digit or are not shown (mathematical, enclosed, tags).
_ASTRAL = lazy("[\U00010000-\U0010ffff]")
_ASTRAL_SPELLS = lazy(
    "[\U0001d400-\U0001d7ff\U0001f100-\U0001f1ff\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff\U00010780-\U000107bf"
    "\U0001fbf0-\U0001fbf9]"
)


def read_hint(text: str) -> bool:
    """Whether ``text`` read as read (:func:`folded`) may hold a secret that its code
    points do not: a character read as a letter, a digit, ``_``, ``-``, ``@`` or ``%`` (an
    escape spells a letter: ``to%6Ben``, its ``%`` fullwidth), or one not shown, may spell
    a name or token; where only punctuation and blanks read otherwise (U+FF0C, U+FF1A in
    Chinese text) the words are the text's own, so a secret word or a token's head (a
    JWT's ``eyJ``, its dots fullwidth) must be there already. C-level searches: CJK text
    pays no fold (0.2 us a character)."""
    if text.isascii() or not fold_hint(text):
        return False
    if _Table.table is None:
        _build()
    spells = _Table.spells
    if spells is None or spells.search(text) is not None:
        return True
    if _ASTRAL.search(text) is not None and _ASTRAL_SPELLS.search(text) is not None:
        return True
    return (
        secret_hint(text) or "@" in text or "earer" in text or "EARER" in text
        or "asic" in text or "ASIC" in text or token_hint(text)
    )  # fmt: skip
