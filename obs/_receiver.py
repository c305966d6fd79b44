"""A real OTLP logs receiver on loopback, for tests and local development.

`OTLPReceiver` speaks OTLP/gRPC and OTLP/HTTP (protobuf and JSON, gzip/deflate, optional
TLS) so the SDK's own exporters can be tested end to end without a collector. A request is
answered once its protobuf is parsed, as a collector answers; its records are flattened into
plain dicts when they are read. Faults (a slow or failing collector) can be injected to test
delivery guarantees. Decoding is :mod:`obs._otlp_decode`, certificates :mod:`obs._certs`,
the command :mod:`obs._receive_cli`. It imports nothing from obs' logging chain.
"""

from __future__ import annotations

import socket
import ssl
import sys
import threading
import time
import zlib
from collections.abc import Callable
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc

from obs._certs import make_self_signed_cert, read_bytes
from obs._otlp_decode import Record, decode_request, decompress, event_of, parse_json_request
from obs._sigmask import held
from obs.cli_text import shown

__all__ = ["OTLPReceiver", "make_self_signed_cert"]

_TRANSPORTS = ("grpc", "http")
_LOGS_PATH = "/v1/logs"
_POLL_INTERVAL = 0.05  # how often the HTTP accept loop checks for shutdown: stop() is prompt


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

    def Export(  # noqa: N802 - the generated gRPC servicer's name
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

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's
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
            body = decompress(self._read_body(), self.headers.get("Content-Encoding", ""))
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
                request = parse_json_request(body)
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

    def __enter__(self) -> OTLPReceiver:  # noqa: PYI034 - start() returns this receiver
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _start_grpc(self) -> None:
        with held():  # its threads leave the process's signals to the application
            self._start_grpc_server()

    def _start_grpc_server(self) -> None:
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
                cert, key = (read_bytes(p) for p in self._tls)
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
        with held():
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
        return [r for r in self.records if event_of(r) == name]

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
                    # scrubbed: a test's failure message lands in CI logs
                    events = sorted({shown(event_of(r)) for r in self._records})
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
                self._records.extend(decode_request(request, transport))
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
