"""Secrets: which field names are secret, and credentials in free text.

One key normaliser (:func:`key_words`: case, ``-``, ``_``, ``.``, camelCase) and one table
of secret words (both in :mod:`obs._secret_names`) decide whether a field's value is
shown (:func:`is_secret_name`, cached and within a log call's budget; the
walk in :mod:`obs.encode` applies it to every container kind). Text needs no name:
:func:`scrub_credentials` takes URL passwords, bearer/basic credentials and vendor tokens
known by their prefix and shape (``hf_``, ``ghp_``, ``xoxb-``, ``sk-``, ``AKIA``, JWTs,
PEM private keys) out of any str obs writes, and :func:`scrub_text` also the values of
secret-named ``name=value`` pairs, for messages, summaries and exception text (a line
break after the separator, JSON escaped again or percent-encoded too); :func:`scrub_name`
does so for names, keeping a placeholder (``password=%s``). Both run in one pass over the
text, whatever it holds, and a plain text costs a few C-level substring tests.
"""

from __future__ import annotations

__all__ = [
    "MAX_KEY",
    "REDACTED",
    "SECRET_LAST_WORDS",
    "SECRET_PAIRS",
    "SECRET_WORDS",
    "bearer_hint",
    "budget_refused",
    "close_budget",
    "credential_hint",
    "cut_head",
    "cut_tail",
    "has_separator",
    "is_secret_name",
    "key_words",
    "open_budget",
    "option_hint",
    "pair_hint",
    "scrub_credentials",
    "scrub_name",
    "scrub_text",
    "token_hint",
]

import re
import threading
from collections.abc import Callable
from urllib.parse import unquote

from obs._fold import folded, last_read_as, read_hint
from obs._lazy_re import lazy
from obs._secret_hints import (
    bearer_hint,
    credential_hint,
    has_separator,
    option_hint,
    pair_hint,
    secret_hint,
)
from obs._secret_names import (
    MAX_KEY,
    SECRET_LAST_WORDS,
    SECRET_PAIRS,
    SECRET_PARTS,
    SECRET_WORDS,
    alnum,
    hinted,
    key_words,
    secret_words,
    separators_dropped,
)
from obs._tokens import REDACTED, scrub_tokens, token_head, token_hint

#: ``scheme://user:password@host``: the password part of a URL's userinfo.
#: ``user:password@`` with or without a scheme; the password runs to the last ``@`` of
#: the token (a password may hold ``@`` or ``/``), so none of it is left behind.
#: Tried only where a run of userinfo characters starts, and only on a token cut at its
#: last ``@`` (:data:`_AT_TOKEN`), so it costs one pass whatever the text (it was quadratic
#: on a long run of ``:`` with an ``@`` somewhere after it).
_URL_PASSWORD = lazy(
    r"(?i)(?<![^\s/:@'\"<>()])((?:[a-z][a-z0-9+.-]*://)?[^\s/:@'\"<>()]*:)(?!//)[^\s'\"<>]*@"
)
#: An http(s) URL's userinfo without a password: a token sent as the user
#: (``https://ghp_x@github.com``, git's credential URLs). One with a password is
#: :data:`_URL_PASSWORD`'s.
_HTTP_USER = lazy(r"(?i)((?:^|[^\w.+-])https?://)(?!\[REDACTED\]@)[^/?#\s@:]+@")
#: A whitespace- or quote-delimited token with a ``:`` before an ``@``, from its start only.
_AT_TOKEN = lazy(r"(?<![^\s'\"<>])[^\s'\"<>:]*:[^\s'\"<>]*@[^\s'\"<>]*")
#: The start of a ``name=value`` / ``name: value`` pair in text (reprs of Namespace-like
#: objects, a formatted message, a URL's query), or of a ``('name', value)`` pair (a
#: header list's repr): the name and its separator. The name decides, through
#: :func:`is_secret_name`; it is any run of word characters, ``.`` and ``-``
#: (``--hf-token``, ``2fa_token``), at any length (its end decides too), with subscripts
#: after it (``user[password]``, a form field as Rails and PHP nest them). An option of a
#: command line (``-``/``--`` and a name) is a name too, its value after blanks. The
#: separator is ``=``, ``:``, ``=>`` or a run of them (``:=``, ``::=``, ``==``); blanks or
#: escaped line breaks may end a quoted name (``{"api_key\\n": x}``, ``{'token ': x}``).
_PAIR_NAME = lazy(
    r"(?<![\w.-])(?=[\w.-]*?[A-Za-z])([\w.-]++(?:\[[\w.-]*+\])*+)"
    r"(\s*+(?:\\+[ntr]\s*+)*+"  # blanks before a quoted name's closing quote
    r"(?:\\*['\"]?\s*+(?:\\+[ntr]\s*+)*+(?::*+=++>?|:++)\s*+|\\*['\"][ \t]*,[ \t]*))"
    r"|(?:(?<![\w.-])|(?<=\\[ntr]))(--?[A-Za-z][\w.-]*+)([ \t]+)(?=[^\s-])"  # --hf-token x
)
#: A pair's value: quoted, or up to a blank or a delimiter. A value already
#: ``[REDACTED]`` (a token's, its prefix kept: ``hf_[REDACTED]``) is matched whole, so
#: scrubbing twice changes nothing.
_PAIR_VALUE = lazy(
    r"(?:\\+[ntr][ \t]*)*+"  # blanks escaped in JSON text (``:\\n  x``): part of the value
    r"([\w-]*\[REDACTED\]|\\+\"[^\"]*\\+\"|\\+'[^']*\\+'|'[^']*'|\"[^\"]*\"|[^\s,;)}\]&]+)"
)
#: An authorization-like name (``Authorization``, ``Proxy-Authorization``, ``X-Auth``):
#: its value is a scheme and then the credential, so all of it, to the end of the line or
#: field, is the secret. Tried from a name's start only; a value already redacted stays.
_AUTH_PAIR = lazy(
    r"(?i)(?<![\w.-])([\w.-]*auth(?:orization|entication)?)"
    r"(\s*+(?:\\+[ntr]\s*+)*+\\*['\"]?\s*+(?:\\+[ntr]\s*+)*+(?:=>?|:)\s*+)"
    r"(?![ \t]*\[REDACTED\])('[^']*'|\"[^\"]*\"|(?:[^\r\n,;&)}\][]++|\[REDACTED\]|\[)++)"
)
#: A ``Cookie:`` / ``Set-Cookie:`` header: every cookie in it is the secret (``a=1;
#: session=x``), so all of its value, to the end of the line or a quote, is redacted.
_COOKIE_HEADER = lazy(
    r"(?i)(?:(?<![\w.-])|(?<=\\[ntr]))((?:set[-_])?cookie)"
    r"(\s*+(?:\\+[ntr]\s*+)*+\\*['\"]?\s*+(?:\\+[ntr]\s*+)*+:[:=]*+\s*+(?:\\+[ntr][ \t]*)*+)"
    r"(?!\[REDACTED\]|\\*['\"])([^\r\n'\"]*[^\s'\"])"  # a quoted value: a pair's
)
#: The scheme and its credential are apart by blanks (HTTP's SP; a tab or line break in
#: a message): the same four characters :func:`bearer_hint` looks for first. A scheme's
#: name is not a credential (``basic Bearer x``: the token is the second one's).
_BEARER = lazy(r"(?i)\b(bearer|basic)[ \t\r\n]+(?!(?:bearer|basic)\b)[a-z0-9._~+/=-]{6,}")


_SECRET_CACHE: dict[str, bool] = {}
#: Names past MAX_KEY, by their ends (what decides them): 16 dicts of 256 long keys were
#: judged anew each call, 7 us a key.
_LONG_CACHE: dict[str, bool] = {}


def is_secret_name(key: str) -> bool:
    """True when a field named ``key`` must not show its value (see the module docstring).

    Within an open log call (:func:`open_budget`) the names split into words spend the
    call's name budget; past it a name that may be secret is taken as secret (its value is
    redacted): thousands of long keys cost 0.5 s a call before."""
    hit = _SECRET_CACHE.get(key)
    if hit is None:
        short = len(key) <= MAX_KEY
        if short:
            low = key.lower()
        else:  # decided by its ends alone: kept under them (a long key is not kept)
            ends = f"{key[:MAX_KEY]}\0{key[-MAX_KEY:]}"
            hit = _LONG_CACHE.get(ends)
            if hit is not None:
                return hit
            low = ends.lower()
        has_hint = hinted(low)
        if not has_hint and low.isascii() and alnum(low.encode(), short):
            hit = False  # no hint, and nothing the normaliser drops could hide one
        elif any(p in low for p in SECRET_PARTS):
            hit = True
        else:
            budget = _BUDGET
            if budget.chars is not None:
                budget.names -= len(low)
                if budget.names < 0:
                    return True  # past the call's budget: not kept (another call decides)
            if not has_hint and not hinted(separators_dropped(low)):
                hit = False  # no hint with the separators dropped either (se_cret has one)
            else:
                hit = secret_words(key_words(key)) or (
                    not short and secret_words(key_words(key[-MAX_KEY:]))  # its end too
                )
        hit = hit or _secret_as_read(key if short else ends, low)  # a long one's ends
        cache, key = (_SECRET_CACHE, key) if short else (_LONG_CACHE, ends)
        if len(cache) >= (8192 if short else 1024):
            cache.clear()  # names repeat: the ones in use come back at once
        cache[key] = hit
    return hit


def _secret_as_read(key: str, low: str) -> bool:
    """Whether ``key``, read as a reader reads it (fullwidth letters, a zero-width space
    inside: :func:`~obs._fold.folded`), is a secret name."""
    if low.isascii():
        return False
    shown = folded(key)
    return shown is not key and is_secret_name(shown)


#: What one log call may spend scrubbing its values (:func:`scrub_budget`): characters of
#: text that may hold a credential, and matches looked at one by one (pair names, userinfo
#: tokens, bearer credentials; 2 to 4 microseconds each, the search up to it included). A
#: few milliseconds at the scrubber's worst, far more than an ordinary call's values hold.
#: Fewer steps redact more of a huge value, never less: past them the text is [REDACTED];
#: 1024 keeps an engine's config line of 400 pairs (2 steps each) readable.
SCRUB_CHARS = 32 * 1024
SCRUB_STEPS = 1024
#: ... and characters of text with a pair separator tested for a secret word (a dozen
#: substring searches: about 7 ns a character).
SCRUB_SCAN = 128 * 1024
#: ... and characters of text percent-decoded (each pass; about 50 ns a character) or
#: read as a reader reads it (:func:`~obs._fold.folded`, about 0.1 us a character).
SCRUB_DECODE = 16 * 1024
#: ... and characters of names (fields, keys, pair names in text) split into words to test
#: for secret ones (about 60 ns a character); most names are cached or decided before.
SCRUB_NAMES = 16 * 1024


class _Budget(threading.local):
    """What the current log call of this thread may still spend; ``None``: no call open
    (obs' own texts, bounded by their makers, are scrubbed in full)."""

    chars: int | None = None
    steps: int = 0
    scan: int = 0
    decode: int = 0
    names: int = 0
    #: Whether a text was ``[REDACTED]`` whole because the budget ran out.
    refused: bool = False


_BUDGET = _Budget()


_Saved = tuple[int | None, int, int, int, int, bool]


def open_budget(chars: int = SCRUB_CHARS) -> _Saved:
    """Bound what :func:`scrub_text` spends until :func:`close_budget` (one log call's
    values): past :data:`SCRUB_CHARS` a text that may hold a credential is ``[REDACTED]``
    whole, past :data:`SCRUB_STEPS` matches the rest of the text being scrubbed is. Never a
    secret, never slow: 300 values of 2 KB full of pairs took 450 ms a call without it.
    Returns what :func:`close_budget` puts back (a call inside a call keeps its own).
    ``chars``: a smaller budget, for a text scrubbed again whole after its pieces."""
    budget = _BUDGET
    saved = (budget.chars, budget.steps, budget.scan, budget.decode, budget.names, budget.refused)
    budget.chars, budget.steps, budget.scan = chars, SCRUB_STEPS, SCRUB_SCAN
    budget.decode, budget.names, budget.refused = SCRUB_DECODE, SCRUB_NAMES, False
    return saved


def close_budget(saved: _Saved) -> None:
    """End the budget :func:`open_budget` opened."""
    budget = _BUDGET
    budget.chars, budget.steps, budget.scan, budget.decode, budget.names, budget.refused = saved


def budget_refused() -> bool:
    """Whether the open call's budget ran out on a text (it was ``[REDACTED]`` whole)."""
    return _BUDGET.refused


class _Spent(Exception):
    """The open call's budget ran out while a text was scrubbed: it is ``[REDACTED]``."""


def _step() -> None:
    """Spend one match of the open call's budget; raise :class:`_Spent` when none is left."""
    budget = _BUDGET
    if budget.chars is not None:
        if budget.steps <= 0:
            raise _Spent
        budget.steps -= 1


def _sub(pattern: re.Pattern[str], text: str, repl: Callable[[re.Match[str]], str]) -> str:
    """``pattern.sub(repl, text)``, each match spending a step of the open call's budget."""
    parts: list[str] = []
    done = 0
    budget = _BUDGET  # _step, inlined
    bounded = budget.chars is not None
    for match in pattern.finditer(text):
        if bounded:
            if budget.steps <= 0:
                raise _Spent
            budget.steps -= 1
        parts.append(text[done : match.start()])
        parts.append(repl(match))
        done = match.end()
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


#: What a name in text is made of (the patterns' ``[\w.-]``), ASCII; other characters are
#: tested by :data:`_NAME_CHAR` itself.
_ASCII_NAME = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_NAME_CHAR = lazy(r"(?i)[\w.-]")
#: A run of name characters, and of others: no name starts inside either.
_NAME_RUN = lazy(r"(?i)[\w.-]*+")
_NOT_NAME = lazy(r"[^\w.-]*+")
#: ``auth`` in any case: only ASCII letters match it case-insensitively.
_AUTH_WORD = lazy(r"[Aa][Uu][Tt][Hh]")


def _name_start(text: str, at: int) -> int:
    """Where the run of name characters that ``text[at]`` ends or is in starts."""
    while at > 0:
        head = text[max(at - 64, 0) : at]
        kept = head.rstrip(_ASCII_NAME)
        at -= len(head) - len(kept)
        if kept:
            if kept[-1].isascii() or _NAME_CHAR.match(kept[-1]) is None:
                break
            at -= 1  # a name character past ASCII (``é``)
    return at


def _auth_pairs(text: str, repl: Callable[[re.Match[str]], str]) -> str:
    """``_sub(_AUTH_PAIR, text, repl)``, the pattern tried only where a name that holds
    ``auth`` starts (its only starts): not at every character (a text of line breaks
    after a name cost 350 instructions a character)."""
    parts: list[str] = []
    done = pos = 0
    budget = _BUDGET  # _step, inlined
    bounded = budget.chars is not None
    while (word := _AUTH_WORD.search(text, pos)) is not None:
        start = _name_start(text, word.start())
        found = _AUTH_PAIR.match(text, start) if start >= pos else None
        if found is None:  # no other name starts in this run: past it
            pos = _NAME_RUN.match(text, word.end()).end()  # type: ignore[union-attr]
            continue
        if bounded:
            if budget.steps <= 0:
                raise _Spent
            budget.steps -= 1
        parts.append(text[done:start])
        parts.append(repl(found))
        done = pos = found.end()
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


def scrub_credentials(text: str) -> str:
    """``text`` with URL passwords, bearer/basic credentials and credentials known by
    their shape (``hf_...``, ``ghp_...``, ``AKIA...``, a JWT, a PEM private key's body;
    their prefix kept) replaced by ``[REDACTED]``.

    For every str obs writes (field values at any depth, event names, bodies): they need
    no name to be recognised, so no value may carry one out.
    """
    if "@" in text and ":" in text:
        text = _AT_TOKEN.sub(_url_token, text)
    if bearer_hint(text):
        text = _BEARER.sub(rf"\1 {REDACTED}", text)
    if token_hint(text):
        text = scrub_tokens(text)
    return text


def _url_token(match: re.Match[str]) -> str:
    """A token with its URL password (up to its last ``@``) replaced, or an http(s) URL's
    user when it has no password (``https://<token>@github.com``: a token, not a user)."""
    token = match.group()
    at = token.rfind("@")
    token = _URL_PASSWORD.sub(rf"\1{REDACTED}@", token[: at + 1]) + token[at + 1 :]
    return _HTTP_USER.sub(rf"\1{REDACTED}@", token) if "//" in token else token


#: What ends a token in text (:data:`_AT_TOKEN`'s delimiters): a token a cut lands in is
#: the text after the last of these.
_TOKEN_ENDS = (" ", "\t", "\n", "\r", "'", '"', "<", ">")


def cut_tail(text: str) -> str:
    """``text``, the start of a longer text cut short, without its last token when that
    token may be a credential the cut left without its end, which the scrubber needs to
    see it: a URL's userinfo before its ``@`` (``https://user:pw``, ``https://<token>``,
    percent-encoded too) or a bearer/basic credential (shorter than it looks for), read as
    a reader reads it (:func:`~obs._fold.folded`). Cut before it is scrubbed, so none of
    it is shown; a word, a number or a pair stays."""
    start = max(*map(text.rfind, _TOKEN_ENDS), last_read_as(text, _TOKEN_ENDS)) + 1
    token = text[start:]
    if ":" in token or "@" in token or "%" in token or last_read_as(token, ":@%") >= 0:
        return text[:start]  # a fullwidth colon or at sign too, as a reader reads them
    if token and folded(text[max(start - 32, 0) : start]).rstrip().lower().endswith(
        ("bearer", "basic")
    ):
        return text[:start]
    if not token.isascii():  # a head such as a fullwidth ``hf_``: its end read as read (a
        token = folded(token[-_HEAD_READ:])  # longer head is no partial credential)
    if ("_" in token or "-" in token or "J" in token or "I" in token) and token_head(token):
        return text[:start]  # ``hf_AbC``: a token's head, too short for its shape now
    return text


#: How much of a cut token's end is read as read for a credential's head: a head further
#: back has more than its shape's length after it, so the scrub finds it whole.
_HEAD_READ = 256

#: How far past a cut a scrub reads, so a credential that straddles the cut is found.
SCRUB_MARGIN = 1024


def cut_head(text: str, limit: int) -> str:
    """What of ``text`` to scrub when at most ``limit`` characters of it are shown: all of
    it, or its first ``limit`` + :data:`SCRUB_MARGIN` characters without a last token that
    cut left without its end (:func:`cut_tail`: a URL password longer than the margin)."""
    end = limit + SCRUB_MARGIN
    return text if len(text) <= end else cut_tail(text[:end])


def _bearer(match: re.Match[str]) -> str:
    return f"{match.group(1)} {REDACTED}"


def _auth(match: re.Match[str]) -> str:
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


def _auth_but(keep: re.Pattern[str], text: str) -> Callable[[re.Match[str]], str]:
    """:func:`_auth`, but a value that is all ``keep``'s stays."""

    def repl(match: re.Match[str]) -> str:
        if _kept(keep, text, match.start(3), match.end(3)):
            return match.group()
        return _auth(match)

    return repl


def _budgeted_credentials(text: str) -> str:
    """:func:`scrub_credentials` within the open call's budget."""
    if "@" in text and ":" in text:
        text = _sub(_AT_TOKEN, text, _url_token)
    if bearer_hint(text):
        text = _sub(_BEARER, text, _bearer)
    if token_hint(text):
        text = scrub_tokens(text, _sub)
    return text


def scrub_text(text: str, keep: re.Pattern[str] | None = None) -> str:
    """:func:`scrub_credentials`, and the values of secret-named ``name=value`` pairs
    replaced by ``[REDACTED]``.

    For obs' own messages, summaries, formatted bodies, exception text and the reprs of
    objects obs cannot walk, which may quote an endpoint, a header or a
    ``Namespace(hf_token=...)``. A secret pair that is percent-encoded (``api_key%3Dx``,
    ``api%5Fkey=x``, a URL in a query) is found in the decoded text, which is then
    written, redacted.
    ``keep``: pair values that stay (:func:`scrub_name`'s placeholders). A text a reader
    reads otherwise than its code points spell it (``password=x`` in fullwidth letters,
    a zero-width space inside it: :func:`~obs._fold.folded`) is scrubbed as read too, and
    written so when that found more.
    """
    scrubbed = _scrub_text(text, keep)
    if read_hint(scrubbed):  # what a reader reads, scrubbed (where it may differ)
        budget = _BUDGET
        if budget.chars is not None:  # a log call's value: within its decode budget
            budget.decode -= len(scrubbed)
            if budget.decode < 0:
                return REDACTED
        shown = folded(scrubbed)
        read = _scrub_text(shown, keep)
        if read != shown:
            return read
    return scrubbed


def _scrub_text(text: str, keep: re.Pattern[str] | None) -> str:
    """:func:`scrub_text` of the text as its code points spell it."""
    budget = _BUDGET
    pairs = has_separator(text)  # pair_hint, its first test once
    if pairs and budget.chars is not None:
        budget.scan -= len(text)  # a log call's value: the hint below within its budget
        if budget.scan < 0:
            budget.refused = True
            return REDACTED
    pairs = pairs and secret_hint(text)
    if not (pairs or credential_hint(text)):
        return text
    if budget.chars is not None:  # and the scrub (none left: no step to take, no char)
        if len(text) > budget.chars or budget.steps <= 0:
            budget.refused = True
            return REDACTED
        budget.chars -= len(text)
    try:
        text = _budgeted_credentials(text)
        if pairs:
            text = _scrub_pairs(text, keep)
            if "%" in text:  # an encoded separator (``%3D``, ``%253D``) or name (``api%5Fkey``)
                text = _scrub_encoded(text, keep)
    except _Spent:
        budget.refused = True
        return REDACTED
    return text


def scrub_name(text: str) -> str:
    """:func:`scrub_text` for a name (an event name, a logger's): a pair's value that is a
    placeholder (``password=%s``, ``token={}``) is a template and stays, so an event name
    without a secret in it is kept byte for byte."""
    return scrub_text(text, _TEMPLATE)


#: A value that is a %-format or ``str.format`` placeholder, quoted or not.
_TEMPLATE = lazy(
    r"(['\"]?)(?:%(?:\([^)]*\))?[#0 +-]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[a-zA-Z%]|\{[^{}]*\})\1"
)


def _scrub_pairs(text: str, keep: re.Pattern[str] | None) -> str:
    """``text`` with its secret pairs' values (authorization-like ones to the end of their
    field, a cookie header's to the end of its line) redacted, and what that cut short as
    userinfo scrubbed again."""
    paired = text
    if "\n" in text and _BLOCK_HINT.search(text):  # a YAML block scalar: all its lines
        paired = _redact_blocks(text)
    if "auth" in paired.lower():
        paired = _auth_pairs(paired, _auth if keep is None else _auth_but(keep, paired))
    if "ookie" in paired or "OOKIE" in paired:
        paired = _sub(_COOKIE_HEADER, paired, _auth if keep is None else _auth_but(keep, paired))
    paired = _redact_pairs(paired, keep)
    if paired != text:  # a pair cut short may now read as userinfo: scrub again
        return _budgeted_credentials(paired)
    return text


def _scrub_encoded(text: str, keep: re.Pattern[str] | None) -> str:
    """``text`` itself, or its percent-decoded text scrubbed when that held a secret pair
    or a credential (``api_key%3Dx``, ``api%5Fkey=x``, a URL in a query, its password
    too): written decoded, so no escape hides the value."""
    decoded = _percent_decoded(text)
    if decoded is not text and (pair_hint(decoded) or credential_hint(decoded)):
        scrubbed = _scrub_pairs(_budgeted_credentials(decoded), keep)
        if scrubbed != decoded:
            return scrubbed
    return text


def _percent_decoded(text: str) -> str:
    """``text`` percent-decoded until it no longer changes (at most three times: a URL in a
    query in a URL), or ``text`` itself when it holds no escape; each pass within the open
    call's :data:`SCRUB_DECODE`."""
    decoded = text
    budget = _BUDGET
    for _ in range(3):  # ``?next=%2Fp%3Ftoken%3Dx``: the pairs of its decoded text
        if budget.chars is not None:  # the decoded text is scanned too: its chars count
            budget.decode -= len(decoded)
            budget.chars -= len(decoded)
            if budget.decode < 0 or budget.chars < 0:
                raise _Spent
        again = unquote(decoded, errors="backslashreplace")
        if again == decoded:
            break
        decoded = again
    return text if decoded == text else decoded


_secret_name = is_secret_name  # names met in text: cached as field names are

#: A YAML block scalar under a name (``private_key: |``, ``password: >-``): the name, its
#: ``:`` and the indicator ending its line; the value is the lines below it.
_BLOCK = lazy(r"(?<![\w.-])([\w.-]++)(['\"]?[ \t]*+:[ \t]*+)[|>][-+1-9]{0,2}[ \t]*+(?=\r?\n)")
#: What :data:`_BLOCK` needs, searched first (C-level; ``<module>\n`` in a traceback is not).
_BLOCK_HINT = lazy(r":[ \t]*+[|>][-+1-9]{0,2}[ \t]*+\r?\n")
#: Names whose value is a secret whatever they are (:data:`_AUTH_PAIR`'s, a cookie header).
_AUTH_NAME = lazy(r"(?i)[\w.-]*auth(?:orization|entication)?|(?:set[-_])?cookie")


def _redact_blocks(text: str) -> str:
    """``text`` with the block scalar under each secret name redacted, all its lines (a
    PEM key in a Kubernetes Secret's ``stringData``); one pass, each block walked once."""
    parts: list[str] = []
    done = 0
    for found in _BLOCK.finditer(text):
        _step()
        name = found[1]
        if found.start() < done or not (_secret_name(name) or _AUTH_NAME.fullmatch(name)):
            continue
        parts.append(text[done : found.end(2)])
        parts.append(REDACTED)
        done = _block_end(text, found.start(), found.end(2))
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


def _block_end(text: str, name_at: int, at: int) -> int:
    """Where the YAML block scalar whose indicator is at ``at`` ends (``private_key: |``
    and a PEM key's lines): at the line break before the first line below it that is not
    blank and is indented no more than the line its name is on. One pass over the block."""
    line = text.rfind("\n", 0, name_at) + 1
    indent = name_at - line - len(text[line:name_at].lstrip(" \t"))
    end = pos = text.find("\n", at)
    while pos >= 0:
        nxt = text.find("\n", pos + 1)
        row = text[pos + 1 : nxt if nxt >= 0 else len(text)].rstrip("\r")
        body = row.lstrip(" \t")
        if body and len(row) - len(body) <= indent:
            break  # back at the name's indentation (or less): the block is over
        end = pos = nxt if nxt >= 0 else len(text)
        if nxt < 0:
            break
    return end


def _kept(keep: re.Pattern[str] | None, text: str, start: int, end: int) -> bool:
    """Whether the value at ``text[start:end]`` is all ``keep``'s (a placeholder: ``{}``
    reads as a value ``{`` cut at its ``}``)."""
    if keep is None:
        return False
    found = keep.match(text, start)
    return found is not None and found.end() >= end


#: The second words of :data:`SECRET_PAIRS` (``key``, ``id``): a name that is one of them
#: may have its first word before a blank (``API Key: x``, ``Session ID: x``).
_SECONDS = frozenset(second for _, second in SECRET_PAIRS)
_WORD_BEFORE = lazy(r"(?<![\w.-])([A-Za-z][\w.-]{0,31})[ \t]\Z")


def _two_words(text: str, at: int, found: str) -> bool:
    """Whether ``found`` (at ``at``) and the word a blank before it name a secret pair."""
    if found.lower() not in _SECONDS:
        return False
    before = _WORD_BEFORE.search(text, max(at - 33, 0), at)
    return before is not None and _secret_name(f"{before[1]}_{found}")


def _escaped_name(found: str) -> bool:
    """Whether a name met right after a backslash is secret without its first letter: an
    escaped blank's (``{\\n\\tapi_key: x}``, pretty-printed JSON escaped again)."""
    return found[0] in "ntr" and _secret_name(found[1:])


def _redact_pairs(text: str, keep: re.Pattern[str] | None = None) -> str:
    """``text`` with the value of each secret-named pair replaced by ``[REDACTED]``.

    A pair whose name is not secret consumes only its name and separator: its value is
    scanned for pairs in turn (``error: password=x``, ``config={'api_key': 'x'}``,
    ``url=http://h/?token=x`` each hide a secret pair inside another pair's value). One
    pass: each search starts where the last one ended.
    """
    if not ("=" in text or ":" in text or "," in text or "-" in text):
        return text  # no separator, no option: no pair (``api_key%3Dx`` before decoding)
    parts: list[str] = []
    done = pos = 0
    skip = _NOT_NAME.match  # no name starts at a blank or a delimiter: skipped in C
    budget = _BUDGET  # _step, inlined: a step is spent per name
    bounded = budget.chars is not None
    while (name := _PAIR_NAME.search(text, skip(text, pos).end())) is not None:  # type: ignore[union-attr]
        if bounded:
            if budget.steps <= 0:
                raise _Spent
            budget.steps -= 1
        pos = name.end()
        found = name[1] or name[3]  # a pair's name, or an option's
        if (
            not _secret_name(found)
            and not (text[name.start() - 1] == "\\" and name.start() and _escaped_name(found))
            and not (len(found) <= 4 and _two_words(text, name.start(), found))
        ):
            continue
        value = _PAIR_VALUE.match(text, pos)
        if value is None:
            continue
        if value[1] != REDACTED and not _kept(keep, text, pos, value.end()):
            parts.append(text[done:pos])
            parts.append(REDACTED)
            done = value.end()
        pos = value.end()
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)
