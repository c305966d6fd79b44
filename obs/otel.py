"""OTel export: every event as an OTLP log record, with delivery guarantees.

:class:`ExportSink` is the chain's export processor. The caller thread only captures the
OTel context, the observed time and a shallow copy of the event dict, and appends them to
a :class:`~obs._export_queue.SeverityQueue` (a few microseconds, no I/O). One export
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

__all__ = ["ExportSink", "build_export_sink", "build_exporter", "in_export_thread"]

import atexit
import base64
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import unquote, urlparse, urlsplit, urlunsplit

from opentelemetry import context as otel_context
from opentelemetry._logs import LogRecord, SeverityNumber, get_logger_provider
from opentelemetry.sdk._logs import LoggerProvider as SDKLoggerProvider
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    ConsoleLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.sdk.version import __version__ as _sdk_version
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from structlog.typing import EventDict, WrappedLogger

from obs._export_queue import LEVEL_NAMES, WARNING_CLASS, SeverityQueue, level_class
from obs._otlp_outcome import Outcome, install_grpc_probe, install_http_probe
from obs._spool import Spool, service_dir
from obs.encode import format_exception, safe_repr, scrub_text, to_otel_value
from obs.errors import ConfigError
from obs.otlp_wire import Encoder
from obs.rank import RankInfo, RankResolver
from obs.settings import Settings
from obs.settings import _default_spool_dir as default_spool_dir

Report = Callable[..., None]
#: What the caller thread queues: observed time (ns), OTel context, event dict copy.
Captured = tuple[int, otel_context.Context, dict[str, Any]]
Payload = Captured | ReadableLogRecord

_SCOPE = InstrumentationScope("obs", "0.1.0")
_NOT_ATTRIBUTES = frozenset({"timestamp", "body", "severity_text", "severity_number"})
_CLASS_OF = {10: 0, 20: 1, 30: 2, 40: 3, 50: 4}
_CLASS_OF_SEVERITY = (1,) + (0,) * 8 + (1,) * 4 + (2,) * 4 + (3,) * 4 + (4,) * 4  # index = number
_SEVERITY_OF_CLASS = (
    SeverityNumber.DEBUG,
    SeverityNumber.INFO,
    SeverityNumber.WARN,
    SeverityNumber.ERROR,
    SeverityNumber.FATAL,
)
_SEVERITIES = {member.value: member for member in SeverityNumber}
_SUPPRESS_KEY = otel_context._SUPPRESS_INSTRUMENTATION_KEY
_MAX_BACKOFF = 5.0
_PROBE_TIMEOUT = 1.0  # one export attempt at shutdown when the collector was just down
_REPLAY_CHECK_INTERVAL = 1.0
#: obs' own reports of loss: spooled into the spool's reserve, so they survive a full spool.
_LOSS_REPORTS = frozenset({"obs_records_dropped", "obs_internal_error"})
_DISPOSE_CHUNK = 256  # records spooled per step at shutdown (what shutdown can take over)
#: gRPC's default reconnect backoff (1 s, growing to 120 s) would keep a channel failing
#: fast long after the collector is back; ours retries its own way (see _MAX_BACKOFF).
_GRPC_RECONNECT: Any = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class _ExportThread(threading.Thread):
    """The export thread's class: :func:`in_export_thread` is a type check, not a global."""


def in_export_thread() -> bool:
    """True in obs' export thread: the stdlib bridge must not export records logged there
    (the SDK's and grpc's own warnings about a failing export), or export could loop."""
    return isinstance(threading.current_thread(), _ExportThread)


def _class_of(event_dict: EventDict) -> int:
    """Severity class of an event: ``_obs_level`` if set, else its ``severity_number``."""
    level = event_dict.get("_obs_level")
    if type(level) is int:
        return level_class(level)
    number = event_dict.get("severity_number")
    if type(number) is int and 0 <= number < len(_CLASS_OF_SEVERITY):
        return _CLASS_OF_SEVERITY[number]
    return 1


def _exception_fields(event_dict: dict[str, Any]) -> None:
    """Turn ``exc_info`` into ``exception.*`` strings now, in the caller's thread (where
    ``exc_info=True`` still means something)."""
    exc = event_dict.pop("exc_info")
    fields = format_exception(exc) if exc is not None and exc is not False else None
    if fields:
        for key, value in fields.items():
            event_dict.setdefault(key, value)


# --- records ------------------------------------------------------------------------------


class _Resource(Resource):
    """A Resource that hashes once: the SDK's OTLP encoder groups a batch by resource and
    hashes each record's (a sorted ``json.dumps`` per record in 1.45, ~15% of encoding)."""

    def __init__(self, attributes: Mapping[str, Any]) -> None:
        super().__init__(attributes)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or super().__eq__(other)


class _RecordBuilder:
    """Turns captured events (and spool lines) into SDK ``ReadableLogRecord`` objects.

    Runs on the export thread: attribute coercion (``obs.encode.to_otel_value``) and object
    building stay off the caller's hot path. Holds the resource, rebuilt when the rank
    changes, and the ``log.record.uid`` generator (a per-process random prefix + counter).
    """

    __slots__ = (
        "_counter",
        "_keys",
        "_prefix",
        "_rank",
        "_resolver",
        "_resource",
        "_resources",
        "_settings",
    )

    def __init__(self, settings: Settings, resolver: RankResolver) -> None:
        self._settings = settings
        self._resolver = resolver
        self._rank: RankInfo | None = None
        self._resource: Resource = _Resource({})
        self._resources: dict[str, Resource] = {}
        self._prefix = uuid.uuid4().hex[:16]
        self._counter = 0
        self._keys: dict[str, bool] = {}

    def after_fork(self) -> None:
        """A child gets its own uid prefix and recomputes its rank resource."""
        self._prefix = uuid.uuid4().hex[:16]
        self._counter = 0
        self._rank = None

    def resource(self) -> Resource:
        """The resource for records built now (rank attributes from the resolver)."""
        info = self._resolver.current()
        if info is not self._rank:
            self._resource = _Resource(resource_attributes(self._settings, info))
            self._rank = info
        return self._resource

    def build(
        self, item: Captured, cls: int, resource: Resource | None = None
    ) -> ReadableLogRecord:
        """One SDK record from a captured event dict (see DESIGN.md "Event record shape");
        ``cls`` is its severity class, ``resource`` the batch's (looked up when None)."""
        observed, ctx, ed = item
        attributes: dict[str, Any] = {}
        keys = self._keys
        for key, value in ed.items():
            wanted = keys.get(key) if type(key) is str else None
            if wanted is None:
                wanted = self._classify(key)
                if type(key) is not str:
                    key = safe_repr(key, 256)  # noqa: PLW2901
            if wanted:
                attributes[key] = to_otel_value(value)
        self._counter += 1
        attributes["log.record.uid"] = f"{self._prefix}-{self._counter}"
        event = ed.get("event")
        event = event if type(event) is str else safe_repr(event, 1024)
        body = ed.get("body")
        if type(body) is not str:
            body = event if body is None else safe_repr(body)
        number = ed.get("severity_number")
        severity = _SEVERITIES.get(number) if type(number) is int else None
        text = ed.get("severity_text")
        when = ed.get("_obs_time_ns")
        record = LogRecord(
            timestamp=when if type(when) is int else observed,
            observed_timestamp=observed,
            context=ctx,
            severity_text=text if type(text) is str else LEVEL_NAMES[cls],
            severity_number=severity or _SEVERITY_OF_CLASS[cls],
            body=body,
            attributes=attributes,
            event_name=event,
        )
        return ReadableLogRecord(record, resource or self.resource(), _SCOPE)

    def _classify(self, key: object) -> bool:
        """Whether a field becomes an attribute (control and rendered-only keys do not);
        remembered per key name, a bounded table."""
        wanted = type(key) is not str or not (key in _NOT_ATTRIBUTES or key.startswith("_obs_"))
        if type(key) is str and len(self._keys) < 4096:
            self._keys[key] = wanted
        return wanted

    @staticmethod
    def to_spool(record: ReadableLogRecord, cls: int) -> dict[str, Any]:
        """The spool line of a record: everything needed to rebuild it in another process."""
        rec = record.log_record
        number = rec.severity_number
        return {
            "v": 1,
            "cls": cls,
            "ts": rec.timestamp,
            "ots": rec.observed_timestamp,
            "sn": number.value if number is not None else None,
            "st": rec.severity_text,
            "body": rec.body if isinstance(rec.body, str) else safe_repr(rec.body),
            "name": rec.event_name,
            "attrs": dict(rec.attributes or {}),
            "tid": rec.trace_id or 0,
            "sid": rec.span_id or 0,
            "tf": int(rec.trace_flags or 0),
            "res": dict(record.resource.attributes),
        }

    def from_spool(self, doc: Mapping[str, Any]) -> ReadableLogRecord:
        """Rebuild a spooled record (with its original resource), marked ``obs.replayed``."""
        res = doc.get("res") or {}
        key = json.dumps(res, sort_keys=True, default=str)
        resource = self._resources.get(key)
        if resource is None:
            if len(self._resources) > 256:
                self._resources.clear()
            resource = self._resources[key] = _Resource(dict(res))
        trace_id, span_id = int(doc.get("tid") or 0), int(doc.get("sid") or 0)
        ctx = otel_context.Context()
        if trace_id and span_id:
            span = NonRecordingSpan(
                SpanContext(
                    trace_id,
                    span_id,
                    is_remote=True,
                    trace_flags=TraceFlags(int(doc.get("tf") or 0)),
                )
            )
            ctx = set_span_in_context(span, ctx)
        attributes = dict(doc.get("attrs") or {})
        attributes["obs.replayed"] = True
        number = doc.get("sn")
        record = LogRecord(
            timestamp=doc.get("ts"),
            observed_timestamp=doc.get("ots"),
            context=ctx,
            severity_text=doc.get("st"),
            severity_number=_SEVERITIES.get(number) if isinstance(number, int) else None,
            body=str(doc.get("body", "")),
            attributes=attributes,
            event_name=doc.get("name"),
        )
        return ReadableLogRecord(record, resource, _SCOPE)


def resource_attributes(settings: Settings, info: RankInfo) -> dict[str, Any]:
    """Resource of this process: service, host, rank attributes and a ``service.instance.id``
    stable per (host, rank), so Loki keeps one stream per rank across restarts and forks."""
    attrs: dict[str, Any] = {
        "telemetry.sdk.name": "opentelemetry",
        "telemetry.sdk.language": "python",
        "telemetry.sdk.version": _sdk_version,
    }
    attrs.update(settings.resource_attributes)
    attrs["service.name"] = settings.service_name
    attrs.setdefault("host.name", info.host)
    attrs.update(
        rank=info.rank,
        local_rank=info.local_rank,
        world_size=info.world_size,
        node_rank=info.node_rank,
    )
    attrs.setdefault("service.instance.id", f"{info.host}:rank{info.rank}")
    attrs["process.pid"] = os.getpid()
    return attrs


# --- transports ---------------------------------------------------------------------------


class _Transport(Protocol):
    """Where batches go: an SDK exporter or an application's LoggerProvider."""

    def export(self, batch: Sequence[ReadableLogRecord], timeout: float) -> Outcome: ...
    def interrupt(self) -> None: ...
    def close(self, timeout: float) -> None: ...


def _request_timeout_setter(exporter: LogRecordExporter) -> Callable[[float], None] | None:
    """How to cut this exporter's per-request deadline (its retry loop runs until it).

    The OTLP exporters take ``timeout`` only at construction; 1.45 keeps it in
    ``_timeout`` (gRPC) and ``_client._timeout`` (HTTP). Re-check on SDK upgrades.
    """
    module = type(exporter).__module__
    if module.startswith("opentelemetry.exporter.otlp.proto.grpc") and hasattr(
        exporter, "_timeout"
    ):
        return lambda seconds: setattr(exporter, "_timeout", seconds)
    client = getattr(exporter, "_client", None)
    if module.startswith("opentelemetry.exporter.otlp.proto.http") and hasattr(client, "_timeout"):
        return lambda seconds: setattr(client, "_timeout", seconds)
    return None


def _wire_path(exporter: LogRecordExporter, encoder: Encoder) -> Callable[[bytes], bool] | None:
    """Let the SDK's OTLP exporter send bytes from :mod:`obs.otlp_wire` instead of
    building messages with ``encode_logs`` (6x the encoding cost).

    HTTP: the request bytes go to the exporter's own client (``_client.export``: its
    retries, compression, TLS and headers), behind the exporter's size limit; returns that
    sender. gRPC: the exporter's ``_translate_data`` parses our bytes into its request
    (C speed) and it sends as usual; returns None. 1.45's private names; where they are
    missing the exporter encodes as it always did (``_ExporterTransport.wire`` tells which).
    """
    module = type(exporter).__module__
    client = getattr(exporter, "_client", None)
    if module.startswith("opentelemetry.exporter.otlp.proto.http") and _takes_data(client):
        limit = getattr(exporter, "_max_request_size", 0)

        def send(data: bytes) -> bool:
            if getattr(exporter, "_shutdown", False):
                return False
            if isinstance(limit, int) and 0 < limit < len(data):
                raise _RequestTooLarge(f"OTLP request of {len(data)} bytes exceeds {limit}")
            success = getattr(client.export(data), "success", None)  # type: ignore[union-attr]
            if not isinstance(success, bool):
                raise _WireUnsupported("the SDK HTTP client answered without .success")
            return success

        return send
    if module.startswith("opentelemetry.exporter.otlp.proto.grpc") and hasattr(
        exporter, "_translate_data"
    ):
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: PLC0415
            ExportLogsServiceRequest,
        )

        parse = ExportLogsServiceRequest.FromString

        def translate(batch: Sequence[ReadableLogRecord]) -> Any:
            return parse(encoder.request(batch))

        exporter._translate_data = translate
    return None


class _RequestTooLarge(ValueError):
    """The encoded request is over the exporter's own size limit: split the batch."""


class _WireUnsupported(TypeError):
    """This SDK's exporter internals are not the ones obs.otlp_wire was written against."""


def _takes_data(client: object) -> bool:
    """Whether ``client.export`` is 1.45's ``export(data: bytes)``."""
    export = getattr(client, "export", None)
    if not callable(export):
        return False
    import inspect  # noqa: PLC0415 - once per exporter

    try:
        return list(inspect.signature(export).parameters) == ["data"]
    except (TypeError, ValueError):
        return False


class _ExporterTransport:
    """An SDK ``LogRecordExporter`` driven synchronously from the export thread."""

    __slots__ = ("_box", "_encoder", "_send_bytes", "_set_timeout", "exporter", "wire")

    def __init__(self, exporter: LogRecordExporter) -> None:
        self.exporter = exporter
        self._set_timeout = _request_timeout_setter(exporter)
        self._encoder = Encoder()
        self._send_bytes = _wire_path(exporter, self._encoder)
        #: True when requests are encoded by obs.otlp_wire (the SDK OTLP exporters).
        self.wire = self._send_bytes is not None or "_translate_data" in vars(exporter)
        module = type(exporter).__module__
        self._box = None
        if module.startswith("opentelemetry.exporter.otlp.proto.http"):
            self._box = install_http_probe(exporter)
        elif module.startswith("opentelemetry.exporter.otlp.proto.grpc"):
            self._box = install_grpc_probe(exporter)

    def export(self, batch: Sequence[ReadableLogRecord], timeout: float) -> Outcome:
        if self._set_timeout is not None:
            self._set_timeout(max(timeout, 0.01))
        box = self._box
        if box is not None:
            box.answer = None
        ok: bool | None = None
        if self._send_bytes is not None:
            try:
                ok = self._send_bytes(self._encoder.request(batch))
            except _RequestTooLarge as exc:
                return Outcome(ok=False, too_large=True, message=str(exc))
            except _WireUnsupported:  # from now on the exporter encodes and sends itself
                self._send_bytes = None  # (this batch may arrive twice: log.record.uid)
                self.wire = False
        if ok is None:
            ok = self.exporter.export(batch) is LogRecordExportResult.SUCCESS
        answer = box.answer if box is not None else None
        if answer is None or answer.ok != ok:
            return Outcome(ok=ok)
        return answer

    def interrupt(self) -> None:
        """Abort an export in its retry sleep (the exporter is unusable afterwards)."""
        self.exporter.shutdown()  # type: ignore[no-untyped-call]

    def close(self, timeout: float) -> None:
        _bounded(self.exporter.shutdown, timeout)


class _ProviderTransport:
    """The application's own SDK LoggerProvider (e.g. under ``opentelemetry-instrument``):
    records are emitted into its Logger and its processors deliver them."""

    __slots__ = ("_logger", "_provider")

    def __init__(self, provider: SDKLoggerProvider) -> None:
        self._provider = provider
        self._logger = provider.get_logger(_SCOPE.name, _SCOPE.version)

    def export(self, batch: Sequence[ReadableLogRecord], timeout: float) -> Outcome:
        for record in batch:
            self._logger.emit(record.log_record)
        return Outcome(ok=True)

    def interrupt(self) -> None:
        return

    def close(self, timeout: float) -> None:
        """Flush the provider, bounded (its BatchLogRecordProcessor ignores timeouts);
        it belongs to the application, which shuts it down."""
        _bounded(lambda: self._provider.force_flush(int(timeout * 1000)), timeout)


def _bounded(fn: Callable[[], object], timeout: float) -> bool:
    """Run ``fn`` on a helper thread and wait at most ``timeout``; True if it finished."""
    thread = _ExportThread(target=lambda: _quietly(fn), name="obs-otel-close", daemon=True)
    thread.start()
    thread.join(max(timeout, 0.0))
    return not thread.is_alive()


def _quietly(fn: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        fn()


def endpoint_text(url: str | None) -> str:
    """``url`` for messages: without its user info (a password or token), scrubbed."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            netloc = parts.netloc.rsplit("@", 1)[-1]
            url = urlunsplit(parts._replace(netloc=f"[REDACTED]@{netloc}"))
    except ValueError:
        return "[unparsable endpoint]"
    return scrub_text(url)


def _split_userinfo(url: str) -> tuple[str, str]:
    """``url`` without user info, and that user info as a Basic ``authorization`` value:
    gRPC targets cannot carry it (the channel fails, and the SDK logs the target)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, ""
    netloc = parts.netloc.rsplit("@", 1)[-1]
    userinfo = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    basic = "Basic " + base64.b64encode(userinfo.encode()).decode()
    return urlunsplit(parts._replace(netloc=netloc)), basic


def _read_pem(path: str | None, field: str) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(field, path, f"a readable PEM file ({exc.strerror})") from None


def build_exporter(settings: Settings) -> LogRecordExporter:
    """The SDK exporter the settings ask for (OTLP gRPC/HTTP with TLS, or console).

    Raises :class:`obs.ConfigError` for unreadable certificate files, at configure time.
    """
    if settings.logs_exporter == "console":
        return ConsoleLogRecordExporter(out=sys.stdout)
    url = settings.otlp_logs_url
    ca = _read_pem(settings.otlp_certificate, "OTEL_EXPORTER_OTLP_CERTIFICATE")
    key = _read_pem(settings.otlp_client_key, "OTEL_EXPORTER_OTLP_CLIENT_KEY")
    cert = _read_pem(settings.otlp_client_certificate, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE")
    timeout = min(settings.otlp_timeout, settings.blrp_export_timeout_ms / 1000.0)
    gzip = settings.otlp_compression == "gzip"
    if settings.otlp_protocol == "grpc":
        import grpc  # noqa: PLC0415 - grpc loads only when asked for
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (  # noqa: PLC0415
            OTLPLogExporter as GRPCExporter,
        )

        url = url or "http://localhost:4317"
        headers = {k.lower(): v for k, v in settings.otlp_headers.items()}
        url, basic = _split_userinfo(url)
        if basic and "authorization" not in headers:
            headers["authorization"] = basic
        scheme = urlparse(url).scheme
        secure = scheme == "https" or (scheme != "http" and ca is not None)
        credentials = grpc.ssl_channel_credentials(ca, key, cert) if secure else None
        return GRPCExporter(
            endpoint=url,
            insecure=not secure,
            credentials=credentials,
            # gRPC metadata keys must be lower case or every call fails
            headers=headers or None,
            timeout=timeout,
            compression=grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression,
            channel_options=_GRPC_RECONNECT,
        )
    from opentelemetry.exporter.otlp.proto.http import Compression  # noqa: PLC0415
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (  # noqa: PLC0415
        OTLPLogExporter as HTTPExporter,
    )

    return HTTPExporter(
        endpoint=url or "http://localhost:4318/v1/logs",
        certificate_file=settings.otlp_certificate,
        client_key_file=settings.otlp_client_key,
        client_certificate_file=settings.otlp_client_certificate,
        headers=dict(settings.otlp_headers),
        timeout=timeout,
        compression=Compression.Gzip if gzip else Compression.NoCompression,
        session=_pinned_ca_session() if settings.otlp_certificate else None,
    )


def _pinned_ca_session() -> Any:
    """A requests Session whose CA stays the configured one.

    requests lets ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` override a session's
    ``verify`` (psf/requests#3829), so on hosts that set them (most CI images, corporate
    machines) the SDK's HTTP exporter would ignore OTEL_EXPORTER_OTLP_CERTIFICATE.
    """
    import requests  # noqa: PLC0415 - the HTTP exporter's own dependency

    class PinnedCASession(requests.Session):
        def merge_environment_settings(self, *args: Any, **kwargs: Any) -> Any:
            merged = super().merge_environment_settings(*args, **kwargs)
            merged["verify"] = self.verify
            return merged

    return PinnedCASession()


# --- the sink -----------------------------------------------------------------------------


class _Counters:
    """Delivery accounting, for :meth:`ExportSink.stats` and ``obs_records_dropped``."""

    __slots__ = (
        "dropped",
        "enqueued",
        "exported",
        "failed_exports",
        "pending_drops",
        "replayed",
        "spool_corrupt",
        "spooled",
    )

    def __init__(self) -> None:
        self.enqueued = 0
        self.exported = 0
        self.spooled = 0
        self.replayed = 0
        self.failed_exports = 0
        self.spool_corrupt = 0
        self.dropped: dict[str, dict[str, int]] = {}  # reason -> level -> n, since start
        self.pending_drops: dict[str, dict[str, int]] = {}  # ... not yet reported

    def drop(self, reason: str, cls: int, n: int = 1) -> None:
        self.drop_named(reason, LEVEL_NAMES[cls], n)

    def drop_named(self, reason: str, name: str, n: int = 1) -> None:
        for table in (self.dropped, self.pending_drops):
            per_level = table.setdefault(reason, {})
            per_level[name] = per_level.get(name, 0) + n

    def dropped_total(self) -> int:
        return sum(n for per_level in self.dropped.values() for n in per_level.values())


class ExportSink:
    """Processor: queue every event for OTLP export (see the module docstring).

    ``__call__`` never raises and never blocks on the network; ``force_flush`` and
    ``shutdown`` return within their timeout (default ``settings.shutdown_timeout``).
    """

    __slots__ = (
        "__weakref__",
        "_abandoned",
        "_ahead",
        "_ahead_cond",
        "_ahead_held",
        "_ahead_thread",
        "_atexit",
        "_backoff",
        "_backoff_until",
        "_batch_size",
        "_builder",
        "_closed",
        "_closing",
        "_closing_replayed",
        "_cond",
        "_counters",
        "_crashes",
        "_deadline",
        "_disposing",
        "_down",
        "_drop_interval",
        "_errors",
        "_final_reported",
        "_flush_deadline",
        "_flush_target",
        "_flush_waiters",
        "_give_up",
        "_inflight",
        "_last_drop_report",
        "_last_reject_message",
        "_last_replay_check",
        "_lock",
        "_make_transport",
        "_next_due",
        "_notes",
        "_queue",
        "_ready",
        "_replay_busy",
        "_replay_due",
        "_replay_retry_at",
        "_report",
        "_reported",
        "_reserve",
        "_settings",
        "_shutdown_ok",
        "_sigterm",
        "_spool",
        "_thread",
        "_transport",
        "mode",
    )

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
        self._report = report
        self._builder = _RecordBuilder(settings, resolver)
        self._spool = make_spool(settings)
        self._batch_size = max(
            1, min(settings.blrp_max_export_batch_size, settings.blrp_max_queue_size)
        )
        self._drop_interval = drop_report_interval
        self._notes: list[tuple[str, str, str]] = []  # internal errors the export thread reports
        self._reported: set[tuple[str, str]] = set()
        self._crashes = 0
        self._ready = False
        if settings.otlp_protocol == "http/json" and exporter is None and provider is None:
            self._notes.append(
                (
                    "otel_build",
                    "UnsupportedProtocol",
                    "the Python SDK has no OTLP/HTTP JSON exporter: using http/protobuf",
                )
            )
        self._make_transport: Callable[[], _Transport]
        if provider is not None:
            self.mode = "provider"
            self._make_transport = lambda: _ProviderTransport(provider)
        elif exporter is not None:
            self.mode = "exporter"
            self._make_transport = lambda: _ExporterTransport(exporter)
        else:
            self.mode = settings.logs_exporter
            self._make_transport = lambda: _ExporterTransport(build_exporter(settings))
        self._transport: _Transport | None = self._make_transport()  # ConfigError now, not later
        self._reset_state()
        weak_fork = weakref.WeakMethod(self._after_fork_in_child)

        def after_in_child() -> None:
            method = weak_fork()
            if method is not None:
                method()

        os.register_at_fork(after_in_child=after_in_child)
        weak_exit = weakref.WeakMethod(self.shutdown)

        def at_exit() -> None:
            method = weak_exit()
            if method is not None:
                method()

        self._atexit = at_exit
        atexit.register(at_exit)
        self._sigterm: Any = None
        if settings.handle_sigterm:
            self._install_sigterm()
        with self._cond:
            self._replay_due = True  # replay what an earlier process left behind
            self._start_thread_locked()

    def _install_sigterm(self) -> None:
        """``OBS_HANDLE_SIGTERM``: on SIGTERM, shut the sink down within its budget (queued
        WARNING+ spooled or counted), then chain to the handler that was there before
        (the default one: die by the signal, as without obs)."""
        if threading.current_thread() is not threading.main_thread():
            self._notes.append(
                ("otel_sigterm", "NotMainThread", "OBS_HANDLE_SIGTERM needs the main thread")
            )
            return
        previous = signal.getsignal(signal.SIGTERM)
        weak = weakref.WeakMethod(self.shutdown)
        budget = self._settings.shutdown_timeout

        def on_sigterm(signum: int, frame: Any) -> None:
            method = weak()
            if method is not None:  # on a thread: the interrupted code may hold our lock
                worker = threading.Thread(target=lambda: _quietly(method), daemon=True)
                worker.start()
                worker.join(budget + 0.5)
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, on_sigterm)
        self._sigterm = (on_sigterm, previous)

    def _restore_sigterm(self) -> None:
        """Put the previous SIGTERM handler back if ours is still the installed one."""
        if self._sigterm is None or threading.current_thread() is not threading.main_thread():
            return
        ours, previous = self._sigterm
        self._sigterm = None
        with contextlib.suppress(Exception):
            if signal.getsignal(signal.SIGTERM) is ours:
                signal.signal(signal.SIGTERM, previous)

    def _reset_state(self) -> None:
        """Fresh lock, queue and counters (construction, and in a forked child)."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: SeverityQueue[Captured] = SeverityQueue(self._settings.blrp_max_queue_size)
        self._counters = _Counters()
        self._thread: _ExportThread | None = None
        self._inflight: list[tuple[int, Captured]] | None = None
        self._closing = False
        self._closed = False
        self._abandoned = False
        self._give_up = False
        self._disposing = False
        self._final_reported = False
        self._shutdown_ok: bool | None = None
        self._deadline = 0.0
        self._reserve = 0.0
        self._flush_target = 0
        self._flush_deadline = 0.0
        self._flush_waiters = 0
        self._backoff = 0.0
        self._backoff_until = 0.0
        self._down = False
        self._replay_due = False
        self._replay_busy = False
        self._replay_retry_at = 0.0  # when the worker replays the spool on its own (0: no)
        self._ahead: list[tuple[int, Payload]] = []  # WARNING+ to write ahead (collector down)
        self._ahead_held: list[tuple[int, Payload]] | None = None  # being written
        self._ahead_cond = threading.Condition(self._lock)
        self._ahead_thread: _ExportThread | None = None
        self._closing_replayed = False
        self._last_replay_check = 0.0
        self._last_drop_report = time.monotonic()
        self._last_reject_message = ""
        self._next_due = time.monotonic() + self._settings.blrp_schedule_delay_ms / 1000.0

    def _after_fork_in_child(self) -> None:
        """The child drops the parent's queued records (the parent exports them), gets a
        new exporter (sockets and gRPC channels do not survive fork) and its own rank."""
        closed = self._closed or self._closing
        self._reset_state()
        self._closed = closed
        self._transport = None
        self._builder.after_fork()

    # -- the caller's side -------------------------------------------------------------

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        """Queue the event for export and return it unchanged; never raises or blocks."""
        try:
            self._ready = True
            if event_dict.get("_obs_no_export"):
                return event_dict
            level = event_dict.get("_obs_level")
            cls = _CLASS_OF.get(level) if type(level) is int else None
            if cls is None:
                cls = _class_of(event_dict)
            copy = dict(event_dict)
            if "exc_info" in copy:  # a user's own chain without obs' Redactor
                _exception_fields(copy)
            item: Captured = (time.time_ns(), otel_context.get_current(), copy)
            with self._lock:
                if self._closed:
                    victim: tuple[int, Payload] | None = (cls, item)
                elif self._down and cls >= WARNING_CLASS and not self._closing:
                    self._counters.enqueued += 1  # collector down: written ahead to the spool
                    self._ahead.append((cls, item))
                    victim = None
                    if self._ahead_thread is None:
                        self._ahead_thread = _ExportThread(
                            target=self._write_ahead, name="obs-otel-spool", daemon=True
                        )
                        self._ahead_thread.start()
                    elif len(self._ahead) == 1:
                        self._ahead_cond.notify()
                else:
                    self._counters.enqueued += 1
                    queue = self._queue
                    victim = queue.put(cls, item)
                    if self._thread is None:
                        if self._crashes < 3:
                            self._start_thread_locked()
                    elif len(queue) == self._batch_size:
                        self._cond.notify()
            if victim is not None:
                self._dispose([victim], "after_shutdown" if self._closed else "queue_full")
        except Exception as exc:
            self._note("otel_enqueue", exc)
        return event_dict

    def _start_thread_locked(self) -> None:
        thread = _ExportThread(target=self._run, name="obs-otel-export", daemon=True)
        self._thread = thread
        thread.start()

    def _note(self, where: str, exc: BaseException) -> None:
        """Remember an internal failure; the export thread reports it (once per kind)."""
        with contextlib.suppress(Exception):
            self._notes.append((where, type(exc).__name__, scrub_text(safe_repr(exc, 1000))))

    # -- disposal: spool WARNING+, count the rest ----------------------------------------

    def _dispose(self, victims: Sequence[tuple[int, Payload]], reason: str) -> None:
        """Records that will not be exported now: spool WARNING+, count the rest dropped."""
        lines: list[dict[str, Any]] = []
        classes: list[int] = []
        own: list[dict[str, Any]] = []  # obs' loss reports: may use the spool's reserve
        own_classes: list[int] = []
        dropped: list[tuple[str, int]] = []
        for cls, payload in victims:
            if cls < WARNING_CLASS:
                dropped.append((reason, cls))
                continue
            try:
                record = (
                    payload
                    if isinstance(payload, ReadableLogRecord)
                    else self._builder.build(payload, cls)
                )
                line = _RecordBuilder.to_spool(record, cls)
                if line["name"] in _LOSS_REPORTS:
                    own.append(line)
                    own_classes.append(cls)
                else:
                    lines.append(line)
                    classes.append(cls)
            except Exception as exc:
                self._note("otel_encode", exc)
                dropped.append(("encode_error", cls))
        written = 0
        for batch, batch_classes, reserved in ((lines, classes, False), (own, own_classes, True)):
            if not batch:
                continue
            why, n = "spool_full", 0
            try:
                n = self._spool.append(batch, reserved=reserved)
            except Exception as exc:  # unwritable directory, disk full, ...
                self._note("otel_spool", exc)
                why = "spool_error"
            written += n
            dropped.extend((why, cls) for cls in batch_classes[n:])
        with self._lock:
            self._counters.spooled += written
            for why, cls in dropped:
                self._counters.drop(why, cls)
            if written and not self._replay_retry_at:
                self._replay_retry_at = max(self._backoff_until, time.monotonic() + 0.5)

    def _write_ahead(self) -> None:
        """The write-ahead thread: while the collector is known to be down, WARNING+
        records go to the spool as they are logged, not after the next failed export
        (which may hang in a blackholed connection), so a SIGTERM or SIGKILL loses at most
        the few milliseconds of records not yet written."""
        while True:
            with self._lock:
                while not self._ahead:
                    if self._closing or self._closed:
                        self._ahead_thread = None
                        self._ahead_cond.notify_all()
                        return
                    self._ahead_cond.wait(1.0)
                batch, self._ahead = self._ahead, []
                self._ahead_held = batch
            try:
                self._dispose(batch, "collector_down")
            finally:
                with self._lock:
                    self._ahead_held = None
                    self._replay_due = True  # delivered by replay (also the next probe)
                    self._ahead_cond.notify_all()
                    self._cond.notify_all()

    def _take_ahead(self, deadline: float) -> list[tuple[int, Payload]]:
        """At shutdown: what the write-ahead thread has not taken yet (ours to spool), after
        waiting until ``deadline`` for the batch it is writing; that one, if still not
        written, is counted (it may yet be written: counted twice, never lost)."""
        with self._lock:
            while self._ahead_held is not None and time.monotonic() < deadline:
                self._ahead_cond.wait(max(deadline - time.monotonic(), 0.001))
            if self._ahead_held is not None:
                for cls, _ in self._ahead_held:
                    self._counters.drop("shutdown_in_flight", cls)
                self._ahead_held = None
            rest: list[tuple[int, Payload]] = list(self._ahead)
            self._ahead = []
            self._ahead_cond.notify_all()
        return rest

    def _dispose_until(
        self, victims: Sequence[tuple[int, Payload]], reason: str, deadline: float
    ) -> None:
        """:meth:`_dispose` chunk by chunk until ``deadline``; what is left then is counted
        as ``shutdown_timeout`` drops (cheap), so exit stays within its budget."""
        start = 0
        while start < len(victims) and time.monotonic() < deadline:
            self._dispose(victims[start : start + _DISPOSE_CHUNK], reason)
            start += _DISPOSE_CHUNK
        if start < len(victims):
            with self._lock:
                for cls, _ in victims[start:]:
                    self._counters.drop("shutdown_timeout", cls)

    # -- the export thread ---------------------------------------------------------------

    def _run(self) -> None:
        token = otel_context.attach(otel_context.set_value(_SUPPRESS_KEY, True))
        try:
            if self._transport is None:
                self._transport = self._make_transport()
            while self._step():
                pass
        except BaseException as exc:
            self._note("otel_export_thread", exc)
            with contextlib.suppress(Exception):
                self._send_reports(force=True)
        finally:
            otel_context.detach(token)
            with self._cond:
                if self._thread is threading.current_thread() and not self._closing:
                    self._crashes += 1  # restarted by the next event, a few times at most
                    self._thread = None
                self._cond.notify_all()

    def _step(self) -> bool:
        """One unit of export-thread work; False when the thread should end."""
        self._send_reports(force=False)
        with self._cond:
            action = self._next_action_locked()
        kind = action[0]
        if kind == "exit":
            return False
        if kind == "report":
            self._send_reports(force=True)
            return True
        if kind == "replay":
            self._replay(action[2])
            return True
        if kind == "dispose":
            self._dispose(action[1], "shutdown")
            with self._cond:
                if not self._abandoned:
                    self._inflight = None
                    self._disposing = False
                self._cond.notify_all()
            return True
        self._export_batch(action[1], action[2])
        return True

    def _next_action_locked(self) -> tuple[str, list[tuple[int, Captured]], float]:
        """Wait for work; decide what to do next (called with the lock held)."""
        nothing: list[tuple[int, Captured]] = []
        settings = self._settings
        delay = settings.blrp_schedule_delay_ms / 1000.0
        request_timeout = min(settings.otlp_timeout, settings.blrp_export_timeout_ms / 1000.0)
        while True:
            if self._abandoned:
                return "exit", nothing, 0.0
            now = time.monotonic()
            queue = self._queue
            if self._closing:
                remaining = self._deadline - now
                if not queue:
                    if not self._final_reported and self._counters.pending_drops:
                        self._final_reported = True
                        return "report", nothing, 0.0
                    if (
                        not self._closing_replayed
                        and not self._give_up
                        and remaining > self._reserve + 0.05
                        and self._spool.pending()
                    ):  # replay what we can within the budget (one probe if it was down)
                        self._closing_replayed = True
                        self._replay_busy = True
                        timeout = min(request_timeout, remaining - self._reserve)
                        if self._down:
                            timeout = min(timeout, _PROBE_TIMEOUT)
                        return "replay", nothing, timeout
                    return "exit", nothing, 0.0
                if self._give_up or remaining <= self._reserve:
                    chunk, _ = queue.take(_DISPOSE_CHUNK)  # shutdown sees what we hold
                    self._inflight = chunk
                    self._disposing = True
                    return "dispose", chunk, 0.0
                timeout = min(request_timeout, remaining - self._reserve)
                if self._down:
                    timeout = min(timeout, _PROBE_TIMEOUT)
                return self._take_locked(timeout)
            flushing = self._flush_deadline > now  # a force_flush is waiting: try now
            if queue:
                if flushing and self._flush_pending_locked():
                    return self._take_locked(
                        min(request_timeout, max(self._flush_deadline - now, 0.05))
                    )
                if now >= self._backoff_until and (
                    len(queue) >= self._batch_size or now >= self._next_due
                ):
                    self._next_due = now + delay
                    return self._take_locked(request_timeout)
            retry = self._replay_retry_at
            if retry and now >= retry and now >= self._backoff_until and not queue:
                self._replay_retry_at = 0.0  # our own schedule: probe the collector, replay
                self._replay_due = True
            if self._replay_due and (flushing or now >= self._backoff_until):
                self._replay_due = False
                self._replay_busy = True
                timeout = request_timeout
                if flushing:
                    timeout = min(timeout, max(self._flush_deadline - now, 0.05))
                return "replay", nothing, timeout
            if self._counters.pending_drops and now - self._last_drop_report >= self._drop_interval:
                return "report", nothing, 0.0
            wake = max(self._backoff_until, self._next_due) - now if queue else delay
            if retry and not queue:
                wake = min(wake, max(retry, self._backoff_until) - now)
            self._cond.wait(max(min(wake, delay), 0.005))

    def _take_locked(self, timeout: float) -> tuple[str, list[tuple[int, Captured]], float]:
        batch, _ = self._queue.take(self._batch_size)
        self._inflight = batch
        return "export", batch, timeout

    def _flush_pending_locked(self) -> bool:
        if not self._flush_target:
            return False
        oldest = self._queue.oldest_seq()
        return oldest is not None and oldest <= self._flush_target

    def _export_batch(self, batch: list[tuple[int, Captured]], timeout: float) -> None:
        records: list[tuple[int, ReadableLogRecord]] = []
        build = self._builder.build
        resource = self._builder.resource()
        for cls, item in batch:
            try:
                records.append((cls, build(item, cls, resource)))
            except Exception as exc:
                self._note("otel_encode", exc)
                with self._lock:
                    self._counters.drop("encode_error", cls)
        delivered, undelivered = self._deliver(records, timeout)
        records = undelivered
        now = time.monotonic()
        with self._cond:
            if self._abandoned:
                return  # shutdown gave up on us and disposed of this batch itself
            was_down = self._down
            self._counters.exported += delivered
            if not undelivered:
                self._inflight = None
                self._backoff = 0.0
                self._backoff_until = 0.0
                self._down = False
                if now - self._last_replay_check >= _REPLAY_CHECK_INTERVAL or was_down:
                    self._last_replay_check = now
                    self._replay_due = self._replay_due or self._spool.pending()
                self._cond.notify_all()
                return
            self._counters.failed_exports += 1
            self._enter_backoff_locked(now)
            self._disposing = True  # flush waits for the spool write below
        try:
            self._dispose(records, "export_failed")
            if not was_down:
                self._notes.append(("otel_export", "ExportFailed", self._failure_text()))
            self._send_reports(force=False)  # before a waiting flush returns
        finally:
            with self._cond:
                self._disposing = False
                if not self._abandoned:
                    self._inflight = None  # held until spooled: shutdown counts it otherwise
                self._cond.notify_all()

    def _enter_backoff_locked(self, now: float) -> None:
        self._backoff = min(max(self._backoff * 2, 0.5), _MAX_BACKOFF)
        self._backoff_until = now + self._backoff
        self._down = True
        if self._closing:
            self._give_up = True

    def _failure_text(self) -> str:
        target = endpoint_text(self._settings.otlp_logs_url) or self.mode
        return (
            f"OTLP export to {target} failed; WARNING+ records are spooled to "
            f"{self._spool.directory} and replayed when it is reachable again"
        )

    def _send(self, records: Sequence[ReadableLogRecord], timeout: float) -> Outcome:
        if not records:
            return Outcome(ok=True)
        transport = self._transport
        if transport is None:
            return Outcome(ok=False)
        try:
            return transport.export(records, timeout)
        except Exception as exc:
            self._note("otel_export", exc)
            return Outcome(ok=False)

    def _deliver(
        self, records: list[tuple[int, ReadableLogRecord]], timeout: float
    ) -> tuple[int, list[tuple[int, ReadableLogRecord]]]:
        """Send ``records`` (class, record); a request too large is split in halves, a
        permanent rejection is narrowed down by halves to the records the collector
        refuses, which are given up and counted ``rejected`` (so a poisoned record never
        blocks the ones behind it). Returns (records the collector took, records left
        undelivered by a transient failure: the collector is down or the budget is spent).
        """
        deadline = time.monotonic() + max(timeout, 0.05) * 2
        parts = [records] if records else []
        delivered = 0
        while parts:
            part = parts.pop()
            if time.monotonic() > deadline and part is not records:
                return delivered, [r for p in [*parts, part] for r in p]
            outcome = self._send([r for _, r in part], timeout)
            if outcome.ok:
                delivered += len(part) - min(outcome.rejected, len(part))
                if outcome.rejected:
                    self._reject(part, min(outcome.rejected, len(part)), outcome.message)
                continue
            if not (outcome.too_large or outcome.permanent):
                return delivered, [r for p in [*parts, part] for r in p]
            if len(part) > 1:
                mid = len(part) // 2
                parts.append(part[mid:])
                parts.append(part[:mid])
                continue
            self._reject(part, 1, outcome.message or "rejected by the collector")
        return delivered, []

    def _reject(self, part: list[tuple[int, ReadableLogRecord]], n: int, message: str) -> None:
        """Count ``n`` records of ``part`` as given up for good (the collector refused them);
        their level is known unless a partial success rejected some of a mixed batch."""
        classes = {cls for cls, _ in part}
        level = LEVEL_NAMES[classes.pop()] if len(classes) == 1 else "UNKNOWN"
        with self._lock:
            self._counters.drop_named("rejected", level, n)
            self._last_reject_message = message
        if (("otel_export", "Rejected")) not in self._reported:
            self._notes.append(
                (
                    "otel_export",
                    "Rejected",
                    scrub_text(f"the collector rejected {n} log record(s) for good: {message}"),
                )
            )

    def _replay(self, timeout: float) -> None:
        """Replay the spool through the transport (another process may hold the lock)."""

        def export(docs: list[dict[str, Any]]) -> bool:
            records = []
            for doc in docs:
                try:
                    cls = doc.get("cls")
                    cls = cls if type(cls) is int and 0 <= cls < len(LEVEL_NAMES) else 3
                    records.append((cls, self._builder.from_spool(doc)))
                except Exception:
                    with self._lock:
                        self._counters.spool_corrupt += 1
            ok = not self._deliver(records, timeout)[1]
            if ok:
                with self._cond:  # the collector is back: log straight to it again
                    self._down = False
                    self._backoff = self._backoff_until = 0.0
            if not ok:
                with self._cond:
                    self._counters.failed_exports += 1
                    self._enter_backoff_locked(time.monotonic())
            return ok

        def should_stop() -> bool:
            if self._closing:
                return self._give_up or time.monotonic() >= self._deadline - self._reserve
            return self._abandoned or len(self._queue) >= self._batch_size

        try:
            result = self._spool.replay(export, self._batch_size, should_stop)
        except Exception as exc:
            self._note("otel_replay", exc)
            result = None
        with self._cond:
            self._replay_busy = False
            if result is not None:
                self._counters.replayed += result.replayed
                self._counters.spool_corrupt += result.corrupt
                if result.refused:
                    self._notes.append(
                        (
                            "otel_spool",
                            "SpoolFileRefused",
                            scrub_text(
                                f"{result.refused} spool file(s) in {self._spool.directory} "
                                "not owned by this uid or accessible to others were set "
                                "aside (refused.*) and not replayed"
                            ),
                        )
                    )
                if not result.failed and not result.skipped and self._spool.pending():
                    self._replay_due = True  # stopped early to serve the queue
                if result.failed or result.skipped:  # try again on the backoff schedule
                    self._replay_retry_at = max(self._backoff_until, time.monotonic() + 0.5)
            elif not self._closing:
                self._replay_retry_at = time.monotonic() + _MAX_BACKOFF
            self._cond.notify_all()

    # -- reports -------------------------------------------------------------------------

    def _send_reports(self, *, force: bool) -> None:
        """Deliver internal-error notes and (rate-limited) drop counts through ``report``.

        Called without the lock: ``report`` runs the chain, which re-enters ``__call__``.
        Nothing is reported before the first event or flush: until then the runtime that
        owns ``report`` may still be under construction.
        """
        if not self._ready:
            return
        notes: list[tuple[str, str, str]] = []
        while self._notes:
            notes.append(self._notes.pop(0))
        for where, kind, message in notes:
            if (where, kind) in self._reported:
                continue
            self._reported.add((where, kind))
            self._call_report(
                "obs_internal_error",
                logging.ERROR if kind != "ExportFailed" else logging.WARNING,
                where=where,
                error_type=kind,
                error_message=message,
            )
        with self._lock:
            now = time.monotonic()
            pending = self._counters.pending_drops
            if not pending or not (force or now - self._last_drop_report >= self._drop_interval):
                return
            self._counters.pending_drops = {}
            self._last_drop_report = now
        for reason, per_level in sorted(pending.items()):
            total = sum(per_level.values())
            extra = {"collector_message": self._last_reject_message} if reason == "rejected" else {}
            self._call_report(
                "obs_records_dropped",
                logging.WARNING,
                dropped=dict(per_level),
                reason=reason,
                body=f"{total} log records were not exported ({reason})",
                **extra,
            )

    def _call_report(self, event: str, level: int, **fields: Any) -> None:
        try:
            self._report(event, level, **fields)
        except Exception:
            return  # the runtime counts its own failures; we must not loop

    # -- flush / shutdown / stats --------------------------------------------------------

    def _budget(self, timeout: float | None) -> float:
        return self._settings.shutdown_timeout if timeout is None else max(0.0, timeout)

    def force_flush(self, timeout: float | None = None) -> bool:
        """Export everything queued so far (and pending replays); True when all of it was
        delivered within ``timeout`` (default ``settings.shutdown_timeout``).

        Pending drop counts are reported first, and once more if the flush itself caused
        drops (the report takes a queue slot), so the counts reach the collector too.
        """
        deadline = time.monotonic() + self._budget(timeout)
        self._ready = True
        try:
            with self._lock:
                failures = self._counters.failed_exports
            for _ in range(2):
                self._send_reports(force=True)
                if not self._wait_flushed(deadline):
                    return False
                with self._lock:
                    if not self._counters.pending_drops:
                        break
            with self._lock:
                ok = failures == self._counters.failed_exports
            if self.mode == "provider" and self._transport is not None:
                self._transport.close(max(deadline - time.monotonic(), 0.0))
            return ok
        except Exception as exc:
            self._note("otel_flush", exc)
            return False

    def _wait_flushed(self, deadline: float) -> bool:
        """Wait until everything queued now is handled; False at the deadline."""
        with self._cond:
            if self._closed or self._closing:
                return False
            if self._thread is None:
                self._start_thread_locked()
            target = self._queue.last_seq
            self._flush_target = max(self._flush_target, target)
            self._flush_deadline = max(self._flush_deadline, deadline)
            self._replay_due = self._replay_due or self._spool.pending()
            self._flush_waiters += 1
            self._cond.notify_all()
            try:
                while self._flush_busy_locked(target):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
            finally:
                self._flush_waiters -= 1
                if not self._flush_waiters:
                    self._flush_deadline = 0.0  # nobody waits: back to the schedule
            return True

    def _flush_busy_locked(self, target: int) -> bool:
        oldest = self._queue.oldest_seq()
        return (
            (oldest is not None and oldest <= target)
            or self._inflight is not None
            or self._disposing
            or self._replay_due
            or self._replay_busy
            or bool(self._ahead)
            or self._ahead_held is not None
        )

    def shutdown(self, timeout: float | None = None) -> bool:
        """Deliver what is queued, spool what cannot be, stop; bounded by ``timeout``
        (default ``settings.shutdown_timeout``) even with the collector down or stuck.
        True when everything was delivered. Idempotent."""
        budget = self._budget(timeout)
        deadline = time.monotonic() + budget
        try:
            with self._cond:
                if self._closing or self._closed:
                    return bool(self._shutdown_ok)
            with contextlib.suppress(Exception):
                atexit.unregister(self._atexit)
            self._restore_sigterm()
            self._ready = True
            self._send_reports(force=True)
            with self._cond:
                before = (
                    self._counters.spooled,
                    self._counters.dropped_total(),
                    self._counters.failed_exports,
                )
                self._closing = True
                self._deadline = deadline
                self._reserve = min(0.5, budget * 0.2)
                if self._thread is None and self._queue:
                    self._start_thread_locked()
                thread = self._thread
                self._cond.notify_all()
            abandoned = self._wait_for(thread, deadline)
            self._dispose_until(self._take_ahead(deadline), "shutdown", deadline)
            with self._cond:
                after = (
                    self._counters.spooled,
                    self._counters.dropped_total(),
                    self._counters.failed_exports,
                )
                self._closed = True
                self._shutdown_ok = not abandoned and before[1:] == after[1:]
            self._send_reports(force=True)  # what shutdown counted: to the console and spool
            if self._shutdown_ok and before[0] != after[0]:  # spooled, but replayed since?
                self._shutdown_ok = not self._spool.pending()
            return self._shutdown_ok
        except Exception as exc:
            self._note("otel_shutdown", exc)
            self._closed = True
            return False

    def _wait_for(self, thread: threading.Thread | None, deadline: float) -> bool:
        """Join the export thread by the deadline, interrupting then abandoning a stuck
        export; True when it had to be abandoned."""
        transport = self._transport
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(deadline - self._reserve - time.monotonic(), 0.0))
            if thread.is_alive() and transport is not None:
                with self._cond:
                    self._give_up = True
                _bounded(transport.interrupt, 0.05)  # also closes it
                transport = None
                thread.join(max(deadline - 0.1 - time.monotonic(), 0.0))
            if thread.is_alive():
                with self._cond:
                    self._abandoned = True
                    held = list(self._inflight or [])
                    self._inflight = None
                    leftovers: list[tuple[int, Payload]] = []
                    if self._disposing:  # the thread is spooling them: may still finish
                        for cls, _ in held:  # (then they are counted twice, never lost)
                            self._counters.drop("shutdown_in_flight", cls)
                    else:  # stuck in the network: ours to spool
                        leftovers.extend(held)
                    leftovers.extend(self._queue.drain())
                self._dispose_until(leftovers, "shutdown", deadline)
                return True
        if transport is not None:
            transport.close(max(deadline - time.monotonic(), 0.0))
        return False

    def stats(self) -> dict[str, Any]:
        """Delivery counters: queued, enqueued, exported, dropped per level (and per
        reason), spooled, replayed, failed exports, corrupt spool lines."""
        with self._lock:
            c = self._counters
            per_level: dict[str, int] = {}
            for table in c.dropped.values():
                for name, n in table.items():
                    per_level[name] = per_level.get(name, 0) + n
            return {
                "queued": len(self._queue),
                "enqueued": c.enqueued,
                "exported": c.exported,
                "dropped": per_level,
                "dropped_by_reason": {reason: dict(t) for reason, t in c.dropped.items()},
                "spooled": c.spooled,
                "replayed": c.replayed,
                "failed_exports": c.failed_exports,
                "spool_corrupt": c.spool_corrupt,
            }


def make_spool(settings: Settings) -> Spool:
    """The sink's spool: ``OBS_SPOOL_DIR`` as given, or by default one directory per
    service under ``$TMPDIR/obs-spool-$UID`` (its parent checked like the spool itself),
    so that no program replays, or is credited with, another program's records."""
    if "spool_dir" in settings.sources or settings.spool_dir != default_spool_dir():
        return Spool(settings.spool_dir, settings.spool_max_bytes)
    directory = service_dir(settings.spool_dir, settings.service_name)
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
