"""The bound logger ``obs.get_logger()`` returns.

A small structlog-style bound logger (``bind``/``unbind``/``new``). Its plain methods of
levels below the runtime's (up to WARNING: a call of the alert's event, named, passes any
level) are swapped for quiet ones (:func:`gate_levels`), so a call below the level costs
one ``stage`` test; its ``*_once`` methods decide scope and dedup
before building any event dict, so a suppressed repeat is cheaper than vLLM's
``lru_cache`` path. It holds a reference to the holder, not
to a chain, so ``configure()`` again reaches it.
"""

from __future__ import annotations

__all__ = ["BoundLogger"]

import logging
from collections.abc import Callable
from marshal import dumps
from typing import TYPE_CHECKING, Any

from obs._fields import CONTEXT_OWNED, NO_EVENT, user_fields
from obs._once_cache import HIT_DUE, _all_same, _same
from obs._secrets import scrub_name
from obs.encode import plain_values
from obs.levels import LEVELS, METHOD_BY_LEVEL, as_level, level_class
from obs.severity import ALERT_MARK, ALERT_SCAN, claim_alert

if TYPE_CHECKING:
    from obs._config import Holder
    from obs._runtime import Runtime

#: What a logger with context matches ``*_once`` rows by: none (they take the full path).
_WITH_CONTEXT: Any = object()
#: A counted repeat after which the periodic summaries are due (the caller drains them).
_DUE: Any = object()
_D, _I, _W, _E, _C = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL


class BoundLogger:
    """``log.info("event_name", key=value)``; see the module docstring.

    Every method accepts the control keywords ``scope``, ``once``, ``once_key``,
    ``every_n``, ``every_seconds``, ``stage``, ``body``, ``exc_info`` and ``stacklevel``
    (as ``logging``'s: a helper's caller). The event may be given as a keyword too, as
    structlog takes it (``log.error(event="x")``).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_context", "_fields", "_flat", "_holder", "_name", "_plain")

    def __init__(self, name: str, holder: Holder, context: dict[str, Any] | None = None) -> None:
        #: Scrubbed once here, as the chain scrubs names (the fused path writes it).
        self._name = scrub_name(name) if type(name) is str else name
        self._holder = holder
        self._context: dict[str, Any] = context or {}
        #: The context as the record carries it: a control-field or call-keyword name
        #: becomes ``user.<name>`` (a bound ``once_key`` is data, not an instruction).
        self._fields = user_fields(self._context, owned=CONTEXT_OWNED)
        #: Only short plain scalars among the bound values (decided once here, not per call).
        self._flat = plain_values(self._context)
        #: The name a ``*_once`` repeat matches its row by identity; a logger with context
        #: takes the full path: a marker no row holds.
        self._plain: object = _WITH_CONTEXT if self._context else self._name

    def __repr__(self) -> str:
        return f"<obs.BoundLogger {self._name!r} context={self._context!r}>"

    @property
    def name(self) -> str:
        """The logger name (``logger`` field of every record)."""
        return self._name

    # -- context -------------------------------------------------------------------

    def bind(self, **new_values: Any) -> BoundLogger:
        """A copy with ``new_values`` added to the context."""
        return BoundLogger(self._name, self._holder, {**self._context, **new_values})

    def unbind(self, *keys: str) -> BoundLogger:
        """A copy without ``keys`` (KeyError for a missing one, as structlog)."""
        context = dict(self._context)
        for key in keys:
            del context[key]
        return BoundLogger(self._name, self._holder, context)

    def try_unbind(self, *keys: str) -> BoundLogger:
        """A copy without ``keys``, ignoring missing ones."""
        return BoundLogger(
            self._name, self._holder, {k: v for k, v in self._context.items() if k not in keys}
        )

    def new(self, **new_values: Any) -> BoundLogger:
        """A copy whose context is exactly ``new_values``."""
        return BoundLogger(self._name, self._holder, dict(new_values))

    def is_enabled_for(self, level: int) -> bool:
        """True when a call at ``level`` (without a ``stage``) would be processed."""
        rt = self._holder.runtime or self._holder.ensure()
        return (level if type(level) is int else _level_of(rt, level)) >= rt.level

    # -- plain calls (the stage decides the level, then the level filter) ------------

    def debug(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None:
        """Log ``event`` at DEBUG (``event % args`` is the body when args are given)."""
        rt = self._holder.runtime or self._holder.ensure()
        if type(event) is not str or len(event) > ALERT_SCAN or ALERT_MARK in event:
            _alert(event, kw)
        if (rt.effective_level(_D, kw["stage"]) if "stage" in kw else _D) >= rt.level:
            rt.log(self, _D, "debug", event, kw, args)

    def info(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None:
        """Log ``event`` at INFO."""
        rt = self._holder.runtime or self._holder.ensure()
        if type(event) is not str or len(event) > ALERT_SCAN or ALERT_MARK in event:
            _alert(event, kw)
        if (rt.effective_level(_I, kw["stage"]) if "stage" in kw else _I) >= rt.level:
            rt.log(self, _I, "info", event, kw, args)

    def warning(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None:
        """Log ``event`` at WARNING."""
        rt = self._holder.runtime or self._holder.ensure()
        if type(event) is not str or len(event) > ALERT_SCAN or ALERT_MARK in event:
            _alert(event, kw)
        if (rt.effective_level(_W, kw["stage"]) if "stage" in kw else _W) >= rt.level:
            rt.log(self, _W, "warning", event, kw, args)

    warn = warning

    def error(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None:
        """Log ``event`` at ERROR."""
        rt = self._holder.runtime or self._holder.ensure()
        _alert(event, kw)
        if (rt.effective_level(_E, kw["stage"]) if "stage" in kw else _E) >= rt.level:
            rt.log(self, _E, "error", event, kw, args)

    def exception(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None:
        """Log ``event`` at ERROR with the exception being handled."""
        rt = self._holder.runtime or self._holder.ensure()
        _alert(event, kw)
        if (rt.effective_level(_E, kw["stage"]) if "stage" in kw else _E) >= rt.level:
            kw.setdefault("exc_info", True)
            rt.log(self, _E, "error", event, kw, args)

    def critical(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None:
        """Log ``event`` at CRITICAL."""
        rt = self._holder.runtime or self._holder.ensure()
        _alert(event, kw)
        if (rt.effective_level(_C, kw["stage"]) if "stage" in kw else _C) >= rt.level:
            rt.log(self, _C, "critical", event, kw, args)

    fatal = critical
    msg = info  # structlog's name for it

    def log(self, level: int, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None:
        """Log ``event`` at a numeric ``level`` (0..100; a level name such as ``"error"``
        is its number; any other value is INFO, reported once: logging never raises)."""
        rt = self._holder.runtime or self._holder.ensure()
        if type(level) is not int or not 0 <= level <= 100:
            level = _level_of(rt, level)
        if type(event) is not str or len(event) > ALERT_SCAN or ALERT_MARK in event:
            _alert(event, kw)
        if (rt.effective_level(level, kw["stage"]) if "stage" in kw else level) >= rt.level:
            if kw.get("once"):
                rt.log_once(self, level, _method(level), event, kw, args)
            else:
                rt.log(self, level, _method(level), event, kw, args)

    # -- once per key (scope defaults to "local", as vLLM's) -------------------------

    if TYPE_CHECKING:  # made by _once_method below: one body, the level a closure constant

        def debug_once(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        def info_once(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        def warning_once(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        def error_once(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...

        # structlog's awaitable names (made by _async below): the plain call, awaited
        async def adebug(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        async def ainfo(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        async def amsg(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        async def awarning(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        async def awarn(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        async def aerror(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        async def aexception(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        async def acritical(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        async def afatal(self, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None: ...
        async def alog(
            self, level: int, event: str = NO_EVENT, /, *args: Any, **kw: Any
        ) -> None: ...


def _once_method(level: int, method: str) -> Callable[..., None]:  # noqa: C901 - see once
    """``<method>_once``: log ``event`` once per key (and count the repeats). A plain
    repeat (no args, no bound context, no stage) is answered by the runtime's once cache
    before any event dict is built; anything else takes the runtime's once path."""

    def once(  # noqa: C901, PLR0912 - the hot path: OnceCache.repeat inlined (a frame less)
        self: BoundLogger, event: str = NO_EVENT, /, *args: Any, **kw: Any
    ) -> None:
        if not args:  # the event's rows (newest first, a few), as OnceCache.repeat reads them
            cache = self._holder.once  # the runtime's table, read before the runtime
            try:  # an unhashable event, a value whose __eq__ raises: the full path
                rows = cache._table.get(event)  # never with a stage (a row implies the level)
                if rows is not None and cache._world._default_pg is cache._pg:
                    # Any row, not only the newest: a call repeated in a loop is answered
                    # here whichever of its event's calls came last (not by a frame more).
                    # Indexed, not iterated: a hit on the newest row makes no iterator. A
                    # flat list's kind and item types: its marshal form, compared inline
                    # (its length is the snapshot's once ``snap == kw`` holds: bounded).
                    index = 0
                    while True:
                        snap, key, cls, key2, cls2, more, lvl, name, entry, count, clock = rows[
                            index
                        ]
                        if (
                            snap == kw
                            and name is self._plain  # not a logger with context (no row is)
                            and lvl == level
                            and (
                                key is None
                                or type(kw[key]) is cls
                                or (type(cls) is bytes and dumps(kw[key], 0) == cls)  # _same's
                            )
                            and (key2 is None or type(kw[key2]) is cls2 or _same(kw[key2], cls2))
                            and (not more or _all_same(kw, more))
                        ):
                            if entry is None:  # the scope keeps this rank quiet: not counted
                                return
                            now = clock()
                            next(count)  # the deduper's own lock-free count: exact, shared
                            entry.last_seen = now
                            if now < cache._deduper._next_summary:
                                return
                            cache._deduper.summary_due = True
                            rows = _DUE
                            break
                        index += 1
                        if index >= len(rows):
                            break
            except Exception:
                rows = None
            rt = self._holder.runtime or self._holder.ensure()
            if rows is _DUE:
                rt.emit_summaries()
                return
            # An equal name of another object, or the rank may have moved: the table's.
            if rows is not None and rt.level <= level and not self._context:
                hit = rt.once_cache.repeat(self._name, level, event, kw)
                if hit:
                    if hit == HIT_DUE:
                        rt.emit_summaries()
                    return
        else:
            rt = self._holder.runtime or self._holder.ensure()
        if type(event) is not str or len(event) > ALERT_SCAN or ALERT_MARK in event:
            _alert(event, kw)
        if "stage" in kw:
            if rt.effective_level(level, kw["stage"]) >= rt.level:
                rt.log_once(self, level, method, event, kw, args)
        elif rt.level <= level:
            rt.log_once(self, level, method, event, kw, args)

    once.__name__ = f"{method}_once"
    once.__qualname__ = f"BoundLogger.{method}_once"
    once.__doc__ = f"Log ``event`` at {method.upper()} once per key (and count the repeats)."
    return once


def _alert(event: object, kw: dict[str, Any]) -> None:
    """Give a call of an event named after an alert stage, at any level
    (``log.debug("workspace_terminal_failure")``), that stage, as ``stage=`` would, whatever
    stage it gave (:func:`obs.severity.claim_alert`): no level and no stage may drop it."""
    claim_alert(kw.get("event") if event is NO_EVENT else event, kw)


def _quiet(loud: Callable[..., None]) -> Callable[..., None]:
    """``loud`` for a level below the runtime's: only a ``stage`` or the alert's event
    (named) can raise such a call above it, so without one the call returns at once
    (structlog's no-op, plus two tests)."""
    mark, scan = ALERT_MARK, ALERT_SCAN  # closure constants: no global lookup per call
    plain: object = None  # the last event found plain (a str without the mark): by identity

    def quiet(self: BoundLogger, event: str = NO_EVENT, /, *args: Any, **kw: Any) -> None:
        nonlocal plain
        if "stage" in kw:
            loud(self, event, *args, **kw)
        elif event is not plain:  # the same object: the same exact str, plain again
            if type(event) is str and len(event) <= scan and mark not in event:
                plain = event
            else:
                loud(self, event, *args, **kw)

    quiet.__name__, quiet.__qualname__, quiet.__doc__ = (
        loud.__name__,
        loud.__qualname__,
        loud.__doc__,
    )
    return quiet


#: The plain methods of each level (aliases included), loud (as defined) and quiet. Those
#: of ERROR and above stay loud (a call of the alert's event passes any level, :func:`_alert`).
_GATED = (
    (_D, ("debug",)),
    (_I, ("info", "msg")),
    (_W, ("warning", "warn")),
)
_LOUD = {name: vars(BoundLogger)[name] for _, names in _GATED for name in names}
_QUIET = {name: _quiet(method) for name, method in _LOUD.items()}


def gate_levels(level: int) -> None:
    """Give :class:`BoundLogger` the quiet method of every level below ``level`` and the
    loud one of the others: the holder calls this whenever its runtime's level changes,
    so a call below the level costs no level lookup at all. There is one holder
    (``obs._config.STATE``): every logger reads the same level, so it can live here."""
    for method_level, names in _GATED:
        table = _QUIET if method_level < level else _LOUD
        for name in names:
            if vars(BoundLogger)[name] is not table[name]:  # unchanged: keep type caches
                setattr(BoundLogger, name, table[name])


def _level_of(rt: Runtime, value: object) -> int:
    """The level number a ``log(value, ...)`` call is made at: :func:`as_level`'s, else
    INFO and the bad argument reported once (``log(None, ...)`` raised TypeError)."""
    number = as_level(value)
    if number is None:
        rt._bad_argument("level", value, "a level number or name", "logged at INFO")
        return _I
    return number


def _method(level: int) -> str:
    """The method of the level class ``level`` falls in (the levels table's)."""
    return LEVELS[level_class(level)].method


def _async(name: str) -> Callable[..., Any]:
    """structlog's ``a<name>``: the plain call, awaited (it never waits on the network)."""

    async def method(self: BoundLogger, /, *args: Any, **kw: Any) -> None:
        getattr(self, name)(*args, **kw)

    method.__name__ = f"a{name}"
    method.__qualname__ = f"BoundLogger.a{name}"
    method.__doc__ = f"``await log.a{name}(...)``: :meth:`BoundLogger.{name}`, as structlog's."
    return method


_PLAIN = ("debug", "info", "msg", "warning", "warn", "error", "exception", "critical", "fatal")
for _name in (*_PLAIN, "log"):
    setattr(BoundLogger, f"a{_name}", _async(_name))
del _name

for _level in (_D, _I, _W, _E):
    setattr(
        BoundLogger,
        f"{METHOD_BY_LEVEL[_level]}_once",
        _once_method(_level, METHOD_BY_LEVEL[_level]),
    )
del _level
