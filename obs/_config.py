"""Global state department: the one module-level holder of the current runtime.

Everything else hangs off the :class:`Runtime` it holds; ``reset()`` puts it back to the
unconfigured state for tests.
"""

from __future__ import annotations

__all__ = ["STATE", "Holder"]

import atexit
import dataclasses
import logging
import threading
from typing import Any

from obs._runtime import Runtime, build_output
from obs.errors import ConfigError
from obs.rank import RankResolver
from obs.settings import Settings, load_settings


def _output_error(settings: Settings, exc: BaseException) -> ConfigError:
    """An ``OBS_FILE`` that cannot be opened, as a ConfigError naming the variable."""
    reason = f"a writable file path ({type(exc).__name__}: {getattr(exc, 'strerror', '') or exc})"
    return ConfigError(settings.source("file"), settings.file, reason)


class Holder:
    """Holds the current :class:`Runtime` (None until first use or ``configure()``)."""

    __slots__ = ("_atexit", "_lock", "bridge", "runtime")

    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        self.bridge: Any = None
        self._lock = threading.RLock()
        self._atexit = False

    def ensure(self) -> Runtime:
        """The runtime, creating a console-only default one on first use.

        Never raises: a bad variable falls back to its default (the others still apply), a
        file that cannot be opened is left out, and each problem is reported once.
        """
        with self._lock:
            if self.runtime is None:
                errors: list[ConfigError] = []
                settings = load_settings({}, errors=errors)
                try:
                    runtime = Runtime(settings, build_sink=False)
                except Exception as exc:
                    errors.append(_output_error(settings, exc))
                    settings = dataclasses.replace(settings, file=None)
                    runtime = Runtime(settings, build_sink=False)
                self.runtime = runtime
                self._register_atexit()
                for error in errors:
                    runtime.report(
                        "obs_internal_error",
                        logging.ERROR,
                        where="settings",
                        error_type="ConfigError",
                        error_message=str(error),
                        variable=error.variable,
                    )
            return self.runtime

    def configure_from_env(self) -> Runtime:
        """The runtime, configured from the environment (OTLP export included) if nothing
        configured obs yet; a bad variable falls back to :meth:`ensure`. Never raises."""
        with self._lock:
            if self.runtime is None:
                try:
                    self.configure({})
                except Exception:
                    return self.ensure()
            return self.runtime or self.ensure()

    def configure(self, overrides: dict[str, Any]) -> Settings:
        """Build a new runtime from settings and swap it in; the old one is flushed.

        Raises :class:`ConfigError` (nothing changes) for a bad value or an ``OBS_FILE``
        that cannot be opened. Threads logging meanwhile write every line once: the file
        is handed over open when the path stays the same, and never closed under a writer.
        """
        settings = load_settings(overrides)
        with self._lock:
            old = self.runtime
            keep = old is not None and (
                old.settings.dedup_capacity == settings.dedup_capacity
                and old.settings.repeat_summary_seconds == settings.repeat_summary_seconds
            )
            try:
                output = build_output(
                    settings, RankResolver().current(), old.output if old is not None else None
                )
            except Exception as exc:
                raise _output_error(settings, exc) from None
            runtime = Runtime(
                settings, deduper=old.deduper if keep and old else None, output=output
            )
            self.runtime = runtime
            if old is not None:
                if not keep:
                    old.emit_summaries()
                old.shutdown(timeout=min(1.0, old.settings.shutdown_timeout))
            from obs.stdlib import install_bridge, remove_bridge  # noqa: PLC0415

            if settings.stdlib_bridge:
                install_bridge(self, settings.level, settings.adopt_loggers)
            else:
                remove_bridge(self)
            self._register_atexit()
        return settings

    def reset(self) -> None:
        """Back to unconfigured: shut the runtime down quickly and remove the bridge."""
        with self._lock:
            from obs.stdlib import remove_bridge  # noqa: PLC0415

            remove_bridge(self)
            old, self.runtime = self.runtime, None
            if old is not None:
                old.shutdown(timeout=0.5)

    def _register_atexit(self) -> None:
        if not self._atexit:
            atexit.register(self._at_exit)
            self._atexit = True

    def _at_exit(self) -> None:
        runtime = self.runtime
        if runtime is not None:
            runtime.shutdown()


STATE = Holder()
