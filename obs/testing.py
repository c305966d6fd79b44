"""Helpers for testing code that logs with obs.

``capture_events()`` collects the event dicts that made it through the whole chain (scope
and dedup applied) in a list; ``reset()`` puts obs back to its unconfigured state. The
real-protocol OTLP receiver is ``OTLPReceiver`` (loaded on first use: it needs grpcio).

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = ["OTLPReceiver", "capture_events", "make_self_signed_cert", "reset"]

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from obs._config import STATE

if TYPE_CHECKING:
    from obs._receiver import OTLPReceiver, make_self_signed_cert


@contextlib.contextmanager
def capture_events() -> Iterator[list[dict[str, Any]]]:
    """Collect every event that passes the chain while the block runs (still rendered)."""
    runtime = STATE.runtime or STATE.ensure()
    events: list[dict[str, Any]] = []
    runtime.captures.append(events)
    try:
        yield events
    finally:
        with contextlib.suppress(ValueError):
            runtime.captures.remove(events)


def reset() -> None:
    """Unconfigure obs: shut the current runtime down and remove the stdlib bridge."""
    STATE.reset()


def __getattr__(name: str) -> Any:
    if name in ("OTLPReceiver", "make_self_signed_cert"):
        from obs import _receiver  # noqa: PLC0415 - grpc loads only when a receiver is used

        return getattr(_receiver, name)
    raise AttributeError(f"module 'obs.testing' has no attribute {name!r}")
