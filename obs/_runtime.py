"""The runtime: one object holding a configured chain and everything it needs.

``configure()`` builds a :class:`Runtime`; loggers find it through the holder in
``obs._config``, so a reconfiguration reaches loggers obtained earlier. Nothing in
:meth:`Runtime.process` raises into the caller: a failing processor is reported once as
``obs_internal_error`` and the event is still written from a sanitised copy.
"""

from __future__ import annotations

__all__ = ["Runtime"]

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from structlog import DropEvent
from structlog.typing import EventDict, Processor

from obs.callsite import AddCallsite
from obs.context import merge_contextvars
from obs.dedup import OVERFLOW, Dedup, Deduper, make_key
from obs.encode import Redactor, safe_repr, to_jsonable
from obs.rank import RankInfo, RankResolver, add_rank_info
from obs.render import ConsoleRenderer, JSONRenderer, TimeStamper, strip_control_keys
from obs.scope import DecideScope, scope_allows
from obs.settings import Settings
from obs.severity import DEFAULT_POLICY, LEVEL_NAMES, StagePolicy, TagSeverity

if TYPE_CHECKING:
    from obs._logger import BoundLogger

_NEVER = 1 << 30
_STDLIB_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)
_METHOD_BY_LEVEL = {10: "debug", 20: "info", 30: "warning", 40: "error", 50: "critical"}


class _Output:
    """Where rendered lines go: the stream (looked up per write, so redirection works)
    in the configured format, and optionally a JSON-lines file."""

    __slots__ = ("_file", "_lock", "_render", "_stream_name", "json")

    def __init__(self, settings: Settings, rank: RankInfo) -> None:
        self._stream_name = settings.stream
        stream = getattr(sys, settings.stream)
        fmt = settings.format
        if fmt == "auto":
            try:
                fmt = "console" if stream.isatty() else "json"
            except Exception:
                fmt = "json"
        self.json = fmt == "json"
        #: The event as one line, newline included.
        self._render: Callable[[EventDict], str] = (
            JSONRenderer.line if self.json else _console(ConsoleRenderer(colors=_colors_ok(stream)))
        )
        self._lock = threading.Lock()
        self._file = None
        if settings.file:
            path = settings.file.format(
                rank=rank.rank,
                local_rank=rank.local_rank,
                node_rank=rank.node_rank,
                host=rank.host,
                pid=os.getpid(),
            )
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def write(self, event_dict: EventDict) -> None:
        line = self._render(event_dict)
        getattr(sys, self._stream_name).write(line)
        if self._file is not None:
            data = line if self.json else JSONRenderer.line(event_dict)
            with self._lock:
                self._file.write(data)

    def flush(self) -> None:
        try:
            getattr(sys, self._stream_name).flush()
            if self._file is not None:
                self._file.flush()
        except Exception:  # a closed stream at exit is not our caller's problem
            return

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            try:
                self._file.close()
            except Exception:
                return
            self._file = None


def _console(renderer: ConsoleRenderer) -> Callable[[EventDict], str]:
    return lambda ed: renderer(None, "", ed) + "\n"


def _colors_ok(stream: Any) -> bool:
    try:
        return bool(stream.isatty()) and "NO_COLOR" not in os.environ
    except Exception:
        return False


class Runtime:
    """A configured chain: settings, rank resolver, dedup table, export sink, output."""

    __slots__ = (
        "_guard",
        "_output",
        "_reported",
        "captures",
        "deduper",
        "export_level",
        "level",
        "policy",
        "processors",
        "resolver",
        "settings",
        "sink",
        "unreported_errors",
    )

    def __init__(
        self,
        settings: Settings,
        *,
        deduper: Deduper | None = None,
        policy: StagePolicy = DEFAULT_POLICY,
        build_sink: bool = True,
    ) -> None:
        self.settings = settings
        self.level = settings.level
        self.policy = policy
        self.resolver = RankResolver()
        self.deduper = deduper or Deduper(settings.dedup_capacity, settings.repeat_summary_seconds)
        self.captures: list[list[dict[str, Any]]] = []
        self._guard = threading.local()
        self._reported: set[tuple[str, str]] = set()
        self.unreported_errors = 0
        self.sink: Any = None
        if build_sink:
            from obs.otel import build_export_sink  # noqa: PLC0415 - the SDK loads only when used

            self.sink = build_export_sink(settings, self.resolver, self.report)
        self.export_level = settings.export_all_ranks_level if self.sink is not None else _NEVER
        chain: list[Processor] = [
            merge_contextvars,
            add_rank_info(self.resolver),
            TagSeverity(policy),
            DecideScope(self.resolver, self.export_level if self.sink is not None else None),
            Dedup(self.deduper),
            AddCallsite(),
            TimeStamper(),
            Redactor(),
        ]
        if self.sink is not None:
            chain.append(self.sink)
        self.processors: Sequence[Processor] = tuple(chain)
        self._output = _Output(settings, self.resolver.current())

    # -- the hot paths ---------------------------------------------------------------

    def log(
        self,
        logger: BoundLogger,
        level: int,
        method: str,
        event: str,
        kw: dict[str, Any],
        *,
        depth: int = 4,
    ) -> None:
        """Build the event dict of a logger call and run it through the chain.

        ``depth``: where the logger's caller sits, counted from a processor's frame up
        (processor -> process -> log -> logger method -> caller), for the callsite walk.
        """
        ed: EventDict = {
            "timestamp": None,
            "severity_text": None,
            "severity_number": None,
            "event": event,
            "body": event,
            "logger": logger._name,
        }
        context = logger._context
        if context:
            ed.update(context)
        flat = logger._flat  # no dict among the values: the redactor skips its nested pass
        if kw:
            ed.update(kw)
            if flat and dict in map(type, kw.values()):
                flat = False
        ed["_obs_level"] = level
        ed["_obs_depth"] = depth
        ed["_obs_flat"] = flat
        self.process(method, ed)

    def log_once(
        self, logger: BoundLogger, level: int, method: str, event: str, kw: dict[str, Any]
    ) -> None:
        """``*_once``: scope then dedup decided before any dict is built (the repeat path)."""
        scope = kw.pop("scope", "local")
        once_key = kw.pop("once_key", None) if "once_key" in kw else None
        kw.pop("once", None)
        deduper = self.deduper
        try:
            if "stage" in kw:
                rule = self.policy.rules.get(kw["stage"])
                if rule is not None and rule.level > level:
                    level = rule.level
            if level < self.export_level:
                if scope == "local":
                    if self.resolver.current().local_rank != 0:
                        return
                elif scope != "process" and not scope_allows(scope, self.resolver.current()):
                    return
            context = logger._context
            name = logger._name
            key = make_key(name, level, event, {**context, **kw} if context else kw, once_key)
            admitted = not deduper.repeat(key) and deduper.admit(
                key, event=event, level=level, logger=name
            )
        except Exception:  # an unhashable stage, once_key or event: never raise into the
            kw.update(scope=scope, once=True)  # caller; the guarded processor path decides
            if once_key is not None:  # (and reports what failed, once)
                kw["once_key"] = once_key
            self.log(logger, level, method, event, kw, depth=5)
            return
        if not admitted:
            if deduper.summary_due:
                self.emit_summaries()
            return
        if admitted == OVERFLOW:
            kw["dedup_overflow"] = True
        kw["scope"] = scope
        self.log(logger, level, method, event, kw, depth=5)

    def admit_once(
        self, name: str, level: int, event: object, args: tuple[Any, ...], scope: object
    ) -> bool | Literal["overflow"]:
        """The vLLM-style ``*_once(msg, *args, scope=)`` gate: scope, then dedup.

        :data:`obs.dedup.OVERFLOW` (truthy) when admitted through the full table's overflow slot.
        """
        if level < self.export_level and not scope_allows(scope, self.resolver.current()):
            return False
        key = make_key(
            name,
            level,
            event if isinstance(event, str) else safe_repr(event, 200),
            dict(enumerate_args(args)),
        )
        admitted = self.deduper.admit(key, event=str(event), level=level, logger=name)
        if admitted:
            return admitted
        if self.deduper.summary_due:
            self.emit_summaries()
        return False

    def process(self, method: str, event_dict: EventDict) -> None:
        """Run the chain and write the result; never raises."""
        try:
            for processor in self.processors:
                event_dict = processor(None, method, event_dict)  # type: ignore[assignment]
            if self.captures:
                snapshot = dict(strip_control_keys(dict(event_dict)))
                for sink in self.captures:
                    sink.append(dict(snapshot))
            if event_dict.get("_obs_console", True):
                self._output.write(strip_control_keys(event_dict))
        except DropEvent:
            pass
        except Exception as exc:
            self._fallback_write(event_dict, exc)
        if (self.deduper.summary_due or self.deduper.capacity_reached) and not getattr(
            self._guard, "active", False
        ):  # not while reporting: the nested reports would be dropped after the drain
            self.emit_summaries()

    def log_record(self, record: logging.LogRecord, *, export: bool = True) -> None:
        """Run a stdlib ``LogRecord`` through the same chain (the bridge's entry)."""
        try:
            msg = record.msg
            event = getattr(record, "event", None)
            if not isinstance(event, str):
                event = msg if isinstance(msg, str) else safe_repr(msg, 200)
            try:
                body = record.getMessage()
            except Exception as exc:
                body = (
                    f"{safe_repr(msg, 1000)} % {safe_repr(record.args, 1000)}"
                    f" (formatting failed: {type(exc).__name__})"
                )
            ed: EventDict = {
                "timestamp": None,
                "severity_text": None,
                "severity_number": None,
                "event": event,
                "body": body,
                "logger": record.name,
            }
            for key, value in record.__dict__.items():
                if key not in _STDLIB_ATTRS and key != "event":
                    ed[key] = value
            ed["code.file.path"] = record.pathname
            ed["code.line.number"] = record.lineno
            ed["code.function.name"] = record.funcName
            if record.exc_info:
                ed["exc_info"] = record.exc_info
            ed["_obs_level"] = record.levelno
            ed["_obs_time_ns"] = round(record.created * 1e6) * 1000  # float s, exact to the us
            if not export:
                ed["_obs_no_export"] = True
        except Exception as exc:
            self._fallback_write(
                {"event": "obs_unbridgeable_record", "logger": getattr(record, "name", "?")}, exc
            )
            return
        self.process(_METHOD_BY_LEVEL.get(record.levelno, "info"), ed)

    # -- internal events -------------------------------------------------------------

    def report(self, event: str, level: int = logging.WARNING, **fields: Any) -> None:
        """Emit an obs-internal event through the chain; a failure inside is counted."""
        guard = self._guard
        if getattr(guard, "active", False):
            self.unreported_errors += 1
            return
        guard.active = True
        try:
            ed: EventDict = {
                "timestamp": None,
                "severity_text": None,
                "severity_number": None,
                "event": event,
                "body": fields.pop("body", event),
                "logger": fields.pop("logger", "obs"),
            }
            ed.update(fields)
            ed["_obs_level"] = level
            self.process(_METHOD_BY_LEVEL.get(level, "warning"), ed)
        finally:
            guard.active = False

    def _fallback_write(self, event_dict: EventDict, exc: Exception) -> None:
        where = "chain"
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f"{tb.tb_frame.f_globals.get('__name__', '?')}.{tb.tb_frame.f_code.co_name}"
        signature = (where, type(exc).__name__)
        try:
            safe = to_jsonable(
                {k: v for k, v in event_dict.items() if not str(k).startswith("_obs_")}
            )
            safe = Redactor()(None, "", safe)  # the chain may have failed before redaction
            safe.setdefault("obs_internal_error", f"{type(exc).__name__}: {safe_repr(exc, 300)}")
            if isinstance(safe.get("severity_text"), str) is False:
                safe["severity_text"] = LEVEL_NAMES.get(
                    int(event_dict.get("_obs_level", 20) or 20), "INFO"
                )
            if not isinstance(safe.get("timestamp"), str):
                safe["timestamp"] = TimeStamper()(None, "", {})["timestamp"]
            self._output.write(safe)
        except Exception:
            self.unreported_errors += 1
        if signature not in self._reported:
            self._reported.add(signature)
            self.report(
                "obs_internal_error",
                logging.ERROR,
                where=where,
                error_type=type(exc).__name__,
                error_message=safe_repr(exc, 1000),
            )

    def emit_summaries(self) -> None:
        """Emit ``log_repeats_suppressed`` for keys that repeated (and the capacity notice)."""
        deduper = self.deduper
        if deduper.capacity_reached:
            deduper.capacity_reached = False
            self.report(
                "obs_dedup_capacity_reached",
                logging.WARNING,
                capacity=deduper.capacity,
                body=f"dedup table full ({deduper.capacity} keys): new keys share a throttled slot",
            )
        for summary in deduper.drain():
            level = summary.pop("_obs_level") or logging.WARNING
            logger = summary.pop("_obs_logger") or "obs"
            summary["body"] = (
                f"{summary['original_event']} repeated {summary['suppressed_count']} more times"
            )
            self.report("log_repeats_suppressed", level, logger=logger, **summary)

    # -- lifecycle -------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Emit pending summaries, flush outputs and the export sink (bounded)."""
        self.emit_summaries()
        ok = True
        if self.sink is not None:
            try:
                ok = bool(self.sink.force_flush(self._budget(timeout)))
            except Exception:
                ok = False
        self._output.flush()
        return ok

    def shutdown(self, timeout: float | None = None) -> bool:
        """Flush, then stop the export sink within the timeout; the runtime stays usable
        for console output afterwards."""
        self.emit_summaries()
        ok = True
        sink, self.sink = self.sink, None
        if sink is not None:
            try:
                ok = bool(sink.shutdown(self._budget(timeout)))
            except Exception:
                ok = False
            self.processors = tuple(p for p in self.processors if p is not sink)
            self.export_level = _NEVER
        self._output.close()
        return ok

    def _budget(self, timeout: float | None) -> float:
        return (
            self.settings.shutdown_timeout
            if timeout is None
            else min(timeout, self.settings.shutdown_timeout)
        )


def enumerate_args(args: tuple[Any, ...]) -> list[tuple[str, Any]]:
    """vLLM's positional ``*args`` as key fields ``0``, ``1``, ..."""
    return [(str(i), a) for i, a in enumerate(args)]
