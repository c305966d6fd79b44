"""The runtime: one object holding a configured chain and everything it needs.

``configure()`` builds a :class:`Runtime`; loggers find it through the holder in
``obs._config``, so a reconfiguration reaches loggers obtained earlier. Nothing in
:meth:`Runtime.process` raises into the caller: a failing processor is reported once as
``obs_internal_error`` and the event is still written from a sanitised copy.

Re-entrancy: a log call made while this thread is already inside one (a signal handler, a
finaliser run by the garbage collector, a ``__repr__`` that logs) never takes a lock the
outer call may hold. Its event is built and deferred, and the outer call writes it when it
is done; what a deferred event logs in turn is deferred once more, and past that counted.
"""

from __future__ import annotations

__all__ = ["CONTROL_KEYS", "Runtime", "build_output"]

import logging
import math
import time
from collections.abc import Callable, Sequence
from operator import length_hint
from typing import TYPE_CHECKING, Any, Literal

from obs import errors
from obs._bridge import CALL_KEYWORDS, record_dict, record_minimal
from obs._delivery import delivery_report, stats_of
from obs._fields import CONTROL_SET, NO_EVENT, new_event_dict, plain_names
from obs._format import format_body, plain_text
from obs._fused import FusedLine
from obs._last_resort import write_unprocessed
from obs._once_cache import NOT_CACHED, OnceCache
from obs._output import Output, build_output, colors_ok, console_line
from obs._own_events import (
    LogRepeatsSuppressed,
    ObsDedupCapacityReached,
    ObsInternalError,
    ObsRecordsDropped,
    own_event_dict,
)
from obs._redactor import Redactor
from obs._reentry import LOCAL, defer, defer_built, drain, while_building
from obs._registry import Event
from obs._seams import ExportProcessor, SinkFactory, default_sink_factory
from obs.callsite import AddCallsite
from obs.context import merge_contextvars
from obs.dedup import OVERFLOW, Dedup, Deduper, make_key, ranked_key
from obs.encode import FLAT, MAX_STR, PLAIN_TYPES, safe_repr, scrub_text
from obs.levels import METHOD_BY_LEVEL
from obs.rank import RankResolver, add_rank_info
from obs.render import (
    PIPE_LINE_MAX,
    ConsoleRenderer,
    JSONRenderer,
    TimeStamper,
    fit_line,
    strip_control_keys,
    user_fields,
)
from obs.scope import DecideScope, scope_allows
from obs.settings import Settings
from obs.severity import (
    ALERT_MARK,
    ALERT_SCAN,
    DEFAULT_POLICY,
    StagePolicy,
    TagSeverity,
    alert_level,
    claim_alert,
)

if TYPE_CHECKING:
    from structlog.typing import EventDict, Processor

    from obs._logger import BoundLogger

_NEVER = 1 << 30
#: Fields the chain owns: a caller's field of that name is kept as ``user.<name>``.
CONTROL_KEYS = CONTROL_SET
_CALL_CONTROL = CONTROL_KEYS - CALL_KEYWORDS
_line = JSONRenderer.line_bytes


class Runtime:
    """A configured chain: settings, rank resolver, dedup table, export sink, output."""

    __slots__ = (
        "_console",
        "_drops_reported",
        "_final_stats",
        "_fused",
        "_next_drop_report",
        "_output",
        "_reported",
        "_stalled_at_exit",
        "captures",
        "closed",
        "deduper",
        "drops_due",
        "export_level",
        "level",
        "once_cache",
        "policy",
        "processors",
        "reentrant_dropped",
        "resolver",
        "settings",
        "ship_level",
        "sink",
        "unexported_after_shutdown",
        "unreported_errors",
    )

    def __init__(
        self,
        settings: Settings,
        *,
        deduper: Deduper | None = None,
        policy: StagePolicy = DEFAULT_POLICY,
        build_sink: bool = True,
        output: Output | None = None,
        sink_factory: SinkFactory = default_sink_factory,
    ) -> None:
        self.settings = settings
        self.level = settings.level
        self.policy = policy
        self.resolver = RankResolver()
        self.deduper = deduper or Deduper(settings.dedup_capacity, settings.repeat_summary_seconds)
        #: Suppressed ``*_once`` repeats of plain calls, for the cost of a dict lookup.
        self.once_cache = OnceCache(self.deduper, self.resolver)
        self.captures: list[list[dict[str, Any]]] = []
        self._reported: set[tuple[str, str]] = set()
        self.unreported_errors = 0
        self.reentrant_dropped = 0
        self.unexported_after_shutdown = 0
        self._drops_reported: dict[str, int] = {}
        #: Set when something was counted as dropped; reported after a write, once a second.
        self.drops_due = False
        self._next_drop_report = 0.0
        self.closed = False
        self._stalled_at_exit = False
        self._output = output or build_output(settings, self.resolver.current())
        self._console: Callable[[EventDict], bytes] = (
            JSONRenderer.line_bytes
            if self._output.json
            else console_line(
                ConsoleRenderer(
                    colors=self._stream_colors(), tracebacks=settings.console_tracebacks
                )
            )
        )
        self.sink: ExportProcessor | None = None
        self._final_stats: dict[str, Any] | None = None
        if build_sink:
            self.sink = sink_factory(settings, self.resolver, self.report)
        self.export_level = settings.export_all_ranks_level if self.sink is not None else _NEVER
        #: Hidden-by-scope records at or above this still go to the shipping sinks.
        shipping = self.sink is not None or self._output.file is not None
        self.ship_level = settings.export_all_ranks_level if shipping else _NEVER
        chain: list[Processor] = [
            merge_contextvars,
            add_rank_info(self.resolver),
            TagSeverity(policy, on_bad_argument=self._bad_argument),
            DecideScope(
                self.resolver,
                self.ship_level if shipping else None,
                on_bad_argument=self._bad_argument,
                policy=policy,
            ),
            Dedup(self.deduper, self._bad_argument, policy),
            callsite := AddCallsite(),
            stamper := TimeStamper(),
            redactor := Redactor(),
        ]
        if self.sink is not None:
            chain.append(self.sink)
        self.processors: Sequence[Processor] = tuple(chain)
        #: The default chain fused, for plain calls to JSON lines without export.
        self._fused = (
            FusedLine(self, callsite, stamper, redactor)
            if self._output.json and (self.sink is None or getattr(self.sink, "fusable", False))
            else None
        )

    def _stream_colors(self) -> bool:
        stream = self._output.stream
        return stream is not None and colors_ok(stream.stream(), self.settings)

    @property
    def output(self) -> Output:
        """The stream and file sinks (shared with the next runtime when the file is the same)."""
        return self._output

    # -- the hot paths ---------------------------------------------------------------

    def effective_level(self, level: int, stage: object) -> int:
        """The level a call with ``stage`` is filtered at: the stage's (an alert's: passes)."""
        rule = self.policy.rule(stage)  # any spelling of a stage; never raises
        return level if rule is None else max(rule.level, self.level) if rule.alert else rule.level

    def _entry(  # noqa: PLR0917 - the hot path passes positionally
        self,
        logger: BoundLogger,
        level: int,
        event: object,
        kw: dict[str, Any],
        args: tuple[Any, ...],
        depth: int,
    ) -> EventDict:
        """The event dict of a logger call: control fields first, user fields never over them."""
        if type(event) is not str or len(event) > MAX_STR:
            if event is NO_EVENT:  # log.error(event="x"): the keyword is the event
                event = kw.pop("event", None)
            event = event if type(event) is str and len(event) <= MAX_STR else plain_text(event)
        ed: EventDict = new_event_dict(
            event, event if not args else format_body(event, args), logger._name
        )
        flat = logger._flat
        if logger._context:
            ed.update(logger._fields)
        if kw:
            ed.update(kw if plain_names(kw, _CALL_CONTROL) else user_fields(kw, CALL_KEYWORDS))
            if flat:  # plain_values(kw), inlined: two C-level passes
                values = kw.values()
                flat = PLAIN_TYPES.issuperset(map(type, values)) and (
                    max(map(length_hint, values)) < MAX_STR
                )
        ed["_obs_level"] = level
        ed["_obs_depth"] = depth
        ed["_obs_flat"] = FLAT if flat else None  # obs' own mark: the Redactor trusts only it
        return ed

    def log(  # noqa: PLR0917 - the hot path passes positionally
        self,
        logger: BoundLogger,
        level: int,
        method: str,
        event: str,
        kw: dict[str, Any],
        args: tuple[Any, ...] = (),
        *,
        depth: int = 4,
    ) -> None:
        """Build the event dict of a logger call and run it through the chain.

        ``depth``: where the logger's caller sits, counted from a processor's frame up
        (processor -> process -> log -> logger method -> caller), for the callsite walk.
        """
        local = LOCAL
        if local.busy:
            defer_built(self, method, self._entry, logger, level, event, kw, args, depth)
            return
        local.busy = True
        try:
            fused = self._fused
            try:
                done = (
                    fused is not None
                    and not args
                    and fused.write(logger, level, method, event, kw, depth)
                )
            except Exception:  # the chain decides (and reports) instead
                done = False
            if done:
                deduper = self.deduper  # _after_event's test, inlined: a frame fewer
                if deduper.summary_due or deduper.capacity_reached or self.drops_due:
                    self._after_event()
            else:
                self._process(method, self._entry(logger, level, event, kw, args, depth))
        finally:
            local.busy = False
            if local.deferred:
                drain(local)

    def log_once(  # noqa: PLR0917, C901, PLR0912, PLR0915 - the *_once hot path, inlined
        self,
        logger: BoundLogger,
        level: int,
        method: str,
        event: str,
        kw: dict[str, Any],
        args: tuple[Any, ...] = (),
    ) -> None:
        """``*_once``: scope then dedup decided before any dict is built (the repeat path)."""
        cache = self.once_cache  # the caller asked it already: this is not a known repeat
        if event is NO_EVENT:  # log.error_once(event="x"): the keyword is the event
            event = kw.pop("event", None)
        plain = cache.enabled and not args and not logger._context and type(event) is str
        snap = dict(kw) if plain and NOT_CACHED.isdisjoint(kw) else None  # scope kept
        scope = kw.pop("scope", "local")
        once_key = kw.pop("once_key", None) if "once_key" in kw else None
        kw.pop("once", None)
        local = LOCAL
        alert = "stage" in kw and getattr(self.policy.rule(kw["stage"]), "alert", False)
        if local.busy or alert:  # re-entrant, or an alert (keyed per rank): the chain's Dedup
            kw.update(scope=scope, once=True)
            if once_key is not None:
                kw["once_key"] = once_key
            if local.busy:  # decides later, lock-free here
                defer_built(self, method, self._entry, logger, level, event, kw, args, 4)
            else:
                self.process(method, self._entry(logger, level, event, kw, args, 5))
            return
        deduper = self.deduper
        local.busy = True  # a value's __repr__/__hash__ in the key may log: deferred, once
        try:
            try:
                if "stage" in kw:
                    level = self.effective_level(level, kw["stage"])
                info = self.resolver.current() if level < self.ship_level else None
                if info is not None and not scope_allows(scope, info):
                    if snap is not None:  # kept quiet here: the table answers the repeat
                        cache.remember(logger._name, level, event, snap, None, info)
                    return
                context = logger._context
                name = logger._name
                fields = {**context, **kw} if context else kw
                if args:  # the formatted body keys the call, as vLLM's (msg, *args)
                    fields = {**fields, "body": format_body(event, args)}
                key = make_key(name, level, event, fields, once_key)
                if snap is not None:
                    cache.remember(name, level, event, snap, key, info)
                if deduper.lockfree and deduper.repeat(key):  # the suppressed repeat
                    if deduper.summary_due:
                        self._emit_summaries()
                    return
            except Exception:  # an odd stage, scope, once_key or event: the guarded
                kw.update(scope=scope, once=True)  # processor path decides (and reports)
                if once_key is not None:
                    kw["once_key"] = once_key
                self._process(method, self._entry(logger, level, event, kw, args, 4))
                return
            admitted = not deduper.repeat(key) and deduper.admit(
                key, event=event, level=level, logger=name
            )
            if not admitted:
                if deduper.summary_due:
                    self._emit_summaries()
                return
            if admitted == OVERFLOW:
                kw["dedup_overflow"] = True
            kw["scope"] = scope
            self._process(method, self._entry(logger, level, event, kw, args, 4))
        finally:
            local.busy = False
            if local.deferred:
                drain(local)

    def admit_once(  # noqa: C901, PLR0912 - the drop-in *_once hot path, inlined
        self, name: str, level: int, event: object, args: tuple[Any, ...], scope: object
    ) -> bool | Literal["overflow"]:
        """The vLLM-style ``*_once(msg, *args, scope=)`` gate: scope, then dedup; the alert's
        event (by name) passes every scope, keyed at its stage's level with the rank.
        :data:`obs.dedup.OVERFLOW` (truthy): admitted through the full table's overflow slot.
        Re-entrant (a signal handler inside a log call): admitted, never blocking."""
        local = LOCAL
        if local.busy:
            return True
        local.busy = True  # a value's __repr__/__hash__ in the key may log: deferred, once
        try:
            cache = self.once_cache
            slot = cache.slot(event, scope) if cache.enabled and type(event) is str else None
            try:  # the caller asked the once cache already: this is not a known repeat
                marked = type(event) is not str or len(event) > ALERT_SCAN or ALERT_MARK in event
                alert = alert_level(self.policy, event) if marked else None
                if alert is not None:  # the alert's, by name: every rank, at its stage's level
                    level, slot, scope, rank = alert, None, "process", self.resolver.current().rank
                info = self.resolver.current() if level < self.ship_level else None
                if info is not None and not scope_allows(scope, info):
                    if slot is not None:  # kept quiet here: the table answers the repeat
                        cache.remember(name, level, slot, args, None, info)
                    return False
                key = make_key(
                    name,
                    level,
                    event if isinstance(event, str) else safe_repr(event, 200),
                    {str(i): a for i, a in enumerate(args)},  # vLLM's *args as fields 0, 1, ...
                )
                if alert is not None:  # one rank's alert is never another's repeat
                    key = ranked_key(key, rank)
                if slot is not None:
                    cache.remember(name, level, slot, args, key, info)
                if self.deduper.lockfree and self.deduper.repeat(key):  # lock-free repeat
                    if self.deduper.summary_due:
                        self._emit_summaries()
                    return False
            except Exception:
                return True
            admitted = self.deduper.admit(
                key, event=str(event), level=level, logger=name, alert=alert is not None
            )
            if admitted:
                return admitted
            if self.deduper.summary_due:
                self._emit_summaries()
            return False
        finally:
            local.busy = False
            if local.deferred:
                drain(local)

    def process(self, method: str, event_dict: EventDict) -> None:
        """Run ``event_dict`` through the chain and write it; never raises or blocks."""
        local = LOCAL
        if local.busy:
            defer(self, event_dict, method)
            return
        local.busy = True
        try:
            self._process(method, event_dict)
        finally:
            local.busy = False
            if local.deferred:
                drain(local)

    def _process(self, method: str, event_dict: EventDict) -> None:
        try:
            for processor in self.processors:
                event_dict = processor(None, method, event_dict)  # type: ignore[assignment]
            self._write(event_dict)
        except errors.DropEvent:
            pass
        except Exception as exc:
            self._fallback_write(event_dict, exc)
        self._after_event()

    def _after_event(self) -> None:
        """Due summaries, or a (rate-limited) report of drops, after an event is written."""
        if self.deduper.summary_due or self.deduper.capacity_reached:
            self._emit_summaries()
        elif self.drops_due:
            now = time.monotonic()
            if now >= self._next_drop_report:  # a storm of drops: one report a second
                self._next_drop_report = now + 1.0
                self.drops_due = False
                self._report_drops()

    def _write(self, event_dict: EventDict) -> None:
        console = event_dict.pop("_obs_console", True)
        if self.closed and event_dict.get("_obs_level", 0) >= self.settings.export_all_ranks_level:
            self.unexported_after_shutdown += 1
            if self.settings.logs_exporter == "otlp":
                event_dict["obs.export"] = "skipped_after_shutdown"
        strip_control_keys(event_dict)
        if self.captures:
            for sink in self.captures:
                sink.append(dict(event_dict))
        output = self._output
        if output.json:
            line = _line(event_dict)
            shown: bytes | None = line if console else None
            if shown is not None and len(shown) > PIPE_LINE_MAX and output.stream_is_pipe():
                shown = fit_line(event_dict)  # whole across processes sharing the pipe
            output.write(shown, line)
        else:
            output.write(
                self._console(event_dict) if console else None,
                _line(event_dict) if output.file is not None else None,
            )
        if output.dropped and output.dropped != self._drops_reported.get("write_failed"):
            self.drops_due = True  # a sink failed: say so (rate-limited) where it still works

    def log_record(self, record: logging.LogRecord, *, export: bool = True) -> None:
        """Run a stdlib ``LogRecord`` through the same chain (the bridge's entry).

        The template is the event (stable for alerts), the formatted message the body;
        ``extra`` fields are user fields (``extra={"event": ...}`` is kept as
        ``user.event``). A record whose attributes are odd (a NaN ``created``, a key whose
        ``__str__`` raises) is still written at its own level with its message.
        """
        local = LOCAL
        if local.busy:  # nested: deferred; a record its message's %-args log is counted
            while_building(self, self._log_record, record, export, self.process)
            return
        local.busy = True  # the message's %-args' __str__ may log: deferred, once
        try:
            self._log_record(record, export, self._process)
        finally:
            local.busy = False
            if local.deferred:
                drain(local)

    def _log_record(
        self,
        record: logging.LogRecord,
        export: bool,
        process: Callable[[str, EventDict], None],
    ) -> None:
        try:
            ed = record_dict(record)
        except Exception as exc:
            self._fallback(record_minimal(record), exc)
            return
        level = ed["_obs_level"]
        event = ed.get("event")  # the alert's by name, at any level, whatever stage it gave
        if type(event) is not str or len(event) > ALERT_SCAN or ALERT_MARK in event:
            claim_alert(event, ed)
        if "stage" in ed:
            level = self.effective_level(level, ed["stage"])
            if level < self.level:  # the stage lowered it below what is logged
                return
            ed["_obs_level"] = level
        elif level < self.level and "level" in self.settings.sources:
            return  # OBS_LEVEL decides, whatever level a library gave its own logger
        if not export:
            ed["_obs_no_export"] = True
        process(METHOD_BY_LEVEL.get(level, "info"), ed)

    def report(
        self,
        event: Event,
        level: int | None = None,
        *,
        body: str | None = None,
        logger: str | None = None,
    ) -> None:
        """Emit one of obs' own (registered, typed) events through the chain, at ``level``
        (default: the event's own); never raises. Its text is scrubbed of URL passwords
        and bearer tokens, since it may quote an endpoint or a header."""
        try:
            level = type(event).level if level is None else level
            self.process(
                METHOD_BY_LEVEL.get(level, "warning"), own_event_dict(event, level, body, logger)
            )
        except Exception:
            self.unreported_errors += 1

    def _bad_argument(
        self,
        argument: str,
        value: object,
        expected: str = "a positive number",
        consequence: str = "logged without throttling",
    ) -> None:
        """Report a bad call argument once per argument name (the event is still logged)."""
        self._report_once(
            ("argument", argument),
            ObsInternalError(
                where="obs.api",
                error_type="ValueError",
                error_message=f"{argument}={safe_repr(value, 100)} is not valid "
                f"(expected {expected}): {consequence}",
            ),
        )

    def _report_once(self, signature: tuple[str, str], event: Event) -> None:
        if signature in self._reported:
            return
        self._reported.add(signature)
        self.report(event)

    def _fallback_write(self, event_dict: EventDict, exc: Exception) -> None:
        """Write ``event_dict`` without the chain, holding the re-entrancy mark: a signal
        handler that logs meanwhile is deferred, never waits on the sink's lock."""
        local = LOCAL
        if local.busy:
            self._fallback(event_dict, exc)
            return
        local.busy = True
        try:
            self._fallback(event_dict, exc)
        finally:
            local.busy = False
            if local.deferred:
                drain(local)

    def _fallback(self, event_dict: EventDict, exc: Exception) -> None:
        where, written = write_unprocessed(
            event_dict, exc, self.resolver, self._output, self._console, self.sink, self.policy
        )
        if not written:
            self.unreported_errors += 1
        self._report_once(
            (where, type(exc).__name__),
            ObsInternalError(
                where=where, error_type=type(exc).__name__, error_message=safe_repr(exc, 1000)
            ),
        )

    def emit_summaries(self) -> None:
        """Emit ``log_repeats_suppressed`` for keys that repeated (and the capacity notice)."""
        local = LOCAL
        if local.busy:
            return  # the outer call drains them when it is done
        local.busy = True
        try:
            self._emit_summaries()
        finally:
            local.busy = False
            if local.deferred:
                drain(local)

    def _emit_summaries(self) -> None:
        self.drops_due = False
        self._report_drops()
        deduper = self.deduper
        if deduper.capacity_reached:
            deduper.capacity_reached = False
            self._report_internal(ObsDedupCapacityReached(capacity=deduper.capacity))
        for summary in deduper.drain():
            level = summary.pop("_obs_level") or logging.WARNING
            logger = summary.pop("_obs_logger") or "obs"
            event = summary["original_event"]
            event = event if type(event) is str else safe_repr(event, 200)  # never str()
            summary["original_event"] = scrub_text(event)
            self._report_internal(LogRepeatsSuppressed(**summary), level, logger=logger)

    def _report_drops(self) -> None:
        """``obs_records_dropped`` for what re-entrant calls or a broken stream lost."""
        for reason, count in (
            ("reentrant", self.reentrant_dropped),
            ("write_failed", self._output.dropped),
        ):
            new = count - self._drops_reported.get(reason, 0)
            if new > 0:
                self._drops_reported[reason] = count
                self._report_internal(
                    ObsRecordsDropped(reason=reason, count=new),
                    body=f"{new} records not written ({reason})",
                )

    def _report_internal(
        self,
        event: Event,
        level: int | None = None,
        *,
        body: str | None = None,
        logger: str | None = None,
    ) -> None:
        """:meth:`report` from inside a call that already holds the re-entrancy mark."""
        level = type(event).level if level is None else level
        ed = own_event_dict(event, level, body, logger)
        try:
            for processor in self.processors:
                ed = processor(None, METHOD_BY_LEVEL.get(level, "warning"), ed)  # type: ignore[assignment]
            self._write(ed)
        except errors.DropEvent:
            return
        except Exception:
            self.unreported_errors += 1

    # -- lifecycle -------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Emit pending summaries, flush outputs and the export sink (bounded)."""
        self._output.posted(self.emit_summaries)
        ok = True
        if self.sink is not None:
            try:
                ok = bool(self.sink.force_flush(self._budget(timeout)))
            except Exception:
                ok = False
        return self.flush_lines(timeout) and ok

    def flush_lines(self, timeout: float | None = None, successor: Output | None = None,
                    *, at_exit: bool = False) -> bool:  # fmt: skip
        """Wait up to the budget (``OBS_SHUTDOWN_TIMEOUT`` at most) until the lines logged
        so far are written; False when time ran out. Inside a log call (a finaliser, a
        signal handler) it does not wait. ``at_exit``: wait on while a slow reader still
        takes lines; after one stalled wait, exit does not wait again."""
        stalled = LOCAL.busy or (at_exit and self._stalled_at_exit)
        done = self._output.flush(0.0 if stalled else self._budget(timeout), successor,
                                  patient=at_exit)  # fmt: skip
        self._stalled_at_exit = at_exit and not done
        return done

    def shutdown(self, timeout: float | None = None, successor: Output | None = None,
                 *, at_exit: bool = False) -> bool:  # fmt: skip
        """Flush, then stop the export sink within the timeout. The stream and the file stay
        open: records logged afterwards (atexit handlers) are still written there, and those
        that would have been exported are counted (``unexported_after_shutdown``).
        ``successor``: the output of the runtime replacing this one; the sinks it keeps
        are not flushed (reconfiguring never waits behind other threads' writes)."""
        self._output.posted(self.emit_summaries, post=successor is None)
        ok = True
        sink, self.sink = self.sink, None
        self.closed = True
        self.once_cache.clear()
        if sink is not None:
            try:
                ok = bool(sink.shutdown(self._budget(timeout)))
            except Exception:
                ok = False
            self._final_stats = stats_of(sink)
            self.processors = tuple(p for p in self.processors if p is not sink)
            self.export_level = _NEVER
        return self.flush_lines(timeout, successor, at_exit=at_exit) and ok

    def delivery(self) -> dict[str, Any]:
        """What OTLP export did so far (where to, sent, acknowledged, spooled, dropped,
        queued), and the lines no sink took; after :meth:`shutdown` the final counts."""
        stats = stats_of(self.sink) if self.sink is not None else self._final_stats
        return delivery_report(self.settings, stats, self.unexported_after_shutdown,
                               self._output.dropped + self.reentrant_dropped)  # fmt: skip

    def _budget(self, timeout: float | None) -> float:
        budget = self.settings.shutdown_timeout
        if timeout is not None and math.isfinite(timeout):
            budget = min(max(timeout, 0.0), budget)
        return budget
