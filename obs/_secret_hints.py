"""The scrubber's cheap pre-tests: whether a text may hold a credential or a secret pair
at all, decided by C-level substring tests (most by one character search, memchr) before
any pattern of :mod:`obs._secrets` runs."""

from __future__ import annotations

__all__ = [
    "bearer_hint",
    "credential_hint",
    "has_separator",
    "option_hint",
    "pair_hint",
    "secret_hint",
]

from obs._lazy_re import lazy
from obs._tokens import token_hint

#: Words one of which a secret-named key holds (a cheap test before the pair scan).
_SECRET_HINTS = ("pass", "pwd", "secret", "token", "key", "auth", "cookie", "cred",
                 "session", "jwt", "dsn", "bearer", "header", "_pat")  # fmt: skip


def credential_hint(text: str) -> bool:
    """False when :func:`~obs._secrets.scrub_credentials` would surely leave ``text`` as
    it is: a few C-level substring tests, so a plain value costs next to nothing."""
    return "@" in text or bearer_hint(text) or token_hint(text)


def bearer_hint(text: str) -> bool:
    """Whether ``text`` may hold a bearer/basic credential: a blank and a ``b`` first (a
    character search each, cheap on any text), then the schemes' letters (dearer)."""
    return (
        len(text) >= 12  # "basic" + a blank + 6 token characters, the shortest match
        and (" " in text or "\t" in text or "\n" in text or "\r" in text)
        and ("b" in text or "B" in text)  # a character search: skips most long texts
        and ("earer" in text or "asic" in text or "EARER" in text or "ASIC" in text)
    )


def pair_hint(text: str) -> bool:
    """False when :func:`~obs._secrets.scrub_text`'s pair scan would surely leave ``text``
    as it is: no pair separator, or no secret word and no percent escape, which may spell
    one (``to%6Ben=x``; C-level tests, the lowering only past a separator)."""
    return has_separator(text) and secret_hint(text)


def secret_hint(text: str) -> bool:
    """:func:`pair_hint` past its separator test: a secret word or a percent escape."""
    low = text.lower()
    for hint in _SECRET_HINTS:  # a loop, not any(genexpr): a third less per text
        if hint in low:
            return True
    return "%" in text and _ESCAPE.search(text) is not None


#: A percent escape (``%5F``): a name may be spelled with them (``api%5Fkey``).
_ESCAPE = lazy(r"%[0-9A-Fa-f]{2}")


def has_separator(text: str) -> bool:
    """Whether ``text`` has what separates a pair's name from its value: ``=``, ``:``, a
    quoted name's ``,``, a percent-encoded one (``%3D``), or a command-line option (``-``
    first or after a blank, a quote or a line break: ``'--hf-token x'`` in a repr)."""
    return (
        "=" in text
        or ":" in text
        or "," in text
        or ("%" in text and ("%3" in text or "%2" in text))  # encoded: ``api_key%3Dx``
        or ("-" in text and option_hint(text))  # one char first: memchr
    )


def option_hint(text: str) -> bool:
    """Whether ``text`` (which holds a ``-``) may hold a command-line option: a ``-`` first
    or after a blank, a quote, a line break or an escaped one (``b'\\t--hf-token x'``)."""
    return (
        text[0] == "-" or " -" in text or "'-" in text or '"-' in text or "\n-" in text
        or "\t-" in text or ("\\" in text and ("\\t-" in text or "\\n-" in text))
    )  # fmt: skip
