"""pytest plugin (entry point ``obs``): ``obs_events``, ``otlp_receiver``, and ``caplog``
seeing obs records.

- ``obs_events``: obs reset and configured for the test (JSON lines, no export, repeat
  summaries only at flush), the list of events that passed the chain; reset again after,
  so dedup state never leaks from one test into the next.
- ``caplog``: a test that uses it sees obs records as ``logging.LogRecord`` objects
  (``record.event`` and ``record.obs`` carry the event and its fields), as structlog's docs
  show for its stdlib integration.
- ``otlp_receiver``: a real OTLP receiver (gRPC + HTTP) on loopback.

Importing this module is cheap: grpc and protobuf load only when a test asks for the
receiver.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from obs.levels import LEVEL_BY_NAME

if TYPE_CHECKING:
    from obs._receiver import OTLPReceiver

__all__ = ["obs_events", "otlp_receiver"]


class _StdlibMirror(list):  # type: ignore[type-arg]
    """A capture sink that hands each event to a logging handler (caplog's) instead of
    keeping it: a LogRecord at the event's level with the body as message."""

    def __init__(self, handler: logging.Handler) -> None:
        super().__init__()
        self.handler = handler

    def __eq__(self, other: object) -> bool:  # identity: never "equal" to an empty capture
        return self is other

    __hash__ = object.__hash__  # type: ignore[assignment]

    def append(self, event: Any) -> None:
        """Called by the runtime with each written event (a copy)."""
        try:
            level = LEVEL_BY_NAME.get(str(event.get("severity_text")), logging.INFO)
            if level < self.handler.level:
                return
            record = logging.LogRecord(
                name=str(event.get("logger", "obs")),
                level=level,
                pathname=str(event.get("code.file.path", "")),
                lineno=int(event.get("code.line.number") or 0),
                msg=str(event.get("body") or event.get("event", "")),
                args=None,
                exc_info=None,
                func=event.get("code.function.name"),
            )
            record.event = event.get("event")
            record.obs = event
            self.handler.handle(record)
        except Exception:  # a test helper must not break the code under test
            return


@pytest.fixture(autouse=True)
def _obs_caplog(request: pytest.FixtureRequest) -> Iterator[None]:
    """When the test uses ``caplog``, mirror obs' events into it."""
    if "caplog" not in request.fixturenames:
        yield
        return
    from obs._config import STATE  # noqa: PLC0415

    caplog = request.getfixturevalue("caplog")
    mirror = _StdlibMirror(caplog.handler)
    with STATE._lock:
        STATE.sinks.append(mirror)
        if STATE.runtime is not None:
            STATE.runtime.captures.append(mirror)
    try:
        yield
    finally:
        with STATE._lock:
            STATE.sinks.remove(mirror)
            if STATE.runtime is not None and mirror in STATE.runtime.captures:
                STATE.runtime.captures.remove(mirror)


@pytest.fixture
def obs_events() -> Iterator[list[dict[str, Any]]]:
    """obs freshly configured for this test; the events that passed the chain, in order."""
    import obs  # noqa: PLC0415
    from obs.testing import capture_events, reset  # noqa: PLC0415

    reset()
    obs.configure(format="json", sdk_disabled=True, repeat_summary_seconds=0)
    try:
        with capture_events() as events:
            yield events
    finally:
        reset()


@pytest.fixture
def otlp_receiver() -> Iterator[OTLPReceiver]:
    """A started OTLPReceiver (gRPC + HTTP on free loopback ports), stopped after the test."""
    from obs._receiver import OTLPReceiver  # noqa: PLC0415 - keep plugin import light

    receiver = OTLPReceiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()
