"""Secret names: which field names are secret. One key normaliser (:func:`key_words`:
case, ``-``, ``_``, ``.``, camelCase) and the tables of secret words, last words and word
pairs; :func:`obs._secrets.is_secret_name` decides a name with them (cached, within a log
call's budget), :mod:`obs._secrets` finds the pairs in text."""

from __future__ import annotations

__all__ = [
    "MAX_KEY",
    "NAME_HINTS",
    "SECRET_LAST_WORDS",
    "SECRET_PAIRS",
    "SECRET_PARTS",
    "SECRET_WORDS",
    "alnum",
    "hinted",
    "key_words",
    "secret_words",
    "separators_dropped",
]

import itertools

from obs._lazy_re import lazy

#: Where a name is cut for the word test (its start; its end is tested too).
MAX_KEY = 256

#: A key any of whose words (after :func:`key_words`) is one of these is secret.
SECRET_WORDS: frozenset[str] = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "secret",
        "secrets",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "cred",
        "creds",
        "passcode",
        "authorization",
        "bearer",
        "apikey",
        "privatekey",
        "accesskey",
        "secretkey",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "authtoken",
        "sessiontoken",
        "xapikey",
        "setcookie",
        "sessionid",
        "csrftoken",
        "pwd",
        "jwt",
        "dsn",
    }
)
#: ... or whose last word is one of these (``hf_token``, ``otlp_headers``, ``basic_auth``),
#: so ``max_token_num`` or ``num_tokens`` stay readable.
SECRET_LAST_WORDS: frozenset[str] = frozenset({"token", "headers", "header", "auth", "pass", "pat"})
#: ... or that has one of these adjacent word pairs (``X-Api-Key``, ``privateKey``).
SECRET_PAIRS: frozenset[tuple[str, str]] = frozenset(
    {
        ("api", "key"),
        ("private", "key"),
        ("access", "key"),
        ("secret", "key"),
        ("signing", "key"),
        ("encryption", "key"),
        ("client", "key"),
        ("ssh", "key"),
        ("session", "id"),
        ("session", "key"),
        ("api", "keys"),
        ("private", "keys"),
        ("access", "keys"),
        ("account", "key"),  # an Azure connection string's AccountKey
        ("shared", "key"),
        ("storage", "key"),
        ("subscription", "key"),
        ("master", "key"),
        ("hmac", "key"),
        ("auth", "key"),
        ("deploy", "key"),
        ("license", "key"),
    }
)
#: Substrings that make any key secret, whatever the word boundaries (``dbpassword``).
SECRET_PARTS: tuple[str, ...] = ("password", "passwd", "secret", "credential", "authorization")

_CAMEL = lazy(
    r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])(?![0-9]*[a-z])"
)  # camelCase, and a number after a word (``token2``, ``b64``; ``2fa`` stays whole)
_NON_WORD = lazy(r"[^a-z0-9]+")


def key_words(key: str) -> tuple[str, ...]:
    """A key's words: camelCase split, lower-cased, split on anything not a letter or digit."""
    return tuple(w for w in _NON_WORD.split(_CAMEL.sub("_", key[:MAX_KEY]).lower()) if w)


#: Words a secret name may end with after its secret word (``hf_token2``,
#: ``access_token_v2``, ``refresh_token_old``): dropped before the last word is looked at.
_TRAILING_WORDS = frozenset({"v", "b", "base", "old", "new", "prev", "previous", "next",
                             "current", "backup", "bak", "tmp", "temp", "orig", "raw",
                             "value", "val", "str", "b64", "base64", "hex", "enc", "encoded",
                             "default", "env"})  # fmt: skip


def secret_words(words: tuple[str, ...]) -> bool:
    """Whether a name's words (:func:`key_words`) name a secret: a secret word, a last
    word, a pair, or words written apart that together are one."""
    while words and (words[-1].isdigit() or words[-1] in _TRAILING_WORDS):
        words = words[:-1]  # a number or a version after the name: the name decides
    if not words:
        return False
    if words[-1] in SECRET_LAST_WORDS:
        return True
    if not _WHOLE.isdisjoint(words):  # C-level set tests, not a generator per word
        return True
    if not SECRET_PAIRS.isdisjoint(itertools.pairwise(words)):
        return True
    return len(words) > 1 and _joined_secret(words)


#: Secret words, and the pairs written as one word (``accountkey``, ``accesskeys``): the
#: normaliser drops case and separators, so ``AccessKeys`` and ``accesskeys`` are one name.
_WHOLE = SECRET_WORDS | {first + second for first, second in SECRET_PAIRS}
#: The longest secret word: a run of words joined longer than it is no secret word.
_JOINED = _WHOLE | SECRET_LAST_WORDS
#: Every proper start of such a word: a run of words that is none is no secret word's start.
_STARTS = frozenset(word[:n] for word in _JOINED for n in range(1, len(word)))


def _joined_secret(words: tuple[str, ...]) -> bool:
    """Whether adjacent words written together are a secret word (``pass_word``,
    ``A_P_I_KEY``): the normaliser ignores ``-``, ``_`` and case, so they do not split one;
    or, at the end, a last word (``hf_to_ken``). A run is extended only while it is a
    secret word's start: a set lookup or two per word, whatever the name."""
    last = len(words) - 1
    starts = _STARTS
    for start in range(last):
        run = words[start]
        if run not in starts:
            continue
        for end in range(start + 1, last + 1):
            run += words[end]
            if run in _WHOLE or (end == last and run in SECRET_LAST_WORDS):
                return True
            if run not in starts:
                break
    return False


#: Letters every secret word, last word and pair holds one of (lower case): a name with
#: none of them is not secret, decided by C-level searches (no word split). Spelled out in
#: :func:`_hinted` (a generator over this tuple costs four times as much).
NAME_HINTS = ("pass", "pwd", "secret", "cookie", "cred", "auth", "bearer", "key",
              "token", "session", "jwt", "dsn", "header", "pat")  # fmt: skip


def hinted(low: str) -> bool:
    """Whether ``low`` (a lower-cased name) holds any of :data:`NAME_HINTS`: each searched
    for only where one of its letters is (a character search, memchr: a long name without
    ``k``, ``p``, ``h``, ``c``, ``s``, ``j`` or ``b`` costs 7 of those, not 14 substring
    searches of 1 ns a character)."""
    return (
        ("k" in low and ("key" in low or "token" in low or "cookie" in low))
        or ("p" in low and ("pass" in low or "pwd" in low or "pat" in low))
        or ("h" in low and ("auth" in low or "header" in low))
        or ("c" in low and ("secret" in low or "cred" in low))
        or ("s" in low and ("session" in low or "dsn" in low))
        or ("j" in low and "jwt" in low)
        or ("b" in low and "bearer" in low)
    )


def alnum(low: bytes, short: bool) -> bool:
    """Whether a lowered ASCII name (both ends of a long one) is letters and digits only:
    ``bytes.isalnum`` (a table per byte; ``str.isalnum`` reads each character's Unicode
    class, ten times slower on a long name)."""
    return low.isalnum() if short else low[:MAX_KEY].isalnum() and low[MAX_KEY + 1 :].isalnum()


def separators_dropped(low: str) -> str:
    """``low`` without what the normaliser drops between words (``se_cret`` -> ``secret``)."""
    return _NON_WORD.sub("", low)
