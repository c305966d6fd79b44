"""Timestamps and renderers: one safe JSON object per line, or a readable console line.

The JSON renderer uses orjson; values orjson cannot encode go through
:func:`obs.encode.json_default`, and anything that still fails (cycles, huge ints,
non-str keys deep down) is re-encoded from a sanitised copy, so a line is always written
and is always one valid JSON object: newlines and control characters inside values are
escaped and can never forge a second line.
"""

from __future__ import annotations

__all__ = [
    "CONTROL_FIELDS",
    "ConsoleRenderer",
    "JSONRenderer",
    "TimeStamper",
    "strip_control_keys",
    "user_fields",
]

import os
import re
import sys
import time
from typing import TYPE_CHECKING, Any

import orjson

from obs._fields import CONTROL_FIELDS, CONTROL_SET, INT_FIELDS, PRIVATE_KEYS, user_fields
from obs._lokifit import LINE_ROOM, fold_line
from obs._secrets import close_budget, open_budget
from obs.encode import (
    MAX_KEY,
    MAX_STR,
    PLAIN_TYPES,
    json_default,
    safe_repr,
    scrub_credentials,
    to_jsonable,
)
from obs.levels import CLASS_NAMES, CRITICAL, ERROR, LEVEL_BY_NAME

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

MAX_LINE = 256 * 1024
#: Longest line whose text is scanned for ``null`` before the floats are looked at.
_SCAN_MAX = 2048
#: Loki's limits on what the filelog pipeline makes of a line (checked in :func:`_dumps` by
#: C-level tests: its length, its field count, the count of its keys at any depth): fields
#: (entries), and line bytes that surely fit (a number's text may grow 6x in Go's JSON).
_LOKI_FIELDS = LINE_ROOM.entries
_LOKI_SMALL = 5 * _LOKI_FIELDS  # a key costs 5 bytes at least: fewer keys than this
_LOKI_BYTES = LINE_ROOM.bytes // 6
#: The most a top-level field's metadata may exceed its text in the line (a number).
_NUMBER_GROWTH = 24


def _fold(event_dict: EventDict, out: bytes, option: int, *, finite: bool) -> bytes:
    """``out`` when the line fits Loki's limits as it is, else the folded line; ``b""`` when
    a key or value can be read only through the safe copy (a renderer in an application's
    own chain, given raw values), which :func:`_dumps` then writes and folds."""
    try:
        folded = fold_line(event_dict)
    except BaseException:  # a value's own repr raising, a key that is not text
        return b""
    return out if folded is None else _dumps(folded, option, finite=finite, fitted=True)


def _loki_bytes_due(out: bytes, event_dict: EventDict) -> bool:
    """Whether a line over _LOKI_BYTES may be over Loki's size limit after the filelog
    pipeline. With scalar values only, a field's metadata is its own text in the line plus
    at most a number's growth (``1e20`` is 21 digits in Go's formatting), so a long line
    of plain fields (a 1 MB string cut to 16 KiB) is not fitted for nothing; a map or a
    list (nested names are prefixed, a list's numbers may grow 4x) is fitted exactly. The
    values' types are looked at, not the line: scanning 16 KiB twice cost 20 us a call."""
    if not PLAIN_TYPES.issuperset(map(type, event_dict.values())):
        return True
    return len(out) + _NUMBER_GROWTH * len(event_dict) > LINE_ROOM.bytes


def strip_control_keys(event_dict: EventDict) -> EventDict:
    """Remove obs' internal ``_obs_*`` keys (in place) before rendering."""
    pop = event_dict.pop
    for key in PRIVATE_KEYS:
        pop(key, None)
    return event_dict


class TimeStamper:
    """Processor: ``timestamp`` as ISO 8601 UTC with microseconds and ``Z``, plus ``_obs_time_ns``.

    The ``%Y-%m-%dT%H:%M:%S`` prefix is cached per second, so the per-event cost is one
    ``time_ns()`` and one ``%`` format. A record that already has ``_obs_time_ns`` (a bridged
    stdlib record) keeps its own time.
    """

    __slots__ = ("_format", "_second")

    def __init__(self) -> None:
        self._second: int | None = None
        self._format = ""  # "%Y-%m-%dT%H:%M:%S.%%06dZ" of that second, for one % per event

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        ns = event_dict.get("_obs_time_ns")
        if type(ns) is not int:  # obs' own entries set an int or nothing
            ns = time.time_ns()
            event_dict["_obs_time_ns"] = ns
        event_dict["timestamp"] = self.stamp(ns)
        return event_dict

    def stamp(self, ns: int) -> str:
        """``ns`` (since the epoch) as ``2026-12-04T04:20:00.123456Z``."""
        sec = ns // 1_000_000_000
        if sec != self._second:
            self._format = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(sec)) + "%06dZ"
            self._second = sec
        return self._format % (ns // 1000 % 1_000_000)


_CONTROL_SET = CONTROL_SET


_INT_CONTROL = INT_FIELDS
#: User fields a line keeps at most; the rest is counted in ``truncated``.
MAX_FIELDS = 256
_I64 = (-(2**63), 2**63 - 1)


def _has_nonfinite(event_dict: EventDict) -> bool:
    """True when a top-level float is NaN or infinite (orjson writes those as ``null``).

    A plain loop, not ``any(genexpr)``: half the cost, paid on every line with a ``null``."""
    for v in event_dict.values():  # noqa: SIM110 - the loop is half the cost of any()
        if type(v) is float and v - v != 0.0:
            return True
    return False


def _control_value(key: str, value: Any) -> Any:
    """A control field as its plain type: never repr-quoted, never dropped."""
    if key in _INT_CONTROL and type(value) is int and _I64[0] <= value <= _I64[1]:
        return value
    if isinstance(value, str):
        try:
            return to_jsonable(value)
        except BaseException:
            return "<unrenderable>"
    return to_jsonable(value)


def _bounded_name(key: object) -> str:
    text = to_jsonable(key[: MAX_KEY * 2]) if isinstance(key, str) else safe_repr(key, MAX_KEY)
    return str(text)[:MAX_KEY]


_UNMADE = object()


def _made(made: dict[Any, Any], key: object, value: object) -> Any:
    """:func:`_jsonable` of ``value``, once per key across the passes of one line."""
    safe = made.get(key, _UNMADE)
    if safe is _UNMADE:
        safe = made[key] = _jsonable(value)
    return safe


def _jsonable(value: object) -> Any:
    """A value the chain made safe already (the Redactor scrubbed it, secret pairs too, or
    the fused path found nothing to scrub), made writable: URL passwords and bearer tokens
    are still taken out, as a safety net; the pair scan is not run a second time."""
    return to_jsonable(value, scrub_credentials)


def _safe_dict(
    event_dict: EventDict, value_limit: int | None, made: dict[Any, Any] | None = None
) -> dict[str, Any]:
    """The slow path's copy: control fields first and intact, then at most MAX_FIELDS user
    fields, each made safe on its own (``value_limit``: shorten each to that many chars;
    ``made``: the values already made safe by an earlier pass, by key, kept for the next)."""
    out: dict[str, Any] = {}
    for key in CONTROL_FIELDS:
        if key in event_dict:
            out[key] = _control_value(key, event_dict[key])
    kept = dropped = 0
    for key, value in event_dict.items():
        if key in _CONTROL_SET:
            continue
        if kept >= MAX_FIELDS:
            dropped += 1
            continue
        name = key if type(key) is str and len(key) <= MAX_KEY else _bounded_name(key)
        try:
            safe = _jsonable(value) if made is None else _made(made, key, value)
            if value_limit is not None and not isinstance(safe, (int, float, bool, type(None))):
                text = safe if isinstance(safe, str) else orjson.dumps(safe).decode()
                safe = text if len(text) <= value_limit else text[:value_limit] + "..."
        except BaseException:
            safe = safe_repr(value, value_limit or MAX_STR)
        out[name] = safe
        kept += 1
    if dropped or value_limit is not None:
        if "truncated" in out:
            out["user.truncated"] = out.pop("truncated")
        out["truncated"] = f"{dropped} fields dropped" if dropped else "values shortened"
    return out


#: Characters JSON allows raw but that break a line or reorder what a terminal shows, in
#: UTF-8: DEL and the C1 controls (CSI among them), NEL, LINE/PARAGRAPH SEPARATOR (line
#: splitters such as Python's splitlines break on them) and the bidi controls (a value
#: could make ``kubectl logs`` read otherwise).
#: UTF-8 lead bytes never occur inside another character, so a byte match is a character.
_UNSAFE_UTF8 = re.compile(
    b"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]|\xd8\x9c"
)


def _escape_unsafe(match: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(match.group().decode())


def _escape_breaks(out: bytes) -> bytes:
    return _UNSAFE_UTF8.sub(_escape_unsafe, out)


def _dumps(
    event_dict: EventDict,
    option: int = 0,
    *,
    finite: bool = False,
    flat: bool = False,
    fitted: bool = False,
) -> bytes:
    """JSON bytes for ``event_dict``, always one valid object with its control fields intact.

    orjson writes the common event directly (a ``null`` in its output costs one check of the
    top-level floats, not a re-encode); anything it cannot write as is (NaN/inf, a huge
    int, a lone surrogate, a line over :data:`MAX_LINE`) goes through a copy where only
    the offending values are replaced. Values longer than MAX_STR are cut before this, by
    the redactor, when the entry saw them. ``finite``: the caller knows every float value
    is finite, so a ``null`` needs no check; ``flat``: no value is a map or list. A line
    Loki would refuse after the collector's filelog pipeline is folded as the OTLP record
    is (:func:`obs._lokifit.fold_line`).
    """
    try:
        out = orjson.dumps(event_dict, default=json_default, option=option)
    except BaseException:  # a huge int, a lone surrogate, a non-str key
        out = b""
    # bytes.find, not `in`: `in` goes through the buffer protocol, 3x slower per line. On a
    # long line the scan costs more than looking at the floats (10 us for 16 KB of text).
    if (
        out
        and len(out) <= MAX_LINE
        and (
            finite
            or (len(out) <= _SCAN_MAX and out.find(b"null") < 0)
            or not _has_nonfinite(event_dict)
        )
    ):
        if (
            len(out) > _LOKI_SMALL
            and (
                len(event_dict) > _LOKI_FIELDS
                or (not flat and out.find(b"{", 1) >= 0 and out.count(b'":') > _LOKI_FIELDS)
                or (len(out) > _LOKI_BYTES and _loki_bytes_due(out, event_dict))
            )
            and not fitted
        ):
            out = _fold(event_dict, out, option, finite=finite)
        if out:
            return out if out.isascii() and out.find(b"\x7f") < 0 else _escape_breaks(out)
    made: dict[Any, Any] = {}  # each value is made safe (walked, scrubbed) once
    budget = open_budget()  # the walk again: bounded as the chain's was
    try:
        for limit in (None, 1024, 64):
            try:
                safe = _safe_dict(event_dict, limit, made)  # folded first: 300 fields of
                folded = None if fitted else fold_line(safe)  # 2 KB fit in one pass then
                out = orjson.dumps(safe if folded is None else folded, option=option)
            except BaseException:  # a value even the safe copy could not write: shorter
                out = b""
            if out and len(out) <= MAX_LINE:
                return out if out.isascii() and out.find(b"\x7f") < 0 else _escape_breaks(out)
    finally:
        close_budget(budget)
    last = {k: _control_value(k, event_dict[k]) for k in CONTROL_FIELDS if k in event_dict}
    last = {k: v[:1024] if isinstance(v, str) else v for k, v in last.items()}
    last["truncated"] = "all user fields dropped"
    return _escape_breaks(orjson.dumps(last, option=option))


#: What the kernel writes whole into a pipe or socket shared by several processes
#: (POSIX PIPE_BUF; 4096 on Linux): a longer line can interleave with another process's.
PIPE_LINE_MAX = 4096


def fit_line(event_dict: EventDict, limit: int = PIPE_LINE_MAX) -> bytes:
    """The event as one JSON line of at most ``limit`` bytes (newline included): user
    values shortened, then dropped; control fields kept, a traceback keeping its tail (the
    exception and the frames nearest to it). ``truncated`` says why the line was cut."""
    why = f"line cut to {limit} bytes for a shared pipe (PIPE_BUF); OBS_FILE and OTLP keep it whole"
    budget = open_budget()  # the walk again: bounded as the chain's was
    try:
        for value_limit in (1024, 256, 64):
            out = _safe_dict(event_dict, value_limit)
            out["truncated"] = why
            line = orjson.dumps(out, option=orjson.OPT_APPEND_NEWLINE)
            if len(line) <= limit:
                return _escape_breaks(line)
    finally:
        close_budget(budget)
    for keep in (limit // 2, limit // 4, 256, 0):
        last: dict[str, Any] = {}
        for key in CONTROL_FIELDS:
            if key in event_dict:
                value = _control_value(key, event_dict[key])
                if isinstance(value, str) and len(value) > keep:
                    tail = key == "exception.stacktrace"
                    value = ("..." + value[len(value) - keep :]) if tail else value[:keep] + "..."
                last[key] = value
        last["truncated"] = why
        line = _escape_breaks(orjson.dumps(last, option=orjson.OPT_APPEND_NEWLINE))
        if len(line) <= limit or keep == 0:
            return line
    return line  # pragma: no cover - the loop returns at keep == 0


class JSONRenderer:
    """Processor (last in a chain): the event as one JSON line (``str``, no newline)."""

    __slots__ = ()

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> str:
        return _dumps(strip_control_keys(event_dict)).decode()

    @staticmethod
    def dumps(event_dict: EventDict) -> bytes:
        """Encode an already-stripped event dict to JSON bytes, safely."""
        return _dumps(event_dict)

    @staticmethod
    def line(event_dict: EventDict) -> str:
        """An already-stripped event dict as one JSON line, ending in a newline."""
        return _dumps(event_dict, orjson.OPT_APPEND_NEWLINE).decode()

    @staticmethod
    def line_bytes(event_dict: EventDict, *, finite: bool = False, flat: bool = False) -> bytes:
        """An already-stripped event dict as one JSON line (UTF-8 bytes, newline included);
        ``finite``: no float value is NaN or infinite; ``flat``: every value is a scalar
        (no map or list: no nested key to count for Loki). Both known to the caller."""
        return _dumps(event_dict, orjson.OPT_APPEND_NEWLINE, finite=finite, flat=flat)


#: The console style of each level, in the levels table's order (DEBUG .. CRITICAL).
_LEVEL_STYLES = dict(
    zip(CLASS_NAMES, ("\x1b[2m", "\x1b[32m", "\x1b[33m", "\x1b[31;1m", "\x1b[41;97m"), strict=True)
)
_RESET = "\x1b[0m"
_BRIGHT = "\x1b[1m"
_DIM = "\x1b[2m"
_KEY = "\x1b[36m"  # cyan, as structlog's ConsoleRenderer
_VALUE = "\x1b[35m"  # magenta
_LOGGER = "\x1b[34m"  # blue
#: Width the event name is padded to, so key=value pairs of consecutive lines line up.
EVENT_COLUMN = 30
#: A console value longer than this is cut (JSON lines and OTLP keep it whole).
CONSOLE_VALUE_MAX = 160
_IDENT = re.compile(r"[A-Za-z0-9_.:-]+")
#: Fields the console shows in place (head, location, traceback), not as key=value.
_HEAD = frozenset(CONTROL_FIELDS) - {"stage", "outcome", "exception.type", "exception.message"}
#: Bidi controls (embeddings, overrides, isolates, marks): raw, they reorder what a terminal
#: shows, so a value could make a line read as something else (Trojan Source).
BIDI_CONTROLS = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
#: Format characters (Unicode category Cf, as of Unicode 14): zero-width spaces and joiners,
#: the soft hyphen, the byte-order mark, bidi controls, tag characters. A terminal shows
#: them as nothing, so a value could hide text or read as something else.
INVISIBLE = (
    0x00AD, *range(0x0600, 0x0606), 0x061C, 0x06DD, 0x070F, *range(0x0890, 0x0892), 0x08E2,
    0x180E, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2065),
    *range(0x2066, 0x2070), 0xFEFF, *range(0xFFF9, 0xFFFC), 0x110BD, 0x110CD,
    *range(0x13430, 0x13440), *range(0x1BCA0, 0x1BCA4), *range(0x1D173, 0x1D17B), 0xE0001,
    *range(0xE0020, 0xE0080),
)  # fmt: skip
_ESCAPES = (
    {i: f"\\x{i:02x}" for i in (*range(32), *range(127, 160))}  # C0, DEL and C1 (NEL)
    | {i: f"\\u{i:04x}" if i <= 0xFFFF else f"\\U{i:08x}" for i in (0x2028, 0x2029, *INVISIBLE)}
    | {10: "\\n", 13: "\\r", 9: "\\t"}
)


def _one_line(text: str) -> str:
    return text.translate(_ESCAPES)


def _value(value: Any, limit: int = CONSOLE_VALUE_MAX) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, (int, float, bool)) or value is None:
        text = str(value)
    else:
        try:
            text = orjson.dumps(
                value, default=json_default, option=orjson.OPT_NON_STR_KEYS
            ).decode()
        except BaseException:
            text = safe_repr(value, limit)
    return _one_line(text if len(text) <= limit else text[:limit] + "...")


def _site_dirs() -> tuple[str, ...]:
    return tuple(
        os.path.join(p, "")
        for p in sorted(sys.path, key=len, reverse=True)
        if p.endswith(("site-packages", "dist-packages"))
    )


class ShortPaths:
    """File paths as a developer reads them: relative to the working directory, or to the
    site-packages folder a library lives in (``vllm/engine/llm_engine.py``); else as is."""

    __slots__ = ("_cache", "_cwd", "_sites")

    def __init__(self, cwd: str | None = None) -> None:
        try:
            self._cwd = os.path.join(cwd or os.getcwd(), "")
        except OSError:  # the working directory was removed
            self._cwd = ""
        self._sites = _site_dirs()
        self._cache: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        short = self._cache.get(path)
        if short is None:
            short = path
            if self._cwd and path.startswith(self._cwd):
                short = path[len(self._cwd) :]
            else:
                for site in self._sites:
                    if path.startswith(site):
                        short = path[len(site) :]
                        break
            if len(self._cache) < 4096:
                self._cache[path] = short
        return short


class ConsoleRenderer:
    """Processor (last): ``time LEVEL [rN/nM] event  body   key=value ...  logger (file:line)``.

    The event (and its body) is padded to :data:`EVENT_COLUMN` so the pairs of consecutive
    lines line up; a stdlib record shows its formatted message, not the template too.
    Tracebacks follow (indented) for ERROR and above, or ``always`` / ``never``
    (``OBS_CONSOLE_TRACEBACKS``): an expected fallback is one line, not twenty. Control and
    bidi characters in every part are escaped, so one event is always one line that reads as
    what it holds.
    """

    __slots__ = ("_colors", "_paths", "_tracebacks")

    def __init__(
        self, colors: bool = False, tracebacks: str = "error", cwd: str | None = None
    ) -> None:
        self._colors = colors
        self._tracebacks = tracebacks
        self._paths = ShortPaths(cwd)

    def _style(self, style: str, text: str) -> str:
        return f"{style}{text}{_RESET}" if self._colors and text else text

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> str:
        ed = strip_control_keys(event_dict)
        level = _one_line(str(ed.get("severity_text", "")))
        parts = [
            self._style(_DIM, _one_line(str(ed.get("timestamp", "")))),
            self._style(_LEVEL_STYLES.get(level, ""), f"{level:<8}"),
        ]
        if ed.get("world_size", 1) != 1:
            parts.append(_one_line(f"[r{ed.get('rank')}/n{ed.get('node_rank', 0)}]"))
        parts.append(self._title(ed))
        extras = " ".join(
            f"{self._style(_KEY, _one_line(str(k)))}={self._style(_VALUE, _value(v))}"
            for k, v in ed.items()
            if k not in _HEAD
        )
        if extras:
            parts.append(extras)
        where = self._where(ed)
        if where:
            parts.append(where)
        line = "  ".join(parts).rstrip()
        trace = ed.get("exception.stacktrace")
        if trace and self._wants_trace(level, ed):
            line += "\n" + "\n".join(
                "    " + _one_line(t) for t in str(trace).rstrip().splitlines()
            )
        return line

    def _title(self, ed: EventDict) -> str:
        """The event (bold) and its body when it says more, padded to the event column."""
        event = _one_line(str(ed.get("event", "")))
        body = ed.get("body")
        text = _value(body, 1024) if body and body != event else ""
        if text and not _IDENT.fullmatch(event):  # a stdlib template: the message says it
            event, text = text, ""
        width = len(event) + (len(text) + 2 if text else 0)
        pad = " " * max(EVENT_COLUMN - width, 0)
        title = self._style(_BRIGHT, event)
        return f"{title}  {text}{pad}" if text else f"{title}{pad}"

    def _where(self, ed: EventDict) -> str:
        logger = ed.get("logger")
        out = self._style(_LOGGER, _one_line(str(logger))) if logger else ""
        path = ed.get("code.file.path")
        if path is not None:
            loc = f"({self._paths(str(path))}:{ed.get('code.line.number')})"
            out = (
                f"{out} {self._style(_DIM, _one_line(loc))}"
                if out
                else self._style(_DIM, _one_line(loc))
            )
        return out

    def _wants_trace(self, level: str, ed: EventDict) -> bool:
        if self._tracebacks == "always":
            return True
        if self._tracebacks == "never":
            return False
        number = ed.get("severity_number")
        if isinstance(number, int) and not isinstance(number, bool):
            return number >= 17  # OTel ERROR
        return LEVEL_BY_NAME.get(level, CRITICAL) >= ERROR
