"""The collector's filelog mapping, re-implemented from the collector config file.

No OpenTelemetry Collector can run here, so the parity test feeds obs' JSON lines through
this model of what ``otelcol-contrib`` does with them, built from the very config file
operators deploy (``examples/otel-collector.yaml``): the filelog receiver's settings and
stanza operators, then the resource processors of the pipeline that receiver feeds.

Semantics follow opentelemetry-collector-contrib ``pkg/stanza`` (json_parser with
``parse_ints``, timestamp ``gotime``/``strptime`` layouts, severity presets and mappings,
``move``/``remove``/``copy``/``add``, field syntax ``attributes["host.name"]``) and the
``resource`` processor. Only what a config may reasonably use is modelled; anything else
(an unknown operator, an ``if:`` expression, a layout token not listed here, another
processor type) raises :class:`UnsupportedConfig`, so a config change can never make the
parity test pass by being ignored.
"""

from __future__ import annotations

import calendar
import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "FilelogMapping",
    "MappedRecord",
    "UnsupportedConfig",
    "expand_env",
    "parse_field",
]


class UnsupportedConfig(ValueError):
    """The config uses something this model does not implement (fail, never ignore)."""


@dataclasses.dataclass
class MappedRecord:
    """One log record as the filelog pipeline would hand it to the exporter."""

    timestamp_ns: int | None
    severity_number: int
    severity_text: str
    body: Any
    attributes: dict[str, Any]
    resource: dict[str, Any]


# --- config values ------------------------------------------------------------------------

_ENV = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, env: Mapping[str, str]) -> Any:
    """``${env:NAME}``, ``${NAME}`` and ``${env:NAME:-default}`` in every string, as the
    collector's env provider expands them (unset without a default: empty)."""
    if isinstance(value, str):
        return _ENV.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)
    if isinstance(value, list):
        return [expand_env(v, env) for v in value]
    if isinstance(value, dict):
        return {k: expand_env(v, env) for k, v in value.items()}
    return value


_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3}
_UNITS.update({"kib": 1024, "mib": 1024**2, "gib": 1024**3})


def _byte_size(value: Any) -> int:
    if isinstance(value, int):
        return value
    m = _SIZE.match(str(value))
    if m is None:
        raise UnsupportedConfig(f"byte size {value!r}")
    return int(m.group(1)) * _UNITS[(m.group(2) or "").lower()]


# --- fields -------------------------------------------------------------------------------

_ROOTS = ("body", "attributes", "resource")
_STEP = re.compile(r'\.([A-Za-z0-9_\-]+)|\["([^"]*)"\]')


def parse_field(text: str) -> tuple[str, tuple[str, ...]]:
    """A stanza field (``attributes.x``, ``attributes["host.name"]``, ``body``, ``x`` =
    ``body.x``) as (root, keys)."""
    m = re.match(r"[A-Za-z0-9_\-]+", text)
    if m is None:
        raise UnsupportedConfig(f"field {text!r}")
    head, rest = m.group(0), text[m.end() :]
    root, keys = (head, []) if head in _ROOTS else ("body", [head])
    pos = 0
    while pos < len(rest):
        step = _STEP.match(rest, pos)
        if step is None:
            raise UnsupportedConfig(f"field {text!r}")
        keys.append(step.group(1) if step.group(1) is not None else step.group(2))
        pos = step.end()
    return root, tuple(keys)


class _Entry:
    """A stanza entry: body, attributes, resource, timestamp, severity."""

    def __init__(self, body: Any) -> None:
        self.body: Any = body
        self.attributes: dict[str, Any] = {}
        self.resource: dict[str, Any] = {}
        self.timestamp_ns: int | None = None
        self.severity = 0
        self.severity_text = ""

    def _container(self, root: str) -> Any:
        return {"body": self.body, "attributes": self.attributes, "resource": self.resource}[root]

    def get(self, field: str) -> tuple[bool, Any]:
        root, keys = parse_field(field)
        value = self._container(root)
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                return False, None
            value = value[key]
        return True, value

    def set(self, field: str, value: Any) -> None:
        root, keys = parse_field(field)
        if not keys:
            if root == "body":
                self.body = value
                return
            if not isinstance(value, dict):
                raise UnsupportedConfig(f"setting {root} to a non-map")
            self._container(root).update(value)
            return
        if root == "body" and not isinstance(self.body, dict):
            self.body = {}
        target = self._container(root)
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        target[keys[-1]] = value

    def delete(self, field: str) -> tuple[bool, Any]:
        root, keys = parse_field(field)
        if not keys:
            raise UnsupportedConfig(f"deleting the whole {root}")
        found, parent = self.get(
            root + "".join(f'["{k}"]' for k in keys[:-1]) if keys[:-1] else root
        )
        if not found or not isinstance(parent, dict) or keys[-1] not in parent:
            return False, None
        return True, parent.pop(keys[-1])


# --- timestamps ---------------------------------------------------------------------------

#: ctimefmt (stanza's strptime) directive -> Go layout (pkg/stanza/docs/types/timestamp.md).
_STRPTIME_TO_GO = {
    "%Y": "2006",
    "%m": "01",
    "%d": "02",
    "%H": "15",
    "%M": "04",
    "%S": "05",
    "%L": "999",
    "%f": "999999",
    "%s": "999999999",
    "%z": "Z0700",
    "%j": "-07:00",
    "%F": "2006-01-02",
    "%T": "15:04:05",
    "%%": "%",
}
_GO_TOKENS: tuple[tuple[str, str], ...] = (
    ("2006", r"(?P<year>\d{4})"),
    ("Z07:00", r"(?P<zone>Z|[+-]\d{2}:\d{2})"),
    ("-07:00", r"(?P<zone>[+-]\d{2}:\d{2})"),
    ("Z0700", r"(?P<zone>Z|[+-]\d{4})"),
    ("-0700", r"(?P<zone>[+-]\d{4})"),
    ("01", r"(?P<month>\d{2})"),
    ("02", r"(?P<day>\d{2})"),
    ("15", r"(?P<hour>\d{2})"),
    ("04", r"(?P<minute>\d{2})"),
    ("05", r"(?P<second>\d{2})"),
)


#: Go layout elements this model does not parse (names, 12-hour clock, padded days, ...).
_GO_UNSUPPORTED = ("Jan", "Mon", "MST", "PM", "pm", "_", "Z07", "-07")


def _go_layout_regex(layout: str) -> tuple[re.Pattern[str], bool]:
    """A regex for a Go time layout (the tokens above plus fractional seconds)."""
    out, pos, zoned = [], 0, False
    while pos < len(layout):
        frac = re.compile(r"[.,](0+|9+)").match(layout, pos)
        if frac is not None:
            digits = frac.group(1)
            if digits[0] == "0":  # exactly n digits
                out.append(rf"[.,](?P<frac>\d{{{len(digits)}}})")
            else:  # any number of digits, or none (Go accepts either when parsing)
                out.append(r"(?:[.,](?P<frac>\d+))?")
            pos = frac.end()
            continue
        for token, pattern in _GO_TOKENS:
            if layout.startswith(token, pos):
                out.append(pattern)
                zoned = zoned or "zone" in pattern
                pos += len(token)
                if token == "05" and not re.match(r"[.,](0+|9+)", layout[pos:]):
                    # Go accepts a fractional second after the seconds even when the
                    # layout has none (time.Parse, "When parsing (only)").
                    out.append(r"(?:[.,](?P<frac>\d+))?")
                break
        else:
            char = layout[pos]
            if char.isdigit() or layout.startswith(_GO_UNSUPPORTED, pos):
                raise UnsupportedConfig(f"Go layout element at {layout[pos:]!r} in {layout!r}")
            out.append(re.escape(char))  # any other character is a literal, as in Go
            pos += 1
    return re.compile("^" + "".join(out) + "$"), zoned


def _strptime_to_go(layout: str) -> str:
    out, pos = [], 0
    while pos < len(layout):
        if layout[pos] == "%":
            directive = layout[pos : pos + 2]
            if directive not in _STRPTIME_TO_GO:
                raise UnsupportedConfig(f"strptime directive {directive!r}")
            out.append(_STRPTIME_TO_GO[directive])
            pos += 2
        else:
            out.append(layout[pos])
            pos += 1
    return "".join(out)


def _time_parser(cfg: Mapping[str, Any]) -> tuple[str, Callable[[Any], int]]:
    unknown = set(cfg) - {"parse_from", "layout_type", "layout", "location"}
    if unknown:
        raise UnsupportedConfig(f"timestamp settings {sorted(unknown)}")
    layout_type = cfg.get("layout_type", "strptime")
    layout = str(cfg["layout"])
    if layout_type == "epoch":
        raise UnsupportedConfig("epoch timestamps (obs writes ISO 8601)")
    if layout_type not in ("strptime", "gotime"):
        raise UnsupportedConfig(f"layout_type {layout_type!r}")
    go = _strptime_to_go(layout) if layout_type == "strptime" else layout
    pattern, zoned = _go_layout_regex(go)
    location = cfg.get("location")
    # pkg/stanza/operator/helper/time.go setLocation(): `location` if set, else UTC when the
    # (strptime-converted) layout ends in "Z", else the collector's local zone.
    utc = location in ("UTC", "Etc/UTC") or (location is None and go.endswith("Z"))
    if not zoned and not utc:
        raise UnsupportedConfig(f"layout {layout!r} has no zone and location is {location!r}")

    def parse(value: Any) -> int:
        m = pattern.match(str(value))
        if m is None:
            raise ValueError(f"timestamp {value!r} does not match layout {layout!r}")
        parts = m.groupdict()
        seconds = calendar.timegm(
            (
                int(parts["year"]),
                int(parts["month"]),
                int(parts["day"]),
                int(parts.get("hour") or 0),
                int(parts.get("minute") or 0),
                int(parts.get("second") or 0),
            )
        )
        zone = parts.get("zone")
        if zone and zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            hhmm = zone[1:].replace(":", "")
            seconds -= sign * (int(hhmm[:2]) * 3600 + int(hhmm[2:]) * 60)
        frac = (parts.get("frac") or "").ljust(9, "0")[:9]
        return seconds * 1_000_000_000 + int(frac or 0)

    return str(cfg["parse_from"]), parse


# --- severity -----------------------------------------------------------------------------

_LEVELS = (("trace", 1), ("debug", 5), ("info", 9), ("warn", 13), ("error", 17), ("fatal", 21))
_ALIASES = {
    f"{name}{suffix}": base + i
    for name, base in _LEVELS
    for i, suffix in enumerate(("", "2", "3", "4"))
}
_SHORT = {number: alias.upper() for alias, number in _ALIASES.items()}


def _preset(name: str | None) -> dict[str, int]:
    """stanza's getBuiltinMapping (pkg/stanza/operator/helper/severity_builder.go)."""
    if name == "none":
        return {}
    aliases = dict(_ALIASES)
    aliases.update({str(n): n for n in range(1, 25)})
    if name in ("otel", "aliases"):
        return aliases
    if name not in (None, "", "default"):
        raise UnsupportedConfig(f"severity preset {name!r}")
    for i, suffix in enumerate(("", "2", "3", "4")):
        aliases[f"warning{suffix}"] = 13 + i
        aliases[f"err{suffix}"] = 17 + i
    return aliases


def _parseable(value: Any) -> list[str]:
    if isinstance(value, bool):
        raise UnsupportedConfig(f"severity mapping value {value!r}")
    if isinstance(value, int):
        return [str(value)]
    if isinstance(value, str):
        ranges = {"2xx": 200, "3xx": 300, "4xx": 400, "5xx": 500}
        if value in ranges:
            return [str(n) for n in range(ranges[value], ranges[value] + 100)]
        return [value.lower()]
    if isinstance(value, dict) and set(value) == {"min", "max"}:
        lo, hi = sorted((int(value["min"]), int(value["max"])))
        return [str(n) for n in range(lo, hi + 1)]
    raise UnsupportedConfig(f"severity mapping value {value!r}")


def _severity_parser(cfg: Mapping[str, Any]) -> tuple[str, Callable[[Any], tuple[int, str]]]:
    unknown = set(cfg) - {"parse_from", "preset", "mapping", "overwrite_text"}
    if unknown:
        raise UnsupportedConfig(f"severity settings {sorted(unknown)}")
    table = _preset(cfg.get("preset"))
    for alias, values in (cfg.get("mapping") or {}).items():
        if alias not in _ALIASES:
            raise UnsupportedConfig(f"severity alias {alias!r}")
        for value in values if isinstance(values, list) else [values]:
            for key in _parseable(value):
                table[key] = _ALIASES[alias]
    overwrite = bool(cfg.get("overwrite_text", False))

    def find(value: Any) -> tuple[int, str]:
        if isinstance(value, bool):
            raise TypeError(f"type bool cannot be a severity: {value!r}")
        if isinstance(value, int):
            text = str(value)
            number = table.get(text, 0)
        elif isinstance(value, float):
            if value != int(value):
                raise ValueError(f"severity {value!r} is not a whole number")
            text = str(int(value))
            number = table.get(text, 0)
        elif isinstance(value, str):
            text, number = value, table.get(value.lower(), 0)
        else:
            raise TypeError(f"type {type(value).__name__} cannot be a severity")
        if overwrite and number:
            text = _SHORT[number]
        return number, text

    return str(cfg["parse_from"]), find


# --- operators ----------------------------------------------------------------------------

_COMMON = {"id", "type", "output", "on_error"}
Operator = Callable[[_Entry], None]


def _keys(cfg: Mapping[str, Any], allowed: Iterable[str]) -> None:
    if "if" in cfg:
        raise UnsupportedConfig(f"`if` expressions ({cfg.get('type')})")
    unknown = set(cfg) - _COMMON - set(allowed)
    if unknown:
        raise UnsupportedConfig(f"{cfg.get('type')} settings {sorted(unknown)}")
    if cfg.get("on_error", "send") not in ("send", "send_quiet"):
        raise UnsupportedConfig(f"on_error {cfg['on_error']!r}")


def _literal(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("EXPR("):
        raise UnsupportedConfig(f"expression value {value!r}")
    return value


def _json_number_hook(parse_ints: bool) -> Callable[[str], Any]:
    def parse_int(text: str) -> Any:
        # Go's decoder without UseNumber: every number is a float64. With parse_ints: an
        # int64 when it fits, else float64 (pkg/stanza/operator/parser/json/parser.go).
        if not parse_ints:
            return float(text)
        value = int(text)
        return value if -(2**63) <= value < 2**63 else float(text)

    return parse_int


def _json_parser(cfg: Mapping[str, Any]) -> Operator:
    _keys(cfg, ("parse_from", "parse_to", "parse_ints", "timestamp", "severity"))
    parse_from = str(cfg.get("parse_from", "body"))
    parse_to = str(cfg.get("parse_to", "attributes"))
    hook = _json_number_hook(bool(cfg.get("parse_ints", False)))
    time = _time_parser(cfg["timestamp"]) if cfg.get("timestamp") else None
    severity = _severity_parser(cfg["severity"]) if cfg.get("severity") else None

    def run(entry: _Entry) -> None:
        found, raw = entry.get(parse_from)
        if not found or not isinstance(raw, str):
            raise ValueError(f"json_parser: {parse_from} is not a string")
        parsed = json.loads(raw, parse_int=hook)
        if not isinstance(parsed, dict):
            raise TypeError("json_parser: the value is not a JSON object")
        entry.set(parse_to, parsed)
        # Embedded timestamp then severity parsing, after the JSON (helper/parser.go).
        # Both leave the field they read in place: a later `remove` drops it.
        if time is not None:
            ok, value = entry.get(time[0])
            if not ok:
                raise ValueError(f"json_parser: no {time[0]}")
            entry.timestamp_ns = time[1](value)
        if severity is not None:
            ok, value = entry.get(severity[0])
            if not ok:
                raise ValueError(f"json_parser: no {severity[0]}")
            entry.severity, entry.severity_text = severity[1](value)

    return run


def _move(cfg: Mapping[str, Any]) -> Operator:
    _keys(cfg, ("from", "to"))
    src, dst = str(cfg["from"]), str(cfg["to"])

    def run(entry: _Entry) -> None:
        found, value = entry.delete(src) if src != "body" else (True, entry.body)
        if not found:
            raise ValueError(f"move: {src} does not exist")
        entry.set(dst, value)

    return run


def _copy(cfg: Mapping[str, Any]) -> Operator:
    _keys(cfg, ("from", "to"))
    src, dst = str(cfg["from"]), str(cfg["to"])

    def run(entry: _Entry) -> None:
        found, value = entry.get(src)
        if not found:
            raise ValueError(f"copy: {src} does not exist")
        entry.set(dst, json.loads(json.dumps(value)))

    return run


def _remove(cfg: Mapping[str, Any]) -> Operator:
    _keys(cfg, ("field",))
    field = str(cfg["field"])

    def run(entry: _Entry) -> None:
        found, _ = entry.delete(field)
        if not found:
            raise ValueError(f"remove: {field} does not exist")

    return run


def _add(cfg: Mapping[str, Any]) -> Operator:
    _keys(cfg, ("field", "value"))
    field, value = str(cfg["field"]), _literal(cfg["value"])

    def run(entry: _Entry) -> None:
        entry.set(field, json.loads(json.dumps(value)))

    return run


_OPERATORS: dict[str, Callable[[Mapping[str, Any]], Operator]] = {
    "json_parser": _json_parser,
    "move": _move,
    "copy": _copy,
    "remove": _remove,
    "add": _add,
}


# --- processors ---------------------------------------------------------------------------

_NO_OP_PROCESSORS = ("memory_limiter", "batch")


def _resource_processor(cfg: Mapping[str, Any]) -> Callable[[dict[str, Any]], None]:
    actions = []
    for action in cfg.get("attributes") or []:
        unknown = set(action) - {"key", "value", "action"}
        if unknown:
            raise UnsupportedConfig(f"resource processor action settings {sorted(unknown)}")
        kind = action["action"]
        if kind not in ("insert", "update", "upsert", "delete"):
            raise UnsupportedConfig(f"resource processor action {kind!r}")
        actions.append((kind, str(action["key"]), action.get("value")))

    def run(resource: dict[str, Any]) -> None:
        for kind, key, value in actions:
            present = key in resource
            if kind == "delete":
                resource.pop(key, None)
            elif kind == "upsert" or (kind == "insert") != present:
                resource[key] = value  # upsert; insert when absent; update when present

    return run


# --- the whole mapping --------------------------------------------------------------------


class FilelogMapping:
    """What one filelog receiver (and its pipeline's processors) makes of a line."""

    def __init__(
        self,
        receiver: Mapping[str, Any],
        processors: Iterable[tuple[str, Mapping[str, Any]]] = (),
    ) -> None:
        known = {
            "include",
            "exclude",
            "start_at",
            "storage",
            "include_file_name",
            "include_file_path",
            "include_file_name_resolved",
            "include_file_path_resolved",
            "max_log_size",
            "poll_interval",
            "encoding",
            "operators",
            "attributes",
            "resource",
            "fingerprint_size",
            "max_concurrent_files",
            "retry_on_failure",
        }
        unknown = set(receiver) - known
        if unknown:
            raise UnsupportedConfig(f"filelog settings {sorted(unknown)}")
        if receiver.get("encoding", "utf-8") not in ("utf-8", "utf8"):
            raise UnsupportedConfig(f"encoding {receiver['encoding']!r}")
        if receiver.get("include_file_name_resolved") or receiver.get("include_file_path_resolved"):
            raise UnsupportedConfig("resolved file name/path attributes")
        self.include = list(receiver.get("include") or [])
        self._file_name = bool(receiver.get("include_file_name", True))
        self._file_path = bool(receiver.get("include_file_path", False))
        self._max = _byte_size(receiver.get("max_log_size", "1MiB"))
        self._static_attributes = {
            k: _literal(v) for k, v in (receiver.get("attributes") or {}).items()
        }
        self._static_resource = {
            k: _literal(v) for k, v in (receiver.get("resource") or {}).items()
        }
        self.operators: list[Operator] = []
        self.operator_types: list[str] = []
        for op in receiver.get("operators") or []:
            factory = _OPERATORS.get(op.get("type"))
            if factory is None:
                raise UnsupportedConfig(f"operator type {op.get('type')!r}")
            self.operators.append(factory(op))
            self.operator_types.append(str(op["type"]))
        self._processors: list[Callable[[dict[str, Any]], None]] = []
        self.processor_names: list[str] = []
        for name, cfg in processors:
            kind = name.split("/", 1)[0]
            if kind == "resource":
                self._processors.append(_resource_processor(cfg or {}))
            elif kind not in _NO_OP_PROCESSORS:
                raise UnsupportedConfig(f"processor {name!r} in the filelog pipeline")
            self.processor_names.append(name)

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str],
        receiver: str = "filelog",
        env: Mapping[str, str] | None = None,
    ) -> FilelogMapping:
        """Build the mapping of ``receiver`` from a collector config file: the receiver,
        then the processors of the (single) logs pipeline it feeds, env vars expanded."""
        doc = expand_env(yaml.safe_load(Path(path).read_text()), env or {})
        receiver_cfg = (doc.get("receivers") or {}).get(receiver)
        if receiver_cfg is None:
            raise UnsupportedConfig(f"no receiver {receiver!r}")
        pipelines = [
            p
            for name, p in (doc.get("service", {}).get("pipelines") or {}).items()
            if name.split("/", 1)[0] == "logs" and receiver in (p.get("receivers") or [])
        ]
        if len(pipelines) != 1:
            raise UnsupportedConfig(f"{receiver!r} feeds {len(pipelines)} logs pipelines")
        defined = doc.get("processors") or {}
        processors = []
        for name in pipelines[0].get("processors") or []:
            if name not in defined:
                raise UnsupportedConfig(f"processor {name!r} is used but not defined")
            processors.append((name, defined[name]))
        return cls(receiver_cfg, processors)

    def map_line(self, line: str, file_path: str) -> MappedRecord:
        """The record one line (without its newline) of ``file_path`` becomes."""
        if len(line.encode()) > self._max:
            raise ValueError(f"line of {len(line.encode())} bytes exceeds max_log_size")
        entry = _Entry(line)
        entry.attributes.update(json.loads(json.dumps(self._static_attributes)))
        entry.resource.update(json.loads(json.dumps(self._static_resource)))
        if self._file_name:
            entry.attributes["log.file.name"] = os.path.basename(file_path)
        if self._file_path:
            entry.attributes["log.file.path"] = file_path
        for op in self.operators:
            op(entry)
        for processor in self._processors:
            processor(entry.resource)
        return MappedRecord(
            timestamp_ns=entry.timestamp_ns,
            severity_number=entry.severity,
            severity_text=entry.severity_text,
            body=entry.body,
            attributes=entry.attributes,
            resource=entry.resource,
        )

    def map_file(self, path: str | os.PathLike[str]) -> list[MappedRecord]:
        """Every non-empty line of a file, mapped."""
        text = Path(path).read_text(encoding="utf-8")
        return [self.map_line(line, str(path)) for line in text.splitlines() if line]
