"""Once-per-key dedup and throttling, bounded, thread-safe, with exact repeat counts.

Modes: ``once`` (per process lifetime), ``every_n`` and ``every_seconds``. Suppressed
repeats are counted per key and reported as ``log_repeats_suppressed`` summaries,
periodically and at flush/shutdown, so an error that keeps repeating stays visible.

Capacity: at most ``capacity`` keys are retained, and a retained key never fires again
(no LRU eviction, unlike ``functools.lru_cache``). Once the table is full, keys that are
not retained share one overflow slot: the first of them is emitted (marked
``dedup_overflow=True``), the rest are suppressed and counted until the next summary
window, and ``obs_dedup_capacity_reached`` is reported once. Memory stays bounded and
nothing spams or disappears silently. An alert stage's record (a terminal failure, what
alerts key on) is keyed per rank (a forked child of another rank is not its parent's
repeat) and never goes through the shared slot: past capacity its key takes one of
:data:`ALERT_RESERVE` more entries, and past those it is written, never suppressed.

Keys hold no caller's object: anything but str/int/float/bool/None/bytes is keyed by its
bounded safe ``repr`` (unhashable values never raise; an exception keeps no frames alive).
Values written differently are different keys (1, 1.0 and True; 0.0 and -0.0).
"""

from __future__ import annotations

__all__ = [
    "ALERT_RESERVE",
    "HIT",
    "HIT_DUE",
    "NOT_PLAIN",
    "OVERFLOW",
    "Dedup",
    "Deduper",
    "OnceCache",
    "key_text",
    "make_key",
    "ranked_key",
]

import itertools
import math
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from obs import errors
from obs._dedup_text import iso_time, key_text
from obs._fields import CALL_KEYWORDS, NOT_KEYED
from obs._secrets import cut_tail
from obs.encode import PLAIN_TYPES, safe_repr, to_jsonable
from obs.rank import NOT_IMPORTED, import_watch
from obs.severity import DEFAULT_POLICY, StagePolicy

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

    from obs.rank import RankInfo, RankResolver

Key = tuple[Any, ...]
OVERFLOW_KEY = "<overflow>"
#: What :meth:`Deduper.admit` returns for an event let through the shared overflow slot: truthy
#: (so it is emitted), and the caller marks the event ``dedup_overflow=True``.
OVERFLOW: Literal["overflow"] = "overflow"
#: Entries past capacity kept for alert keys only: a full table never hides a new alert.
ALERT_RESERVE = 1024

#: Fields that are the same for every call of a process, or are the key's other parts.
_NOT_KEY = NOT_KEYED

#: Strings longer than this are keyed by length, prefix and hash, not held whole.
_LONG = 1024

#: A list or tuple of at most this many plain scalars (texts up to _SEQ_TEXT chars, ints in
#: int64) is keyed by its items and their types, as scalars are, and kept by the once cache.
_SEQ_ITEMS, _SEQ_TEXT, _INT64 = 16, 64, 2**63


def flat_types(value: object) -> tuple[type, ...] | None:
    """The item types of a short list or tuple of plain scalars (no NaN), else None."""
    cls = type(value)
    if (cls is not list and cls is not tuple) or len(value) > _SEQ_ITEMS:  # type: ignore[arg-type]
        return None
    for item in value:  # type: ignore[attr-defined]
        kind = type(item)
        if kind is str:
            if len(item) > _SEQ_TEXT:
                return None
        elif kind is int:
            if not -_INT64 <= item < _INT64:
                return None
        elif kind is float:
            if item != item or not item:  # noqa: PLR0124 - NaN never equals itself; -0.0
                return None  # equals 0.0 but writes "-0.0": both keep the JSON-text key
        elif kind is not bool and item is not None:
            return None
    return tuple(map(type, value))  # type: ignore[call-overload]


def _kv(value: object) -> object:
    cls = type(value)
    if cls is str:
        return value if len(value) <= _LONG else _long(value)  # type: ignore[arg-type]
    if cls is int or cls is bool or value is None:
        return (cls, value)
    if isinstance(value, bytes) and cls is bytes:
        return (cls, value) if len(value) <= _LONG else (cls, _long(value.decode("latin-1")))
    if cls is float:  # a zero keeps its sign: -0.0 equals 0.0 but writes "-0.0"
        part = (cls, value) if not math.isnan(value) else (cls, "nan")  # type: ignore[arg-type]
        return part if value else (*part, math.copysign(1.0, value))  # type: ignore[arg-type]
    if cls is list or cls is tuple:  # [1, 2] and (1, 2) are one key, as their JSON is
        types = flat_types(value)
        if types is not None:
            return ("seq", tuple(value), types)  # type: ignore[arg-type]
    # Anything else by its bounded, redacted JSON form: never held, never unhashable.
    return ("repr", safe_repr(to_jsonable(value), 200))


def ranked_key(key: Key, rank: object) -> Key:
    """An alert's ``key`` with its rank: one rank's alert is never another's repeat."""
    return (*key[:3], "rank", _kv(rank), *key[3:])


def _long(text: str) -> tuple[str, int, str, int]:
    return ("long", len(text), cut_tail(text[:256]), hash(text))  # its start: summaries show it


def make_key(  # noqa: C901, PLR0911 - the hot path: a fast return per common shape
    logger: str,
    level: int,
    event: str,
    fields: Mapping[str, Any],
    once_key: object = None,
) -> Key:
    """The dedup key: ``(logger, level, event, fields...)``, or built from ``once_key``.

    ``once_key="text"`` names the key outright; ``once_key=("field", ...)`` keys on those
    fields only. 1, 1.0 and True are different keys (vLLM's cache merges them).
    """
    if once_key is not None:
        if type(once_key) is str:
            return (logger, level, "once_key", _kv(once_key))
        if isinstance(once_key, Sequence) and not isinstance(once_key, (str, bytes)):
            try:
                names = [k if type(k) is str else safe_repr(k, 200) for k in once_key[:64]]
                return (logger, level, event, *[x for k in names for x in (k, _kv(fields.get(k)))])
            except Exception:  # an odd sequence: keyed by its stable encoding
                return (logger, level, "once_key", ("repr", safe_repr(once_key, 200)))
        return (logger, level, "once_key", _kv(once_key))
    if not fields:
        return (logger, level, event)
    if len(fields) == 1:
        for name, value in fields.items():
            if name in _NOT_KEY or name[:5] == "_obs_" or (name == "body" and value == event):
                return (logger, level, event)
            return (
                logger,
                level,
                event,
                name,
                value if type(value) is str and len(value) <= _LONG else _kv(value),
            )
    parts: list[object] = [logger, level, event]
    for name in sorted(fields):
        if name in _NOT_KEY or name[:5] == "_obs_":
            continue
        if name == "body" and fields[name] == event:  # the default body is the event itself
            continue
        parts.append(name)
        parts.append(_kv(fields[name]))
    return tuple(parts)


class _Entry:
    __slots__ = (
        "event",
        "fast",
        "fast_base",
        "first_seen",
        "key_text",
        "last_emit",
        "last_seen",
        "level",
        "logger",
        "pending",
        "seen",
        "suppressed",
    )

    def __init__(self, key_text: str, event: str, level: int, logger: str, now: float) -> None:
        self.key_text = key_text
        self.event = event
        self.level = level
        self.logger = logger
        self.seen = 1
        self.pending = 0
        self.suppressed = 0
        self.first_seen = now
        self.last_seen = now
        self.last_emit = now
        #: Lock-free repeat counter (``next()`` on it is one atomic C call under the GIL);
        #: :meth:`fold` moves its hits into ``pending``.
        self.fast = itertools.count()
        self.fast_base = 0

    def fold(self) -> None:
        """Move the lock-free hits into ``pending`` (call under the table's lock)."""
        mark = next(self.fast)  # consumes one value itself, hence the +1 below
        self.pending += mark - self.fast_base
        self.fast_base = mark + 1


class Deduper:
    """The key table: decides emit-or-suppress and keeps the repeat counts."""

    __slots__ = (
        "_capacity",
        "_clock",
        "_entries",
        "_lock",
        "_lockfree",
        "_next_summary",
        "_overflow",
        "_summary_seconds",
        "capacity_reached",
        "summary_due",
    )

    def __init__(
        self,
        capacity: int = 10_000,
        summary_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._summary_seconds = summary_seconds
        self._clock = clock
        self._entries: dict[Key, _Entry] = {}
        self._lock = threading.Lock()
        #: Chosen once: the lock-free repeat count needs the GIL (not a free-threaded build).
        self._lockfree = bool(getattr(sys, "_is_gil_enabled", lambda: True)())
        self._overflow: _Entry | None = None
        self._next_summary = clock() + summary_seconds if summary_seconds else math.inf
        #: Set when a periodic summary is due; the runtime drains it after the event.
        self.summary_due = False
        #: Set once, when the table first fills; the runtime reports it and clears it.
        self.capacity_reached = False

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def lockfree(self) -> bool:
        """True when :meth:`repeat` takes no lock (a GIL build): callers may skip guarding it."""
        return self._lockfree

    @property
    def capacity(self) -> int:
        """How many keys are retained at most."""
        return self._capacity

    def admit(
        self,
        key: Key,
        *,
        every_n: int = 0,
        every_seconds: float = 0.0,
        event: str = "",
        level: int = 0,
        logger: str = "",
        alert: bool = False,
    ) -> bool | Literal["overflow"]:
        """True when the event must be emitted, False when it is a counted repeat.

        With neither ``every_n`` nor ``every_seconds`` the mode is once. :data:`OVERFLOW`
        (truthy) when the table is full and the event is emitted through the overflow slot.
        An ``alert`` key never shares that slot: a full table keeps it in the reserve, and
        past the reserve it is emitted (:data:`OVERFLOW`), never suppressed.
        """
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                if len(self._entries) >= self._capacity:
                    if not alert:
                        return self._admit_overflow(now)
                    if len(self._entries) >= self._capacity + ALERT_RESERVE:
                        return OVERFLOW
                event = event if type(event) is str else safe_repr(event, 200)  # text only
                self._entries[key] = _Entry(key_text(key), event, level, logger, now)
                return True
            entry.seen += 1
            entry.last_seen = now
            if every_n > 0:
                emit = (entry.seen - 1) % every_n == 0
            elif every_seconds > 0:
                emit = now - entry.last_emit >= every_seconds
            else:
                emit = False
            if emit:
                entry.last_emit = now
                return True
            entry.pending += 1
            if now >= self._next_summary:
                self.summary_due = True
            return False

    def repeat(self, key: Key) -> bool:
        """Fast path for once mode: True (and counted) when ``key`` is already retained.

        False means "not known yet": call :meth:`admit`, which decides under the lock, so
        racing first calls still produce exactly one emit and an exact count.
        """
        entry = self._entries.get(key)
        if entry is None:
            return False
        now = self._clock()
        if self._lockfree:
            next(entry.fast)
            entry.last_seen = now  # a racing writer's time is as good as ours
        else:
            with self._lock:
                entry.pending += 1
                entry.last_seen = now
        if now >= self._next_summary:
            self.summary_due = True
        return True

    def _admit_overflow(self, now: float) -> bool | Literal["overflow"]:
        entry = self._overflow
        if entry is None:
            self._overflow = _Entry(OVERFLOW_KEY, OVERFLOW_KEY, 0, "obs.dedup", now)
            self.capacity_reached = True
            return OVERFLOW
        entry.seen += 1
        entry.last_seen = now
        window = max(self._summary_seconds, 1.0)
        if now - entry.last_emit >= window:
            entry.last_emit = now
            return OVERFLOW
        entry.pending += 1
        if now >= self._next_summary:
            self.summary_due = True
        return False

    def suppressed(self, key: Key) -> int:
        """Total repeats suppressed for ``key`` so far (0 for an unknown key)."""
        entry = self._entries.get(key)
        if entry is None:
            return 0
        with self._lock:
            entry.fold()
            return entry.suppressed + entry.pending

    def drain(self) -> list[dict[str, Any]]:
        """Summaries of keys with repeats since the last drain (and reset those counts)."""
        now = self._clock()
        out: list[dict[str, Any]] = []
        with self._lock:
            self.summary_due = False
            self._next_summary = now + self._summary_seconds if self._summary_seconds else math.inf
            entries = list(self._entries.values())
            if self._overflow is not None:
                entries.append(self._overflow)
            for entry in entries:
                entry.fold()
                if not entry.pending:
                    continue
                out.append(
                    {
                        "dedup_key": entry.key_text,
                        "original_event": entry.event,
                        "suppressed_count": entry.pending,
                        "first_seen": iso_time(entry.first_seen),
                        "last_seen": iso_time(entry.last_seen),
                        "_obs_level": entry.level,
                        "_obs_logger": entry.logger,
                    }
                )
                entry.suppressed += entry.pending
                entry.pending = 0
        return out


class Dedup:
    """Processor: apply ``once``/``once_key``/``every_n``/``every_seconds`` from the event.

    Events without those keys pass untouched (one dict lookup). A suppressed event
    raises :class:`structlog.DropEvent` and is counted. An event of one of ``policy``'s
    alert stages (after :class:`obs.severity.TagSeverity` named it) is keyed with its rank
    and admitted as an alert (see :meth:`Deduper.admit`).
    """

    __slots__ = ("_alerts", "_deduper", "_on_bad_argument")

    def __init__(
        self,
        deduper: Deduper | None = None,
        on_bad_argument: Callable[[str, object], None] | None = None,
        policy: StagePolicy = DEFAULT_POLICY,
    ) -> None:
        self._deduper = deduper if deduper is not None else Deduper()
        #: Told about an ``every_n``/``every_seconds`` that is not a positive number.
        self._on_bad_argument = on_bad_argument
        self._alerts = frozenset(name for name, rule in policy.rules.items() if rule.alert)

    @property
    def deduper(self) -> Deduper:
        """The key table this processor uses."""
        return self._deduper

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        once = event_dict.pop("once", None)
        once_key = event_dict.pop("once_key", None)
        every_n = event_dict.pop("every_n", None)
        every_seconds = event_dict.pop("every_seconds", None)
        if every_n is not None:
            every_n = self._positive("every_n", every_n, int)
        if every_seconds is not None:
            every_seconds = self._positive("every_seconds", every_seconds, float)
        if not (once or once_key is not None or every_n or every_seconds):
            return event_dict
        name = str(event_dict.get("logger", ""))
        level = event_dict.get("_obs_level", 0)
        level = level if type(level) is int else 0
        event = event_dict.get("event", "")
        event = event if type(event) is str else safe_repr(event, 200)
        key = make_key(name, level, event, _with_exception(event_dict), once_key)
        stage = event_dict.get("stage")
        alert = type(stage) is str and stage in self._alerts
        key = ranked_key(key, event_dict.get("rank")) if alert else key  # per rank (a fork's)
        admitted = self._deduper.admit(
            key,
            every_n=every_n or 0,
            every_seconds=every_seconds or 0.0,
            event=event,
            level=level,
            logger=name,
            alert=alert,
        )
        if not admitted:
            raise errors.DropEvent
        if admitted == OVERFLOW:
            event_dict["dedup_overflow"] = True
        return event_dict

    def _positive(self, name: str, value: object, kind: Callable[[Any], Any]) -> Any:
        """``value`` as a positive finite number, else None (no throttling) and a report."""
        try:
            number = kind(value) if not isinstance(value, bool) else 0
            if number > 0 and math.isfinite(number) and number == value:
                return number
        except (TypeError, ValueError, OverflowError):
            pass
        if self._on_bad_argument is not None:
            self._on_bad_argument(name, value)
        return None


def _with_exception(event_dict: EventDict) -> EventDict:
    """The fields the key is made of: ``exc_info=True`` stands for the exception being
    handled (two different failures logged from ``except`` blocks are two keys)."""
    exc_info = event_dict.get("exc_info")
    if exc_info is None or exc_info is False or isinstance(exc_info, (BaseException, tuple)):
        return event_dict
    handled = sys.exc_info()[1]
    return event_dict if handled is None else {**event_dict, "exc_info": handled}


# -- the *_once fast path ----------------------------------------------------------------
# A suppressed ``*_once`` repeat for the cost of a dict lookup.
#
# The full path decides the scope, builds the dedup key and looks it up. For a plain call
# (no positional args on a structlog-style logger, no bound context, no control keyword but
# a plain ``scope``: no ``stage``, ``once_key``, ``body``), the :class:`OnceCache` remembers
# the last few exact argument snapshots per ``(logger, level, event)`` with the key they
# made, so a repeat only compares the arguments and counts the deduper's own entry: counts
# stay exact and shared with the full path. Values match only when their types match too
# (1, 1.0 and True never stand for each other; a str Enum is not its text). A call the
# scope keeps quiet on this rank is remembered without an entry: its repeat is answered
# (nothing written, nothing counted) without the rank probe. The scope is part of the
# snapshot (a keyword of the structlog-style call; the slot ``(msg, scope)`` of a drop-in
# call with a scope other than "local"). The cache is bounded, is dropped when the rank
# info changes (a scope decided for rank 0 is not rank 3's), after fork (the rank info is
# recomputed) and at shutdown, and is off without a GIL.

#: Keywords that change how a call is scoped or keyed: such calls take the full path.
NOT_PLAIN = frozenset(CALL_KEYWORDS) | {"stage", "body"}
#: Those the once cache cannot answer (a plain ``scope`` it can: it is in the snapshot).
NOT_CACHED = NOT_PLAIN - {"scope"}
_MAX_KEYS = 4096
_PER_EVENT = 4

#: (arguments, the first argument's name or position and type (None: no argument), the
#: others' (name or position, type), level, logger, the deduper's entry, its counter,
#: the deduper's clock: a local call in the hit, not a method lookup on the table).
Snapshot = tuple[
    Any, Any, Any, Any, Any, tuple[tuple[Any, Any], ...], int, str, "_Entry | None", Any, Any
]


_UNSEEN = object()

#: What :meth:`OnceCache.repeat` returns for a counted repeat, and for one after which the
#: periodic summaries are due (the caller drains them); a miss is 0.
HIT, HIT_DUE = 1, 2


class _Unknown:
    """The world holder while the table has no rank info yet, or where torch has none:
    its ``_default_pg`` never matches, so every hit looks again (:meth:`OnceCache._sync`)."""

    __slots__ = ()
    _default_pg = object()  # no group the table ever records


_UNKNOWN = _Unknown()


def _shape(value: object) -> object:
    """What a snapshot checks a value's type against: its type for a plain scalar, the
    type and item types for a flat sequence; None where the cache cannot compare it (NaN
    never equals itself; a long text is keyed by hash)."""
    cls = type(value)
    if cls in PLAIN_TYPES:  # None: NaN never equals itself, -0.0 equals 0.0, a long text
        kept = value == value and not (cls is str and len(value) > _LONG)  # type: ignore[arg-type]  # noqa: PLR0124
        return cls if kept and (value or cls is not float) else None
    types = flat_types(value)
    return None if types is None else (cls, types)


def _same(value: object, shape: object) -> bool:
    """A flat sequence of the remembered shape (the rare branch of a hit's type check)."""
    return (
        type(shape) is tuple and type(value) is shape[0] and tuple(map(type, value)) == shape[1]  # type: ignore[call-overload]
    )


def _all_same(args: Any, types: tuple[tuple[Any, Any], ...]) -> bool:
    """Each argument after the second of the remembered type (a call with several)."""
    return all(type(args[k]) is cls or _same(args[k], cls) for k, cls in types)


class OnceCache:
    """Per runtime: event -> the last few (arguments, their types, level, logger, entry)."""

    __slots__ = (
        "_clock",
        "_deduper",
        "_generation",
        "_info",
        "_pg",
        "_resolver",
        "_table",
        "_world",
        "enabled",
    )

    def __init__(self, deduper: Deduper, resolver: RankResolver) -> None:
        self._deduper = deduper
        self._clock = deduper._clock
        self._resolver = resolver
        self._table: dict[object, list[Snapshot]] = {}
        self._info: RankInfo | None = None
        #: torch's process-group holder and the default group the info was computed for:
        #: a hit compares them inline (one attribute read) instead of probing the resolver.
        self._world: Any = _UNKNOWN
        self._pg: object = None
        self._generation = -1
        resolver.on_change = self.invalidate  # fork, refresh, a recompute: look again
        #: Off without a GIL: the deduper's lock-free count is what makes a hit cheap.
        self.enabled = deduper.lockfree

    def __len__(self) -> int:
        return sum(map(len, self._table.values()))

    def repeat(  # noqa: PLR0911 - the *_once hot path: a fast return per outcome
        self, name: str, level: int, event: object, args: Any
    ) -> int:
        """:data:`HIT` (counted) when this exact call is a remembered repeat: equal
        arguments, each of the same type as the remembered one (per name for keywords, per
        position for positional args); :data:`HIT_DUE` when summaries are due too (the
        caller drains them); 0 when not. Never raises: an odd value takes the full path."""
        try:  # a value whose __eq__ raises (a numpy array) must not reach the caller
            rows = self._table.get(event)
            if rows is None:
                return 0
            if self._world._default_pg is not self._pg and not self._sync():
                self._table.clear()  # the rank changed: scopes must be decided again
                return 0
            for snap, key, cls, key2, cls2, more, row_level, row_name, entry, count, clock in rows:
                if (
                    snap == args
                    and row_level == level
                    and row_name == name
                    and (key is None or type(args[key]) is cls or _same(args[key], cls))
                    and (key2 is None or type(args[key2]) is cls2 or _same(args[key2], cls2))
                    and (not more or _all_same(args, more))
                ):
                    if entry is None:  # the scope keeps this rank quiet: nothing to count
                        return HIT
                    # Counted on the deduper's own entry, as Deduper.repeat does (inlined).
                    now = clock()
                    next(count)  # the deduper's own lock-free count: exact and shared
                    entry.last_seen = now
                    if now < self._deduper._next_summary:
                        return HIT
                    self._deduper.summary_due = True
                    return HIT_DUE
        except Exception:
            return 0
        return 0

    def remember(  # noqa: PLR0917 - the call's parts, as repeat() takes them
        self,
        name: str,
        level: int,
        event: object,
        args: Any,
        key: Key | None,
        info: RankInfo | None = None,
    ) -> None:
        """Keep this call's arguments with the deduper's entry for ``key`` (only plain
        calls whose key is retained; a few per event). ``key`` None: the scope keeps this
        rank quiet for this call. ``info``: the rank info the scope was decided with (None:
        no decision); not kept when the rank changed since (another thread moved it)."""
        if not self.enabled:
            return
        entry = None if key is None else self._deduper._entries.get(key)
        if entry is None and key is not None:
            return
        is_dict = type(args) is dict
        values = tuple(args.values()) if is_dict else tuple(args)
        shapes = [_shape(v) for v in values]
        if None in shapes or (is_dict and not NOT_CACHED.isdisjoint(args)):
            return
        table = self._table
        if not self._sync():
            table.clear()
        if info is not None and info is not self._info:
            return  # decided for the rank the table is no longer for
        if len(table) >= _MAX_KEYS and event not in table:
            return
        rows = table.setdefault(event, [])
        if len(rows) >= _PER_EVENT:
            del rows[0]
        if is_dict:  # a copy of each list: the caller may change theirs
            snap: Any = {k: list(v) if type(v) is list else v for k, v in args.items()}
            types = tuple(zip(args, shapes, strict=True))
        else:
            snap, types = (
                tuple(list(v) if type(v) is list else v for v in args),
                tuple(enumerate(shapes)),
            )
        # The first two checked inline (``n=1, scope="global"``: no call), the rest by a loop.
        key, cls = types[0] if types else (None, None)
        key2, cls2 = types[1] if len(types) > 1 else (None, None)
        count = None if entry is None else entry.fast  # next(): a builtin's fast call
        rows.append((snap, key, cls, key2, cls2, types[2:], level, name, entry, count, self._clock))

    @staticmethod
    def slot(event: str, scope: object) -> object:
        """Where a drop-in ``*_once(msg, *args, scope=)`` call is kept: ``msg`` for the
        default scope, ``(msg, scope)`` for another str or int one (a tuple never equals
        a message); None for any other scope (not cached: True is not 1 here)."""
        cls = type(scope)
        if cls is str:
            return event if scope == "local" else (event, scope)
        return (event, scope) if cls is int else None

    def _sync(self) -> bool:
        """Take the resolver's rank info now; False when it is not what the table was
        built for. Records the process group it was computed for, read before the probe so
        that a change after it is seen on the next hit."""
        resolver = self._resolver
        world = resolver.world
        pg = getattr(world, "_default_pg", None)
        self._generation = resolver.generation  # before: a recompute in current() is seen
        info = resolver.current()
        if resolver.world is not world:  # torch.distributed found just now: check again
            world, pg = resolver.world, _UNSEEN
        elif world is NOT_IMPORTED:
            if pg:  # imported, not found yet (a thread is importing it): look again
                pg = _UNSEEN
            else:  # torch not imported at all: a hit reads a flag, not sys.modules
                watch = import_watch()
                world = NOT_IMPORTED if watch is None else watch
        self._world, self._pg = _UNKNOWN if world is None else world, pg
        if resolver.generation != self._generation:  # moved meanwhile: look again next hit
            self._world = _UNKNOWN
        if info is self._info:
            return True
        self._info = info
        return False

    def invalidate(self) -> None:
        """The rank info moved (fork, refresh, a recompute): the next hit syncs first."""
        self._world = _UNKNOWN

    def clear(self) -> None:
        """Forget everything (shutdown)."""
        self._table.clear()
        self._info = None
        self._world = _UNKNOWN
