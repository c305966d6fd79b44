"""What a collector answered to one export request, read from the SDK exporters' wire.

The SDK's OTLP exporters reduce every answer to SUCCESS / FAILURE, which is not enough to
deliver under real faults: a request that is too large must be split, a record the
collector rejects for good must be given up (and counted) instead of blocking the spool,
and a ``partial_success`` says how many records of an accepted request were dropped. The
probes here sit between the exporter and its wire (HTTP transport, gRPC stub) and keep the
last answer; :class:`Outcome` classifies it.

Written against opentelemetry-exporter-otlp 1.45's private names (``_client._transport``,
``_client`` / ``_initialize_channel_and_stub``); where they are missing, outcomes carry
only ok / not ok, as before.
"""

from __future__ import annotations

__all__ = ["Outcome", "install_grpc_probe", "install_http_probe"]

import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from obs.encode import scrub_text

#: Starts a thread running the function it is given, and returns it.
Spawn = Callable[[Callable[[], object]], threading.Thread]
#: HTTP answers that no retry of the same request can fix (besides 413, too large).
_PERMANENT_HTTP = frozenset({400, 422})
#: A server error that may be the request's: a collector that fails on one record (a bug,
#: a pipeline panicking on one value) answers it to every request holding that record.
_SUSPECT_HTTP = frozenset({500})
_SUSPECT_GRPC = frozenset({"INTERNAL", "UNKNOWN"})
#: How gRPC's message size limits read (C core, Go: "larger than max"; Java: "exceeds
#: maximum size"). Not "exceeds" alone: rate limiters say "rate exceeds quota".
_SIZE_WORDS = ("larger than max", "exceeds max", "too large", "message size")
_RETRY_INFO = "google.rpc.retryinfo-bin"
#: gRPC core's words when the *answer* is over the client's receive limit (4 MiB): the
#: collector took the request and answered (a huge partial_success text), not "too large".
_ANSWER_TOO_LARGE = "client: received message larger than max"
#: The longest "not before" honoured (``Retry-After``, ``RetryInfo``): a collector's wish
#: beyond it (an hour, a garbage 10**30) would stop delivery for that long; obs tries again
#: after it, and its flush and shutdown never wait for it past their own deadlines.
MAX_RETRY_AFTER = 600.0


@dataclasses.dataclass(slots=True)
class Outcome:
    """One export request's result; truthy when the collector accepted it."""

    ok: bool
    too_large: bool = False  # split the batch and retry the halves
    permanent: bool = False  # retrying the same records cannot succeed
    rejected: int = 0  # partial_success.rejected_log_records of an accepted request
    message: str = ""  # the answer: status or code, the collector's words (scrubbed, bounded)
    retry_after: float = 0.0  # seconds the collector asked to wait before the next request
    #: A server error that may be this request's own (HTTP 500, gRPC INTERNAL / UNKNOWN):
    #: narrowed down like a rejection once the collector takes another part.
    suspect: bool = False

    def __bool__(self) -> bool:
        return self.ok


def _text(raw: object) -> str:
    return scrub_text(str(raw))[:500]


class _Box:
    """The last answer a probe saw (one export at a time: the export thread's), and when
    that export's budget ends (``time.monotonic()``; set for each export)."""

    __slots__ = ("answer", "deadline")

    def __init__(self) -> None:
        self.answer: Outcome | None = None
        self.deadline = math.inf

    def left(self) -> float:
        """Seconds left to the export in progress (inf: no budget set)."""
        return self.deadline - time.monotonic()


class _Budget(threading.Event):
    """An SDK exporter's shutdown event, whose waits (its retry loop's backoffs) end with
    the export's budget on the monotonic clock, as if shut down. The SDK keeps its retry
    deadline on ``time.time()``: a wall clock stepped back (an NTP step, a VM resumed)
    left it hours, and the export thread slept backoffs and ``Retry-After`` for that
    long, delivering and spooling nothing meanwhile."""

    def __init__(self, box: _Box, flag: object) -> None:
        super().__init__()
        self._box = box
        if isinstance(flag, threading.Event) and flag.is_set():
            self.set()

    def wait(self, timeout: float | None = None) -> bool:
        left = self._box.left()
        if left == math.inf or (timeout is not None and timeout <= left):
            return super().wait(timeout)
        super().wait(max(left, 0.0))
        return True  # the budget is spent: give the retry up


def _bound_waits(owner: object, name: str, box: _Box) -> None:
    """Put a :class:`_Budget` in place of ``owner``'s shutdown event ``name``, if it has one."""
    flag = getattr(owner, name, None)
    if isinstance(flag, threading.Event):
        setattr(owner, name, _Budget(box, flag))


def _within(timeout: object, box: _Box) -> object:
    """A request's ``timeout`` cut to what is left of the export's budget (see _Budget)."""
    left = box.left()
    if isinstance(timeout, (int, float)) and left < timeout:
        return max(left, 0.001)
    return timeout


# --- HTTP -----------------------------------------------------------------------------------


#: How long past its timeout a request may take before it counts as stuck.
_GRACE = 0.25
#: How long a stuck request holds the transport before its connection is closed under it
#: (requests are refused meanwhile: the collector is answering, however slowly, and a
#: request sent while a 200 trickles could end with that 200 and count as delivered).
_STUCK_LIMIT = 10.0


class _HTTPProbe:
    """Wraps the HTTP client's transport: classifies each response it returns, and bounds
    each request by its timeout. The HTTP clients' timeouts bound each socket read, not
    the request: a collector that trickles its answer (a byte or a header line at a time)
    held the export thread forever, so nothing was spooled or delivered after it."""

    def __init__(
        self,
        inner: Any,
        box: _Box,
        spawn: Spawn | None = None,
        abort: Callable[[threading.Thread], None] | None = None,
    ) -> None:
        self._inner = inner
        self._box = box
        self._spawn = spawn
        self._abort = abort
        self._stuck: threading.Thread | None = None
        self._stuck_since = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _bounded(self, *args: Any, **kwargs: Any) -> Any:
        """The inner request, run on a helper thread and given up after its timeout (a
        failure: sent again). The helper is left to end when its socket does, and none is
        started while one is stuck, for ``_STUCK_LIMIT`` seconds at most: then its
        connection is closed under it (``abort``), so that one connection trickling for
        ever (a stuck proxy) does not stop every later request."""
        if "timeout" in kwargs:
            kwargs["timeout"] = _within(kwargs["timeout"], self._box)
        timeout = kwargs.get("timeout")
        if self._spawn is None or not isinstance(timeout, (int, float)):
            return self._inner.request(*args, **kwargs)
        stuck = self._stuck
        if stuck is not None and stuck.is_alive():
            if self._abort is None or time.monotonic() < self._stuck_since + _STUCK_LIMIT:
                return _timed_out("an earlier request to the collector is still unanswered")
            with contextlib.suppress(Exception):
                self._abort(stuck)
            stuck.join(_GRACE)
            if stuck.is_alive():
                return _timed_out("an earlier request to the collector is still unanswered")
        self._stuck = None
        got: list[Any] = []
        thread = self._spawn(lambda: got.append(self._inner.request(*args, **kwargs)))
        thread.join(max(float(timeout), 0.0) + _GRACE)
        if got:
            return got[0]
        self._stuck, self._stuck_since = thread, time.monotonic()
        return _timed_out(f"no complete answer within {float(timeout):.2f} s")

    def request(self, *args: Any, **kwargs: Any) -> Any:
        result = self._bounded(*args, **kwargs)
        try:
            self._box.answer = _classify_http(result)
        except Exception:  # a body we cannot read: plain ok / not ok
            self._box.answer = None
        _drop_unreadable_retry_after(result)
        return result


def _drop_unreadable_retry_after(result: Any) -> None:
    """Remove a ``Retry-After`` the SDK's parser would raise on (an HTTP-date whose numbers
    overflow a C int raises OverflowError, which it does not catch): the answer is then a
    plain retryable status, not an exception out of the exporter."""
    from email.utils import parsedate_to_datetime  # noqa: PLC0415

    try:
        headers = result.headers()
        value = headers.get("retry-after")
        if value is None:
            return
        try:
            float(value)
        except ValueError:
            with contextlib.suppress(TypeError, ValueError):
                parsedate_to_datetime(value.strip()).timestamp()
    except Exception:
        with contextlib.suppress(Exception):
            del headers["retry-after"]


def _timed_out(why: str) -> Any:
    """A transport result for a request given up: an error, no status (a failed export)."""
    from opentelemetry.exporter.http.transport._base import BaseHTTPResult  # noqa: PLC0415

    class TimedOut(BaseHTTPResult):
        def content(self) -> bytes:
            return b""

        def headers(self) -> Any:
            return {}

    return TimedOut(error=TimeoutError(f"OTLP request abandoned: {why}"))


def _classify_http(result: Any) -> Outcome | None:
    status = getattr(result, "status_code", None)
    if not isinstance(status, int):
        return None
    if 200 <= status < 300:
        return _partial(result.content(), _content_type(result))
    message = _http_answer(status, result)
    if status == 413:
        return Outcome(ok=False, too_large=True, message=message)
    permanent = status in _PERMANENT_HTTP
    wait = 0.0 if permanent else _retry_after_header(result)
    suspect = status in _SUSPECT_HTTP
    return Outcome(
        ok=False, permanent=permanent, message=message, retry_after=wait, suspect=suspect
    )


def _retry_after_header(result: Any) -> float:
    """The ``Retry-After`` of an answer, in seconds (delay-seconds or an HTTP-date, RFC
    9110), within [0, MAX_RETRY_AFTER]; 0 when absent or unreadable (any value: a date out
    of range, garbage, a float past any clock)."""
    from email.utils import parsedate_to_datetime  # noqa: PLC0415

    try:
        value = str(result.headers().get("retry-after") or "").strip()[:100]
        if not value:
            return 0.0
        try:
            seconds = float(value)
        except ValueError:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        return 0.0 if math.isnan(seconds) else min(max(seconds, 0.0), MAX_RETRY_AFTER)
    except Exception:
        return 0.0


def _http_answer(status: int, result: Any) -> str:
    """``HTTP 401 Unauthorized: <the collector's message>``, scrubbed and bounded."""
    reason = _text(getattr(result, "reason", "") or "")[:100]
    head = f"HTTP {status} {reason}".rstrip()
    words = _http_message(result)
    return _text(f"{head}: {words}") if words and words != reason else head


def _http_message(result: Any) -> str:
    """The collector's message: a google.rpc.Status body, else its text, else the reason."""
    from google.rpc import status_pb2  # type: ignore[import-untyped]  # noqa: PLC0415

    try:
        body = result.content()
    except Exception:
        body = b""
    if body:
        try:
            message = status_pb2.Status.FromString(body).message
            if message:
                return _text(message)
        except Exception:  # noqa: S110 - not protobuf: use the text
            pass
        return _text(body.decode("utf-8", "replace").strip())
    return ""


def _content_type(result: Any) -> str:
    try:
        return str(result.headers().get("content-type") or "").lower()
    except Exception:
        return ""


def _partial(body: bytes, content_type: str = "") -> Outcome:
    """A 2xx's partial_success, read as its Content-Type says: protobuf (or no type), or
    OTLP/JSON; another body (an HTML page, text) holds none, and garbage that happens to
    parse as protobuf must not count delivered records as rejected."""
    from google.protobuf import json_format  # noqa: PLC0415
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2  # noqa: PLC0415

    if not body:
        return Outcome(ok=True)
    response = logs_service_pb2.ExportLogsServiceResponse()
    try:
        if "json" in content_type:
            json_format.Parse(body, response, ignore_unknown_fields=True)
        elif not content_type or "protobuf" in content_type or "octet-stream" in content_type:
            response.ParseFromString(body)
        else:
            return Outcome(ok=True)
    except Exception:
        return Outcome(ok=True)
    return _from_response(response)


def _from_response(response: Any) -> Outcome:
    partial = response.partial_success
    return Outcome(
        ok=True,
        rejected=max(int(partial.rejected_log_records), 0),
        message=_text(partial.error_message) if partial.error_message else "",
    )


def install_http_probe(
    exporter: Any,
    spawn: Spawn | None = None,
    abort: Callable[[threading.Thread], None] | None = None,
) -> _Box | None:
    """Put a probe on an SDK HTTP exporter's transport; None when its internals differ.
    ``spawn(fn)`` starts a thread running ``fn``: each request then runs on one, bounded
    by its timeout; ``abort(thread)`` closes the connection of a request given up on."""
    client = getattr(exporter, "_client", None)
    inner = getattr(client, "_transport", None)
    if inner is None or not callable(getattr(inner, "request", None)):
        return None
    box = _Box()
    client._transport = _HTTPProbe(inner, box, spawn, abort)  # type: ignore[union-attr]
    _bound_waits(client, "_shutdown_event", box)
    return box


# --- gRPC -----------------------------------------------------------------------------------


def install_grpc_probe(exporter: Any) -> _Box | None:  # noqa: C901 - one guard per SDK internal
    """Put a probe on an SDK gRPC exporter's stub (and on the stubs it makes when it
    reconnects); None when its internals differ."""
    import grpc  # noqa: PLC0415

    init = getattr(exporter, "_initialize_channel_and_stub", None)
    if not callable(init) or not hasattr(exporter, "_client"):
        return None
    box = _Box()

    class Final(grpc.RpcError):  # type: ignore[misc]
        """The same error, under a code the SDK does not retry (we split / give up)."""

        def __init__(self, error: Any) -> None:
            super().__init__()
            self._error = error

        def code(self) -> Any:
            return grpc.StatusCode.INVALID_ARGUMENT

        def details(self) -> Any:
            return self._error.details()

        def trailing_metadata(self) -> Any:
            return ()

    class Stub:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def Export(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - the gRPC stub's
            if "timeout" in kwargs:
                kwargs["timeout"] = _within(kwargs["timeout"], box)
            try:
                response = self._inner.Export(*args, **kwargs)
            except grpc.RpcError as error:
                box.answer = _classify_grpc(error)
                if box.answer.ok:  # its answer was too large to read: it took the request
                    return _empty_response()
                if box.answer.too_large or box.answer.permanent:
                    raise Final(error) from error
                raise
            box.answer = _from_response(response)
            return response

    def reinit() -> None:
        init()
        exporter._client = Stub(exporter._client)

    exporter._initialize_channel_and_stub = reinit
    exporter._client = Stub(exporter._client)
    _bound_waits(exporter, "_shutdown_in_progress", box)
    return box


def _classify_grpc(error: Any) -> Outcome:
    import grpc  # noqa: PLC0415

    try:
        code, details = error.code(), _text(error.details() or "")
        message = _text(f"{code.name}: {details}" if details else code.name)
    except Exception:
        return Outcome(ok=False)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and _ANSWER_TOO_LARGE in details.lower():
        return Outcome(ok=True)  # a unary call answers a message only on success
    if (
        code == grpc.StatusCode.RESOURCE_EXHAUSTED
        and not _retry_info(error)  # the server says: later (throttled, not too large)
        and any(word in details.lower() for word in _SIZE_WORDS)
    ):
        return Outcome(ok=False, too_large=True, message=message)
    permanent = code == grpc.StatusCode.INVALID_ARGUMENT
    wait = 0.0 if permanent else _retry_delay(error)
    suspect = code.name in _SUSPECT_GRPC
    return Outcome(
        ok=False, permanent=permanent, message=message, retry_after=wait, suspect=suspect
    )


def _retry_delay(error: Any) -> float:
    """The delay of the error's RetryInfo, in seconds within [0, MAX_RETRY_AFTER]; 0 when
    it has none or it cannot be read."""
    from google.rpc.error_details_pb2 import RetryInfo  # type: ignore[import-untyped]  # noqa: PLC0415

    try:
        for key, value in error.trailing_metadata() or ():
            if key == _RETRY_INFO:
                delay = RetryInfo.FromString(value).retry_delay
                seconds = float(delay.seconds) + float(delay.nanos) / 1e9
                return min(max(seconds, 0.0), MAX_RETRY_AFTER)
    except Exception:
        return 0.0
    return 0.0


def _retry_info(error: Any) -> bool:
    """Whether the error's trailers carry a RetryInfo: OTLP's sign that RESOURCE_EXHAUSTED
    is throttling, which passes (a size limit does not)."""
    try:
        return any(key == _RETRY_INFO for key, _ in error.trailing_metadata() or ())
    except Exception:
        return False


def _empty_response() -> Any:
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2  # noqa: PLC0415

    return logs_service_pb2.ExportLogsServiceResponse()
