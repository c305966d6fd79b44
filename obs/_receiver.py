"""A real OTLP logs receiver on loopback, for tests and local development.

`OTLPReceiver` speaks OTLP/gRPC and OTLP/HTTP (protobuf and JSON, gzip/deflate, optional
TLS) so the SDK's own exporters can be tested end to end without a collector. A request is
answered once its protobuf is parsed, as a collector answers; its records are flattened into
plain dicts when they are read. Faults (a slow or failing collector) can be injected to test
delivery guarantees. `cli_main` is the `python -m obs receive` command.

This module is self-contained on purpose: it imports nothing from `obs`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as _dt
import gzip
import importlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import IO, Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

__all__ = ["OTLPReceiver", "cli_main", "make_self_signed_cert"]

Record = dict[str, Any]
_TRANSPORTS = ("grpc", "http")
_LOGS_PATH = "/v1/logs"
_POLL_INTERVAL = 0.05  # how often the HTTP accept loop checks for shutdown: stop() is prompt


# --- decoding -----------------------------------------------------------------------------


def _any_value(value: common_pb2.AnyValue) -> Any:
    """Decode an OTLP AnyValue into the matching Python value (None when unset)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _key_values(value.kvlist_value.values)
    return getattr(value, kind)


def _key_values(pairs: Iterable[common_pb2.KeyValue]) -> dict[str, Any]:
    """Decode repeated KeyValue into a dict; a repeated key keeps its last value."""
    return {kv.key: _any_value(kv.value) for kv in pairs}


def _decode_request(
    request: logs_service_pb2.ExportLogsServiceRequest, transport: str
) -> list[Record]:
    """Flatten an export request into one dict per LogRecord, in request order."""
    out: list[Record] = []
    for resource_logs in request.resource_logs:
        resource = _key_values(resource_logs.resource.attributes)
        resource_dropped = resource_logs.resource.dropped_attributes_count
        for scope_logs in resource_logs.scope_logs:
            scope_pb = scope_logs.scope
            for lr in scope_logs.log_records:
                out.append(
                    {
                        "transport": transport,
                        "resource": dict(resource),
                        "resource_dropped_attributes_count": resource_dropped,
                        "scope": {
                            "name": scope_pb.name,
                            "version": scope_pb.version,
                            "attributes": _key_values(scope_pb.attributes),
                        },
                        "time_unix_nano": lr.time_unix_nano,
                        "observed_time_unix_nano": lr.observed_time_unix_nano,
                        "severity_number": int(lr.severity_number),
                        "severity_text": lr.severity_text,
                        "event_name": lr.event_name,
                        "body": _any_value(lr.body),
                        "attributes": _key_values(lr.attributes),
                        "trace_id": lr.trace_id.hex(),
                        "span_id": lr.span_id.hex(),
                        "flags": lr.flags,
                        "dropped_attributes_count": lr.dropped_attributes_count,
                    }
                )
    return out


def _items(doc: Any, camel: str, snake: str) -> list[Any]:
    """The list under an OTLP/JSON key, which may be lowerCamelCase or snake_case."""
    value = doc.get(camel, doc.get(snake)) if isinstance(doc, dict) else None
    return value if isinstance(value, list) else []


def _hex_ids_to_base64(doc: Any) -> None:
    """Rewrite OTLP/JSON hex trace/span ids in place as the base64 that protobuf JSON expects."""
    for resource_logs in _items(doc, "resourceLogs", "resource_logs"):
        for scope_logs in _items(resource_logs, "scopeLogs", "scope_logs"):
            for lr in _items(scope_logs, "logRecords", "log_records"):
                if not isinstance(lr, dict):
                    continue
                for key in ("traceId", "trace_id", "spanId", "span_id"):
                    value = lr.get(key)
                    if not (isinstance(value, str) and value):
                        continue
                    try:
                        raw = bytes.fromhex(value)
                    except ValueError:
                        continue  # not hex: let protobuf judge it as base64
                    lr[key] = base64.b64encode(raw).decode("ascii")


def _parse_json_request(body: bytes) -> logs_service_pb2.ExportLogsServiceRequest:
    """Parse an OTLP/JSON body; unknown fields are ignored, as the OTLP spec requires."""
    doc = json.loads(body)
    _hex_ids_to_base64(doc)
    request = logs_service_pb2.ExportLogsServiceRequest()
    json_format.ParseDict(doc, request, ignore_unknown_fields=True)
    return request


def _decompress(body: bytes, encoding: str) -> bytes:
    """Undo Content-Encoding gzip/deflate (zlib-wrapped or raw); identity passes through."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip"):
        return gzip.decompress(body)
    if encoding == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    msg = f"unsupported Content-Encoding {encoding!r}"
    raise ValueError(msg)


def _event_of(record: Record) -> str:
    """The record's event name: event_name, else the "event" attribute, else ""."""
    name = record.get("event_name") or record.get("attributes", {}).get("event")
    return name if isinstance(name, str) else ""


# --- servers ------------------------------------------------------------------------------


class _Fault:
    """What the receiver does wrong on purpose: answer late, or reject."""

    __slots__ = ("delay", "fail", "grpc_code", "http_status")

    def __init__(
        self,
        delay: float = 0.0,
        fail: bool = False,
        http_status: int = 503,
        grpc_code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE,
    ) -> None:
        self.delay = delay
        self.fail = fail
        self.http_status = http_status
        self.grpc_code = grpc_code


class _LogsServicer(logs_service_pb2_grpc.LogsServiceServicer):
    """gRPC LogsService whose Export hands the request to the receiver."""

    def __init__(self, receiver: OTLPReceiver) -> None:
        self._receiver = receiver

    def Export(
        self, request: logs_service_pb2.ExportLogsServiceRequest, context: grpc.ServicerContext
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        """Store the records, or abort with the injected gRPC status."""
        fault = self._receiver._begin_request("grpc")
        if fault is not None:
            context.abort(fault.grpc_code, "fault injected by OTLPReceiver")
        self._receiver._store(request, "grpc")
        return logs_service_pb2.ExportLogsServiceResponse()


class _HTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its receiver and does the TLS handshake per thread."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        receiver: OTLPReceiver,
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.receiver = receiver
        self.ssl_context = ssl_context
        super().__init__(address, _HTTPHandler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Wrap the connection in TLS here, in the handler thread, so a bad client
        cannot stall the accept loop; a failed handshake just drops the connection."""
        if self.ssl_context is not None:
            try:
                request.settimeout(10.0)
                request = self.ssl_context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (e.g. timed out during an injected delay) is not an error."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _HTTPHandler(BaseHTTPRequestHandler):
    """OTLP/HTTP: POST /v1/logs in protobuf or JSON; everything else is 404."""

    server: _HTTPServer
    # HTTP/1.0 closes each connection after the reply, so a stopped receiver really stops
    # answering instead of serving a client's pooled keep-alive connection.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the stdlib would print every request to stderr."""

    def do_GET(self) -> None:
        """Nothing to GET."""
        self._reply(404, "text/plain", b"not found\n")

    def do_POST(self) -> None:
        """Decode an export request, store its records, and answer in the same format."""
        if self.path.split("?", 1)[0] != _LOGS_PATH:
            self._reply(404, "text/plain", b"not found\n")
            return
        receiver = self.server.receiver
        try:
            body = _decompress(self._read_body(), self.headers.get("Content-Encoding", ""))
        except (OSError, ValueError, EOFError, zlib.error) as exc:
            self._reply(400, "text/plain", f"bad body: {exc}\n".encode())
            return
        content_type = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        is_json = content_type == "application/json"
        if not is_json and content_type != "application/x-protobuf":
            self._reply(415, "text/plain", b"use application/x-protobuf or application/json\n")
            return
        try:
            if is_json:
                request = _parse_json_request(body)
            else:
                request = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
        except (DecodeError, json_format.ParseError, ValueError, TypeError) as exc:
            self._reply(400, "text/plain", f"cannot parse request: {exc}\n".encode())
            return
        fault = receiver._begin_request("http")
        if fault is not None:
            self._reply(fault.http_status, "text/plain", b"fault injected by OTLPReceiver\n")
            return
        receiver._store(request, "http")
        response = logs_service_pb2.ExportLogsServiceResponse()
        if is_json:
            self._reply(200, "application/json", json_format.MessageToJson(response).encode())
        else:
            self._reply(200, "application/x-protobuf", response.SerializeToString())

    def _read_body(self) -> bytes:
        """Read a Content-Length or chunked request body."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _reply(self, status: int, content_type: str, payload: bytes) -> None:
        """Send a complete response with its length."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


# --- the receiver -------------------------------------------------------------------------


class OTLPReceiver:
    """OTLP logs receiver (gRPC and HTTP) that stores every LogRecord as a plain dict.

    Port 0 picks a free port on the first `start()`; the port is then kept, so `restart()`
    comes back where clients expect it. Thread-safe; usable as a context manager.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        grpc_port: int = 0,
        http_port: int = 0,
        *,
        grpc: bool = True,
        http: bool = True,
        tls: tuple[str, str] | None = None,
    ) -> None:
        if not (grpc or http):
            msg = "OTLPReceiver needs grpc=True or http=True"
            raise ValueError(msg)
        self._host = host
        self._grpc_port = grpc_port
        self._http_port = http_port
        self._grpc_enabled = grpc
        self._http_enabled = http
        self._tls = tls
        self._cond = threading.Condition(threading.Lock())
        self._records: list[Record] = []
        #: Parsed requests not yet flattened into records: the reply goes out after the
        #: protobuf parse (as a collector's does), the Python-side flattening happens when
        #: someone reads the records.
        self._pending: list[tuple[logs_service_pb2.ExportLogsServiceRequest, str]] = []
        self._requests = dict.fromkeys(_TRANSPORTS, 0)
        self._rejected = dict.fromkeys(_TRANSPORTS, 0)
        self._fault = _Fault()
        self._grpc_server: Any = None
        self._http_server: _HTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._stopped.set()
        self._lifecycle = threading.Lock()  # start() and stop() from different threads

    # lifecycle

    def start(self) -> OTLPReceiver:
        """Bind and serve; a no-op when already running. Returns self."""
        with self._lifecycle:
            if not self._stopped.is_set():
                return self
            self._stopped = threading.Event()
            try:
                if self._grpc_enabled:
                    self._start_grpc()
                if self._http_enabled:
                    self._start_http()
            except BaseException:
                self._stop()
                raise
        return self

    def stop(self) -> None:
        """Stop both servers and release their ports at once; stored records are kept."""
        with self._lifecycle:
            self._stop()

    def _stop(self) -> None:
        self._stopped.set()
        server, self._grpc_server = self._grpc_server, None
        if server is not None:
            server.stop(grace=0).wait(5.0)
        http_server, self._http_server = self._http_server, None
        if http_server is not None:
            http_server.shutdown()
            http_server.server_close()
        thread, self._http_thread = self._http_thread, None
        if thread is not None:
            thread.join(5.0)

    def restart(self) -> OTLPReceiver:
        """Stop, then start again on the same ports (clients reconnect to the old endpoint)."""
        self.stop()
        return self.start()

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _start_grpc(self) -> None:
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="otlp-receiver-grpc"),
            # No SO_REUSEPORT: binding a port some other server holds must fail, not share it.
            options=[("grpc.so_reuseport", 0)],
        )
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _LogsServicer(self), server
        )
        address = f"{_host_for_url(self._host)}:{self._grpc_port}"
        try:
            if self._tls is None:
                port = server.add_insecure_port(address)
            else:
                cert, key = (_read_bytes(p) for p in self._tls)
                creds = grpc.ssl_server_credentials([(key, cert)])
                port = server.add_secure_port(address, creds)
        except RuntimeError as exc:  # newer grpcio raises instead of returning 0
            msg = f"cannot bind gRPC receiver to {address}: {exc}"
            raise OSError(msg) from exc
        if not port:
            msg = f"cannot bind gRPC receiver to {address}"
            raise OSError(msg)
        self._grpc_port = int(port)
        server.start()
        self._grpc_server = server

    def _start_http(self) -> None:
        ssl_context = None
        if self._tls is not None:
            ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ssl_context.load_cert_chain(*self._tls)
        server = _HTTPServer((self._host, self._http_port), self, ssl_context)
        self._http_port = int(server.server_address[1])
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL},
            name=f"otlp-receiver-http-{self._http_port}",
            daemon=True,
        )
        thread.start()
        self._http_server = server
        self._http_thread = thread

    # endpoints

    @property
    def grpc_port(self) -> int:
        """The gRPC port (0 until the first start when constructed with 0)."""
        return self._grpc_port

    @property
    def http_port(self) -> int:
        """The HTTP port (0 until the first start when constructed with 0)."""
        return self._http_port

    @property
    def grpc_endpoint(self) -> str:
        """URL for the gRPC exporter's `endpoint=`, https:// when TLS is on."""
        return self._url(self._require_port(self._grpc_port, "gRPC"))

    @property
    def http_endpoint(self) -> str:
        """Base URL of the HTTP receiver (what OTEL_EXPORTER_OTLP_ENDPOINT takes)."""
        return self._url(self._require_port(self._http_port, "HTTP"))

    @property
    def http_logs_url(self) -> str:
        """Full logs URL for the HTTP exporter's `endpoint=`."""
        return self.http_endpoint + _LOGS_PATH

    def _url(self, port: int) -> str:
        scheme = "http" if self._tls is None else "https"
        return f"{scheme}://{_host_for_url(self._host)}:{port}"

    def _require_port(self, port: int, what: str) -> int:
        if not port:
            msg = f"{what} port not chosen yet: start() the receiver first"
            raise RuntimeError(msg)
        return port

    # storage and access

    @property
    def records(self) -> list[Record]:
        """A copy of every stored record, in arrival order."""
        with self._cond:
            return list(self._synced_locked())

    @property
    def requests(self) -> dict[str, int]:
        """Well-formed export requests received per transport ("grpc", "http"), rejected
        ones included (malformed HTTP bodies answered 400 are not counted)."""
        with self._cond:
            return dict(self._requests)

    @property
    def rejected(self) -> dict[str, int]:
        """Export requests rejected by an injected fault, per transport."""
        with self._cond:
            return dict(self._rejected)

    def clear(self) -> None:
        """Forget stored records and reset the request counters."""
        with self._cond:
            self._records.clear()
            self._pending.clear()
            self._requests = dict.fromkeys(_TRANSPORTS, 0)
            self._rejected = dict.fromkeys(_TRANSPORTS, 0)

    def by_event(self, name: str) -> list[Record]:
        """Records whose event_name, or else "event" attribute, equals `name`."""
        return [r for r in self.records if _event_of(r) == name]

    def wait_for(
        self,
        count: int | None = None,
        *,
        predicate: Callable[[Record], bool] | None = None,
        timeout: float = 10.0,
    ) -> list[Record]:
        """Block until `count` records (matching `predicate`, if given) are stored.

        `count` defaults to 1. Returns all records, or only the matching ones with a
        predicate. Raises TimeoutError saying how many arrived.
        """
        want = 1 if count is None else count
        deadline = time.monotonic() + timeout

        def matching() -> list[Record]:
            records = self._synced_locked()
            if predicate is None:
                return list(records)
            return [r for r in records if predicate(r)]

        with self._cond:
            found = matching()
            while len(found) < want:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    what = "matching records" if predicate is not None else "records"
                    events = sorted({_event_of(r) for r in self._records})
                    msg = (
                        f"waited {timeout:g}s for {want} {what}, got {len(found)} "
                        f"({len(self._records)} records in total from {self._requests} "
                        f"requests, {self._rejected} rejected; events seen: {events})"
                    )
                    raise TimeoutError(msg)
                self._cond.wait(remaining)
                found = matching()
            return found

    def _records_since(self, index: int, timeout: float) -> list[Record]:
        """Records stored after position `index`, waiting up to `timeout` for one."""
        with self._cond:
            if len(self._synced_locked()) <= index:
                self._cond.wait(timeout)
            return self._synced_locked()[index:]

    def _store(self, request: logs_service_pb2.ExportLogsServiceRequest, transport: str) -> None:
        with self._cond:
            self._pending.append((request, transport))
            self._cond.notify_all()

    def _synced_locked(self) -> list[Record]:
        """The records, with every pending request flattened in arrival order."""
        if self._pending:
            pending, self._pending = self._pending, []
            for request, transport in pending:
                self._records.extend(_decode_request(request, transport))
        return self._records

    # fault injection

    def set_fault(
        self,
        *,
        delay: float = 0.0,
        fail: bool = False,
        http_status: int = 503,
        grpc_code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE,
    ) -> None:
        """Act as a slow collector (`delay` seconds before answering) and/or a failing one
        (`fail`: reject every request with `http_status` / `grpc_code`, storing nothing)."""
        with self._cond:
            self._fault = _Fault(delay, fail, http_status, grpc_code)

    def clear_fault(self) -> None:
        """Behave normally again."""
        with self._cond:
            self._fault = _Fault()

    def _begin_request(self, transport: str) -> _Fault | None:
        """Count a request and apply the fault; the fault is returned when it must be rejected.

        A request in its delay when the receiver stops is rejected too (nothing stored).
        """
        with self._cond:
            self._requests[transport] += 1
            fault = self._fault
        stopped = self._stopped
        if fault.delay > 0 and stopped.wait(fault.delay):
            fault = _Fault(fail=True, http_status=503, grpc_code=grpc.StatusCode.UNAVAILABLE)
        if fault.fail:
            with self._cond:
                self._rejected[transport] += 1
            return fault
        return None


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# --- certificates -------------------------------------------------------------------------


def make_self_signed_cert(directory: str | os.PathLike[str]) -> tuple[str, str]:
    """Write a self-signed cert for localhost / 127.0.0.1 into `directory`.

    Returns (cert path, key path), both PEM; the cert is its own CA, so clients pass the
    cert path as the root certificate. Uses the `openssl` binary when present, else the
    `cryptography` package.
    """
    os.makedirs(directory, exist_ok=True)
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    openssl = shutil.which("openssl")
    if openssl is not None:
        args = "req -x509 -nodes -days 2 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1"
        subprocess.run(
            [
                openssl,
                *args.split(),
                *("-keyout", key, "-out", cert, "-subj", "/CN=localhost"),
                *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
                *("-addext", "basicConstraints=critical,CA:TRUE"),
            ],
            check=True,
            capture_output=True,
        )
        return cert, key
    try:
        _cryptography_cert(cert, key)
    except ImportError as exc:
        msg = "make_self_signed_cert needs the openssl binary or the cryptography package"
        raise RuntimeError(msg) from exc
    return cert, key


def _cryptography_cert(cert_path: str, key_path: str) -> None:
    """The same certificate as the openssl branch, made with the cryptography package."""
    import ipaddress  # noqa: PLC0415 - only this fallback needs it

    x509: Any = importlib.import_module("cryptography.x509")
    oid: Any = importlib.import_module("cryptography.x509.oid")
    hashes: Any = importlib.import_module("cryptography.hazmat.primitives.hashes")
    ser: Any = importlib.import_module("cryptography.hazmat.primitives.serialization")
    ec: Any = importlib.import_module("cryptography.hazmat.primitives.asymmetric.ec")
    private_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME, "localhost")])
    now = _dt.datetime.now(_dt.timezone.utc)
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=2))
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private_key, hashes.SHA256())
    )
    with open(key_path, "wb") as f:
        f.write(
            private_key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
        )
    with open(cert_path, "wb") as f:
        f.write(certificate.public_bytes(ser.Encoding.PEM))


# --- command line -------------------------------------------------------------------------


#: Attributes the summary line shows in columns of their own (not again as key=value).
_SHOWN = frozenset(
    {"event", "body", "timestamp", "severity_text", "severity_number", "rank", "host.name",
     "local_rank", "world_size", "node_rank", "code.file.path", "code.line.number",
     "code.function.name", "exception.stacktrace", "log.record.uid"}
)  # fmt: skip


def _summary_line(record: Record) -> str:
    """One aligned line per record: time, severity, service.name, rank@host, event, body,
    then the other attributes as key=value (control characters escaped)."""
    ns = record["time_unix_nano"] or record["observed_time_unix_nano"]
    when = _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc)
    attrs = record["attributes"]
    resource = record.get("resource") or {}
    event = _event_of(record) or "-"
    where = ""
    if "rank" in attrs or "rank" in resource:
        where = f"r{attrs.get('rank', resource.get('rank'))}"
    host = attrs.get("host.name") or resource.get("host.name")
    if host:
        where = f"{where}@{host}" if where else str(host)
    parts = [
        when.strftime("%H:%M:%S.%f")[:-3],
        str(record["severity_text"] or record["severity_number"]).ljust(8),
        str(resource.get("service.name", "-")).ljust(16),
        where.ljust(12),
        event.ljust(28),
    ]
    body = record["body"]
    if body is not None and body != event:
        parts.append(body if isinstance(body, str) else repr(body))
    pairs = " ".join(f"{k}={_short(v)}" for k, v in attrs.items() if k not in _SHOWN)
    if pairs:
        parts.append(pairs)
    return _one_line("  ".join(parts).rstrip())


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=_json_default)
    return text if len(text) <= 120 else text[:120] + "..."


def _one_line(text: str) -> str:
    return "".join(
        c if c.isprintable() or c == " " else c.encode("unicode_escape").decode() for c in text
    )


def _busy_port(args: argparse.Namespace) -> int:
    """The first configured port that cannot be bound now (the one start() failed on)."""
    ports = [] if args.http_only else [args.grpc_port]
    ports += [] if args.grpc_only else [args.port]
    for port in ports:
        try:
            with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as sock:
                sock.bind((args.host, port))
        except OSError:
            return int(port)
    return int(ports[0])


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc).split(":")[-1].strip() or type(exc).__name__


def _json_default(value: Any) -> Any:
    """JSON for what json cannot write: bytes as base64 text, the rest as repr."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return repr(value)


def cli_main(argv: list[str] | None = None) -> int:
    """`python -m obs receive`: run a receiver until SIGINT/SIGTERM, printing each record."""
    parser = argparse.ArgumentParser(
        prog="python -m obs receive",
        description="Receive OTLP logs (gRPC and HTTP) on this machine and print one line "
        "per record (or save them). Stop with Ctrl-C (SIGINT) or SIGTERM; a summary follows.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=int, default=4318, help="HTTP port, 0 = any free one")
    parser.add_argument("--grpc-port", type=int, default=4317, help="gRPC port, 0 = any free one")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--grpc-only", action="store_true", help="serve gRPC only")
    only.add_argument("--http-only", action="store_true", help="serve HTTP only")
    parser.add_argument("--out", help="append every record as one JSON line to this file")
    parser.add_argument("--quiet", action="store_true", help="do not print each record")
    args = parser.parse_args(argv)

    stop = threading.Event()
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        # Outside the main thread signal() raises: the caller must then stop us another way.
        with contextlib.suppress(ValueError):
            previous[signum] = signal.signal(signum, on_signal)

    receiver = OTLPReceiver(
        args.host, args.grpc_port, args.port, grpc=not args.http_only, http=not args.grpc_only
    )
    try:
        receiver.start()
    except OSError as exc:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        which = _busy_port(args)
        sys.stderr.write(
            f"python -m obs receive: cannot listen on {args.host}:{which} ({_reason(exc)}): "
            "another receiver or collector may be running; pick another port "
            "(--port / --grpc-port, 0 = any free one)\n"
        )
        return 1
    out: IO[str] | None = None
    seen = 0
    try:
        out = open(args.out, "a", encoding="utf-8") if args.out else None  # noqa: SIM115
        where = []
        if not args.http_only:
            where.append(f"grpc {receiver.grpc_endpoint}")
        if not args.grpc_only:
            where.append(f"http {receiver.http_logs_url}")
        print(
            f"OTLP receiver listening: {' '.join(where)} (Ctrl-C to stop)",
            flush=True,
        )
        while True:
            done = stop.is_set()  # read first: one more drain after the signal
            new = receiver._records_since(seen, 0.0 if done else 0.2)
            seen += len(new)
            for record in new:
                if out is not None:
                    out.write(json.dumps(record, default=_json_default) + "\n")
                if not args.quiet:
                    print(_summary_line(record), flush=True)
            if out is not None and new:
                out.flush()
            if done:
                break
    finally:
        receiver.stop()
        if out is not None:
            out.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    counts = Counter(_event_of(r) or "<no event>" for r in receiver.records)
    requests = receiver.requests
    print(
        f"received {sum(counts.values())} records in {sum(requests.values())} requests "
        f"(grpc {requests['grpc']}, http {requests['http']})",
        flush=True,
    )
    for name, n in counts.most_common():
        print(f"  {n:6d}  {name}", flush=True)
    sys.stdout.flush()
    return 0
