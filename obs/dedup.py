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
    "OVERFLOW",
    "Dedup",
    "Deduper",
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
from obs._fields import NOT_KEYED
from obs._secrets import cut_tail
from obs.encode import safe_repr, to_jsonable
from obs.severity import DEFAULT_POLICY, StagePolicy

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger


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
    if cls is bytes:
        data: bytes = value  # type: ignore[assignment]
        return (cls, data) if len(data) <= _LONG else (cls, _long(data.decode("latin-1")))
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
