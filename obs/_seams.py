"""The seam between the runtime and the export pipeline, as the SDK's LogRecordProcessor.

The runtime knows the export sink only through :class:`ExportProcessor`, and gets it from a
:data:`SinkFactory` it is given (the default builds obs' OTLP sink, importing the OTel SDK
only then). Tests inject a factory here instead of swapping modules.
"""

from __future__ import annotations

__all__ = ["ExportProcessor", "Report", "SinkFactory", "default_sink_factory"]

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

    from obs.rank import RankResolver
    from obs.settings import Settings

#: How a sink reports obs' own events (``report(event, level=None, *, body=None)``).
Report = Callable[..., None]


@runtime_checkable
class ExportProcessor(Protocol):
    """The export sink: the chain's last processor, flushed and shut down within a budget."""

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        """Queue the event for export; never block, never raise."""
        ...

    def force_flush(self, timeout: float) -> bool:
        """Deliver (or spool) what is queued within ``timeout``; False if it could not."""
        ...

    def shutdown(self, timeout: float) -> bool:
        """Flush and stop within ``timeout``; what is left is spooled or counted."""
        ...


SinkFactory = Callable[["Settings", "RankResolver", Report], "ExportProcessor | None"]


def default_sink_factory(
    settings: Settings, resolver: RankResolver, report: Report
) -> ExportProcessor | None:
    """obs' OTLP export sink, or None when export is off (the SDK loads only here)."""
    from obs.otel import build_export_sink  # noqa: PLC0415 - the SDK loads only when used

    sink: Any = build_export_sink(settings, resolver, report)
    return sink  # type: ignore[no-any-return]
