"""A collector echoing a credential obs sent it: obs' own reports never repeat it.

The secret is one obs knows it sent (a header value, the endpoint's password, a query
value of the logs URL), under no secret-looking name in the collector's words, so no
pattern can spot it: a proxy answering ``invalid api key <value>``, a partial_success
``error_message`` quoting the request, a gRPC status's details. Real SDK exporters talk
to a real loopback collector (tests/integration/test_otel_answers.Collector).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from test_otel_answers import Collector, _log, _sink, collector  # noqa: F401 - fixture

from obs._delivery import delivery_report
from obs.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

#: Plain words, no secret-looking name around them, none of the fixed text's words.
_SECRETS = st.text("QXZJWKVqxzjwkv0123456789", min_size=10, max_size=24)
_SOURCES = ("header", "password", "query")
_ANSWERS = ("transient", "permanent", "partial")


class _Captured(logging.Handler):
    """Every log record the OTel SDK's exporters write, as text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record.getMessage())


@contextlib.contextmanager
def _sdk_logs() -> Iterator[_Captured]:
    handler = _Captured()
    root = logging.getLogger("opentelemetry")
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _settings(spool: Path, to: Collector, protocol: str, source: str, secret: str) -> Settings:
    endpoint = to.endpoint(protocol)
    headers: dict[str, str] = {}
    logs_endpoint = False
    if source == "header":
        headers["x-tenant-pass"] = secret
    elif source == "password":
        endpoint = endpoint.replace("http://", f"http://svc:{secret}@")
    elif protocol != "grpc":  # a query value of the logs URL (an HTTP endpoint's SAS token)
        endpoint, logs_endpoint = f"{endpoint}/v1/logs?sv=2024&sig={secret}", True
    else:
        headers["x-tenant-pass"] = secret
    return Settings(
        logs_exporter="otlp",
        otlp_protocol=protocol,
        otlp_endpoint=endpoint,
        otlp_endpoint_is_logs=logs_endpoint,
        otlp_headers=headers,
        otlp_timeout=0.5,
        spool_dir=str(spool),
        blrp_schedule_delay_ms=20.0,
        shutdown_timeout=2.0,
        service_name="echo-test",
    )


def _answer(to: Collector, answer: str, words: str) -> None:
    """The collector answers every request with ``words`` in its answer."""
    if answer == "partial":
        partial = logs_service_pb2.ExportLogsServiceResponse()
        partial.partial_success.rejected_log_records = 1
        partial.partial_success.error_message = words
        body = partial.SerializeToString()

        def taken(names: list[str]) -> tuple[int, list[tuple[str, str]], bytes]:
            to.store(names)
            return 200, [("Content-Type", "application/x-protobuf")], body

        to.http_answer = taken
        to.grpc_answer = lambda names: (grpc.StatusCode.INVALID_ARGUMENT, words, None)
        return
    status = 503 if answer == "transient" else 400
    body = status_pb2.Status(code=3, message=words).SerializeToString()
    code = (
        grpc.StatusCode.UNAUTHENTICATED
        if answer == "transient"
        else grpc.StatusCode.INVALID_ARGUMENT
    )
    to.http_answer = lambda names: (status, [], body)
    to.grpc_answer = lambda names: (code, words, None)


@settings(max_examples=10)
@given(
    protocol=st.sampled_from(["grpc", "http/protobuf"]),
    source=st.sampled_from(_SOURCES),
    answer=st.sampled_from(_ANSWERS),
    secret=_SECRETS,
)
@example(protocol="http/protobuf", source="header", answer="transient", secret="Zq7kXw91TJ0w")
@example(protocol="grpc", source="header", answer="permanent", secret="Zq7kXw91TJ0w")
@example(protocol="http/protobuf", source="query", answer="partial", secret="Zq7kXw91TJ0w")
@example(protocol="grpc", source="password", answer="transient", secret="Zq7kXw91TJ0w")
def test_an_echoed_credential_is_not_repeated(
    collector: Collector,  # noqa: F811 - the fixture
    tmp_path_factory: pytest.TempPathFactory,
    *,
    protocol: str,
    source: str,
    answer: str,
    secret: str,
) -> None:
    """Whatever the answer (a failure sent again, one refused for good, a partial
    success), the report of it (ExportFailed, Rejected, obs_records_dropped's
    collector_message), stats(), obs.delivery() and the SDK exporters' own warnings hold
    the collector's words with the credential taken out. Before the fix each quoted it."""
    spool = tmp_path_factory.mktemp("echo") / "spool"
    _answer(collector, answer, f"tenant svc refused, it sent {secret} (see docs)")
    sink, reports = _sink(_settings(spool, collector, protocol, source, secret))
    with _sdk_logs() as sdk_logs, contextlib.ExitStack() as undo:
        undo.callback(setattr, collector, "http_answer", lambda names: None)
        undo.callback(setattr, collector, "grpc_answer", lambda names: None)
        undo.callback(sink.shutdown, 2.0)
        _log(sink, f"e{time.monotonic_ns()}", n=2)
        sink.force_flush(2.0)
    stats = sink.stats()
    texts = [repr(reports.calls), repr(stats), repr(delivery_report(Settings(), stats, 0))]
    assert any("tenant svc refused" in text for text in texts), texts  # the words are kept
    for text in [*texts, *sdk_logs.texts]:
        assert secret not in text
