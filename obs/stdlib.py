"""The stdlib bridge, and a vLLM-compatible ``init_logger``.

After ``obs.configure()`` a handler on the root logger sends every stdlib record (vLLM,
torch, flashinfer, ...) through the same chain, so it comes out in the same format with
rank fields and is exported like any other event. Records of the OpenTelemetry SDK's own
loggers, and any record logged from obs' export thread, are rendered but never exported,
so an SDK warning about a failed export cannot loop back into the exporter.

Libraries that print to the console through their own handler and do not propagate (torch
does for ``torch.*``, vLLM for ``vllm`` unless ``VLLM_CONFIGURE_LOGGING=0``) never reach a
root handler, so ``configure()`` adopts them (``OBS_ADOPT_LOGGERS``): their console
handlers are taken off and they propagate, so their records come out once, through obs.
Other handlers (files, torch's trace handler) stay. Removing the bridge gives them back.

:class:`Handler` is the same bridge for a ``logging.config.dictConfig`` (``"class":
"obs.stdlib.Handler"``, e.g. in vLLM's ``VLLM_LOGGING_CONFIG_PATH``): it configures obs
from the environment on its first record if nothing did, and a record it wrote is not
written again by the root handler, so every record comes out once.

``init_logger(name)`` returns ``logging.getLogger(name)`` with
``debug_once/info_once/warning_once/error_once(msg, *args, scope="local")`` bound on the
instance, as vLLM's does. It keeps
vLLM's semantics where they are right (scope checked before the cache, caller's line) and
fixes where they are wrong: no eviction re-fire, no TypeError on unhashable args, no args
kept alive by the cache, repeats counted and summarised.
"""

from __future__ import annotations

__all__ = [
    "Handler",
    "ObsHandler",
    "VllmLogger",
    "adopt_loggers",
    "bind_once_methods",
    "init_logger",
    "once_methods",
    "take_vllm_once",
]

import contextlib
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from types import MethodType
from typing import TYPE_CHECKING, Any, cast

from obs._bridge import (
    HANDLED,
    ObsHandler,
    adopt_consoles,
    install_bridge,
    log_record,
    remove_bridge,
)
from obs._config import STATE
from obs._once_cache import HIT_DUE, OnceCache
from obs.dedup import OVERFLOW
from obs.levels import METHOD_BY_LEVEL
from obs.settings import DEFAULT_ADOPT_LOGGERS, read_variable

if TYPE_CHECKING:
    from obs._runtime import Runtime


class Handler(logging.Handler):
    """A handler for ``dictConfig`` by class path (``"class": "obs.stdlib.Handler"``).

    Records go through the current obs runtime: JSON lines, rank fields, OTLP export. If
    nothing configured obs, the first record configures it from the environment (as
    ``obs.configure()`` would). Formatters are ignored: obs renders. ``stream`` is
    accepted so vLLM's handler entry can name this class unchanged; ``OBS_STREAM`` decides.
    Built inside vLLM with ``OBS_VLLM`` on, it gives vLLM's ``*_once`` table obs' methods.

    .. versionadded:: unreleased
    """

    def __init__(self, level: int | str = logging.NOTSET, stream: object = None) -> None:
        super().__init__(level)
        _vllm_once_early()

    def handle(self, record: logging.LogRecord) -> bool:
        """Configure obs first if needed, outside this handler's lock (configuring takes
        the logging module's lock, which ``dictConfig`` holds while it takes ours)."""
        if STATE.runtime is None:
            STATE.configure_from_env()
        return super().handle(record)

    def emit(self, record: logging.LogRecord) -> None:
        """Process ``record`` once, never raising into the application."""
        if getattr(record, HANDLED, False):
            return
        with contextlib.suppress(Exception):
            log_record(STATE, record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's API
        """Never print stdlib's 'Logging error' tracebacks: the runtime reports failures."""


def adopt_loggers(
    names: Iterable[str] | None = None, handler: ObsHandler | None = None
) -> list[str]:
    """Take over the console output of the logger trees ``names`` (default: the settings').

    For every existing logger named ``name`` or ``name.*`` that has a plain console
    ``StreamHandler``: let it propagate to obs' root handler and take those handlers off.
    A logger of those trees that a library built by calling the class rather than through
    ``logging.getLogger`` (flashinfer's JIT logger), found as a module-level global of the
    trees' imported modules, is adopted too, with the parent logging would have given it.
    Call it again after importing a library that configures its loggers (``import torch``
    after ``obs.configure()``), or after one re-configured them (console handlers put back
    on a logger adopted earlier are taken off again). Returns the names adopted by this
    call; a no-op without the bridge.
    """
    if handler is None:
        handler = STATE.bridge
        if names is None and STATE.runtime is not None:
            names = STATE.runtime.settings.adopt_loggers
    if handler is None:
        return []
    return adopt_consoles(handler, names if names is not None else DEFAULT_ADOPT_LOGGERS)


class VllmLogger(logging.Logger):
    """Type of what :func:`init_logger` returns: a plain ``logging.Logger`` whose instance
    carries ``debug_once/info_once/warning_once/error_once(msg, *args, scope=...)`` (and
    ``stacklevel=``, as ``logging`` takes it, for a caller's own logging helper).

    Never instantiated (as vLLM's ``_VllmLogger``): the methods are bound on the real
    logger, so ``propagate``, pickling, ``isinstance`` and ``logging.getLogger(name)``
    behave as for any logger.
    """

    if TYPE_CHECKING:  # made by _once_method below: one body, the level a closure constant

        def debug_once(
            self, msg: object, *args: Any, scope: object = "local", stacklevel: int = 1, **kw: Any
        ) -> None: ...
        def info_once(
            self, msg: object, *args: Any, scope: object = "local", stacklevel: int = 1, **kw: Any
        ) -> None: ...
        def warning_once(
            self, msg: object, *args: Any, scope: object = "local", stacklevel: int = 1, **kw: Any
        ) -> None: ...
        def error_once(
            self, msg: object, *args: Any, scope: object = "local", stacklevel: int = 1, **kw: Any
        ) -> None: ...


#: The default scope, as the drop-in methods' default (an identity check on the hot path),
#: and the other scope vLLM's callers pass as a literal (interned: the same object).
_LOCAL = "local"
_GLOBAL = "global"


def _once_method(level: int, name: str) -> Callable[..., None]:  # noqa: C901 - hot path, inlined
    """``<name>_once``: a plain suppressed repeat is answered here (the level checked as
    ``isEnabledFor`` does, from its cache; then the runtime's once cache), anything else
    goes to :func:`_once`."""

    def once(
        self: logging.Logger,
        msg: object,
        *args: Any,
        scope: object = _LOCAL,
        stacklevel: int = 1,
        **kwargs: Any,
    ) -> None:
        if kwargs:  # logging's exc_info=, stack_info=, extra= (or a stray keyword)
            _once(self, level, msg, args, scope, stacklevel, kwargs)
            return
        try:  # isEnabledFor, inlined: its own per-level cache (a miss: the method fills it)
            enabled = not self.disabled and self._cache[level]  # type: ignore[attr-defined]
        except Exception:
            enabled = self.isEnabledFor(level)
        if not enabled:
            return
        runtime = STATE.runtime
        if runtime is not None and type(msg) is str:
            if scope is _LOCAL:
                slot: object = msg
            elif scope is _GLOBAL:  # OnceCache.slot's answer, without its tests
                slot = (msg, _GLOBAL)
            elif type(scope) is str:  # OnceCache.slot, inlined: a call fewer per repeat
                slot = msg if scope == "local" else (msg, scope)
            else:
                slot = OnceCache.slot(msg, scope)
            hit = runtime.once_cache.repeat(self.name, level, slot, args)  # never raises
            if hit:  # a plain suppressed repeat, counted
                if hit == HIT_DUE:
                    runtime.emit_summaries()
                return
        _once(self, level, msg, args, scope, stacklevel)

    once.__name__ = once.__qualname__ = f"{name}_once"
    once.__doc__ = f"``{name}`` once per ``(logger, msg, *args)`` on the ranks ``scope`` selects."
    return once


def _once(  # noqa: PLR0917 - the drop-in's arguments, passed on
    logger: logging.Logger,
    level: int,
    msg: object,
    args: tuple[Any, ...],
    scope: object,
    stacklevel: object = 1,
    kwargs: dict[str, Any] | None = None,
) -> None:
    """Log once per key on the selected ranks: scope is decided before the key is used,
    the key is a stable encoding (no eviction re-fire, unhashable args fine, nothing kept
    alive), and repeats are counted by the current runtime. ``kwargs``: logging's keywords
    (:func:`_logging_keywords`); the exception and ``extra`` are part of the key."""
    runtime = STATE.runtime or STATE.ensure()
    extra: dict[str, Any] = {}
    passed: dict[str, Any] = {}
    key_args = args
    if kwargs:
        passed, extra, keyed = _logging_keywords(runtime, kwargs)
        key_args = (*args, keyed)
    try:
        admitted = runtime.admit_once(logger.name, level, msg, key_args, scope)
    except Exception:  # fail open, as vLLM's rank checks do
        admitted = True
    if not admitted:
        return
    extra["scope"] = scope
    if admitted == OVERFLOW:
        extra["dedup_overflow"] = True
    # stacklevel 3: _once -> *_once -> the caller's line; a caller's stacklevel=n (its
    # own helper's caller, as logging takes it) adds n - 1 (an odd value is ignored).
    more = stacklevel - 1 if type(stacklevel) is int and stacklevel > 1 else 0
    logger.log(level, msg, *args, stacklevel=3 + more, extra=extra, **passed)


#: A ``LogRecord``'s own attributes: an ``extra`` key naming one would make logging raise.
_RECORD_NAMES = frozenset(
    (*vars(logging.LogRecord("", 0, "", 0, "", (), None)), "message", "asctime", "scope")
)


def _logging_keywords(
    runtime: Runtime, kwargs: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], tuple[tuple[str, object], ...]]:
    """``logging``'s keywords of a drop-in ``*_once`` call: those passed on (``exc_info``,
    ``stack_info``), the ``extra`` fields (a record attribute's name as ``user.<name>``),
    and what the dedup key adds (the exception, not ``True``; the extra fields). Any other
    keyword is reported once and ignored: vLLM's raised TypeError into the application."""
    passed: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in ("exc_info", "stack_info"):
            passed[name] = value
        elif name == "extra" and isinstance(value, Mapping):
            with contextlib.suppress(Exception):  # a hostile mapping: its fields are left out
                for key, v in value.items():
                    field = key if type(key) is str else repr(key)
                    extra[f"user.{field}" if field in _RECORD_NAMES else field] = v
        else:
            runtime._bad_argument(name, value, "a logging keyword", "ignored")
    exc = passed.get("exc_info")
    if isinstance(exc, tuple) and len(exc) == 3:
        exc = exc[1]
    elif exc is not None and exc is not False and not isinstance(exc, BaseException):
        exc = sys.exc_info()[1]
    return passed, extra, (("exc_info", exc), ("extra", tuple(extra.items())))


_ONCE_METHODS = {
    f"{METHOD_BY_LEVEL[level]}_once": _once_method(level, METHOD_BY_LEVEL[level])
    for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)
}
for _name, _method in _ONCE_METHODS.items():
    setattr(VllmLogger, _name, _method)  # on the class too, as they were defined before
del _name, _method


def take_vllm_once(module: Any) -> bool:
    """``module``'s (vLLM's ``vllm.logger``) method table takes the drop-in ``*_once`` and
    the loggers bound with vLLM's own before are bound again; idempotent. False when the
    module has no such table. (:func:`obs.vllm_plugin.count_vllm_repeats` calls it.)"""
    table = getattr(module, "_METHODS_TO_PATCH", None)
    if not isinstance(table, dict):
        return False
    table.update(_ONCE_METHODS)
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if not isinstance(logger, logging.Logger):
            continue
        own = vars(logger)  # a method absent, or not a bound one, counts as ours
        if any(getattr(own.get(n), "__func__", m) is not m for n, m in _ONCE_METHODS.items()):
            bind_once_methods(logger)  # vLLM's own, bound by its init_logger before
    return True


def _vllm_once_early() -> None:
    """With ``OBS_VLLM`` on, a handler built inside vLLM (a spawned worker applying obs'
    dictConfig before its plugins load) takes vLLM's ``*_once`` table at once: a key vLLM
    logs then is obs' key too, not logged again after the plugins load. Never raises."""
    module = sys.modules.get("vllm.logger")
    if module is None:
        return
    with contextlib.suppress(Exception):
        if read_variable("OBS_VLLM"):
            take_vllm_once(module)


def init_logger(name: str) -> VllmLogger:
    """``logging.getLogger(name)`` with vLLM's ``*_once`` methods bound on the instance:
    ``init_logger(__name__).warning_once("x %s", a, scope="global")``.

    .. versionchanged:: unreleased
       Returns the real ``logging.Logger`` (was a ``LoggerAdapter``), as vLLM's does.
    """
    return bind_once_methods(logging.getLogger(name))


def once_methods() -> dict[str, Callable[..., None]]:
    """The drop-in ``*_once`` functions by method name (a copy: vLLM's method table takes
    them, so its own ``init_logger`` binds them; see :mod:`obs.vllm_plugin`)."""
    return dict(_ONCE_METHODS)


def bind_once_methods(logger: logging.Logger) -> VllmLogger:
    """Bind the drop-in ``*_once`` methods on ``logger`` (the instance, as vLLM does)."""
    for method_name, method in _ONCE_METHODS.items():
        setattr(logger, method_name, MethodType(method, logger))
    return cast("VllmLogger", logger)


#: Internal since issue 14 (they take obs' holder); still importable from here for old code.
_LEGACY = (install_bridge, remove_bridge)
