"""The default chain, fused: one function that writes the same JSON line as the chain for
the common call, without the chain's per-processor passes and control keys.

The composable processors stay the single source of truth: the fused path is taken only
when they would do nothing but their plain case (JSON lines, no export sink or obs' own
``ExportSink``, no bound context or contextvars, no control keyword, plain short values
under names already known not to be secret, a plain event name, no text that may hold
a credential or a secret ``name=value`` pair), and ``tests/test_fused.py`` checks that it
writes byte-identical lines, and hands the export sink the same fields, level and time,
for every input the Hypothesis strategies generate.
Anything else (and any failure here) takes the chain.

A line ends with the rank's and the callsite's fields: they are written as JSON once per
rank info and callsite (the resolver makes a new info object whenever it recomputes:
fork, refresh, a new process group); the level's, event's and logger's fields once per
(level, event, logger). Per call orjson writes only the call's own fields, spliced
between them after the time; the event dict is built only where something reads it.
"""

from __future__ import annotations

__all__ = ["FusedLine", "event_dict_of"]

import time
from contextvars import copy_context as _copy_context
from sys import _getframe
from typing import TYPE_CHECKING, Any

import orjson

from obs._fields import CONTROL_SET, PRIVATE_KEYS
from obs._fold import read_secret_hint
from obs._once_cache import NOT_PLAIN
from obs._redactor import Redactor
from obs._secrets import bearer_hint, option_hint, pair_hint, token_hint
from obs.callsite import AddCallsite, Location
from obs.context import any_bound
from obs.encode import MAX_STR, PLAIN_TYPES
from obs.levels import NAME_BY_LEVEL, SEVERITY_BY_LEVEL, level_name, severity_number
from obs.rank import NOT_IMPORTED, RankInfo
from obs.render import _LOKI_BYTES, _LOKI_FIELDS, PIPE_LINE_MAX, TimeStamper, fit_line
from obs.render import _dumps as _line

if TYPE_CHECKING:
    from obs._logger import BoundLogger
    from obs._runtime import Runtime

#: The one type of keyword name the fused path takes: a str subclass (its own hash and
#: equality could pass the set checks as another name) is renamed by the chain.
_STR_ONLY = frozenset({str})
#: The option ``JSONRenderer.line_bytes`` passes to the encoder, which this path calls
#: directly (one frame fewer per line).
_NEWLINE = orjson.OPT_APPEND_NEWLINE
_orjson_dumps = orjson.dumps
#: A longer str value with a pair separator is left to the chain, which bounds what one
#: call spends looking for secret words (here the test would cost each value in full).
_HINTED_MAX = 512
#: The longest str value tested with ``isidentifier`` (a shortcut: an identifier fails
#: every test after it). It reads each character's Unicode class, 2-3 ns a character:
#: 300 values of 2 KB spent 1.4 ms in it, where the C-level searches cost a tenth.
_IDENT_MAX = 64
#: The fields every line ends with (the rank's, then the callsite's): written once per
#: rank info and callsite, spliced after the per-call fields.
_CALLSITE_NAMES = ("code.file.path", "code.line.number", "code.function.name")
_TAIL_NAMES = frozenset(RankInfo()._fields).union(_CALLSITE_NAMES)  # type: ignore[attr-defined]
#: The most keywords a spliced line has: it stays within Loki's field count (six fields
#: before them: the time, the level's two, the event, its body, the logger).
_KW_MAX = _LOKI_FIELDS - len(_TAIL_NAMES) - 6
#: The most callsites whose tails are kept, and the most (level, event, logger) whose
#: heads are (then they are written anew).
_TAILS_MAX = 1024
_HEADS_MAX = 1024
#: Keywords the chain treats specially (renames, drops or acts on) and the names of the
#: tail's fields (the chain keeps such a field where the call put it): a call with one
#: takes the chain.
_NOT_PLAIN = CONTROL_SET | NOT_PLAIN | frozenset(PRIVATE_KEYS) | _TAIL_NAMES


class FusedLine:
    """Writes a plain call's JSON line directly (see the module docstring)."""

    __slots__ = (
        "_callsite",
        "_chain",
        "_hand_over",
        "_heads",
        "_redactor",
        "_runtime",
        "_sink",
        "_stamper",
        "_tails",
        "_token_free",
    )

    def __init__(
        self, runtime: Runtime, callsite: AddCallsite, stamper: TimeStamper, redactor: Redactor
    ) -> None:
        self._runtime = runtime
        self._chain = runtime.processors  # fused only while the chain is this one
        self._sink = runtime.sink  # and while the export sink is this one
        #: ExportSink.hand_over: the event dict below is built per call, dropped after it
        self._hand_over = getattr(runtime.sink, "hand_over", None)
        self._callsite = callsite
        self._stamper = stamper
        self._redactor = redactor
        #: The rank info the tails were written for, and per callsite the line's tail:
        #: the rank and callsite fields as JSON (``,"rank":0,...}`` and the newline).
        self._tails: tuple[object, dict[tuple[int, int], tuple[Location | None, bytes]]] = (
            None,
            {},
        )
        #: Per (level, event, logger name): the line's JSON between the time and the
        #: call's own fields (see :func:`_head`).
        self._heads: dict[tuple[int, str, str], bytes] = {}
        #: Event names of 20 characters or more known to hold no token (``hf_...``): a
        #: set lookup per call instead of :func:`token_hint`'s tests.
        self._token_free: set[str] = set()

    def _token(self, event: str) -> bool:
        """Whether ``event`` may hold a token; remembered when it does not."""
        if token_hint(event):
            return True
        free = self._token_free
        if len(free) >= _HEADS_MAX:
            free.clear()
        free.add(event)
        return False

    def write(  # noqa: C901, PLR0911, PLR0912, PLR0915, PLR0917 - the hot path, inlined, positional
        self,
        logger: BoundLogger,
        level: int,
        method: str,
        event: str,
        kw: dict[str, Any],
        depth: int,
    ) -> bool:
        """Write the line (and hand the event to the export sink) and return True, or
        return False (nothing written): not plain."""
        if type(event) is not str or type(level) is not int or logger._context:
            return False
        if len(event) > MAX_STR or (not event.isascii() and read_secret_hint(event)):
            return False  # the chain cuts it first; reads it as read (fullwidth letters)
        # credential_hint, inlined here and below (two calls fewer per str); an identifier
        # holds neither a URL credential nor a pair, but may be a token (``hf_...``):
        if (
            not event.isidentifier()
            and ("@" in event or (len(event) >= 12 and bearer_hint(event)) or pair_hint(event))
        ) or (len(event) >= 20 and event not in self._token_free and self._token(event)):
            return False  # the chain scrubs it (a pair's value too, a placeholder kept)
        runtime = self._runtime
        if runtime.processors is not self._chain:
            return False  # the chain was changed (tests inject processors): it decides
        nonfinite = False
        if kw:
            if not (
                _NOT_PLAIN.isdisjoint(kw)
                and self._redactor._safe.issuperset(kw)  # never a caller's _obs_*: renamed
                and _STR_ONLY.issuperset(map(type, kw))
            ):
                return False
            for value in kw.values():  # one pass: a third of the cost of set/map/max/all
                cls = type(value)
                if cls is str:
                    size = len(value)
                    if size >= MAX_STR or (not value.isascii() and read_secret_hint(value)):
                        return False  # the chain's: cut first; read as read (fullwidth)
                    if (
                        # an identifier holds neither a URL credential nor a pair: one C
                        # test for most values; past _IDENT_MAX the tests below are cheaper
                        (size > _IDENT_MAX or not value.isidentifier())
                        and (
                            "@" in value
                            or (size >= 12 and bearer_hint(value))
                            or (
                                (  # has_separator, inlined
                                    "=" in value
                                    or ":" in value
                                    or "," in value
                                    or ("%" in value and ("%3" in value or "%2" in value))
                                    or ("-" in value and option_hint(value))
                                )
                                and (size > _HINTED_MAX or pair_hint(value))
                            )
                        )
                    ) or (  # a token (hf_..., AKIA...): token_hint's first tests inlined
                        size >= 20
                        and ("_" in value or "-" in value or "J" in value or "IA" in value)
                        and token_hint(value)
                    ):
                        return False  # a credential, a secret pair's value (or a long text
                        # that may hold one): the chain redacts it, within its budget
                elif cls is float:
                    if value - value != 0.0:  # NaN or inf (inf - inf is NaN): written as null
                        nonfinite = True
                elif cls not in PLAIN_TYPES:
                    return False
        sink = self._sink
        if runtime.sink is not sink or runtime.closed or (len(_copy_context()) and any_bound()):
            return False  # shutting down (the sink is taken first): the chain counts it
        ns = time.time_ns()
        stamper = self._stamper  # TimeStamper.stamp inlined while the second is the same
        stamp = (
            stamper._format % (ns // 1000 % 1_000_000)
            if ns // 1_000_000_000 == stamper._second
            else stamper.stamp(ns)
        )
        resolver = runtime.resolver  # RankResolver.current inlined while nothing moved
        probe = resolver._is_init
        info = (
            resolver._info
            if (probe() if probe is not None else NOT_IMPORTED._default_pg) is resolver._dist_state
            and not resolver._stale
            else resolver.current()
        )
        state = self._tails
        if state[0] is not info:  # recomputed (fork, refresh, a new group): tails anew
            state = self._tails = (info, {})
        tails = state[1]
        callsite = self._callsite
        try:  # AddCallsite.locate's walk over frames it knows, inlined
            frame = _getframe(depth - 1)  # its depth, from here
            skip = callsite._skip
            while skip.get(id(frame.f_code)):
                frame = frame.f_back  # type: ignore[assignment]
            key: tuple[int, int] | None = (id(frame.f_code), frame.f_lasti)
            entry = tails.get(key)  # type: ignore[arg-type]
        except (ValueError, AttributeError):  # a shallower stack: the walk decides
            key = entry = None
        if entry is None:  # a callsite not seen under this rank info
            where = callsite.locate(depth - 1)
            entry = _remember(tails, key, where, info, callsite)
        where, tail = entry
        line = b""
        name = logger._name  # a logger named 1 and one named True or 1.0: keys alike
        if tail and not nonfinite and not runtime.captures and type(name) is str:
            heads = self._heads
            head = heads.get((level, event, name))
            if head is None:  # the level's, the event's and the logger's fields, as JSON
                head = _head(heads, level, event, name)
            if head:
                try:  # the time and the call's own fields between the head and the tail
                    line = (
                        b'{"timestamp":"%b%b,%b%b'
                        % (stamp.encode(), head, _orjson_dumps(kw)[1:-1], tail)
                        if kw
                        else b'{"timestamp":"%b%b%b' % (stamp.encode(), head, tail)
                    )
                except Exception:
                    line = b""
                if line and (  # else: the whole line below, as render._dumps writes it
                    len(line) > _LOKI_BYTES
                    or len(kw) > _KW_MAX
                    or not line.isascii()
                    or line.find(b"\x7f") >= 0
                ):
                    line = b""
        ed: dict[str, Any] | None = None
        if not line:  # the event dict in full, as the chain builds it
            ed = _event_dict(stamp, level, event, name, kw, info, where)
            if runtime.captures:
                for capture in runtime.captures:
                    capture.append(dict(ed))
            try:  # render._dumps' first case, inlined: a short ASCII line orjson wrote as is
                line = b"" if nonfinite else _orjson_dumps(ed, option=_NEWLINE)
            except Exception:
                line = b""
            if (  # else: one it would escape, cut, fold for Loki or could not write
                not line
                or len(line) > _LOKI_BYTES
                or len(ed) > _LOKI_FIELDS
                or not line.isascii()
                or line.find(b"\x7f") >= 0
            ):
                line = _line(ed, _NEWLINE, finite=not nonfinite, flat=True)  # plain values
        output = runtime._output  # the attribute, not the property: a frame fewer
        shown = line
        if len(line) > PIPE_LINE_MAX and output.stream_is_pipe():
            if ed is None:
                ed = _event_dict(stamp, level, event, name, kw, info, where)
            shown = fit_line(ed)  # whole across processes sharing the pipe
        stream = output.stream
        if output.file is None and stream is not None and not output.posting:
            try:  # Output.write, inlined for the console-only case
                output.dropped += stream.write(shown)
            except Exception:
                output.dropped += 1
        else:
            output.write(shown, line)
        if output.dropped and output.dropped != runtime._drops_reported.get("write_failed"):
            runtime.drops_due = True  # a sink failed: say so (rate-limited) where it still works
        if sink is not None:  # what the chain hands it: the fields, the level and the time
            hand_over = self._hand_over
            if hand_over is not None:  # the parts (see event_dict_of): no dict built here;
                hand_over(ns, (level, event, name, kw, info, where, stamp))  # kw: not reused
            else:
                if ed is None:
                    ed = _event_dict(stamp, level, event, name, kw, info, where)
                ed["_obs_level"] = level
                ed["_obs_time_ns"] = ns
                sink(None, method, ed)
        return True


def _remember(
    tails: dict[tuple[int, int], tuple[Location | None, bytes]],
    key: tuple[int, int] | None,
    where: Location | None,
    info: Any,
    callsite: AddCallsite,
) -> tuple[Location | None, bytes]:
    """The callsite and the tail of its lines under ``info`` (b"": never spliced), kept
    under ``key`` where the callsite keeps its location (its code object kept alive)."""
    fields = dict(info._fields)
    if where is not None:
        fields.update(zip(_CALLSITE_NAMES, where, strict=True))
    try:
        out = _orjson_dumps(fields, option=_NEWLINE)
    except Exception:
        out = b""
    entry = (where, b"," + out[1:] if out and out.isascii() and out.find(b"\x7f") < 0 else b"")
    if key is not None and where is not None and callsite._where.get(key) is where:
        if len(tails) >= _TAILS_MAX:
            tails.clear()
        tails[key] = entry
    return entry


def _head(heads: dict[tuple[int, str, str], bytes], level: int, event: str, name: str) -> bytes:
    """Keep the JSON of a line's fields after the time (``","severity_text":...`` up to
    the logger's name) for ``level``, ``event`` and the logger ``name`` (b"": never
    spliced, text to escape) and return it."""
    try:
        out = _orjson_dumps(_head_fields(level, event, name))
    except Exception:
        out = b""
    head = b'",' + out[1:-1] if out and out.isascii() and out.find(b"\x7f") < 0 else b""
    if len(heads) >= _HEADS_MAX:
        heads.clear()
    heads[level, event, name] = head
    return head


def event_dict_of(parts: tuple[Any, ...], time_ns: int) -> dict[str, Any]:
    """The event dict the chain hands the export sink for what the fused path hands it:
    ``(level, event, logger name, keywords, rank info, callsite, time stamp)`` logged at
    ``time_ns`` (the fields, then the level and the time)."""
    level, event, name, kw, info, where, stamp = parts
    ed = _event_dict(stamp, level, event, name, kw, info, where)
    ed["_obs_level"] = level
    ed["_obs_time_ns"] = time_ns
    return ed


def _event_dict(  # noqa: PLR0917 - positional, as the line's fields come
    stamp: str,
    level: int,
    event: str,
    name: str,
    kw: dict[str, Any],
    info: Any,
    where: Location | None,
) -> dict[str, Any]:
    """The event dict the chain builds for a plain call, in its order."""
    ed: dict[str, Any] = {"timestamp": stamp, **_head_fields(level, event, name)}
    if kw:
        ed.update(kw)
    ed.update(info._fields)
    if where is not None:
        ed.update(zip(_CALLSITE_NAMES, where, strict=True))
    return ed


def _head_fields(level: int, event: str, name: str) -> dict[str, Any]:
    """A line's fields after the time, up to the logger's name (a spliced head's, or the
    start of the event dict), in the chain's order."""
    return {
        "severity_text": NAME_BY_LEVEL.get(level) or level_name(level),
        "severity_number": SEVERITY_BY_LEVEL.get(level) or severity_number(level),
        "event": event,
        "body": event,
        "logger": name,
    }
