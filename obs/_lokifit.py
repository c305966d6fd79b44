"""Keep each exported record within Loki's per-entry structured-metadata limits.

Loki's native OTLP ingestion (what the collector's otlphttp exporter pushes to) stores every
log attribute, each record field (severity, trace ids, event name, observed time), the
scope and every resource attribute it does not index as *structured metadata* entries; a
map value is flattened, one entry per leaf. The distributor refuses an entry with more than
``max_structured_metadata_entries_count`` entries (default 128) or more than
``max_structured_metadata_size`` bytes of names and values (default 64KB = 65,536), and an
attribute name Loki cannot turn into a label name (empty, or no letter or digit: ``_``,
``""``, ``"..."``) fails the whole push, every record of every rank batched with it
(grafana/loki pkg/loghttp/push/otlplabels/labels.go, pkg/distributor/validator.go; the
port in tests/_loki.py). Either way a ``workspace_terminal_failure`` carrying a big
context would never reach the alert.

:func:`fit` keeps a record within Loki's defaults less a headroom for what a collector may
add (:data:`MAX_ENTRIES`, :data:`MAX_BYTES`): the alert keys (:data:`PROTECTED`) stay
whole, other attributes are kept in order while they fit, and the rest is folded into one
``obs.folded`` attribute (their JSON, cut to what fits) with ``obs.folded_fields`` (how
many were folded), so the operator sees it. The record itself is never dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from obs.encode import PLAIN_TYPES

__all__ = [
    "FOLDED",
    "FOLDED_FIELDS",
    "LINE_ROOM",
    "MAX_BYTES",
    "MAX_ENTRIES",
    "PROTECTED",
    "RESOURCE_MAX_BYTES",
    "RESOURCE_MAX_ENTRIES",
    "Room",
    "fit",
    "fits",
    "fits_sized",
    "fold_line",
    "label_name",
    "room",
]

#: Loki's defaults (pkg/validation/limits.go) less a headroom for attributes a collector
#: may add (k8sattributes, resourcedetection): 16 entries, 4 KiB.
MAX_ENTRIES = 128 - 16
MAX_BYTES = 64 * 1024 - 4096

FOLDED = "obs.folded"
FOLDED_FIELDS = "obs.folded_fields"

#: Fields the alert rules, dashboard and runbook key on: never folded (their scalar value
#: is kept; a text is cut only when these alone would not fit).
PROTECTED = frozenset(
    {
        "event", "logger", "stage", "outcome", "rank", "local_rank", "world_size",
        "node_rank", "host.name", "code.file.path", "code.line.number",
        "code.function.name", "exception.type", "exception.message",
        "exception.stacktrace", "chain", "reason", "backend", "from_backend", "to_backend",
        "error_type", "last_error_type", "original_event", "suppressed_count", "dedup_key",
        "where", "dropped", "log.record.uid", "obs.replayed", "truncated",
    }
)  # fmt: skip
#: Cut last, and from the front: the innermost frames and the exception line are the tail.
_TAIL_KEPT = "exception.stacktrace"

#: Entries and bytes of the record fields Loki adds (LogAttrsToLabels) when all are set:
#: observed_timestamp, severity_number, severity_text, dropped_attributes_count, flags,
#: trace_id, span_id, event_name (its value is added per record).
_RECORD_ENTRIES = 8
_RECORD_BYTES = 38 + 17 + 21 + 34 + 8 + 40 + 23 + 10
#: What the builder adds after fitting: log.record.uid (prefix-counter), obs.replayed.
_ADDED_ENTRIES = 2
_ADDED_BYTES = 14 + 40 + 12 + 5
#: obs.folded + obs.folded_fields, and the least room the folded text gets.
_FOLD_ENTRIES = 2
_FOLD_BYTES = 10 + 17 + 10 + 512
#: A number's bytes at most (an int64, or an ES6-formatted double).
_NUMBER = 25
_INVALID = re.compile(r"[^A-Za-z0-9]+")


def label_name(name: str) -> str | None:
    """otlptranslator ``LabelNamer{}.Build`` as Loki calls it, or None where it fails
    (a name Loki refuses the whole push for)."""
    if name.isalnum() and name.isascii():  # most names: nothing to replace
        return "key_" + name if name[0].isdigit() else name
    reserved = len(name) >= 4 and name.startswith("__") and name.endswith("__")
    out = _INVALID.sub("_", name[2:-2] if reserved else name)
    if reserved:
        out = f"__{out}__"
    if not out.strip("_"):
        return None
    return "key_" + out if out[0].isdigit() else out


def _text_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _json_bytes(value: Any) -> int:
    """Bytes of ``encoding/json`` of a slice element (an upper bound for numbers)."""
    cls = type(value)
    if cls is str:
        escaped = 3 * (value.count("\u2028") + value.count("\u2029"))
        return _text_bytes(json.dumps(value, ensure_ascii=False)) + int(escaped)
    if cls is dict:
        return 1 + sum(_json_bytes(str(k)) + 1 + _json_bytes(v) + 1 for k, v in value.items())
    if cls is list or cls is tuple:
        return 1 + sum(_json_bytes(v) + 1 for v in value) + int(not value)
    if cls is bytes:
        return 2 + 4 * ((len(value) + 2) // 3)
    return 5 if value is None or cls is bool else _NUMBER


def _value_bytes(value: Any) -> int:
    """Bytes of ``pcommon.Value.AsString`` of a non-map value (upper bound for numbers)."""
    cls = type(value)
    if cls is str:
        return _text_bytes(value)
    if cls is int:
        return len(str(value))
    if cls is bytes:
        return 4 * ((len(value) + 2) // 3)
    if cls is list or cls is tuple:
        return _json_bytes(value)
    return 0 if value is None else 5 if cls is bool else _NUMBER


def cost(name: str, value: Any, cap: int = 1 << 30) -> tuple[int, int]:
    """(entries, bytes) Loki stores for one attribute whose label name is ``name``; past
    ``cap`` entries the count stops (the attribute cannot fit: 16 dicts of 256 long keys
    named 4,096 leaves, each through the label-name rule, for a field that was folded)."""
    if type(value) is not dict:
        return 1, len(name) + _value_bytes(value)
    entries = size = 0
    for key, sub in value.items():
        child = label_name(f"{name}_{key}") or name
        n, b = cost(child, sub, cap - entries)
        entries += n
        size += b
        if entries > cap:
            break
    return entries, size


class Room:
    """What one resource leaves a record: entries and bytes for its log attributes."""

    __slots__ = ("bytes", "entries")

    def __init__(self, entries: int, size: int) -> None:
        self.entries = entries
        self.bytes = size


def room(resource: Mapping[str, Any], scope_name: str, scope_version: str) -> Room:
    """The room a record's attributes have under ``resource`` (every resource attribute
    counted as structured metadata: what Loki does with all it does not index)."""
    entries = _RECORD_ENTRIES + _ADDED_ENTRIES + _FOLD_ENTRIES + 2
    size = _RECORD_BYTES + _ADDED_BYTES + _FOLD_BYTES + 10 + 13
    size += len(scope_name) + len(scope_version)
    for key, value in resource.items():
        n, b = cost(label_name(key) or key, value)
        entries += n
        size += b
    return Room(MAX_ENTRIES - entries, MAX_BYTES - size)


def fits(attributes: dict[str, Any], event: str, space: Room) -> bool:
    """The cheap test: few plain values whose text (4 bytes a character at most) fits.
    False means "check exactly" (:func:`fit`), not "too big"."""
    values = attributes.values()
    return (
        len(attributes) <= space.entries
        and PLAIN_TYPES.issuperset(map(type, values))
        and fits_sized(
            len(attributes),
            sum(map(len, attributes)) + sum(map(len, filter(_is_str, values))),
            event,
            space,
        )
    )


def fits_sized(count: int, size: int, event: str, space: Room) -> bool:
    """:func:`fits` of ``count`` plain attributes whose names and str values are ``size``
    characters in all (a builder that counted them as it made them)."""
    return count <= space.entries and 4 * (size + len(event)) + (_NUMBER + 4) * count <= space.bytes


def _is_str(value: object) -> bool:
    return type(value) is str


def _cut(text: str, limit: int, tail: bool) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes, marked where it was cut."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    mark = f"...[truncated {len(data) - limit} bytes]"
    keep = max(0, limit - len(mark) - 8)
    if tail:
        return mark + data[len(data) - keep :].decode("utf-8", "ignore")
    return data[:keep].decode("utf-8", "ignore") + mark


def _shrink(
    attributes: dict[str, Any], protected: list[str], costs: dict[str, tuple[int, int]], over: int
) -> dict[str, str]:
    """Cut the protected texts (the stack trace first, then the longest) by ``over`` bytes
    in all: the alert keys alone did not fit. Each keeps at least 256 bytes."""
    texts = sorted(
        (k for k in protected if type(attributes[k]) is str),
        key=lambda k: (k != _TAIL_KEPT, -costs[k][1]),
    )
    cut: dict[str, str] = {}
    for key in texts:
        if over <= 0:
            break
        value = attributes[key]
        size = _text_bytes(value)
        cut[key] = _cut(value, max(256, size - over), key == _TAIL_KEPT)
        over -= size - _text_bytes(cut[key])
    return cut


def fit(attributes: dict[str, Any], event: str, space: Room) -> dict[str, Any]:
    """``attributes`` within ``space``: protected fields whole, others in order while they
    fit, the rest folded into :data:`FOLDED` / :data:`FOLDED_FIELDS`. Returns
    ``attributes`` itself when everything fits (and no name would fail the push)."""
    left_entries, left_bytes = space.entries, space.bytes - _text_bytes(event)
    costs: dict[str, tuple[int, int]] = {}
    for key, value in attributes.items():
        name = label_name(key)
        if name is not None:  # a name Loki cannot store is always folded
            costs[key] = cost(name, value, left_entries)
    protected = [k for k in attributes if k in PROTECTED and k in costs]
    protected = [k for k in protected if type(attributes[k]) in PLAIN_TYPES]
    keep = set(protected)
    used_e = sum(costs[k][0] for k in protected)
    used_b = sum(costs[k][1] for k in protected)
    cut = _shrink(attributes, protected, costs, used_b - left_bytes)
    used_b -= sum(_text_bytes(attributes[k]) - _text_bytes(v) for k, v in cut.items())
    rest: dict[str, Any] = {}
    for key, value in attributes.items():
        c = costs.get(key)
        if key in keep:
            continue
        if c is not None and used_e + c[0] <= left_entries and used_b + c[1] <= left_bytes:
            keep.add(key)
            used_e += c[0]
            used_b += c[1]
        else:
            rest[key] = value
    if not rest and not cut:
        return attributes
    out = {k: cut.get(k, v) for k, v in attributes.items() if k in keep}
    if rest:
        out[FOLDED] = _folded_text(rest, max(512, left_bytes - used_b + _FOLD_BYTES - 37))
        out[FOLDED_FIELDS] = len(rest)
    return out


def _folded_text(rest: dict[str, Any], limit: int) -> str:
    """The JSON of the folded fields in at most ``limit`` bytes (cut and marked past it),
    written only as far as the limit: 300 fields of 2 KB were all written, then cut to
    50 KB, and that doubled the cost of the worst call."""
    shown, _ = _clip({k if type(k) is str else str(k): v for k, v in rest.items()}, limit)
    return _cut(_dumps_text(shown), limit, tail=False)


def _clip(value: Any, room: int) -> tuple[Any, int]:
    """``value`` shortened so that its JSON takes about ``room`` characters (texts cut,
    a container's items past it left out and counted), and that length, estimated: only
    what the folded text can show is written."""
    cls = type(value)
    if cls is str:
        text = value[: max(room, 0)]
        return text, len(text) + 2
    if cls is dict:
        out: dict[str, Any] = {}
        used = 2
        for key, sub in value.items():
            if used >= room:
                out["..."] = f"{len(value) - len(out)} more"
                break
            name, n = _clip(key if type(key) is str else str(key), room - used)
            out[name], m = _clip(sub, room - used - n)
            used += n + m + 2
        return out, used
    if cls is list or cls is tuple:
        items: list[Any] = []
        used = 2
        for sub in value:
            if used >= room:
                items.append(f"... {len(value) - len(items)} more")
                break
            item, m = _clip(sub, room - used)
            items.append(item)
            used += m + 1
        return items, used
    return value, _NUMBER


def _dumps_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


#: What obs' own resource may use of the budget (:func:`obs.otel.records.resource_attributes`
#: cuts the rest): every record then has at least :data:`LINE_ROOM` for its attributes.
RESOURCE_MAX_ENTRIES = 32
RESOURCE_MAX_BYTES = 8 * 1024
_ANY = room({}, "obs", "0.1.0")
#: The room every record's attributes get, on both routes (OTLP and JSON lines through
#: the filelog pipeline), so both fold a record alike whatever the resource.
LINE_ROOM = Room(_ANY.entries - RESOURCE_MAX_ENTRIES, _ANY.bytes - RESOURCE_MAX_BYTES)
#: A line's fields the filelog pipeline lifts into the record (examples/otel-collector.yaml):
#: Loki does not store them as structured metadata.
_LIFTED = frozenset({"timestamp", "severity_text", "severity_number", "body"})


class _Folded:
    """How many JSON lines were folded (process-wide; ``obs.delivery()["folded_lines"]``)."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines = 0


FOLDED_COUNT = _Folded()


def fold_line(fields: Mapping[str, Any]) -> dict[str, Any] | None:
    """A JSON line's fields within :data:`LINE_ROOM` as the filelog pipeline makes them
    attributes (:func:`fit`, the OTLP record's rule), or None when they fit as they are."""
    attributes = {k: v for k, v in fields.items() if k not in _LIFTED}
    event = fields.get("event")
    fitted = fit(attributes, event if type(event) is str else "", LINE_ROOM)
    if fitted is attributes:
        return None
    out = {
        k: v if k in _LIFTED else fitted[k]
        for k, v in fields.items()
        if k in _LIFTED or k in fitted
    }
    for key in (FOLDED, FOLDED_FIELDS):
        if key in fitted:
            out[key] = fitted[key]
    FOLDED_COUNT.lines += 1
    return out
