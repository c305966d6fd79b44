"""Global state department: the one module-level holder of the current runtime.

Everything else hangs off the :class:`Runtime` it holds; ``reset()`` puts it back to the
unconfigured state for tests. The runtime's modules (the renderer, orjson, the bridge, obs'
own events) load on first use, not at ``import obs``.
"""

from __future__ import annotations

__all__ = ["STATE", "Holder"]

import atexit
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from obs._logger import gate_levels
from obs._seams import default_sink_factory
from obs.dedup import _Entry
from obs.errors import ConfigError
from obs.settings import Settings, load_settings

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from obs._output import Output
    from obs._runtime import Runtime
    from obs._seams import SinkFactory
    from obs.dedup import Deduper


def _output_for(
    settings: Settings, old: Runtime | None, errors: list[ConfigError] | None
) -> tuple[Settings, Output]:
    """The sinks ``settings`` name; one that cannot be opened raises :class:`ConfigError`,
    or with ``errors`` is appended there and left out (no ``OBS_FILE``)."""
    from obs._runtime import build_output  # noqa: PLC0415 - on first use
    from obs.rank import RankResolver  # noqa: PLC0415 - on first use

    rank = RankResolver().current()
    previous = old.output if old is not None else None
    try:
        return settings, build_output(settings, rank, previous)
    except Exception as exc:
        if errors is None:
            raise _output_error(settings, exc) from None
        errors.append(_output_error(settings, exc))
        settings = dataclasses.replace(settings, file=None)
        return settings, build_output(settings, rank, previous)


def _runtime_class() -> type[Runtime]:
    """The Runtime class. Its modules are imported on first use with this thread's
    asynchronous signals held (pending, run right after): a handler that logs meanwhile
    found ``obs._runtime`` half imported, and its ImportError ended the interrupted call."""
    module = sys.modules.get("obs._runtime")
    if (
        module is None
        or getattr(module, "Runtime", None) is None
        or "obs._bridge" not in sys.modules
    ):
        from obs._sigmask import held  # noqa: PLC0415 - on first use

        with held():
            import obs._bridge  # noqa: PLC0415 - whole before any handler runs
            import obs._runtime  # noqa: PLC0415

        module = obs._runtime
    runtime: type[Runtime] = module.Runtime
    return runtime


def _report_errors(runtime: Runtime, errors: list[ConfigError]) -> None:
    """Each settings problem the lenient path met, reported once through ``runtime``."""
    from obs._own_events import ObsInternalError  # noqa: PLC0415 - on first use

    for error in errors:
        runtime.report(
            ObsInternalError(
                where="settings",
                error_type="ConfigError",
                error_message=str(error),
                variable=error.variable,
            )
        )


def _report_refused_headers(runtime: Runtime, settings: Settings) -> None:
    """The OTLP headers left out as invalid (:func:`obs._parsers.headers`), reported once:
    which ones by position, never their text."""
    refused = getattr(settings.otlp_headers, "refused", ())
    if refused:
        from obs._own_events import ObsInternalError  # noqa: PLC0415 - on first use

        variable = settings.source("otlp_headers")
        runtime.report(
            ObsInternalError(
                where="settings",
                error_type="ConfigError",
                error_message=f"left out (not sent), read from {variable} -- {'; '.join(refused)}",
                variable=variable,
            ),
            logging.WARNING,
        )


def _output_error(settings: Settings, exc: BaseException) -> ConfigError:
    """An ``OBS_FILE`` that cannot be opened, as a ConfigError naming the variable."""
    reason = f"a writable file path ({type(exc).__name__}: {getattr(exc, 'strerror', '') or exc})"
    return ConfigError(settings.source("file"), settings.file, reason)


def _leave_counts_to_parent(deduper: Deduper) -> None:
    """In a forked child: the repeats the parent counted and has not reported yet are the
    parent's to report (it does, at its next summary); the child keeps the keys (a once
    event stays once) and reports only the repeats it makes itself."""
    entries = [*deduper._entries.values(), deduper._overflow]
    for entry in entries:
        if entry is not None:
            entry.fold()
            entry.suppressed += entry.pending
            entry.pending = 0


def _carry_keys(old: Deduper, new: Deduper) -> None:
    """``configure()`` again with other dedup settings: the new table keeps the keys the
    old one retained (up to its capacity), so a once event never fires again and an
    every_n count goes on; the repeats not yet reported stay the old table's (it reports
    them before it goes), so each is counted once."""
    with old._lock:
        for key, entry in list(old._entries.items())[: new.capacity]:
            copy = _Entry(entry.key_text, entry.event, entry.level, entry.logger, entry.first_seen)
            copy.seen, copy.last_seen = entry.seen, entry.last_seen
            copy.last_emit = entry.last_emit
            entry.fold()
            copy.suppressed = entry.suppressed + entry.pending
            new._entries[key] = copy


class _NoTable:
    """The once table without a runtime (before one, after shutdown): it knows no call."""

    __slots__ = ()
    _table: MappingProxyType[object, Any] = MappingProxyType({})


#: What :attr:`Holder.once` holds without a runtime: every ``*_once`` call misses it.
NO_TABLE: Any = _NoTable()


class Holder:
    """Holds the current :class:`Runtime` (None until first use or ``configure()``)."""

    __slots__ = (
        "_atexit",
        "_configured_late",
        "_deferred",
        "_forked",
        "_inside",
        "_lock",
        "_sighup",
        "after_configure",
        "bridge",
        "level",
        "once",
        "runtime",
        "sink_factory",
        "sinks",
    )

    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        #: The current runtime's once table (an empty stand-in without one): a ``*_once``
        #: repeat reads it first, before looking the runtime up.
        self.once: Any = NO_TABLE
        #: The current runtime's level (0 before one exists): a call below it returns at
        #: once, without looking the runtime up.
        self.level = 0
        self.bridge: Any = None
        #: Capture sinks every runtime gets, across configure() and reset() (the pytest
        #: plugin's caplog mirror); ``capture_events()`` lists live on one runtime only.
        self.sinks: list[Any] = []
        #: Builds the export sink of each configured runtime (tests inject their own).
        self.sink_factory: SinkFactory = default_sink_factory
        self._lock = threading.RLock()
        #: The thread inside configure() / reset() (None: none), and what a call made again
        #: on that same thread (a signal handler's, a finaliser's) asked for meanwhile.
        self._inside: int | None = None
        self._deferred: list[Callable[[], object]] = []
        self._configured_late = False  # a deferred configure() ran: its hooks are due
        self._forked = False  # the fork hook is registered (on first use: none at import)
        self._atexit = False
        self._sighup = False
        #: Run after each ``configure()`` (never raising): obs.vllm_plugin's, when vLLM
        #: loaded its plugins before obs was configured and there was nothing to follow.
        self.after_configure: list[Callable[[], object]] = []

    def _locked(self) -> threading.RLock:
        """The holder's lock, renewed in a forked child: a parent thread inside
        ``configure()`` at the fork would otherwise hold it there forever."""
        if not self._forked and hasattr(os, "register_at_fork"):
            self._forked = True
            os.register_at_fork(after_in_child=self._after_fork)
        return self._lock

    def _set_level(self, level: int) -> None:
        """Record the current runtime's level, and gate the loggers' methods below it."""
        self.level = level
        gate_levels(level)

    def _after_fork(self) -> None:
        self._lock = threading.RLock()
        self._inside, self._deferred, self._configured_late = None, [], False
        if self.bridge is not None:  # held across a walk of the loggers in configure()
            self.bridge.adopt_lock = threading.Lock()
        runtime = self.runtime
        if runtime is not None:  # the once table's lock: a parent thread in admit() held it
            runtime.deduper._lock = threading.Lock()
            _leave_counts_to_parent(runtime.deduper)
        registry = sys.modules.get("obs._registry")
        if registry is not None:  # a parent thread registering an event class held it
            registry.REGISTRY._lock = threading.Lock()
        if "obs._output" in sys.modules:  # a parent thread in configure() making a sink
            from obs import _output  # noqa: PLC0415 - loaded already

            _output._STREAMS_LOCK = threading.Lock()

    def ensure(self) -> Runtime:
        """The runtime, creating a console-only default one on first use.

        Never raises: a bad variable falls back to its default (the others still apply), a
        file that cannot be opened is left out, and each problem is reported once.
        """
        with self._locked():
            if self.runtime is None:
                Runtime = _runtime_class()  # noqa: N806 - the class
                errors: list[ConfigError] = []
                settings = load_settings({}, errors=errors)
                try:
                    runtime = Runtime(settings, build_sink=False)
                except Exception as exc:
                    errors.append(_output_error(settings, exc))
                    settings = dataclasses.replace(settings, file=None)
                    runtime = Runtime(settings, build_sink=False)
                runtime.captures.extend(self.sinks)
                self.runtime, self.once = runtime, runtime.once_cache
                self._set_level(runtime.level)
                self._register_atexit()
                _report_refused_headers(runtime, settings)
                _report_errors(runtime, errors)
            return self.runtime

    def configure_from_env(self) -> Runtime:
        """The runtime, configured from the environment (OTLP export included) if nothing
        configured obs yet. Never raises: a bad variable costs only itself (its default is
        used, the rest applies, OTLP export stays on) and is reported once."""
        with self._locked():
            if self.runtime is None:
                errors: list[ConfigError] = []
                try:
                    self.configure({}, errors=errors)
                except Exception:
                    return self.ensure()
                if self.runtime is not None:
                    _report_errors(self.runtime, errors)
            return self.runtime or self.ensure()

    def configure(
        self, overrides: dict[str, Any], *, errors: list[ConfigError] | None = None
    ) -> Settings:
        """Build a new runtime from settings and swap it in; the old one is flushed.

        Raises :class:`ConfigError` (nothing changes) for a bad value or an ``OBS_FILE``
        that cannot be opened; with ``errors`` (a list) those are appended there instead,
        and the default (no file) is used. Threads logging meanwhile write every line once: the file
        is handed over open when the path stays the same, and never closed under a writer.
        """
        with self._locked():
            if self._inside == threading.get_ident():
                return self._defer_configure(overrides, errors)
            with self._exclusive():
                settings = self._configure(overrides, errors)
            self._configured_late = False  # its hooks run now, once
        self._after_configure()
        return settings

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Mark this thread inside configure() / reset() (the lock held); on the way out,
        run what a call re-entered on this thread asked for meanwhile, in order."""
        self._inside = threading.get_ident()
        try:
            yield
        finally:
            try:  # also after a call that raised: the later call still stands
                while self._deferred:
                    self._deferred.pop(0)()
            finally:
                self._inside = None
                self._deferred.clear()

    def _defer_configure(
        self, overrides: dict[str, Any], errors: list[ConfigError] | None
    ) -> Settings:
        """configure() called on the thread already inside configure() / reset() (a signal
        handler's, a finaliser's): running it there would take locks that thread holds
        (a hang) and be undone by the call it interrupted. Its settings are checked now
        (a bad value raises, as always) and applied right after that call, as the later."""
        settings = load_settings(overrides, errors=errors)
        kept = dict(overrides)

        def later() -> None:
            problems: list[ConfigError] = []
            self._configure(kept, problems)
            self._configured_late = True
            if self.runtime is not None:
                _report_errors(self.runtime, problems)

        self._deferred.append(later)
        return settings

    def _configure(self, overrides: dict[str, Any], errors: list[ConfigError] | None) -> Settings:
        """configure()'s work, with the lock held."""
        Runtime = _runtime_class()  # noqa: N806 - the class
        from obs._bridge import install_bridge, remove_bridge  # noqa: PLC0415 - on first use

        settings = load_settings(overrides, errors=errors)
        keep_root = False
        if "level" not in settings.sources:  # OBS_LEVEL unset: follow the app's root level
            root_level = logging.getLogger().level
            keep_root = settings.stdlib_bridge and root_level not in (
                logging.NOTSET,
                logging.WARNING,
            )
            if keep_root and root_level < settings.level:
                settings = dataclasses.replace(settings, level=root_level)
        with self._locked():
            old = self.runtime
            keep = old is not None and (
                old.settings.dedup_capacity == settings.dedup_capacity
                and old.settings.repeat_summary_seconds == settings.repeat_summary_seconds
            )
            settings, output = _output_for(settings, old, errors)
            runtime = Runtime(
                settings,
                deduper=old.deduper if keep and old else None,
                output=output,
                sink_factory=self.sink_factory,
            )
            if old is not None and not keep:
                _carry_keys(old.deduper, runtime.deduper)
            runtime.captures.extend(self.sinks)
            self.runtime, self.once = runtime, runtime.once_cache
            self._set_level(runtime.level)
            if old is not None:
                if not keep:
                    old.emit_summaries()
                old.shutdown(timeout=min(1.0, old.settings.shutdown_timeout), successor=output)
            if settings.stdlib_bridge:
                install_bridge(
                    self,
                    settings.level,
                    settings.adopt_loggers,
                    keep_root_level=keep_root,
                    adopt_otel_handlers=getattr(runtime.sink, "mode", None) == "provider",
                )
            else:
                remove_bridge(self)
            if getattr(runtime.sink, "mode", None) == "provider":
                _report_global_provider(runtime, settings)
            _report_refused_headers(runtime, settings)
            if settings.file_reopen_on_sighup and settings.file:
                self._install_sighup()
            self._register_atexit()
        return settings

    def _after_configure(self) -> None:
        """Run the :attr:`after_configure` hooks; one that raises does not stop the rest."""
        for hook in list(self.after_configure):
            with contextlib.suppress(Exception):
                hook()

    def reset(self) -> None:
        """Back to unconfigured: shut the runtime down quickly and remove the bridge."""
        with self._locked():
            if self._inside == threading.get_ident():
                self._deferred.append(self._reset)
                return
            with self._exclusive():
                self._reset()
            late, self._configured_late = self._configured_late, False
        if late:  # a signal handler's configure() ran after this reset: its hooks too
            self._after_configure()

    def _reset(self) -> None:
        """reset()'s work, with the lock held."""
        bridge = sys.modules.get("obs._bridge")  # not loaded: no obs handler anywhere
        if bridge is not None:
            bridge.remove_bridge(self)
        old, self.runtime, self.once = self.runtime, None, NO_TABLE
        self._set_level(0)
        if old is not None:
            old.shutdown(timeout=0.5)

    def _install_sighup(self) -> None:
        """SIGHUP reopens ``OBS_FILE`` (logrotate's ``postrotate``), then runs the handler
        that was there before; installed once, from the main thread only."""
        if self._sighup or threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGHUP)

        def on_sighup(signum: int, frame: Any) -> None:
            runtime = self.runtime
            file = runtime.output.file if runtime is not None else None
            if file is not None:
                file.request_reopen()
            if callable(previous):
                previous(signum, frame)

        signal.signal(signal.SIGHUP, on_sighup)
        self._sighup = True

    def _register_atexit(self) -> None:
        if not self._atexit:
            atexit.register(self._at_exit)
            # Also before threading joins the threads at exit: a multiprocessing child ends
            # with os._exit() right after that, without atexit, and a sink's writer thread
            # may still hold lines its threads logged.
            before_join = getattr(threading, "_register_atexit", None)
            if before_join is not None:
                with contextlib.suppress(Exception):  # already shutting down
                    before_join(self._before_threads_join)
            self._atexit = True

    def _at_exit(self) -> None:
        runtime = self.runtime
        if runtime is not None:
            runtime.shutdown(at_exit=True)

    def _before_threads_join(self) -> None:
        from obs._combiner import exiting  # noqa: PLC0415 - loaded with the sinks

        exiting()  # threads still logging write their own lines: joining them waits for it
        runtime = self.runtime
        if runtime is not None:
            with contextlib.suppress(Exception):  # exit must go on whatever happens here
                runtime.flush_lines(at_exit=True)


STATE = Holder()


def _report_global_provider(runtime: Runtime, settings: Settings) -> None:
    """Say which provider exports: the application's global OTel LoggerProvider wins (its
    exporters and endpoint), so obs' own OTLP settings are not used; a WARNING when some
    were given, since they would otherwise be ignored silently."""
    from obs._own_events import ObsExportProvider  # noqa: PLC0415 - on first use

    ignored = settings.otlp_endpoint is not None
    runtime.report(
        ObsExportProvider(provider="global"),
        logging.WARNING if ignored else logging.INFO,
        body="exporting through the application's global OpenTelemetry LoggerProvider"
        + (
            f"; {settings.source('otlp_endpoint')} is not used (that provider's exporters are)"
            if ignored
            else ""
        ),
    )
