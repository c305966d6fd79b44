"""The stdlib bridge's machinery: the root handler obs installs, console adoption, and
the conversion of a ``LogRecord`` into an event dict.

:mod:`obs._config` installs and removes it for the holder it serves; the holder is passed
in, so nothing here reaches for global state. The public face is :mod:`obs.stdlib`.
"""

from __future__ import annotations

__all__ = [
    "CALL_KEYWORDS",
    "HANDLED",
    "STDLIB_ATTRS",
    "Adopted",
    "BridgeHolder",
    "ObsHandler",
    "adopt_consoles",
    "detached_loggers",
    "give_back_trees",
    "install_bridge",
    "log_record",
    "record_dict",
    "record_minimal",
    "remove_bridge",
]

import logging
import math
import os
import re
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from itertools import compress, repeat
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeGuard

from obs._fields import new_event_dict, user_fields
from obs._format import format_body, plain_text, safe_text
from obs.encode import MAX_KEY, MAX_STR, safe_repr, scrubbed_text
from obs.settings import DEFAULT_ADOPT_LOGGERS
from obs.severity import ALERT_LEVEL, claim_alert

if TYPE_CHECKING:
    from structlog.typing import EventDict

    from obs._runtime import Runtime


class BridgeHolder(Protocol):
    """What the bridge needs of the holder it serves (:class:`obs._config.Holder`)."""

    runtime: Runtime | None
    bridge: ObsHandler | None

    def ensure(self) -> Runtime:
        """The current runtime, configured lazily if needed."""
        ...


_NO_EXPORT_PREFIXES = ("opentelemetry", "grpc", "urllib3")


class ObsHandler(logging.Handler):
    """Root handler: hands each record to the current runtime, with a re-entrancy guard."""

    def __init__(self, holder: BridgeHolder) -> None:
        super().__init__(logging.NOTSET)
        self._holder = holder
        self._local = threading.local()
        #: Records dropped because they were logged while obs was handling a record.
        self.reentrant_drops = 0
        #: The root logger's level before the bridge set it (restored on removal).
        self.previous_root_level: int | None = None
        #: Loggers whose console output obs took over, with what to give back.
        self.adopted: dict[str, Adopted] = {}
        #: The same for loggers outside logging's tree, by ``id`` (the entry keeps it alive).
        self.detached: dict[int, Adopted] = {}
        self.adopt_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        """Process ``record``. One logged while this thread is inside obs (a signal handler,
        a finaliser) is deferred by the runtime and written after, never looped or blocked."""
        if getattr(record, HANDLED, False):  # an obs Handler on its logger wrote it
            return
        try:
            log_record(self._holder, record)
        except Exception:
            self.reentrant_drops += 1

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's API
        """Never print stdlib's 'Logging error' tracebacks: the runtime reports failures."""


#: Set on a record an obs handler wrote, so another obs handler up the tree skips it.
HANDLED = "_obs_handled"


def log_record(holder: BridgeHolder, record: logging.LogRecord) -> None:
    """Hand ``record`` to the current runtime (the OTel SDK's own records not exported)."""
    setattr(record, HANDLED, True)
    runtime = holder.runtime or holder.ensure()
    name = record.name  # a record rebuilt by makeLogRecord may have none (None)
    own = type(name) is str and name.startswith(_NO_EXPORT_PREFIXES)
    export = not own and not _in_export_thread()
    runtime.log_record(record, export=export)


def _in_export_thread() -> bool:
    otel = sys.modules.get("obs.otel")
    check = getattr(otel, "in_export_thread", None)
    try:
        return bool(check()) if check is not None else False
    except Exception:
        return False


class Adopted(NamedTuple):
    """What adoption changed on one logger: the console handlers taken off, the old flag;
    for a logger outside logging's tree, the logger itself and the parent it had."""

    handlers: tuple[logging.Handler, ...]
    propagate: bool
    logger: logging.Logger | None = None
    parent: logging.Logger | None = None


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
    holder: BridgeHolder,
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
    if not keep_root_level:  # an alert stage's record passes (obs filters the rest itself)
        root.setLevel(min(level, ALERT_LEVEL))
    holder.bridge = handler
    adopt_consoles(handler, adopt)
    return handler


def adopt_consoles(handler: ObsHandler, names: Iterable[str]) -> list[str]:
    """Take over the console output of the logger trees ``names`` for ``handler``: every
    existing logger ``name`` or ``name.*`` with a plain console ``StreamHandler`` propagates
    to obs' root handler and loses those handlers; so does a logger of those trees built
    outside logging's tree (:func:`detached_loggers`), which is given its tree parent.
    Returns the names adopted by this call."""
    prefixes = tuple(names)
    if not prefixes:
        return []
    taken: list[str] = []
    with handler.adopt_lock:
        for name, logger in list(logging.Logger.manager.loggerDict.items()):
            if not isinstance(logger, logging.Logger):
                continue
            if not _in_trees(name, prefixes):
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
        for logger in detached_loggers(prefixes):
            consoles = _console_handlers(logger)
            if not consoles and logger.parent is not None:
                continue  # none of its records is lost (no parent: logging's last resort)
            handler.detached.setdefault(
                id(logger), Adopted(tuple(consoles), logger.propagate, logger, logger.parent)
            )
            logger.parent = _tree_parent(logger.name)  # first: records now reach obs' root
            logger.propagate = True
            for console in consoles:
                logger.removeHandler(console)
            taken.append(logger.name)
    return taken


def _in_trees(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def detached_loggers(prefixes: tuple[str, ...]) -> list[logging.Logger]:
    """Loggers a library built by calling the class (``FlashInferJITLogger("flashinfer.jit")``)
    rather than through ``logging.getLogger``: not in logging's tree (no parent, so nothing
    propagates to a root handler), found as module-level attributes of the imported modules
    of the trees ``prefixes`` (one pass over those modules' globals)."""
    managed = logging.Logger.manager.loggerDict
    found: dict[int, logging.Logger] = {}
    dotted = tuple(p + "." for p in prefixes)  # C-level tests: thousands of modules
    for modname, module in list(sys.modules.items()):
        if module is None or type(modname) is not str:
            continue
        if modname.startswith(dotted) or modname in prefixes:
            values = _module_globals(module)
            # The loggers among them in C-level passes (a module holds one at most, mostly).
            loggers = compress(values, map(issubclass, map(type, values), repeat(logging.Logger)))
            for value in loggers:
                if _is_detached(value, managed, prefixes):
                    found[id(value)] = value
    return list(found.values())


def _module_globals(module: object) -> list[object]:
    try:
        return list(vars(module).values())
    except Exception:  # a lazy module that refuses: nothing to find there
        return []


def _is_detached(
    value: object, managed: Mapping[str, object], prefixes: tuple[str, ...]
) -> TypeGuard[logging.Logger]:
    cls = type(value)  # not isinstance: that reads __class__, which a lazy proxy answers
    if not issubclass(cls, logging.Logger) or issubclass(cls, logging.RootLogger):
        return False
    try:
        name = value.name  # type: ignore[attr-defined]
        return managed.get(name) is not value and _in_trees(name, prefixes)
    except Exception:  # a subclass whose name is a property that raises
        return False


def _tree_parent(name: str) -> logging.Logger:
    """The parent logging would give a logger named ``name``: its nearest existing
    ancestor in the tree, else the root logger (nothing is created)."""
    managed = logging.Logger.manager.loggerDict
    while "." in name:
        name = name.rpartition(".")[0]
        ancestor = managed.get(name)
        if isinstance(ancestor, logging.Logger):
            return ancestor
    return logging.getLogger()


def give_back_trees(handler: ObsHandler, names: Iterable[str]) -> list[str]:
    """Give the loggers of the trees ``names`` back what adoption took (console handlers,
    ``propagate``): a configuration authoritative for them, applied before obs' (a user's
    vLLM config file). Returns the names given back."""
    prefixes = tuple(names)
    given: list[str] = []
    with handler.adopt_lock:
        for name in [n for n in handler.adopted if n and _in_trees(n, prefixes)]:
            adopted = handler.adopted.pop(name)
            logger = logging.getLogger(name)
            for console in adopted.handlers:
                if console not in logger.handlers:
                    logger.addHandler(console)
            logger.propagate = adopted.propagate
            given.append(name)
    return given


def _give_back(handler: ObsHandler) -> None:
    """Restore what adoption changed, unless the library has set its logger up again."""
    with handler.adopt_lock:
        adopted = [(logging.getLogger(name), a) for name, a in handler.adopted.items()]
        adopted += [(a.logger, a) for a in handler.detached.values() if a.logger is not None]
        for logger, a in adopted:
            if not _console_handlers(logger):  # else: re-configured since; leave it be
                for console in a.handlers:
                    logger.addHandler(console)
                logger.propagate = a.propagate
                if a.logger is not None:
                    logger.parent = a.parent
        handler.adopted.clear()
        handler.detached.clear()


def remove_bridge(holder: BridgeHolder) -> None:
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


# -- a LogRecord as an event dict --------------------------------------------------------

#: A LogRecord's own attributes: anything else on a record came from ``extra``.
STDLIB_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)
#: Control fields a record's ``extra`` may set, as a call's keywords may.
CALL_KEYWORDS = frozenset({"stage", "body"})


def record_minimal(record: logging.LogRecord) -> EventDict:
    """What is left of a record whose full conversion failed: level, message, logger
    (each read on its own: any of them may be the attribute that raises)."""

    def read(name: str, default: Any) -> Any:
        try:
            return record.__dict__.get(name, default)
        except BaseException:
            return default

    level, msg = read("levelno", logging.INFO), read("msg", None)
    plain = type(msg) is str and len(msg) <= MAX_STR
    ed = new_event_dict(
        msg if plain else "obs_unbridgeable_record",
        safe_repr(msg, 1000),
        plain_text(read("name", "?")),
    )
    ed["_obs_level"] = level if type(level) is int else logging.INFO
    ed["user.error"] = "the record's attributes could not be read"
    return ed


#: Where ``logging.captureWarnings(True)`` logs a warning from (logging's, warnings').
_SHOW_WARNING = frozenset({"_showwarning", "_showwarnmsg"})
#: The start of ``warnings.formatwarning``'s text: ``path:line: Category: ``.
_WARNED_AT = re.compile(r"(.+?):(\d+): [A-Za-z_][\w.]*: ")
#: How far up the stack the warning's frame is looked for (bounded).
_MAX_FRAMES = 256


def _warning_site(ed: EventDict, msg: object) -> None:
    """A captured warning's record names the stdlib's ``_showwarnmsg``; the line that
    warned leads its text (``path:line: Category: message``), and, as the record is
    logged while ``warnings.warn`` runs, that frame is on the stack: it names the
    function. A text of another format keeps the record's own location."""
    match = _WARNED_AT.match(msg) if type(msg) is str else None
    if match is None:
        return
    path, line = match.group(1), int(match.group(2))
    function = ""
    frame = sys._getframe(1)
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        if frame.f_lineno == line and frame.f_code.co_filename == path:
            function = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
            break
        frame = frame.f_back  # type: ignore[assignment]
    ed["code.file.path"] = plain_text(path)
    ed["code.line.number"] = line
    ed["code.function.name"] = function


#: What ``logging.Formatter.format`` appends to a message: a traceback, an exception
#: group's, ``stack_info``'s stack.
_APPENDED = (
    "\nTraceback (most recent call last):\n",
    "\n  + Exception Group Traceback (most recent call last):\n",
    "\nStack (most recent call last):\n",
)


def _event_of(record: logging.LogRecord, msg: object) -> str:
    """A record's event: its template (``msg``) without what a formatter appended (not cut:
    :func:`record_dict` cuts it, once its alert is decided on the whole name)."""
    event = str.__str__(msg) if isinstance(msg, str) else safe_repr(msg, 200)  # its own text
    if not record.args and record.exc_info is None and "\n" in event:
        event = _own_text(event)
    return event


def _own_text(msg: str) -> str:
    """A formatted record's own text, before what a formatter appended: a record that went
    through ``QueueHandler.prepare()`` (the stdlib's multi-process pattern) carries its
    traceback and stack in ``msg``, and its event is the text before them (the body keeps
    them). Looked for in the first ``MAX_STR`` characters only: the event is cut there."""
    head = msg[: MAX_STR + 64]
    cut = min((i for i in map(head.find, _APPENDED) if i >= 0), default=-1)
    return msg if cut < 0 else msg[:cut]


def record_dict(record: logging.LogRecord) -> EventDict:
    """A stdlib record as an event dict: the template is the event, the formatted message
    the body, ``extra`` fields user fields, and the record's own time and callsite."""
    msg = record.msg
    text = _event_of(record, msg)
    event = text if len(text) <= MAX_STR else plain_text(text)
    args = record.args
    if args:  # as getMessage() does, bounded and scrubbed
        body = format_body(msg, args if isinstance(args, tuple) else (args,))
    else:
        body = msg if type(msg) is str else scrubbed_text(safe_text(msg))  # not the event
    ed: EventDict = new_event_dict(
        event,
        body if type(body) is str and len(body) <= MAX_STR else plain_text(body),
        plain_text(record.name),
    )
    extras = {}
    for k, v in record.__dict__.items():
        if type(k) is not str:
            k = safe_repr(k, MAX_KEY)  # noqa: PLW2901 - a key whose __str__ may raise
        if k not in STDLIB_ATTRS and not k.startswith("_obs_"):
            extras[k] = v
    if extras:
        ed.update(user_fields(extras, CALL_KEYWORDS))
    if event is not text:  # cut: an alert's name (its end) is decided on the whole text
        claim_alert(text, ed)
    ed["code.file.path"] = plain_text(record.pathname)
    lineno = record.lineno
    ed["code.line.number"] = lineno if type(lineno) is int else 0
    ed["code.function.name"] = plain_text(record.funcName)
    if record.name == "py.warnings" and record.funcName in _SHOW_WARNING:
        _warning_site(ed, msg)
    if record.exc_info:
        ed["exc_info"] = record.exc_info
    level = record.levelno
    ed["_obs_level"] = level if type(level) is int else logging.INFO
    created = record.created
    if type(created) in (int, float) and math.isfinite(created) and abs(created) < 1e11:
        ed["_obs_time_ns"] = round(created * 1e6) * 1000  # float s, exact to the us
    else:
        ed["_obs_time_ns"] = time.time_ns()  # a record built by hand with a bad time
    return ed
