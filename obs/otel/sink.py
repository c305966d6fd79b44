"""OTel export: every event as an OTLP log record, with delivery guarantees.

:class:`ExportSink` is the chain's export processor. The caller thread only captures the
OTel context, the observed time and a shallow copy of the event dict (the fused path's
parts of it: no dict), and appends them to the worker's lock-free intake (a deque; the lock only
once a batch waits, see :mod:`obs.otel.intake`; no I/O). One export
thread per process turns them into SDK ``ReadableLogRecord`` objects and hands batches
to the real SDK exporter (OTLP gRPC / HTTP, or console), so the SDK's
``BatchLogRecordProcessor`` and its sharp edges (oldest-first drops, ``force_flush``
ignoring its timeout, a 30 s exit with the collector down) are not in the path.

Guarantees: the caller never waits on the network; ``force_flush`` / ``shutdown`` are
bounded by their timeout whatever the collector does (per-request timeouts are cut to the
remaining budget, an export still stuck at the deadline is interrupted, then abandoned);
WARNING+ records that cannot be delivered are spooled (:mod:`obs._spool`) and replayed
later by this or the next process; lower ones are counted and the counts are delivered as
``obs_records_dropped`` events; a forked child starts with an empty queue, a fresh
exporter and its own rank resource. Nothing here raises into the application: failures
are reported once through ``report("obs_internal_error", ...)``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ClassVar

from opentelemetry import context as otel_context
from opentelemetry._logs import get_logger_provider
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.sdk._logs import LoggerProvider as SDKLoggerProvider
from opentelemetry.sdk._logs.export import (
    LogRecordExporter,
)

from obs._spool import Spool, service_dir
from obs.otel import transport
from obs.otel.accounting import Report
from obs.otel.known import settings_secrets
from obs.otel.records import Parts, RecordBuilder, exception_fields
from obs.otel.sigterm import SigtermHook
from obs.otel.state import State
from obs.otel.transport import ExporterTransport, ProviderTransport, Transport
from obs.otel.worker import ExportWorker
from obs.rank import RankResolver
from obs.settings import Settings
from obs.settings import _default_spool_dir as default_spool_dir

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

__all__ = ["ExportSink", "build_export_sink", "make_spool"]


class ExportSink:
    """Processor: queue every event for OTLP export (see the module docstring).

    The caller's side of the pipeline: map the event to what the worker queues (the OTel
    context, a shallow copy, or the fused path's parts) and hand it over; never raises,
    never blocks on the network. ``force_flush`` and ``shutdown`` return within their timeout
    (default ``settings.shutdown_timeout``). Registers the fork, atexit and (opt-in) SIGTERM
    hooks; the :class:`~obs.otel.worker.ExportWorker` does the rest.
    """

    __slots__ = (
        "__weakref__",
        "_atexit",
        "_builder",
        "_context",
        "_settings",
        "_sigterm",
        "_worker",
        "mode",
    )

    #: The fused default path may hand events here: this sink reads only the public
    #: fields, ``_obs_level``, ``_obs_time_ns``, ``_obs_no_export`` and ``exc_info``.
    fusable: ClassVar[bool] = True

    def __init__(
        self,
        settings: Settings,
        resolver: RankResolver,
        report: Report,
        *,
        exporter: LogRecordExporter | None = None,
        provider: SDKLoggerProvider | None = None,
        drop_report_interval: float = 5.0,
    ) -> None:
        self._settings = settings
        self._context = _context_getter()
        notes: list[tuple[str, str, str]] = []
        if settings.otlp_protocol == "http/json" and exporter is None and provider is None:
            notes.append(
                (
                    "otel_build",
                    "UnsupportedProtocol",
                    "the Python SDK has no OTLP/HTTP JSON exporter: using http/protobuf",
                )
            )
        make_transport: Callable[[], Transport]
        if provider is not None:
            self.mode = "provider"
            make_transport = lambda: ProviderTransport(provider)  # noqa: E731
        elif exporter is not None:
            self.mode = "exporter"
            make_transport = lambda: ExporterTransport(exporter)  # noqa: E731
        else:
            self.mode = settings.logs_exporter
            secrets = settings_secrets(dict(settings.otlp_headers), settings.otlp_logs_url)
            make_transport = lambda: ExporterTransport(  # noqa: E731
                transport.build_exporter(settings), secrets
            )
        self._builder = RecordBuilder(settings, resolver)
        self._worker = ExportWorker(
            settings,
            self._builder,
            make_spool(settings),
            make_transport,
            report,
            mode=self.mode,
            drop_report_interval=drop_report_interval,
            notes=notes,
        )
        self._builder.note = self._worker.add_note
        weak_fork = weakref.WeakMethod(self._worker.after_fork)

        weak_self = weakref.ref(self)

        def after_in_child() -> None:
            method = weak_fork()
            if method is not None:
                method()
            sink = weak_self()
            hook = getattr(sink, "_sigterm", None)
            if hook is not None:
                hook.after_fork()

        os.register_at_fork(after_in_child=after_in_child)
        weak_exit = weakref.WeakMethod(self.shutdown)

        def at_exit() -> None:
            method = weak_exit()
            if method is not None:
                method()

        self._atexit = at_exit
        atexit.register(at_exit)
        self._sigterm: SigtermHook | None = None
        if settings.handle_sigterm:
            self._install_sigterm()
        self._worker.start()

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        """Queue the event for export and return it unchanged; never raises or blocks."""
        try:
            if event_dict.get("_obs_no_export"):
                return event_dict
            copy = dict(event_dict)
            if "exc_info" in copy:  # a user's own chain without obs' Redactor
                exception_fields(copy)
            worker = self._worker
            intake = worker.intake  # (its class is the copy's: taken from it later)
            intake.append((time.time_ns(), self._context(), copy))
            if len(intake) >= worker.wake_at:  # (read after the append: see ExportWorker)
                worker.settle()
            event_dict["_obs_exported"] = True  # a chain failing after this: not again
        except Exception as exc:
            self._worker.note("otel_enqueue", exc)
        return event_dict

    def hand_over(self, time_ns: int, parts: Parts) -> None:
        """Queue the fused path's parts of an event logged at ``time_ns`` (the export thread
        builds the record of :func:`obs._fused.event_dict_of`, their event dict), as they
        are: nobody uses them after this call, their values are immutable; never raises."""
        try:
            worker = self._worker
            intake = worker.intake
            intake.append((time_ns, self._context(), parts))
            if len(intake) >= worker.wake_at:
                worker.settle()
        except Exception as exc:
            self._worker.note("otel_enqueue", exc)

    @property
    def state(self) -> State:
        """The export worker's state (phase and collector)."""
        return self._worker.state

    def force_flush(self, timeout: float | None = None) -> bool:
        """Export everything queued so far (and pending replays); True when all of it was
        delivered within ``timeout`` (default ``settings.shutdown_timeout``)."""
        return self._worker.force_flush(timeout)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Deliver what is queued, spool what cannot be, stop; bounded by ``timeout``
        (default ``settings.shutdown_timeout``) even with the collector down or stuck.
        True when everything was delivered. Idempotent."""
        if not self._worker.closing:
            with contextlib.suppress(Exception):
                atexit.unregister(self._atexit)
            self._restore_sigterm()
        return self._worker.shutdown(timeout)

    def stats(self) -> dict[str, Any]:
        """Delivery counters: queued, enqueued, exported, dropped per level (and per
        reason), spooled, replayed, failed exports, corrupt spool lines, records folded
        to fit Loki (``folded``)."""
        stats = self._worker.stats()
        stats["folded"] = self._builder.folded
        return stats

    def _install_sigterm(self) -> None:
        """``OBS_HANDLE_SIGTERM`` (see :mod:`obs.otel.sigterm`); Python sets signal
        handlers from the main thread only."""
        if threading.current_thread() is not threading.main_thread():
            self._worker.add_note(
                "otel_sigterm", "NotMainThread", "OBS_HANDLE_SIGTERM needs the main thread"
            )
            return
        weak = weakref.WeakMethod(self.shutdown)

        def shutdown() -> None:
            method = weak()
            if method is not None:
                method()

        hook = SigtermHook(shutdown, self._settings.shutdown_timeout)
        hook.install()
        self._sigterm = hook

    def _restore_sigterm(self) -> None:
        """Put the previous SIGTERM handler back if ours is still the installed one."""
        hook = self._sigterm
        if hook is None or threading.current_thread() is not threading.main_thread():
            return
        self._sigterm = None
        hook.remove()


def _context_getter() -> Callable[[], otel_context.Context]:
    """``opentelemetry.context.get_current`` without its two Python frames: the default
    runtime context's own ``ContextVar.get`` (else ``get_current`` itself)."""
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None)
    if type(runtime) is ContextVarsRuntimeContext and isinstance(var, ContextVar):
        return var.get
    return otel_context.get_current


def make_spool(settings: Settings) -> Spool:
    """The sink's spool: ``OBS_SPOOL_DIR`` as given, or by default one directory per
    service under ``$TMPDIR/obs-spool-$UID`` (its parent checked like the spool itself),
    so that no program replays, or is credited with, another program's records."""
    if "spool_dir" in settings.sources or settings.spool_dir != default_spool_dir():
        return Spool(settings.spool_dir, settings.spool_max_bytes)
    directory = service_dir(settings.spool_dir, settings.shown_service_name)
    return Spool(directory, settings.spool_max_bytes, safe_parent=True)


def build_export_sink(
    settings: Settings, resolver: RankResolver, report: Report
) -> ExportSink | None:
    """The export sink ``configure()`` puts in the chain, or None when export is off.

    An SDK ``LoggerProvider`` the application installed globally (``opentelemetry-instrument``)
    is used instead of building a pipeline, whatever ``OTEL_LOGS_EXPORTER`` says; only
    ``OTEL_SDK_DISABLED`` turns export off then.
    """
    if settings.sdk_disabled:
        return None
    provider = get_logger_provider()
    if isinstance(provider, SDKLoggerProvider):
        return ExportSink(settings, resolver, report, provider=provider)
    if settings.logs_exporter == "none":
        return None
    return ExportSink(settings, resolver, report)
