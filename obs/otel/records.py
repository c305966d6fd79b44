"""Event dicts and spool lines as SDK ``ReadableLogRecord`` objects, and the resource.

Runs on the export thread (the caller only captures the event), except :func:`class_of`
and :func:`exception_fields`, which the sink's caller side uses.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.sdk.version import __version__ as _sdk_version
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from obs._fields import OTEL_RECORD_FIELDS
from obs._fused import event_dict_of
from obs._labels import level_label
from obs._lokifit import LINE_ROOM as ROOM
from obs._lokifit import (
    RESOURCE_MAX_BYTES,
    RESOURCE_MAX_ENTRIES,
    Room,
    cost,
    fit,
    fits,
    fits_sized,
    label_name,
    room,
)
from obs.encode import MAX_STR, PLAIN_TYPES, body_text, format_exception, safe_repr, to_otel_value
from obs.levels import CLASS_NAMES, LEVELS, level_class, severity_class
from obs.rank import RankInfo, RankResolver
from obs.settings import Settings

if TYPE_CHECKING:
    from structlog.typing import EventDict

__all__ = [
    "CLASS_OF_LEVEL",
    "SCOPE",
    "Captured",
    "Payload",
    "RecordBuilder",
    "class_of",
    "exception_fields",
    "resource_attributes",
]

#: What the fused path hands over instead of an event dict (none is built in the caller):
#: level, event, logger name, the call's keywords, rank info, callsite, time stamp
#: (:func:`obs._fused.event_dict_of` makes the chain's dict of it).
Parts = tuple[int, str, Any, dict[str, Any], Any, Any, str]
#: What the caller thread queues: observed time (ns), OTel context, event dict copy (or
#: the fused path's parts).
Captured = tuple[int, otel_context.Context, dict[str, Any] | Parts]
#: A queued item, or a record already built (a replayed or disposed one).
Payload = Captured | ReadableLogRecord

#: The instrumentation scope of every record obs exports.
SCOPE = InstrumentationScope("obs", "0.1.0")
#: The record's own fields (timestamp, body, severity): not attributes.
_NOT_ATTRIBUTES = OTEL_RECORD_FIELDS
#: The severity class of each named level (a dict: the caller's fast path).
CLASS_OF_LEVEL = {lvl.number: cls for cls, lvl in enumerate(LEVELS)}
_SEVERITY_OF_CLASS = tuple(SeverityNumber(lvl.severity) for lvl in LEVELS)
_SEVERITIES = {member.value: member for member in SeverityNumber}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
#: The fused path's tail of one (rank info, callsite): the two, the attributes, whether a
#: name is one Loki cannot store, their size as fits() counts it, whether all are plain.
_Tail = tuple[Any, Any, dict[str, Any], bool, int, bool]


def _text_len(value: object) -> int:
    """What :func:`~obs._lokifit.fits` counts of a value: a str's length, else nothing."""
    return len(value) if type(value) is str else 0


#: The fields the fused path's event dict starts with (a keyword of one of these names
#: takes the dict's path: the dict holds the keyword's value).
_HEAD = frozenset(event_dict_of((20, "e", "l", {}, RankInfo(), None, ""), 0)) - frozenset(
    RankInfo().fields()
)


def class_of(event_dict: EventDict | Parts) -> int:
    """Severity class of an event: ``_obs_level`` if set, else its ``severity_number``
    (the fused path's parts: their level)."""
    if isinstance(event_dict, tuple):
        return level_class(event_dict[0])
    level = event_dict.get("_obs_level")
    if type(level) is int:
        return level_class(level)
    number = event_dict.get("severity_number")
    return severity_class(number) if type(number) is int else severity_class(0)


def exception_fields(event_dict: dict[str, Any]) -> None:
    """Turn ``exc_info`` into ``exception.*`` strings now, in the caller's thread (where
    ``exc_info=True`` still means something)."""
    exc = event_dict.pop("exc_info")
    fields = format_exception(exc) if exc is not None and exc is not False else None
    if fields:
        for key, value in fields.items():
            event_dict.setdefault(key, value)


class _Resource(Resource):
    """A Resource that hashes once: the SDK's OTLP encoder groups a batch by resource and
    hashes each record's (a sorted ``json.dumps`` per record in 1.45, ~15% of encoding)."""

    def __init__(self, attributes: Mapping[str, Any]) -> None:
        super().__init__(attributes)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or super().__eq__(other)


class RecordBuilder:
    """Turns captured events (and spool lines) into SDK ``ReadableLogRecord`` objects.

    Runs on the export thread: attribute coercion (``obs.encode.to_otel_value``) and object
    building stay off the caller's hot path. Holds the resource, rebuilt when the rank
    changes, and the ``log.record.uid`` generator (a per-process random prefix + counter).
    """

    __slots__ = (
        "_counter",
        "_keys",
        "_prefix",
        "_rank",
        "_resolver",
        "_resource",
        "_resources",
        "_settings",
        "_severities",
        "_tails",
        "folded",
        "note",
    )

    def __init__(self, settings: Settings, resolver: RankResolver) -> None:
        self._settings = settings
        self._resolver = resolver
        self._rank: RankInfo | None = None
        self._resource: Resource = _Resource({})
        self._resources: dict[str, Resource] = {}
        self._prefix = uuid.uuid4().hex[:16]
        self._counter = 0
        self._keys: dict[str, bool] = {}
        #: Per level: the record's severity text and number (the fused path's parts).
        self._severities: dict[int, tuple[str, SeverityNumber | None]] = {}
        #: Per (rank info, callsite) of the fused path's parts: the attributes every such
        #: record ends with, coerced, and whether one has a name Loki cannot store.
        self._tails: dict[tuple[int, int], _Tail] = {}
        #: Records folded to fit Loki (``stats()["folded"]``); where a note is reported.
        self.folded = 0
        self.note: Callable[[str, str, str], None] | None = None

    def after_fork(self) -> None:
        """A child gets its own uid prefix and recomputes its rank resource."""
        self._prefix = uuid.uuid4().hex[:16]
        self._counter = 0
        self._rank = None

    def resource(self) -> Resource:
        """The resource for records built now (rank attributes from the resolver)."""
        info = self._resolver.current()
        if info is not self._rank:
            attrs, cut = cap_resource(_full_resource(self._settings, info))
            self._resource = _Resource(attrs)
            self._rank = info
            if cut and self.note is not None:
                self.note(
                    "settings",
                    "ResourceTooLarge",
                    f"OTEL_RESOURCE_ATTRIBUTES: {cut} attribute(s) left out of the resource "
                    f"(Loki stores it beside every record: at most {RESOURCE_MAX_ENTRIES} "
                    f"entries, {RESOURCE_MAX_BYTES} bytes, names with a letter or digit)",
                )
        return self._resource

    def build(
        self, item: Captured, cls: int, resource: Resource | None = None
    ) -> ReadableLogRecord:
        """One SDK record from a captured event dict (see DESIGN.md "Event record shape");
        ``cls`` is its severity class, ``resource`` the batch's (looked up when None)."""
        observed, ctx, ed = item
        if isinstance(ed, tuple):
            return self._build_parts(observed, ctx, ed, cls, resource)
        attributes, unnamed = self._attributes(ed)
        event = ed.get("event")
        event = event if type(event) is str else safe_repr(event, 1024)
        body = ed.get("body")
        if type(body) is not str:  # the Redactor made it text already, in obs' chain
            body = body_text(body, event)
        number = ed.get("severity_number")
        severity = _SEVERITIES.get(number) if type(number) is int else None
        text = ed.get("severity_text")
        when = ed.get("_obs_time_ns")
        return self._record(
            attributes,
            unnamed,
            event,
            body,
            (text if type(text) is str else CLASS_NAMES[cls], severity or _SEVERITY_OF_CLASS[cls]),
            (when if type(when) is int else observed, observed, ctx),
            resource,
        )

    def _attributes(self, ed: Mapping[Any, Any]) -> tuple[dict[str, Any], bool]:
        """The attributes of an event dict's fields; whether one has a name Loki cannot
        store."""
        attributes: dict[str, Any] = {}
        keys = self._keys
        unnamed = False
        for key, value in ed.items():
            wanted = keys.get(key) if type(key) is str else None
            if wanted is None:
                wanted = self._classify(key)
                if type(key) is not str:
                    key = safe_repr(key, 256)  # noqa: PLW2901
                unnamed = unnamed or (wanted and label_name(key) is None)
            if wanted:
                attributes[key] = to_otel_value(value)
        return attributes, unnamed

    def _record(  # noqa: PLR0917 - positional, from the two builders
        self,
        attributes: dict[str, Any],
        unnamed: bool,
        event: str,
        body: str,
        severity: tuple[str, SeverityNumber],
        times: tuple[int, int, otel_context.Context],
        resource: Resource | None,
        size: int = -1,
    ) -> ReadableLogRecord:
        """The record of ``attributes`` (folded to fit Loki where they do not, numbered);
        ``size``: what :func:`fits` would sum of them, all plain (-1: not known)."""
        resource = resource or self.resource()
        space = _room(resource)
        if unnamed or not (
            fits_sized(len(attributes), size, event, space)
            if size >= 0
            else fits(attributes, event, space)
        ):
            fitted = fit(attributes, event, space)
            if fitted is not attributes:
                self._folded()
            attributes = fitted
        self._counter += 1
        attributes["log.record.uid"] = f"{self._prefix}-{self._counter}"
        record = LogRecord(
            timestamp=times[0],
            observed_timestamp=times[1],
            context=times[2],
            severity_text=severity[0],
            severity_number=severity[1],
            body=body,
            attributes=attributes,
            event_name=event,
        )
        return ReadableLogRecord(record, resource, SCOPE)

    def _build_parts(
        self,
        observed: int,
        ctx: otel_context.Context,
        parts: Parts,
        cls: int,
        resource: Resource | None,
    ) -> ReadableLogRecord:
        """:meth:`build` of the fused path's parts: the record of
        :func:`~obs._fused.event_dict_of` (their event dict), without building it."""
        level, event, name, kw, info, where, _ = parts
        tail = self._tails.get((id(info), id(where)))
        if tail is None or tail[0] is not info or tail[1] is not where:
            tail = self._tail(info, where)
        if type(event) is not str or not (tail[2].keys().isdisjoint(kw) and _HEAD.isdisjoint(kw)):
            return self.build((observed, ctx, event_dict_of(parts, observed)), cls, resource)
        head = event if len(event) <= MAX_STR and event.isascii() else to_otel_value(event)
        logger = (
            name
            if type(name) is str and len(name) <= MAX_STR and name.isascii()
            else to_otel_value(name)
        )
        attributes: dict[str, Any] = {"event": head, "logger": logger}
        # what fits() sums, counted as the attributes are made: names and str values
        size = tail[4] + 11 + _text_len(head) + _text_len(logger)
        plain = tail[5] and type(head) in PLAIN_TYPES and type(logger) in PLAIN_TYPES
        keys = self._keys
        for key, value in kw.items():
            wanted = keys.get(key) if type(key) is str else None
            if wanted is None:
                return self.build((observed, ctx, event_dict_of(parts, observed)), cls, resource)
            if wanted:
                kind = type(value)  # to_otel_value's plain cases, inlined
                if kind is str and len(value) <= MAX_STR and value.isascii():
                    size += len(key) + len(value)
                elif (
                    kind is bool
                    or (kind is int and _INT64_MIN <= value <= _INT64_MAX)
                    or (kind is float and value - value == 0.0)
                ):
                    size += len(key)
                else:
                    value = to_otel_value(value)  # noqa: PLW2901
                    size += len(key) + _text_len(value)
                    plain = plain and type(value) in PLAIN_TYPES
                attributes[key] = value
        attributes.update(tail[2])
        severity = self._severities.get(level)
        if severity is None:
            severity = self._severity(level)
        text, number = severity
        return self._record(
            attributes,
            tail[3],
            event,
            event,
            (text, number or _SEVERITY_OF_CLASS[cls]),
            (observed, observed, ctx),
            resource,
            size if plain else -1,
        )

    def _tail(self, info: Any, where: Any) -> _Tail:
        """The attributes the fused path's records end with under ``info`` and ``where``
        (as :meth:`build` makes them of the event dict's rank and callsite fields), whether
        a name is one Loki cannot store, their size as :func:`fits` counts it, whether
        all are plain."""
        fields = event_dict_of((20, "e", "l", {}, info, where, ""), 0)
        for key in ("event", "logger"):
            fields.pop(key)
        attributes, unnamed = self._attributes(fields)
        size = sum(len(k) + _text_len(v) for k, v in attributes.items())
        plain = PLAIN_TYPES.issuperset(map(type, attributes.values()))
        if len(self._tails) >= 256:
            self._tails.clear()
        entry = (info, where, attributes, unnamed, size, plain)
        self._tails[id(info), id(where)] = entry
        return entry

    def _severity(self, level: int) -> tuple[str, SeverityNumber | None]:
        """A level's severity text and number, as the chain's event dict holds them."""
        head = event_dict_of((level, "e", "l", {}, RankInfo(), None, ""), 0)
        number = head["severity_number"]
        entry = (head["severity_text"], _SEVERITIES.get(number) if type(number) is int else None)
        if len(self._severities) < 256:
            self._severities[level] = entry
        return entry

    def _folded(self) -> None:
        """Count a folded record; say once that records are being folded."""
        self.folded += 1
        if self.folded == 1 and self.note is not None:
            self.note(
                "otel_loki",
                "RecordsFolded",
                "records over Loki's structured-metadata limits are folded into obs.folded "
                "(obs.folded_fields: how many fields); obs.delivery()['folded'] counts them",
            )

    def _classify(self, key: object) -> bool:
        """Whether a field becomes an attribute (control and rendered-only keys do not);
        remembered per key name, a bounded table (not a name Loki cannot store: the
        builder sees each of those, and folds it)."""
        wanted = type(key) is not str or not (key in _NOT_ATTRIBUTES or key.startswith("_obs_"))
        if type(key) is str and len(self._keys) < 4096 and label_name(key) is not None:
            self._keys[key] = wanted
        return wanted

    @staticmethod
    def to_spool(record: ReadableLogRecord, cls: int) -> dict[str, Any]:
        """The spool line of a record: everything needed to rebuild it in another process."""
        rec = record.log_record
        number = rec.severity_number
        return {
            "v": 1,
            "cls": cls,
            "ts": rec.timestamp,
            "ots": rec.observed_timestamp,
            "sn": number.value if number is not None else None,
            "st": rec.severity_text,
            "body": rec.body if isinstance(rec.body, str) else safe_repr(rec.body),
            "name": rec.event_name,
            "attrs": dict(rec.attributes or {}),
            "tid": rec.trace_id or 0,
            "sid": rec.span_id or 0,
            "tf": int(rec.trace_flags or 0),
            "res": dict(record.resource.attributes),
        }

    def from_spool(self, doc: Mapping[str, Any]) -> ReadableLogRecord:
        """Rebuild a spooled record (with its original resource), marked ``obs.replayed``.
        Raises ``ValueError`` for a line that is JSON but not a record (counted corrupt)."""
        _check_spooled(doc)
        res = doc.get("res") or {}
        key = json.dumps(res, sort_keys=True, default=str)
        resource = self._resources.get(key)
        if resource is None:
            if len(self._resources) > 256:
                self._resources.clear()
            resource = self._resources[key] = _Resource(dict(res))
        trace_id, span_id = int(doc.get("tid") or 0), int(doc.get("sid") or 0)
        ctx = otel_context.Context()
        if trace_id and span_id:
            span = NonRecordingSpan(
                SpanContext(
                    trace_id,
                    span_id,
                    is_remote=True,
                    trace_flags=TraceFlags(int(doc.get("tf") or 0)),
                )
            )
            ctx = set_span_in_context(span, ctx)
        attributes = dict(doc.get("attrs") or {})
        name = doc.get("name")
        event = name if type(name) is str else ""
        if not fits(attributes, event, space := _room(resource)) or any(
            type(k) is not str or label_name(k) is None for k in attributes
        ):  # a line another version spooled
            attributes = fit({str(k): v for k, v in attributes.items()}, event, space)
        attributes["obs.replayed"] = True
        number = doc.get("sn")
        record = LogRecord(
            timestamp=doc.get("ts"),
            observed_timestamp=doc.get("ots"),
            context=ctx,
            severity_text=doc.get("st"),
            severity_number=_SEVERITIES.get(number) if isinstance(number, int) else None,
            body=str(doc.get("body", "")),
            attributes=attributes,
            event_name=doc.get("name"),
        )
        return ReadableLogRecord(record, resource, SCOPE)


#: A spool line's fields with a type and range the record needs: (field, types, bound).
_SPOOLED: tuple[tuple[str, tuple[type, ...], int], ...] = (
    ("ts", (int,), 1 << 64),
    ("ots", (int,), 1 << 64),
    ("tid", (int,), 1 << 128),
    ("sid", (int,), 1 << 64),
    ("tf", (int,), 1 << 32),
    ("st", (str,), 0),
    ("name", (str,), 0),
    ("attrs", (dict,), 0),
    ("res", (dict,), 0),
)


def _room(resource: Resource) -> Room:
    """The room a record has for its attributes under ``resource`` (computed once per
    resource object: Loki stores the resource's attributes beside every record), at most
    :data:`~obs._lokifit.LINE_ROOM`: a JSON line of the same event is folded alike."""
    space = getattr(resource, "_obs_room", None)
    if type(space) is not Room:
        space = room(resource.attributes, SCOPE.name, SCOPE.version or "")
        space = Room(min(space.entries, ROOM.entries), min(space.bytes, ROOM.bytes))
        with contextlib.suppress(AttributeError):  # a Resource with __slots__: not cached
            resource._obs_room = space  # type: ignore[attr-defined]
    return space


def _check_spooled(doc: Mapping[str, Any]) -> None:
    """Refuse a spool line whose fields would make a record nothing can encode (another
    version's line, a hand edit), or one with neither an event name nor a body
    (``{"v": 1}``: no record at all, never replayed as an empty one): it is counted
    corrupt instead of failing its batch or reaching the collector."""
    if doc.get("name") is None and doc.get("body") is None:
        raise ValueError("spool line holds no record: neither a name nor a body")
    for name, types, bound in _SPOOLED:
        value = doc.get(name)
        if value is None:
            continue
        if type(value) not in types or (bound and not 0 <= value < bound):
            raise ValueError(f"spool line field {name!r} is not a valid {types[0].__name__}")


def resource_attributes(settings: Settings, info: RankInfo) -> dict[str, Any]:
    """Resource of this process: service, host, rank attributes and a ``service.instance.id``
    stable per (host, rank), so Loki keeps one stream per rank across restarts and forks;
    within its share of Loki's limits (:func:`cap_resource`)."""
    return cap_resource(_full_resource(settings, info))[0]


def _full_resource(settings: Settings, info: RankInfo) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "telemetry.sdk.name": "opentelemetry",
        "telemetry.sdk.language": "python",
        "telemetry.sdk.version": _sdk_version,
    }
    attrs.update(settings.shown_resource_attributes())
    attrs["service.name"] = settings.shown_service_name
    attrs.setdefault("host.name", info.host)
    attrs.update(
        rank=info.rank,
        local_rank=info.local_rank,
        world_size=info.world_size,
        node_rank=info.node_rank,
    )
    attrs.setdefault("service.instance.id", f"{info.host}:rank{info.rank}")
    attrs["process.pid"] = os.getpid()
    return attrs


#: Resource attributes kept first, whatever OTEL_RESOURCE_ATTRIBUTES holds.
_RESOURCE_FIRST: tuple[str, ...] = (
    "service.name", "service.instance.id", "host.name", "rank", "local_rank", "world_size",
    "node_rank", "process.pid", "telemetry.sdk.name", "telemetry.sdk.language",
    "telemetry.sdk.version",
)  # fmt: skip


def cap_resource(attrs: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``attrs`` within :data:`~obs._lokifit.RESOURCE_MAX_ENTRIES` entries and
    :data:`~obs._lokifit.RESOURCE_MAX_BYTES` bytes as Loki counts them: obs' own first
    (a text cut to 256 characters when needed), then the others in order while they fit; a
    name Loki cannot store is left out, one it reads a record's level from is kept as
    ``user.<name>``. Returns the attributes and how many were left out."""
    order = [k for k in _RESOURCE_FIRST if k in attrs] + [
        k for k in attrs if k not in _RESOURCE_FIRST
    ]
    out: dict[str, Any] = {}
    entries = size = 0
    for order_key in order:
        key = order_key
        value = attrs[key]
        while level_label(key) or (key != order_key and key in attrs):
            key = f"user.{key}"  # OTEL_RESOURCE_ATTRIBUTES=level=debug: every record's level
        name = label_name(key)
        if name is None:
            continue
        if key in _RESOURCE_FIRST and type(value) is str and len(value) > 256:
            value = value[:256]
        n, b = cost(name, value)
        if key in _RESOURCE_FIRST or (
            entries + n <= RESOURCE_MAX_ENTRIES and size + b <= RESOURCE_MAX_BYTES
        ):
            out[key] = value
            entries, size = entries + n, size + b
    return out, len(attrs) - len(out)


#: The old name (tests and benchmarks import it).
_RecordBuilder = RecordBuilder
