"""Where batches go: an SDK exporter (built from the settings) or the application's
LoggerProvider, behind one small :class:`Transport` protocol; and the export threads' class.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar
from urllib.parse import unquote, urlparse, urlsplit, urlunsplit

from opentelemetry.sdk._logs import LoggerProvider as SDKLoggerProvider
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    ConsoleLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
)

from obs._otlp_outcome import Outcome, install_grpc_probe, install_http_probe
from obs._sigmask import held
from obs.encode import REDACTED, scrub_text
from obs.errors import ConfigError
from obs.otel.http_session import abort_request
from obs.otel.http_session import session as _session
from obs.otel.known import KnownSecrets, exporter_secrets, install_sdk_filter
from obs.otel.records import SCOPE
from obs.otlp_wire import Encoder
from obs.settings import Settings

__all__ = [
    "ExportThread",
    "ExporterTransport",
    "ProviderTransport",
    "Transport",
    "bounded",
    "build_exporter",
    "endpoint_text",
    "in_export_thread",
    "quietly",
]

#: How far past its timeout an export's retry loop may run (its own deadline governs).
_GRACE = 0.25

#: gRPC's default reconnect backoff (1 s, growing to 120 s) would keep a channel failing
#: fast long after the collector is back; ours retries its own way (see _MAX_BACKOFF).
_GRPC_RECONNECT: Any = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class ExportThread(threading.Thread):
    """The export thread's class: :func:`in_export_thread` is a type check, not a global.
    It starts with the process's signals blocked: they are the application's."""

    def start(self) -> None:
        with held():
            super().start()


def in_export_thread() -> bool:
    """True in obs' export thread: the stdlib bridge must not export records logged there
    (the SDK's and grpc's own warnings about a failing export), or export could loop."""
    return isinstance(threading.current_thread(), ExportThread)


class Transport(Protocol):
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


def _wire_path(
    exporter: LogRecordExporter, encoder: Encoder
) -> Callable[[bytes], tuple[bool, str]] | None:
    """Let the SDK's OTLP exporter send bytes from :mod:`obs.otlp_wire` instead of
    building messages with ``encode_logs`` (6x the encoding cost).

    HTTP: the request bytes go to the exporter's own client (``_client.export``: its
    retries, compression, TLS and headers), behind the exporter's size limit; returns that
    sender. gRPC: the exporter's ``_translate_data`` parses our bytes into its request
    (C speed) and it sends as usual; returns None. 1.45's private names; where they are
    missing the exporter encodes as it always did (``_ExporterTransport.wire`` tells which).
    The HTTP sender returns (success, the client's error: why no answer came).
    """
    module = type(exporter).__module__
    client = getattr(exporter, "_client", None)
    if module.startswith("opentelemetry.exporter.otlp.proto.http") and _takes_data(client):
        limit = getattr(exporter, "_max_request_size", 0)

        def send(data: bytes) -> tuple[bool, str]:
            if getattr(exporter, "_shutdown", False):
                return False, "the exporter is shut down"
            if isinstance(limit, int) and 0 < limit < len(data):
                raise _RequestTooLarge(f"OTLP request of {len(data)} bytes exceeds {limit}")
            result = client.export(data)  # type: ignore[union-attr]
            success = getattr(result, "success", None)
            if not isinstance(success, bool):
                raise _WireUnsupported("the SDK HTTP client answered without .success")
            error = getattr(result, "error", None)
            return success, "" if error is None else f"{type(error).__name__}: {error}"

        return send
    if module.startswith("opentelemetry.exporter.otlp.proto.grpc") and hasattr(
        exporter, "_translate_data"
    ):
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: PLC0415
            ExportLogsServiceRequest,
        )

        parse = ExportLogsServiceRequest.FromString

        def translate(batch: Sequence[ReadableLogRecord]) -> Any:
            return parse(_encoded(encoder, batch))

        exporter._translate_data = translate
    return None


class _Unencodable(ValueError):
    """A record of the batch cannot be encoded (a spool line another version wrote, say):
    no collector would take it, whenever asked. Permanent: the batch is narrowed to it."""


def _encoded(encoder: Encoder, batch: Sequence[ReadableLogRecord]) -> bytes:
    """``encoder.request(batch)``; a failure is :class:`_Unencodable`."""
    try:
        return encoder.request(batch)
    except Exception as exc:
        raise _Unencodable(f"record not encodable: {type(exc).__name__}: {exc}") from exc


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


class ExporterTransport:
    """An SDK ``LogRecordExporter`` driven synchronously from the export thread."""

    __slots__ = ("_box", "_encoder", "_known", "_send_bytes", "_set_timeout", "exporter", "wire")

    def __init__(self, exporter: LogRecordExporter, secrets: Sequence[str] = ()) -> None:
        """``secrets``: credentials the exporter sends besides those it holds (the
        endpoint's password, which a gRPC exporter holds only encoded)."""
        self.exporter = exporter
        #: What the exporter sends that no message of obs' may repeat (a collector echoes it).
        known = [*secrets, *exporter_secrets(exporter)]
        self._known = KnownSecrets(known)
        install_sdk_filter(known)
        self._set_timeout = _request_timeout_setter(exporter)
        self._encoder = Encoder()
        self._send_bytes = _wire_path(exporter, self._encoder)
        #: True when requests are encoded by obs.otlp_wire (the SDK OTLP exporters).
        self.wire = self._send_bytes is not None or "_translate_data" in vars(exporter)
        module = type(exporter).__module__
        self._box = None
        if module.startswith("opentelemetry.exporter.otlp.proto.http"):
            self._box = install_http_probe(exporter, _spawn, abort_request)
        elif module.startswith("opentelemetry.exporter.otlp.proto.grpc"):
            self._box = install_grpc_probe(exporter)

    def export(self, batch: Sequence[ReadableLogRecord], timeout: float) -> Outcome:
        outcome = self._export(batch, timeout)
        if outcome.message and self._known:
            outcome.message = self._known(outcome.message)
        return outcome

    def _export(self, batch: Sequence[ReadableLogRecord], timeout: float) -> Outcome:
        if self._set_timeout is not None:
            self._set_timeout(max(timeout, 0.01))
        box = self._box
        if box is not None:  # the SDK's retry loop ends with this budget, whatever time.time()
            box.answer = None
            box.deadline = time.monotonic() + max(timeout, 0.01) + _GRACE
        ok: bool | None = None
        why = ""  # the client's error when no answer came
        try:
            if self._send_bytes is not None:
                try:
                    ok, why = self._send_bytes(_encoded(self._encoder, batch))
                except _RequestTooLarge as exc:
                    return Outcome(ok=False, too_large=True, message=str(exc))
                except _WireUnsupported:  # from now on the exporter encodes and sends itself
                    self._send_bytes = None  # (this batch may arrive twice: log.record.uid)
                    self.wire = False
            if ok is None:
                ok = self.exporter.export(batch) is LogRecordExportResult.SUCCESS
        except _Unencodable as exc:  # asking again would fail again: narrowed, given up
            return Outcome(ok=False, permanent=True, message=scrub_text(str(exc)))
        answer = box.answer if box is not None else None
        if answer is None:
            return Outcome(ok=ok, message="" if ok else scrub_text(why)[:500])
        if ok and not answer.ok:  # the HTTP client calls any status below 400 a success:
            return answer  # a 3xx stored nothing, and our reading of it says why
        return answer if answer.ok == ok else Outcome(ok=ok, message=answer.message)

    def interrupt(self) -> None:
        """Abort an export in its retry sleep (the exporter is unusable afterwards)."""
        self.exporter.shutdown()  # type: ignore[no-untyped-call]

    def close(self, timeout: float) -> None:
        bounded(self.exporter.shutdown, timeout)


class ProviderTransport:
    """The application's own SDK LoggerProvider (e.g. under ``opentelemetry-instrument``):
    records are emitted into its Logger and its processors deliver them."""

    __slots__ = ("_logger", "_provider")

    def __init__(self, provider: SDKLoggerProvider) -> None:
        self._provider = provider
        self._logger = provider.get_logger(SCOPE.name, SCOPE.version)

    def export(self, batch: Sequence[ReadableLogRecord], timeout: float) -> Outcome:
        for record in batch:
            self._logger.emit(record.log_record)
        return Outcome(ok=True)

    def interrupt(self) -> None:
        return

    def close(self, timeout: float) -> None:
        """Flush the provider, bounded (its BatchLogRecordProcessor ignores timeouts);
        it belongs to the application, which shuts it down."""
        bounded(lambda: self._provider.force_flush(int(timeout * 1000)), timeout)


def _spawn(fn: Callable[[], object]) -> threading.Thread:
    """Start ``fn`` on an export-class thread in the caller's context (obs' export
    suppresses instrumentation through it)."""
    context = contextvars.copy_context()
    thread = ExportThread(target=lambda: context.run(fn), name="obs-otel-http", daemon=True)
    thread.start()
    return thread


def bounded(fn: Callable[[], object], timeout: float) -> bool:
    """Run ``fn`` on a helper thread and wait at most ``timeout``; True if it finished."""
    thread = ExportThread(target=lambda: quietly(fn), name="obs-otel-close", daemon=True)
    thread.start()
    thread.join(max(timeout, 0.0))
    return not thread.is_alive()


def quietly(fn: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        fn()


def endpoint_text(url: str | None) -> str:
    """``url`` for messages: without its user info (a password or token) and its query
    values (a SAS ``sig``, a token under any name), scrubbed."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            netloc = parts.netloc.rsplit("@", 1)[-1]
            parts = parts._replace(netloc=f"[REDACTED]@{netloc}")
        if parts.query:
            names = [piece.partition("=")[0] for piece in parts.query.split("&")]
            parts = parts._replace(query="&".join(f"{name}={REDACTED}" for name in names))
        url = urlunsplit(parts)
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
    Threads the library starts for it (gRPC's) leave the process's signals alone.

    Raises :class:`obs.ConfigError` for unreadable certificate files, at configure time.
    """
    with held():
        return _build_exporter(settings)


class _RefusedHeaderText(logging.Filter):
    """The SDK parses the headers variable again in its HTTP exporter (and its gRPC one,
    given none), whatever obs passes it, and warns with each header it refuses quoted
    whole, value and all (``Header format invalid! ...: x api key=<token>``): a header's
    value is a secret, so the warning is written without the header."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Header format invalid"):
            record.args = (REDACTED,)
        return True


_REFUSED_HEADER_TEXT = _RefusedHeaderText()


_E = TypeVar("_E")


def _build_exporter(settings: Settings) -> LogRecordExporter:
    # the SDK's header parser logs here (added once: addFilter keeps one of each filter)
    logging.getLogger("opentelemetry.util.re").addFilter(_REFUSED_HEADER_TEXT)
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
        grpc_exporter = GRPCExporter(
            endpoint=url,
            insecure=not secure,
            credentials=credentials,
            # gRPC metadata keys must be lower case or every call fails
            headers=headers or None,
            timeout=timeout,
            compression=grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression,
            channel_options=_GRPC_RECONNECT,
        )
        return _pin_headers(grpc_exporter, headers)
    from opentelemetry.exporter.otlp.proto.http import Compression  # noqa: PLC0415
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (  # noqa: PLC0415
        OTLPLogExporter as HTTPExporter,
    )

    http_exporter = HTTPExporter(
        endpoint=url or "http://localhost:4318/v1/logs",
        certificate_file=settings.otlp_certificate,
        client_key_file=settings.otlp_client_key,
        client_certificate_file=settings.otlp_client_certificate,
        headers=dict(settings.otlp_headers),
        timeout=timeout,
        compression=Compression.Gzip if gzip else Compression.NoCompression,
        session=_session(pin_ca=bool(settings.otlp_certificate)),
    )
    return _pin_headers(http_exporter, {k.lower(): v for k, v in settings.otlp_headers.items()})


#: The HTTP exporter's own headers (the SDK's ``_OTLP_HTTP_HEADERS`` and the compression's).
_SDK_HTTP_HEADERS = frozenset({"content-type", "user-agent", "content-encoding"})


def _pin_headers(exporter: _E, headers: dict[str, str]) -> _E:
    """``exporter`` sending obs' ``headers`` only. The SDK reads the headers variables
    itself (its HTTP exporter merges them in, its gRPC one reads them when obs passes
    none) with its own parser, which takes what obs left out as invalid: a name with a
    ``~``, or ``bad%20key`` decoded to ``bad key`` that requests refused (every HTTP
    export lost, unreported) and gRPC too (``Illegal header key``). Private attributes,
    each changed only when it is there and of the type the SDK gives it."""
    client = getattr(exporter, "_client", None)  # HTTP: the request headers
    sent = getattr(client, "_headers", None)
    if isinstance(sent, dict):
        own = {k: v for k, v in sent.items() if str(k).lower() in _SDK_HTTP_HEADERS}
        client._headers = {**own, **headers}  # type: ignore[union-attr]
    if isinstance(getattr(exporter, "_headers", None), tuple):  # gRPC: the call metadata
        exporter._headers = tuple(headers.items())  # type: ignore[attr-defined]
    return exporter


#: Old names (tests import them).
_ExporterTransport = ExporterTransport
_ProviderTransport = ProviderTransport
_ExportThread = ExportThread
