"""The ``*_once`` fast path: a suppressed repeat of a plain call for the cost of a dict
lookup, counted on the deduper's own entry (:class:`obs.dedup.Deduper`).

The full path decides the scope, builds the dedup key and looks it up. For a plain call
(no positional args on a structlog-style logger, no bound context, no control keyword but
a plain ``scope``: no ``stage``, ``once_key``, ``body``), the :class:`OnceCache` remembers
the last few exact argument snapshots per ``(logger, level, event)`` with the key they
made, so a repeat only compares the arguments and counts the deduper's own entry: counts
stay exact and shared with the full path. Values match only when their types match too
(1, 1.0 and True never stand for each other; a str Enum is not its text). A call the
scope keeps quiet on this rank is remembered without an entry: its repeat is answered
(nothing written, nothing counted) without the rank probe. The scope is part of the
snapshot (a keyword of the structlog-style call; the slot ``(msg, scope)`` of a drop-in
call with a scope other than "local"). The cache is bounded, is dropped when the rank
info changes (a scope decided for rank 0 is not rank 3's), after fork (the rank info is
recomputed) and at shutdown, and is off without a GIL.
"""

from __future__ import annotations

__all__ = ["HIT", "HIT_DUE", "NOT_CACHED", "NOT_PLAIN", "OnceCache"]

from marshal import dumps
from typing import TYPE_CHECKING, Any

from obs._fields import CALL_KEYWORDS
from obs.dedup import _LONG, flat_types
from obs.encode import PLAIN_TYPES
from obs.rank import NOT_IMPORTED, import_watch

if TYPE_CHECKING:
    from obs.dedup import Deduper, Key, _Entry
    from obs.rank import RankInfo, RankResolver

#: Keywords that change how a call is scoped or keyed: such calls take the full path.
NOT_PLAIN = frozenset(CALL_KEYWORDS) | {"stage", "body"}
#: Those the once cache cannot answer (a plain ``scope`` it can: it is in the snapshot).
NOT_CACHED = NOT_PLAIN - {"scope"}
_MAX_KEYS = 4096
_PER_EVENT = 4

#: (arguments, the first argument's name or position and shape (:func:`_shape`; None: no
#: argument), the others' (name or position, shape), level, logger, the deduper's entry,
#: its counter, the deduper's clock: a local call in the hit, not a method lookup on the
#: table).
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
    marshal form (:func:`_same`) of a flat sequence; None where the cache cannot compare
    it (NaN never equals itself; a long text is keyed by hash)."""
    cls = type(value)
    if cls in PLAIN_TYPES:  # None: NaN never equals itself, -0.0 equals 0.0, a long text
        kept = value == value and not (cls is str and len(value) > _LONG)  # type: ignore[arg-type]  # noqa: PLR0124
        return cls if kept and (value or cls is not float) else None
    return None if flat_types(value) is None else dumps(value, 0)  # type: ignore[arg-type]


def _same(value: Any, shape: object) -> bool:
    """A flat sequence of the remembered kind, items and item types: marshal writes a
    list and a tuple, 1, 1.0 and True apart and refuses any subclass (version 0: no
    interned-text flag). Only once ``value`` equals the snapshot: as short as it is."""
    try:
        return type(shape) is bytes and dumps(value, 0) == shape
    except ValueError:  # an item of a subclass (a str Enum): not the remembered value
        return False


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
            rows.pop()  # the oldest: rows are kept newest first
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
        # Newest first: a logger's inline hit checks ``rows[0]`` only (no loop), the rest here.
        row = (snap, key, cls, key2, cls2, types[2:], level, name, entry, count, self._clock)
        rows.insert(0, row)

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
