"""OTLP/HTTP and gRPC log requests decoded into plain record dicts (protobuf or JSON,
gzip or deflate): what the loopback receiver stores and ``python -m obs receive`` prints."""

from __future__ import annotations

__all__ = ["Record", "decode_request", "decompress", "event_of", "parse_json_request"]

import base64
import gzip
import json
import zlib
from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.common.v1 import common_pb2

Record = dict[str, Any]


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


def decode_request(
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


def parse_json_request(body: bytes) -> logs_service_pb2.ExportLogsServiceRequest:
    """Parse an OTLP/JSON body; unknown fields are ignored, as the OTLP spec requires."""
    doc = json.loads(body)
    _hex_ids_to_base64(doc)
    request = logs_service_pb2.ExportLogsServiceRequest()
    json_format.ParseDict(doc, request, ignore_unknown_fields=True)
    return request


def decompress(body: bytes, encoding: str) -> bytes:
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


def event_of(record: Record) -> str:
    """The record's event name: event_name, else the "event" attribute, else ""."""
    name = record.get("event_name") or record.get("attributes", {}).get("event")
    return name if isinstance(name, str) else ""
