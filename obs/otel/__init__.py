"""OTel export: every event as an OTLP log record, with delivery guarantees.

The pipeline, as the OTel SDK's, in small parts:

- :mod:`obs.otel.sink`: :class:`ExportSink`, the chain's export processor (the caller's
  side: capture, enqueue, never block) and :func:`build_export_sink`;
- :mod:`obs.otel.worker`: the export thread, driven by the state machine of
  :mod:`obs.otel.state`;
- :mod:`obs.otel.delivery`: sending a batch (split, narrow down rejections) or disposing of
  it (spool WARNING+, count the rest); :mod:`obs.otel.accounting`: the counts and obs'
  reports of them;
- :mod:`obs.otel.records`: event dicts and spool lines as SDK records, the resource;
- :mod:`obs.otel.transport`: SDK exporters and the application's LoggerProvider.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "ExportSink",
    "build_export_sink",
    "build_exporter",
    "endpoint_text",
    "in_export_thread",
    "make_spool",
    "resource_attributes",
]

from opentelemetry import context as otel_context

from obs.otel.records import RecordBuilder, _RecordBuilder, resource_attributes
from obs.otel.sink import ExportSink, build_export_sink, make_spool
from obs.otel.transport import (
    ExporterTransport,
    _ExporterTransport,
    build_exporter,
    endpoint_text,
    in_export_thread,
)

#: Names older code and tests use (the module was one file before).
_LEGACY = (otel_context, RecordBuilder, _RecordBuilder, ExporterTransport, _ExporterTransport)
