"""Credentials known by their shape alone, with no name, URL or scheme before them: a
vendor's fixed prefix and a long random body (``hf_...``, ``ghp_...``, ``xoxb-...``,
``sk-...``, ``AKIA...``, a JWT) and a PEM private key's body. :func:`token_hint` rules most
texts out with a few substring tests; :func:`scrub_tokens` replaces what is there (the
prefix kept), through :mod:`obs._secrets`' replacer."""

from __future__ import annotations

__all__ = ["REDACTED", "scrub_tokens", "token_head", "token_hint"]

import re
from collections.abc import Callable

from obs._lazy_re import lazy

#: What a redacted value is written as (:mod:`obs._secrets` writes it too).
REDACTED = "[REDACTED]"

#: A credential told by its shape alone, with no name before it: a vendor's fixed prefix
#: (kept) and a long random body (Hugging Face, GitHub, Slack, OpenAI and Anthropic, an
#: AWS access key id, a JWT's header, payload and signature).
_BODIES = (
    r"(?:(hf_)[A-Za-z0-9]{30,}|(gh[pousr]_)[A-Za-z0-9]{30,}"
    r"|(github_pat_)[A-Za-z0-9_]{30,}|(xox[abposr]-)[A-Za-z0-9-]{15,}"
    r"|(A[KS]IA)[0-9A-Z]{16}(?![A-Za-z0-9])"
    r"|(sk-)(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"  # a key has digits; sk-learn-... not
    r"|(eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
)
#: Such a credential (groups 1..7: its prefix): a prefix inside a longer word or a run of
#: ``-``/``_`` is no start, so each run is one try (linear).
_TOKEN = lazy(r"(?<![A-Za-z0-9_-])" + _BODIES)
#: An escape written as text, whose last character is a letter or digit (JSON's ``\n`` or
#: ``\u0022``, a repr's ``\x1b``, a URL's ``%20``), or a terminal colour (``ESC[33m``): a
#: token may start right after one.
_ESCAPE = (
    r"(\\[abfnrtv]|\\x[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}|%[0-9A-Fa-f]{2}"
    r"|\x1b\[[0-9;]{0,16}m)"
)
#: A credential right after an escape (group 1, kept; groups 2..8: its prefix). The escape
#: comes first, so a search skips to a ``\``, ``%`` or ESC (as fast as :data:`_TOKEN`).
_TOKEN_ESCAPED = lazy(_ESCAPE + _BODIES)
#: A PEM private key (``-----BEGIN RSA PRIVATE KEY-----``): its body, to its END line or,
#: cut short, to the end of the text.
_PEM = lazy(
    r"(-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)[\s\S]*?"
    r"(-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
#: ``ghp_``..., and ``sk-`` at a word's start: ``weights_`` and ``disk-`` hold ``gh``/``sk-``.
_GH_HEAD = lazy(r"gh[pousr]_")
_SK_HEAD = lazy(r"(?<![A-Za-z0-9_-])sk-|" + _ESCAPE + "sk-")
#: Where such a credential starts: a last token a cut leaves with one is dropped whole.
_HEADS = "(?:hf_|gh[pousr]_|github_pat_|xox[abposr]-|sk-|A[KS]IA|eyJ)"
_TOKEN_HEAD = lazy(r"(?<![A-Za-z0-9_-])" + _HEADS + "|" + _ESCAPE + _HEADS)


def token_hint(text: str) -> bool:
    """Whether ``text`` may hold a credential :data:`_TOKEN` or :data:`_PEM` knows by its
    shape: at least 20 characters, then a few C-level substring tests (each prefix holds
    ``_``, ``-``, ``J`` or ``I``: a character search each rules most texts out)."""
    return len(text) >= 20 and (  # one character first: memchr, fast on any text
        ("_" in text and ("hf_" in text or "pat_" in text or ("gh" in text and _gh(text))))
        or ("-" in text and (("sk-" in text and _sk(text)) or "xox" in text or "-----" in text))
        or ("J" in text and "eyJ" in text)
        or ("I" in text and "IA" in text and ("AKIA" in text or "ASIA" in text))
    )


def token_head(text: str) -> bool:
    """Whether ``text`` holds where such a credential starts (a cut text's last token)."""
    return _TOKEN_HEAD.search(text) is not None


def _gh(text: str) -> bool:
    return _GH_HEAD.search(text) is not None


def _sk(text: str) -> bool:
    return _SK_HEAD.search(text) is not None


#: How :func:`scrub_tokens` replaces: :func:`_plain_sub`, or the scrubber's budgeted ``_sub``.
_Sub = Callable[[re.Pattern[str], str, Callable[[re.Match[str]], str]], str]


def _plain_sub(pattern: re.Pattern[str], text: str, repl: Callable[[re.Match[str]], str]) -> str:
    return pattern.sub(repl, text)


def scrub_tokens(text: str, sub: _Sub = _plain_sub) -> str:
    """``text`` without the credentials known by their shape (a token, after an escape
    too, and a PEM private key's body), each replaced through ``sub`` (the scrubber's
    budgeted one, or ``pattern.sub``)."""
    text = sub(_TOKEN, text, _token)
    if "\\" in text or "%" in text or "\x1b" in text:
        text = sub(_TOKEN_ESCAPED, text, _escaped_token)
    return sub(_PEM, text, _pem)


def _escaped_token(match: re.Match[str]) -> str:
    """A credential after an escape: the escape and the prefix kept, the rest gone."""
    return f"{match[1]}{match[match.lastindex or 0]}{REDACTED}"


def _token(match: re.Match[str]) -> str:
    """A credential known by its shape: its prefix kept (which kind it was), the rest gone."""
    return f"{match[match.lastindex or 0]}{REDACTED}"


def _pem(match: re.Match[str]) -> str:
    return f"{match[1]}{REDACTED}{match[2]}"
