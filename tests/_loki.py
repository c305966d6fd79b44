"""Loki's OTLP ingestion of one log record, re-implemented: its structured metadata (the
entries Loki stores beside the line) and whether Loki's per-entry limits refuse it.

Ported from grafana/loki at 65e30f8488e8a5ea2013c6881675f8103a8f6bc7:

- pkg/loghttp/push/otlp.go ``otlpToLokiPushRequest``: an entry's structured metadata is
  its log attributes and record fields (``LogAttrsToLabels``), then the resource attributes
  that are not index labels (``ResourceAttrsToStreamLabels``), then the scope's
  (``ScopeAttrsToStructuredMetadata``: scope attributes, ``scope_name``, ``scope_version``).
- pkg/loghttp/push/otlplabels/labels.go ``AttributeToLabels``: a map value is flattened,
  each leaf one entry named ``<parent>_<key>`` (an empty map: no entry); any other value is
  one entry holding ``pcommon.Value.AsString()`` (a slice: its JSON; bytes: base64). Names
  go through ``otlptranslator.LabelNamer{}.Build``: each run of characters outside
  ``[A-Za-z0-9]`` becomes one ``_``, a leading digit gets ``key_``, ``__x__`` stays
  reserved; an empty name or one of underscores only is an ERROR that fails the whole
  push request (every record of every resource in it), not just this entry.
- ``LogAttrsToLabels`` adds ``observed_timestamp`` (when both timestamps are set),
  ``severity_number``, ``severity_text``, ``dropped_attributes_count``, ``flags``,
  ``trace_id``, ``span_id``, ``event_name`` (and skips an ``event_name`` attribute then).
- pkg/distributor/validator.go ``ValidateEntry``: the entry is refused when
  ``util.StructuredMetadataSize`` (sum of len(name) + len(value) in UTF-8 bytes, the
  ``detected_level`` entry excluded; pkg/util/entry_size.go) is over
  ``max_structured_metadata_size`` (default 64KB = 65,536 bytes: dskit/datasize KB is
  1024), or the number of entries (duplicates included) is over
  ``max_structured_metadata_entries_count`` (default 128; pkg/validation/limits.go).
  pkg/distributor/distributor.go ``PushWithResolver``: a refused entry is dropped and
  counted (``loki_discarded_samples_total{reason="structured_metadata_too_many"|"_large"}``),
  the push's other entries are stored, and the push is answered 400, which the
  collector's otlphttp exporter treats as permanent: no retry.
- go.opentelemetry.io/collector/pdata/pcommon/value.go ``AsString``: doubles as ES6 numbers
  (``float64AsString``), maps and slices as ``encoding/json`` without HTML escaping.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

#: pkg/validation/limits.go defaults.
DEFAULT_MAX_ENTRIES = 128
DEFAULT_MAX_BYTES = 64 * 1024
#: pkg/util/entry_size.go ExcludedStructuredMetadataLabels (constants.LevelLabel).
EXCLUDED_FROM_SIZE = frozenset({"detected_level"})


class PushRefused(Exception):
    """LabelNamer.Build failed: Loki refuses the whole push request."""


def label_name(name: str) -> str:
    """otlptranslator LabelNamer{}.Build (UTF8Allowed false, no PreserveMultipleUnderscores)."""
    if not name:
        raise PushRefused("label name is empty")
    reserved = len(name) >= 4 and name.startswith("__") and name.endswith("__")
    inner = name[2:-2] if reserved else name
    out = re.sub(r"[^A-Za-z0-9]+", "_", inner)
    if reserved:
        out = f"__{out}__"
    if out[:1].isdigit():
        out = "key_" + out
    if not out.strip("_"):
        raise PushRefused(f"normalization for label name {name!r} resulted in {out!r}")
    return out


def go_float(value: float) -> str:
    """pcommon float64AsString: ES6 number formatting (shortest digits, positional for
    1e-6 <= |x| < 1e21, else ``1e-7`` / ``1e+21`` exponents)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    digits = Decimal(repr(value))  # the shortest round-trip digits, as Go's -1 precision
    absolute = abs(value)
    if absolute != 0 and (absolute < 1e-6 or absolute >= 1e21):
        return format(digits, "e")
    text = format(digits, "f")
    return text.removesuffix(".0")


def _go_json(value: Any) -> str:
    """encoding/json of ``AsRaw()`` with SetEscapeHTML(false): sorted map keys, U+2028 and
    U+2029 escaped, floats as ES6 numbers."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise PushRefused("json: unsupported value")  # never reached with obs' values
        return go_float(value)
    if isinstance(value, bytes):
        return json.dumps(base64.b64encode(value).decode())
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    if isinstance(value, list):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(f"{_go_json(k)}:{_go_json(v)}" for k, v in items) + "}"
    raise TypeError(type(value))


def as_string(value: Any) -> str:
    """pcommon.Value.AsString of a decoded OTLP AnyValue (None: the empty value)."""
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, str):
        return value
    return _go_json(value)


def attribute_entries(key: str, value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """AttributeToLabels: (name, value) entries of one attribute, maps flattened."""
    name = label_name(f"{prefix}_{key}" if prefix else key)
    if isinstance(value, dict):
        for k, v in value.items():
            yield from attribute_entries(k, v, name)
    else:
        yield name, as_string(value)


def structured_metadata(
    record: Mapping[str, Any], resource_action: Any = lambda key: "structured_metadata"
) -> list[tuple[str, str]]:
    """The structured metadata Loki stores for one record as ``obs._otlp_decode`` gives it
    (``resource_action(key)``: Loki's action for a resource attribute)."""
    out: list[tuple[str, str]] = []
    event_name = record.get("event_name") or ""
    for key, value in record["attributes"].items():
        if key == "event_name" and event_name:
            continue
        out.extend(attribute_entries(key, value))
    if record.get("time_unix_nano") and record.get("observed_time_unix_nano"):
        out.append(("observed_timestamp", str(record["observed_time_unix_nano"])))
    if record.get("severity_number"):
        out.append(("severity_number", str(record["severity_number"])))
    if record.get("severity_text"):
        out.append(("severity_text", record["severity_text"]))
    if record.get("dropped_attributes_count"):
        out.append(("dropped_attributes_count", str(record["dropped_attributes_count"])))
    if record.get("flags"):
        out.append(("flags", str(record["flags"])))
    if record.get("trace_id") and record["trace_id"].strip("0"):
        out.append(("trace_id", record["trace_id"]))
    if record.get("span_id") and record["span_id"].strip("0"):
        out.append(("span_id", record["span_id"]))
    if event_name:
        out.append(("event_name", event_name))
    for key, value in record["resource"].items():
        action = resource_action(key)
        if action == "drop":  # checked before the name is built
            continue
        entries = list(attribute_entries(key, value))
        if action == "structured_metadata":
            out.extend(entries)
    scope = record.get("scope") or {}
    for key, value in (scope.get("attributes") or {}).items():
        out.extend(attribute_entries(key, value))
    if scope.get("name"):
        out.append(("scope_name", scope["name"]))
    if scope.get("version"):
        out.append(("scope_version", scope["version"]))
    return out


def metadata_size(entries: list[tuple[str, str]]) -> int:
    """util.StructuredMetadataSize: UTF-8 bytes of names and values."""
    return sum(
        len(name.encode()) + len(value.encode("utf-8", "surrogatepass"))
        for name, value in entries
        if name not in EXCLUDED_FROM_SIZE
    )


def refusal(
    entries: list[tuple[str, str]],
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> str | None:
    """ValidateEntry's reason for refusing the entry (size is checked first), or None."""
    size = metadata_size(entries)
    if max_bytes and size > max_bytes:
        return f"structured_metadata_too_large: {size} > {max_bytes}"
    if max_entries and len(entries) > max_entries:
        return f"structured_metadata_too_many: {len(entries)} > {max_entries}"
    return None


#: pkg/validation (DefaultAllowedLevelFields): the fields Loki reads a level from, in order;
#: later releases add the severity_text spellings.
LEVEL_FIELDS = ("level", "LEVEL", "Level", "log.level", "severity", "SEVERITY", "Severity",
                "SeverityText", "lvl", "LVL", "Lvl", "severity_text", "Severity_Text",
                "SEVERITY_TEXT")  # fmt: skip
_LEVELS = {"trace": "trace", "trc": "trace", "debug": "debug", "dbg": "debug", "info": "info",
           "inf": "info", "information": "info", "warn": "warn", "wrn": "warn",
           "warning": "warn", "error": "error", "err": "error", "critical": "critical",
           "fatal": "fatal"}  # fmt: skip


def detected_level(entries: list[tuple[str, str]]) -> str:
    """pkg/distributor/field_detection.go ``extractLogLevel`` for an OTLP record without
    index labels of these names: a ``detected_level`` entry as it is, else the first
    allowed level field among the entries, else the OTLP ``severity_number``."""
    names = dict(reversed(entries))  # the first entry of a name, as labels.Get finds it
    if "detected_level" in names:
        return _LEVELS.get(names["detected_level"].lower(), names["detected_level"])
    for field in LEVEL_FIELDS:
        if field in names:
            return _LEVELS.get(names[field].lower(), names[field])
    number = int(names.get("severity_number", "0"))
    for top, level in ((0, "unknown"), (4, "trace"), (8, "debug"), (12, "info"),
                       (16, "warn"), (20, "error"), (24, "fatal")):  # fmt: skip
        if number <= top:
            return level
    return "unknown"
