"""The HTTP exporter's requests Session: what a 2xx means, how much of an answer is read,
and how a request given up on is cut (its connection closed under the thread reading it).

Loaded only with the OTLP HTTP exporter (``requests`` is imported when a session is made).
"""

from __future__ import annotations

__all__ = ["abort_request", "session"]

import contextlib
import http.client
import socket
import threading
import weakref
from typing import Any

#: The most of an HTTP answer's body read (decoded): an OTLP answer is a few hundred bytes;
#: a collector or proxy answering a huge body or a gzip bomb held it all in memory.
_MAX_ANSWER = 256 * 1024

#: The connection each thread is sending a request on (the thread's last one). No lock:
#: one item set or popped at a time (atomic under the GIL), and a lock a parent thread
#: held at a fork would stop the child's requests for ever.
_LIVE: weakref.WeakKeyDictionary[threading.Thread, Any] = weakref.WeakKeyDictionary()


def abort_request(thread: threading.Thread) -> None:
    """Close the connection ``thread`` is sending a request or reading an answer on, so
    that its blocked read fails now. An HTTP client's timeout bounds each socket read,
    not the request: a collector trickling one answer for ever held that thread, and
    with it the connection, for ever."""
    connection = _LIVE.pop(thread, None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


#: The most informational (1xx) answers skipped before a request's final answer.
_MAX_INFORMATIONAL = 32


class _FinalAnswer(http.client.HTTPResponse):
    """An answer read past any informational (1xx) answer before it (``103 Early Hints``,
    ``102 Processing``): http.client skips only ``100 Continue``, so a 103 read as the
    request's answer, a failure, and the batch was sent again although the collector
    stored it; the 200 left on the keep-alive connection then read as the next request's
    answer. ``101 Switching Protocols`` is final (it ends HTTP on the connection). A 1xx
    that announces content (no 1xx has any) is a server answering it as its final answer:
    an error naming the status (a failed export, sent again), not a wait for another."""

    def _read_status(self) -> tuple[str, int, str]:
        for _ in range(_MAX_INFORMATIONAL):
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if not (100 <= status < 200) or status == 101:
                break
            headers = http.client.parse_headers(self.fp)  # its headers: not the answer's
            if headers.get("transfer-encoding") or headers.get("content-length", "0") != "0":
                msg = f"HTTP {status} {reason.strip()[:100]} answered as a final answer"
                raise http.client.HTTPException(msg)
        return version, status, reason


def _tracked(base: type) -> type:
    """``base`` (a urllib3 connection class) that records itself as its thread's live one
    when it sends a request, and reads each answer past its informational (1xx) ones."""

    class Tracked(base):  # type: ignore[misc]
        response_class = _FinalAnswer

        def request(self, *args: Any, **kwargs: Any) -> Any:
            _LIVE[threading.current_thread()] = self
            return super().request(*args, **kwargs)

    Tracked.__name__ = Tracked.__qualname__ = f"Tracked{base.__name__}"
    return Tracked


def _read_capped(response: Any) -> bytes:
    """The body, decoded, read no further than ``_MAX_ANSWER`` bytes: a 2xx's body
    past that is dropped (a 2xx is a delivery, whatever its body), another status's is
    cut there (the collector's message is at its start)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > _MAX_ANSWER:
            response.close()  # closes the connection: the rest is never read
            if 200 <= response.status_code < 300:
                return b""
            break
    return b"".join(chunks)[:_MAX_ANSWER]


def session(*, pin_ca: bool) -> Any:
    """The requests Session of the HTTP exporter.

    A 2xx answer is the collector's word that it stored the request: a body the client
    cannot decode (``Content-Encoding: gzip`` over plain bytes) or read to its end (the
    connection reset after the status line) leaves the answer a 2xx with an empty body,
    not a failure that would send the stored records again; any other status keeps its
    meaning the same way (a 400 stays permanent, not a transient failure retried for
    ever). A body is read no further than ``_MAX_ANSWER`` bytes, decoded (a longer one's
    connection is closed). Its connections are tracked (:func:`abort_request`). With
    ``pin_ca`` the CA stays the configured one: requests lets ``REQUESTS_CA_BUNDLE`` /
    ``CURL_CA_BUNDLE`` override a session's ``verify`` (psf/requests#3829), so on hosts
    that set them (most CI images, corporate machines) the exporter would ignore
    OTEL_EXPORTER_OTLP_CERTIFICATE.
    """
    import requests  # noqa: PLC0415 - the HTTP exporter's own dependency
    from urllib3.connection import HTTPConnection, HTTPSConnection  # noqa: PLC0415

    unreadable = (
        requests.exceptions.ContentDecodingError,
        requests.exceptions.ChunkedEncodingError,
        requests.exceptions.ConnectionError,
    )
    tracked: dict[type, type] = {c: _tracked(c) for c in (HTTPConnection, HTTPSConnection)}

    class Adapter(requests.adapters.HTTPAdapter):
        def get_connection_with_tls_context(self, *args: Any, **kwargs: Any) -> Any:
            pool = super().get_connection_with_tls_context(*args, **kwargs)
            cls = tracked.get(pool.ConnectionCls)
            if cls is not None:  # (a proxy's pool too; another class: left as it is)
                pool.ConnectionCls = cls
            return pool

    class Session(requests.Session):
        def merge_environment_settings(self, *args: Any, **kwargs: Any) -> Any:
            merged = super().merge_environment_settings(*args, **kwargs)
            if pin_ca:
                merged["verify"] = self.verify
            return merged

        def send(self, request: Any, **kwargs: Any) -> Any:
            if kwargs.get("stream"):
                return super().send(request, **kwargs)
            response = super().send(request, **{**kwargs, "stream": True})
            try:
                body = _read_capped(response)
            except unreadable:  # the status is the answer (a 2xx: stored; a 400: never)
                response._content, response._content_consumed = b"", True
                response.close()
                return response
            response._content, response._content_consumed = body, True
            return response

    made = Session()
    for prefix in ("http://", "https://"):
        made.mount(prefix, Adapter())
    return made
