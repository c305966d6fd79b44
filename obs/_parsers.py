"""Parsers for setting values: each takes (variable name, raw value) and returns the value
or raises :class:`obs.ConfigError` naming the variable and what it accepts."""

from __future__ import annotations

__all__ = [
    "BYTES",
    "FILE_FIELDS",
    "MILLIS",
    "NON_NEGATIVE",
    "POSITIVE_INT",
    "SECONDS",
    "choice",
    "file_template",
    "headers",
    "logger_names",
    "nonempty",
    "number",
    "pairs",
    "parse_bool",
    "parse_level",
    "pem_file",
    "url",
]

import math
import os
import re
import stat
import string
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from obs._lazy_re import lazy
from obs.errors import ConfigError
from obs.levels import LEVEL_BY_NAME, NAME_BY_LEVEL

T = TypeVar("T")


def parse_level(name: str, raw: object) -> int:
    """Parse a level name (any case) or number; ``name`` is what a ConfigError names."""
    accepted = "one of " + ", ".join(sorted(NAME_BY_LEVEL.values())) + " or an integer 0-100"
    if isinstance(raw, bool):
        raise ConfigError(name, raw, accepted)
    if isinstance(raw, int):
        if 0 <= raw <= 100:
            return int(raw)
        raise ConfigError(name, raw, accepted)
    if not isinstance(raw, str):
        raise ConfigError(name, raw, accepted)
    text = raw.strip().upper()
    if text in LEVEL_BY_NAME:
        return LEVEL_BY_NAME[text]
    if text.isascii() and text.isdigit() and int(text) <= 100:
        return int(text)
    raise ConfigError(name, raw, accepted)


def choice(*choices: str) -> Callable[[str, object], Any]:
    """A parser accepting one of ``choices`` (any case, surrounding space ignored)."""

    def parse(name: str, raw: object) -> Any:
        text = raw.strip().lower() if isinstance(raw, str) else None
        if text not in choices:
            raise ConfigError(name, raw, "one of " + ", ".join(choices))
        return text

    return parse


def number(
    kind: Callable[[str], T], *, minimum: float, maximum: float, what: str
) -> Callable[[str, object], T]:
    """A parser for a finite ``kind`` number in [minimum, maximum] (ASCII digits only)."""

    def parse(name: str, raw: object) -> T:
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise ConfigError(name, raw, what)
        try:
            text = raw.strip() if isinstance(raw, str) else raw
            # int() and float() take non-ASCII digits (superscripts, other scripts); nobody
            # means them in a config value, so such text is refused.
            value = kind(text if not isinstance(text, str) or text.isascii() else "x")  # type: ignore[arg-type]
            finite = math.isfinite(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):  # int(inf) is an OverflowError
            raise ConfigError(name, raw, what) from None
        if not finite or not minimum <= value <= maximum:  # type: ignore[operator]
            raise ConfigError(name, raw, what)
        if not isinstance(raw, str) and value != raw:
            raise ConfigError(name, raw, what)  # int(1.5) truncating
        return value

    return parse


def parse_bool(name: str, raw: object) -> bool:
    """true/false, 1/0, yes/no, on/off (any case); empty is false."""
    if isinstance(raw, bool):
        return raw
    if not isinstance(raw, str):
        raise ConfigError(name, raw, "true or false")
    text = raw.strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise ConfigError(name, raw, "true or false")


def nonempty(name: str, raw: object) -> str:
    """Stripped text that is not empty and has no NUL."""
    value = raw.strip() if isinstance(raw, str) else ""
    if not value or "\x00" in value:
        raise ConfigError(name, raw, "a non-empty string")
    return value


def pem_file(name: str, raw: object) -> str:
    """A readable PEM file (CA bundle, client key or certificate), checked now."""
    path = nonempty(name, raw)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the read forever
            raise IsADirectoryError(path)
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except (OSError, ValueError) as exc:
        raise ConfigError(name, raw, f"a readable PEM file ({type(exc).__name__})") from None
    if b"-----BEGIN" not in head:
        raise ConfigError(name, raw, "a PEM file (no -----BEGIN block found)")
    return path


def pairs(name: str, raw: object, *, breaks: bool = False) -> dict[str, str]:
    """Parse the OTel ``k=v,k2=v2`` list (values URL-decoded, as the spec says); a line
    break or NUL in one refuses the list unless ``breaks`` (then it is the caller's)."""
    if isinstance(raw, Mapping):
        return {str(k): str(v) for k, v in raw.items()}
    if not isinstance(raw, str):
        raise ConfigError(name, raw, "comma-separated key=value pairs")
    out: dict[str, str] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(name, raw, "comma-separated key=value pairs")
        key, value = unquote(key.strip()), unquote(value.strip())
        if not breaks and any(c in key + value for c in "\r\n\x00"):
            raise ConfigError(name, raw, "key=value pairs without line breaks")
        out[key] = value
    return out


#: A header name both an HTTP request (an RFC 9110 token) and gRPC metadata (lower case
#: ``[0-9a-z_.-]``, obs lower-cases it) can carry.
_HEADER_NAME = lazy(r"[A-Za-z0-9_.-]+")
#: A header value both can carry: visible ASCII and inner blanks (gRPC refuses any other
#: character in a text value, http.client anything outside Latin-1, both a line break).
_HEADER_VALUE = lazy(r"(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?")


def _header_items(name: str, raw: object) -> dict[str, str]:
    """:func:`pairs` without its refusal of line breaks: a header holding one is left out
    by :func:`headers` (as the SDK leaves it out), the others still sent."""
    return pairs(name, raw, breaks=True)


class Headers(dict[str, str]):
    """The OTLP headers obs sends; :attr:`refused` says why each header left out was (by
    its position: never its name or value, which may be a credential pasted in the wrong
    place; the SDK's own parser quotes the whole item)."""

    refused: tuple[str, ...] = ()


def headers(name: str, raw: object) -> Headers:
    """The OTLP headers: :func:`pairs` (a malformed list is refused whole), then each
    header whose name is not a header name (letters, digits, ``-``, ``_``, ``.``; not
    ``grpc-*``, gRPC's own) or whose value is not visible ASCII (inner blanks allowed; a
    line break or a NUL, percent-encoded too, is not) left out, as the OTel SDK leaves
    out an invalid header, and named in ``refused``: such a name (a blank, a ``:``)
    failed every gRPC export (``Illegal header key``) and every HTTP one, which requests
    refused, while the valid headers stay."""
    parsed = _header_items(name, raw)
    kept = Headers()
    refused = []
    for n, (key, value) in enumerate(parsed.items(), 1):
        if not _HEADER_NAME.fullmatch(key) or key.lower().startswith("grpc-"):
            refused.append(f"header {n} of {len(parsed)}: its name is not a header name")
        elif not _HEADER_VALUE.fullmatch(value):
            refused.append(f"header {n} of {len(parsed)}: its value is not visible ASCII")
        else:
            kept[key] = value
    kept.refused = tuple(refused)
    return kept


def logger_names(name: str, raw: object) -> tuple[str, ...]:
    """Comma-separated logger names (or a sequence of them); ``none`` is the empty list."""
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, (list, tuple)):
        raise ConfigError(name, raw, "comma-separated logger names, or none")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    if not names or (len(names) == 1 and names[0].lower() == "none"):
        return ()
    if any(not n.replace("_", "").replace(".", "").replace("-", "").isalnum() for n in names):
        raise ConfigError(
            name, raw, "comma-separated logger names (letters, digits, . _ -), or none"
        )
    return names


FILE_FIELDS = ("rank", "local_rank", "node_rank", "host", "pid")


_FILE_SAMPLE = {"rank": 0, "local_rank": 0, "node_rank": 0, "host": "host", "pid": 1}


def file_template(name: str, raw: object) -> str:
    """A path, optionally with ``{rank}``-style placeholders (checked now, filled later).

    Only the plain names are allowed (no ``{host.upper}``, ``{rank[0]}``), each with a
    format spec that fits its type (``{rank:03d}`` yes, ``{host:d}`` no).
    """
    text = nonempty(name, raw)
    accepted = "a file path; placeholders allowed: " + ", ".join(f"{{{f}}}" for f in FILE_FIELDS)
    try:
        fields = [(f, s, c) for _, f, s, c in string.Formatter().parse(text) if f is not None]
        plain = all(
            f in FILE_FIELDS and not c and "{" not in (s or "") and _small_spec(s or "")
            for f, s, c in fields
        )
        text.format(**_FILE_SAMPLE)
    except Exception:
        plain = False
    if not plain:
        raise ConfigError(name, raw, accepted)
    return text


def _small_spec(spec: str) -> bool:
    """A format spec without a width or precision over 64 (``{rank:>999999999}`` would
    build a path of any size)."""
    return all(int(n) <= 64 for n in re.findall(r"\d+", spec))


def url(name: str, raw: object) -> str:
    """An http(s) URL with a host and a valid port."""
    text = raw.strip() if isinstance(raw, str) else ""
    try:
        parsed = urlparse(text)
        host = parsed.hostname
        parsed.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ConfigError(
            name, raw, "an http:// or https:// URL with a host and a valid port"
        ) from None
    if parsed.scheme not in {"http", "https"} or not host or any(c.isspace() for c in text):
        raise ConfigError(name, raw, "an http:// or https:// URL with a host")
    return text


POSITIVE_INT = number(int, minimum=1, maximum=2**31 - 1, what="an integer >= 1 (at most 2**31-1)")
BYTES = number(int, minimum=1, maximum=2**48, what="an integer >= 1 (bytes, at most 2**48)")
NON_NEGATIVE = number(float, minimum=0.0, maximum=1e9, what="a number >= 0 (finite)")
MILLIS = number(
    float, minimum=1.0, maximum=86_400_000.0, what="a number > 0 (milliseconds, 1 to 86400000)"
)
SECONDS = number(
    float, minimum=1e-3, maximum=86400.0, what="a number > 0 (seconds, 0.001 to 86400)"
)
