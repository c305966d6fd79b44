"""obs: a structlog processor chain for distributed GPU inference.

Once-per-key dedup with repeat counts, rank scoping, severity that reflects the outcome,
the caller's real location, safe JSON lines, and every event exported as an
OpenTelemetry log record. Call :func:`configure` once at process start.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "BoundLogger",
    "ConfigError",
    "Settings",
    "configure",
    "delivery",
    "emit",
    "flush",
    "get_logger",
    "shutdown",
]

from typing import Any

from obs._config import STATE
from obs._logger import BoundLogger
from obs.errors import ConfigError
from obs.settings import Settings

__version__ = "0.1.0"


def configure(**overrides: Any) -> Settings:
    """Set obs up from keyword overrides > environment > defaults and return the settings.

    Idempotent; calling it again reconfigures cleanly, and loggers obtained earlier
    follow. Raises :class:`ConfigError` (naming the variable) for a bad value.
    """
    return STATE.configure(overrides)


def get_logger(name: str | None = None, **initial_values: Any) -> BoundLogger:
    """A bound logger named ``name`` (the ``logger`` field of its records)."""
    return BoundLogger(name or "root", STATE, dict(initial_values) if initial_values else None)


def flush(timeout: float = 2.0) -> bool:
    """Emit repeat summaries and flush outputs and OTel export; False if time ran out
    or a line was lost since the last flush (``delivery()["not_written"]`` counts them)."""
    runtime = STATE.runtime
    return runtime.flush(timeout) if runtime is not None else True


def shutdown(timeout: float = 2.0) -> bool:
    """Flush and stop OTel export within ``timeout`` (collector down or not)."""
    runtime = STATE.runtime
    return runtime.shutdown(timeout) if runtime is not None else True


def delivery() -> dict[str, Any]:
    """OTLP delivery counters of this process: ``endpoint`` (the URL actually used, no
    password), ``sent``, ``acknowledged``, ``spooled``, ``dropped``, ``queued``,
    ``in_flight`` (sent = the other five; ``spooled`` stays counted once a replay delivered
    the record); ``replay_delivered`` / ``replay_dropped``: spooled records (this process's
    or an earlier one's) a replay delivered / gave up (rejected, corrupt: the spool's
    losses), outside that sum; after
    :func:`shutdown`, the final counts. ``exporting`` False when export is off.
    ``not_written``: lines neither the console nor ``OBS_FILE`` took (a failing sink).

    .. versionadded:: 0.2.0
    """
    return STATE.ensure().delivery()


def emit(event: Any, /, **control: Any) -> None:
    """Log a typed event from :mod:`obs.events` at its stage's severity."""
    from obs.events import emit as _emit  # noqa: PLC0415 - the registry loads on first use

    _emit(event, **control)
