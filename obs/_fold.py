"""Text as a reader reads it: compatibility forms folded (NFKC: ``password`` in fullwidth or
mathematical letters, a fullwidth ``=``) and invisible characters dropped (a zero-width
space, a soft hyphen, a word joiner: Unicode's default-ignorable code points), so that no
spelling a reader still reads as a secret name hides it from the scrubber."""

from __future__ import annotations

__all__ = ["fold_hint", "folded"]

import unicodedata

from obs._lazy_re import lazy

#: Unicode's default-ignorable code points (DerivedCoreProperties): not shown, or shown
#: as nothing, so ``pass\u200bword`` reads ``password``.
_IGNORABLE = lazy(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
_is_normalized = unicodedata.is_normalized
_normalize = unicodedata.normalize


def fold_hint(text: str) -> bool:
    """Whether :func:`folded` would change ``text``: False at once for ASCII text (a flag
    CPython keeps on every str), else a C-level quick check and one character search."""
    return not text.isascii() and (
        not _is_normalized("NFKC", text) or _IGNORABLE.search(text) is not None
    )


def folded(text: str) -> str:
    """``text`` as a reader reads it (NFKC, default-ignorable characters dropped), or
    ``text`` itself, the same object, when that changes nothing."""
    if not fold_hint(text):
        return text
    shown = _normalize("NFKC", _IGNORABLE.sub("", text))
    return text if shown == text else shown
