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
    "init_logger",
    "install_bridge",
    "remove_bridge",
]

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterable
from types import MethodType
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from obs.dedup import OVERFLOW
from obs.settings import DEFAULT_ADOPT_LOGGERS

if TYPE_CHECKING:
    from obs._config import Holder

_NO_EXPORT_PREFIXES = ("opentelemetry", "grpc", "urllib3")


class ObsHandler(logging.Handler):
    """Root handler: hands each record to the current runtime, with a re-entrancy guard."""

    def __init__(self, holder: Holder) -> None:
        super().__init__(logging.NOTSET)
        self._holder = holder
        self._local = threading.local()
        #: Records dropped because they were logged while obs was handling a record.
        self.reentrant_drops = 0
        #: The root logger's level before the bridge set it (restored on removal).
        self.previous_root_level: int | None = None
        #: Loggers whose console output obs took over, with what to give back.
        self.adopted: dict[str, Adopted] = {}
        self.adopt_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        """Process ``record``. One logged while this thread is inside obs (a signal handler,
        a finaliser) is deferred by the runtime and written after, never looped or blocked."""
        if getattr(record, _HANDLED, False):  # an obs Handler on its logger wrote it
            return
        try:
            _log_record(self._holder, record)
        except Exception:
            self.reentrant_drops += 1

    def handleError(self, record: logging.LogRecord) -> None:
        """Never print stdlib's 'Logging error' tracebacks: the runtime reports failures."""


#: Set on a record an obs handler wrote, so another obs handler up the tree skips it.
_HANDLED = "_obs_handled"


def _log_record(holder: Holder, record: logging.LogRecord) -> None:
    """Hand ``record`` to the current runtime (the OTel SDK's own records not exported)."""
    setattr(record, _HANDLED, True)
    runtime = holder.runtime or holder.ensure()
    export = not record.name.startswith(_NO_EXPORT_PREFIXES) and not _in_export_thread()
    runtime.log_record(record, export=export)


class Handler(logging.Handler):
    """A handler for ``dictConfig`` by class path (``"class": "obs.stdlib.Handler"``).

    Records go through the current obs runtime: JSON lines, rank fields, OTLP export. If
    nothing configured obs, the first record configures it from the environment (as
    ``obs.configure()`` would). Formatters are ignored: obs renders. ``stream`` is
    accepted so vLLM's handler entry can name this class unchanged; ``OBS_STREAM`` decides.

    .. versionadded:: unreleased
    """

    def __init__(self, level: int | str = logging.NOTSET, stream: object = None) -> None:
        super().__init__(level)

    def handle(self, record: logging.LogRecord) -> bool:
        """Configure obs first if needed, outside this handler's lock (configuring takes
        the logging module's lock, which ``dictConfig`` holds while it takes ours)."""
        from obs._config import STATE  # noqa: PLC0415 - avoid an import cycle

        if STATE.runtime is None:
            STATE.configure_from_env()
        return super().handle(record)

    def emit(self, record: logging.LogRecord) -> None:
        """Process ``record`` once, never raising into the application."""
        if getattr(record, _HANDLED, False):
            return
        from obs._config import STATE  # noqa: PLC0415 - avoid an import cycle

        with contextlib.suppress(Exception):
            _log_record(STATE, record)

    def handleError(self, record: logging.LogRecord) -> None:
        """Never print stdlib's 'Logging error' tracebacks: the runtime reports failures."""


def _in_export_thread() -> bool:
    otel = sys.modules.get("obs.otel")
    check = getattr(otel, "in_export_thread", None)
    try:
        return bool(check()) if check is not None else False
    except Exception:
        return False


class Adopted(NamedTuple):
    """What adoption changed on one logger: the console handlers taken off, the old flag."""

    handlers: tuple[logging.Handler, ...]
    propagate: bool


def _console_handlers(logger: logging.Logger) -> list[logging.Handler]:
    """Plain ``StreamHandler``s not writing to a named file: the console output torch and
    vLLM set up. Subclasses (``FileHandler``, torch's trace handler, a user's own) and
    streams opened on a path are not console output."""
    out: list[logging.Handler] = []
    for h in logger.handlers:
        if type(h) is not logging.StreamHandler:
            continue
        name = getattr(getattr(h, "stream", None), "name", None)
        if isinstance(name, str) and os.path.isabs(name):
            continue
        out.append(h)
    return out


def _is_otel_logging_handler(handler: logging.Handler) -> bool:
    """The OTel SDK's ``LoggingHandler`` (checked by name: the SDK need not be imported)."""
    cls = type(handler)
    return cls.__name__ == "LoggingHandler" and cls.__module__.startswith("opentelemetry.")


def install_bridge(
    holder: Holder,
    level: int,
    adopt: Iterable[str] = DEFAULT_ADOPT_LOGGERS,
    *,
    keep_root_level: bool = False,
    adopt_otel_handlers: bool = False,
) -> ObsHandler:
    """Put one :class:`ObsHandler` on the root logger (replacing an earlier one) and adopt
    the console loggers under ``adopt``, and the root logger's own console handlers
    (``logging.basicConfig``), so every stdlib line comes out once, through obs; with
    ``adopt_otel_handlers`` also the OTel SDK's ``LoggingHandler`` (``opentelemetry-instrument``
    puts one there) when obs exports through that same global provider. The root
    level is set to ``level`` unless ``keep_root_level`` (the app chose it, OBS_LEVEL did
    not); removal gives all of it back."""
    remove_bridge(holder)
    handler = ObsHandler(holder)
    root = logging.getLogger()
    handler.previous_root_level = root.level
    consoles = _console_handlers(root)
    if adopt_otel_handlers:  # obs exports through the same provider: once is enough
        consoles += [h for h in root.handlers if _is_otel_logging_handler(h)]
    if consoles:
        handler.adopted.setdefault("", Adopted(tuple(consoles), root.propagate))
    root.addHandler(handler)  # first, so no record meanwhile falls to logging.lastResort
    for console in consoles:
        root.removeHandler(console)
    if not keep_root_level:
        root.setLevel(level)
    holder.bridge = handler
    adopt_loggers(adopt, handler)
    return handler


def adopt_loggers(
    names: Iterable[str] | None = None, handler: ObsHandler | None = None
) -> list[str]:
    """Take over the console output of the logger trees ``names`` (default: the settings').

    For every existing logger named ``name`` or ``name.*`` that has a plain console
    ``StreamHandler``: let it propagate to obs' root handler and take those handlers off.
    Call it again after importing a library that configures its loggers (``import torch``
    after ``obs.configure()``), or after one re-configured them (console handlers put back
    on a logger adopted earlier are taken off again). Returns the names adopted by this
    call; a no-op without the bridge.
    """
    if handler is None:
        from obs._config import STATE  # noqa: PLC0415 - avoid an import cycle

        handler = STATE.bridge
        if names is None and STATE.runtime is not None:
            names = STATE.runtime.settings.adopt_loggers
    if handler is None:
        return []
    prefixes = tuple(names if names is not None else DEFAULT_ADOPT_LOGGERS)
    if not prefixes:
        return []
    taken: list[str] = []
    with handler.adopt_lock:
        for name, logger in list(logging.Logger.manager.loggerDict.items()):
            if not isinstance(logger, logging.Logger):
                continue
            if not any(name == p or name.startswith(p + ".") for p in prefixes):
                continue
            consoles = _console_handlers(logger)
            if not consoles:
                continue
            # The first adoption's state is what removal gives back.
            handler.adopted.setdefault(name, Adopted(tuple(consoles), logger.propagate))
            logger.propagate = True  # first, so no record falls to logging.lastResort
            for console in consoles:
                logger.removeHandler(console)
            taken.append(name)
    return taken


def _give_back(handler: ObsHandler) -> None:
    """Restore what adoption changed, unless the library has set its logger up again."""
    with handler.adopt_lock:
        for name, adopted in list(handler.adopted.items()):
            logger = logging.getLogger(name)
            if not _console_handlers(logger):  # else: re-configured since; leave it be
                for console in adopted.handlers:
                    logger.addHandler(console)
                logger.propagate = adopted.propagate
        handler.adopted.clear()


def remove_bridge(holder: Holder) -> None:
    """Take obs' handler off the root logger, restore the root level it replaced and give
    adopted loggers their handlers back (also when something else already removed the
    handler from the root logger, as ``logging.basicConfig(force=True)`` does)."""
    root = logging.getLogger()
    handlers = [h for h in root.handlers if isinstance(h, ObsHandler)]
    if isinstance(holder.bridge, ObsHandler) and holder.bridge not in handlers:
        handlers.append(holder.bridge)
    for handler in handlers:
        if handler in root.handlers:
            root.removeHandler(handler)
            if handler.previous_root_level is not None:
                root.setLevel(handler.previous_root_level)
        _give_back(handler)
    holder.bridge = None


class VllmLogger(logging.Logger):
    """Type of what :func:`init_logger` returns: a plain ``logging.Logger`` whose instance
    carries ``debug_once/info_once/warning_once/error_once(msg, *args, scope=...)``.

    Never instantiated (as vLLM's ``_VllmLogger``): the methods are bound on the real
    logger, so ``propagate``, pickling, ``isinstance`` and ``logging.getLogger(name)``
    behave as for any logger.
    """

    def debug_once(self, msg: object, *args: Any, scope: object = "local") -> None:
        """``debug`` once per ``(logger, msg, *args)`` on the ranks ``scope`` selects."""
        _once(self, logging.DEBUG, msg, args, scope)

    def info_once(self, msg: object, *args: Any, scope: object = "local") -> None:
        """``info`` once per ``(logger, msg, *args)`` on the ranks ``scope`` selects."""
        _once(self, logging.INFO, msg, args, scope)

    def warning_once(self, msg: object, *args: Any, scope: object = "local") -> None:
        """``warning`` once per ``(logger, msg, *args)`` on the ranks ``scope`` selects."""
        _once(self, logging.WARNING, msg, args, scope)

    def error_once(self, msg: object, *args: Any, scope: object = "local") -> None:
        """``error`` once per ``(logger, msg, *args)`` on the ranks ``scope`` selects."""
        _once(self, logging.ERROR, msg, args, scope)


def _once(
    logger: logging.Logger, level: int, msg: object, args: tuple[Any, ...], scope: object
) -> None:
    """Log once per key on the selected ranks: scope is decided before the key is used,
    the key is a stable encoding (no eviction re-fire, unhashable args fine, nothing kept
    alive), and repeats are counted by the current runtime."""
    if not logger.isEnabledFor(level):
        return
    from obs._config import STATE  # noqa: PLC0415 - avoid an import cycle

    try:
        runtime = STATE.runtime or STATE.ensure()
        admitted = runtime.admit_once(logger.name, level, msg, args, scope)
    except Exception:  # fail open, as vLLM's rank checks do
        admitted = True
    if not admitted:
        return
    extra = {"scope": scope}
    if admitted == OVERFLOW:
        extra["dedup_overflow"] = True
    # stacklevel 3: _once -> *_once -> the caller's line.
    logger.log(level, msg, *args, stacklevel=3, extra=extra)


_ONCE_METHODS = {
    "debug_once": VllmLogger.debug_once,
    "info_once": VllmLogger.info_once,
    "warning_once": VllmLogger.warning_once,
    "error_once": VllmLogger.error_once,
}


def init_logger(name: str) -> VllmLogger:
    """``logging.getLogger(name)`` with vLLM's ``*_once`` methods bound on the instance:
    ``init_logger(__name__).warning_once("x %s", a, scope="global")``.

    .. versionchanged:: unreleased
       Returns the real ``logging.Logger`` (was a ``LoggerAdapter``), as vLLM's does.
    """
    logger = logging.getLogger(name)
    for method_name, method in _ONCE_METHODS.items():
        setattr(logger, method_name, MethodType(method, logger))
    return cast(VllmLogger, logger)
