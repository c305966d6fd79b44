"""The fields of an event dict: one table of the keys the chain owns, and one constructor.

Every module that treats a key specially (the renderer's order and types, the deduper's
key, the OTLP mapping, the event schema, the user-field guard) derives its set from
:data:`FIELDS` here, and every event dict starts as :func:`new_event_dict`.
"""

from __future__ import annotations

__all__ = [
    "CALL_KEYWORDS",
    "CONTEXT_OWNED",
    "CONTROL_FIELDS",
    "CONTROL_SET",
    "FIELDS",
    "INT_FIELDS",
    "NOT_KEYED",
    "NO_EVENT",
    "OTEL_RECORD_FIELDS",
    "PRIVATE_KEYS",
    "PRIVATE_PREFIX",
    "Field",
    "new_event_dict",
    "plain_names",
    "user_fields",
    "user_name",
]

from collections.abc import Mapping
from typing import Any, NamedTuple

from obs.levels import CLASS_NAMES
from obs.severity import DEFAULT_POLICY


class Field(NamedTuple):
    """One control field: its JSON schema, whether every record has it, what it means, and
    how the chain treats it."""

    name: str
    schema: dict[str, Any]
    required: bool
    meaning: str
    #: Part of a dedup key (the call's own content) rather than the same for every call.
    keyed: bool = False
    #: A top-level field of the OTel log record rather than an attribute.
    otel_record: bool = False


_STRING: dict[str, Any] = {"type": "string"}
_OUTCOMES = list(dict.fromkeys(rule.outcome for rule in DEFAULT_POLICY.rules.values()))

#: The table, in the order a line (and a slimmed line) keeps them.
FIELDS: tuple[Field, ...] = (
    Field("timestamp", {"type": "string", "format": "date-time"}, True, "ISO 8601, UTC",
          otel_record=True),
    Field("severity_text", {"enum": list(CLASS_NAMES)}, True,
          "level name after the stage policy", otel_record=True),
    Field("severity_number", {"type": "integer", "minimum": 1, "maximum": 24}, True,
          "OTel severity number", otel_record=True),
    Field("event", _STRING, True, "the stable event name"),
    Field("body", _STRING, True, "human message", keyed=True, otel_record=True),
    Field("logger", _STRING, True, "logger name"),
    Field("stage", {"enum": list(DEFAULT_POLICY.rules)}, False, "fallback-chain stage",
          keyed=True),
    Field("outcome", {"enum": _OUTCOMES}, False, "what the stage means for the caller"),
    Field("rank", {"type": "integer", "minimum": 0}, True, "global rank"),
    Field("local_rank", {"type": "integer", "minimum": 0}, True, "rank within the node"),
    Field("world_size", {"type": "integer", "minimum": 1}, True, "number of ranks"),
    Field("node_rank", {"type": "integer", "minimum": 0}, True, "node index"),
    Field("host.name", _STRING, True, "host name"),
    Field("code.file.path", _STRING, False, "caller's file"),
    Field("code.line.number", {"type": "integer"}, False, "caller's line"),
    Field("code.function.name", _STRING, False, "caller's function"),
    Field("exception.type", _STRING, False, "exception class, when exc_info was given",
          keyed=True),
    Field("exception.message", _STRING, False, "exception message", keyed=True),
    Field("exception.stacktrace", _STRING, False,
          "formatted traceback: the cause chain, notes, an exception group's members "
          "(bounded, scrubbed)", keyed=True),
)  # fmt: skip

#: Keywords a logger call takes that are instructions, not fields of the record.
CALL_KEYWORDS: tuple[str, ...] = (
    "scope",
    "once",
    "once_key",
    "every_n",
    "every_seconds",
    "exc_info",
    "level",
    "stacklevel",
)
#: Keys the chain adds for its own use; removed before anything is written.
PRIVATE_PREFIX = "_obs_"
PRIVATE_KEYS: tuple[str, ...] = (
    "_obs_rank",
    "_obs_console",
    "_obs_time_ns",
    "_obs_level",
    "_obs_no_export",
    "_obs_logger",
    "_obs_depth",
    "_obs_flat",
    "_obs_exported",
)


class _NoEvent:
    """The type of :data:`NO_EVENT`: one instance, never a caller's value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no event>"


#: A logger method's default event: the call named none positionally, so its ``event``
#: keyword (structlog's spelling, ``log.error(event="x")``) is the event, never a field.
NO_EVENT: Any = _NoEvent()

CONTROL_FIELDS: tuple[str, ...] = tuple(f.name for f in FIELDS)
CONTROL_SET: frozenset[str] = frozenset(CONTROL_FIELDS)
#: Names a bound value or a contextvar is never taken under: the control fields and the
#: call keywords the chain acts on (``once_key``, ``every_n``, ``scope``, ...), which are
#: one call's instructions: bound, they would act on every record of the context (a
#: bound ``once_key`` made each later record, a terminal failure too, a repeat of one).
CONTEXT_OWNED: frozenset[str] = CONTROL_SET | (frozenset(CALL_KEYWORDS) - {"level"})
INT_FIELDS: frozenset[str] = frozenset(f.name for f in FIELDS if f.schema.get("type") == "integer")
OTEL_RECORD_FIELDS: frozenset[str] = frozenset(f.name for f in FIELDS if f.otel_record)
#: What a dedup key leaves out: fields that are the same for every call of a process (or
#: are the key's other parts), the call's instructions, and the overflow marker.
NOT_KEYED: frozenset[str] = (
    frozenset(f.name for f in FIELDS if not f.keyed)
    | frozenset(CALL_KEYWORDS) - {"exc_info", "level"}
    | {"dedup_overflow"}
)


def new_event_dict(event: object, body: object, logger: object) -> dict[str, Any]:
    """The skeleton every event dict starts from: the three fields the chain fills in
    later come first (so every line has the same order), then event, body and logger."""
    return {
        "timestamp": None,
        "severity_text": None,
        "severity_number": None,
        "event": event,
        "body": body,
        "logger": logger,
    }


def user_name(
    key: str, allowed: frozenset[str] = frozenset(), owned: frozenset[str] = CONTROL_SET
) -> str:
    """The name a caller's field ``key`` is kept under: its exact text (a ``str`` subclass's
    own ``__str__``, ``__hash__`` and ``__eq__`` are never asked), as ``user.<text>`` when
    that is a name in ``owned`` (the control fields; :data:`CONTEXT_OWNED` for a bound or
    context value) but ``allowed``, or one of obs' private ``_obs_*`` names, so a caller's
    value never overwrites a field the chain owns nor acts as obs' bookkeeping
    (``_obs_no_export=True`` keeps nothing from the export)."""
    text = key if type(key) is str else str.__str__(key)
    if (text in owned and text not in allowed) or text[:5] == PRIVATE_PREFIX:
        return f"user.{text}"
    return text


def plain_names(fields: Mapping[Any, Any], owned: frozenset[str] = CONTROL_SET) -> bool:
    """True when no key of ``fields`` is in ``owned``, none is a private ``_obs_*`` name and
    each is a plain ``str``: :func:`user_fields` would return ``fields`` as it is."""
    if not owned.isdisjoint(fields):
        return False
    for key in fields:  # noqa: SIM110 - a loop: cheaper than all() on a generator (hot path)
        if type(key) is not str or key[:5] == PRIVATE_PREFIX:
            return False
    return True


def user_fields(
    fields: dict[str, Any],
    allowed: frozenset[str] = frozenset(),
    owned: frozenset[str] = CONTROL_SET,
) -> dict[str, Any]:
    """``fields`` with each key named as :func:`user_name` says: names in ``owned`` but
    ``allowed`` and private ``_obs_*`` names as ``user.<name>``. A ``str`` subclass key is
    its exact text, never ``allowed`` and placed after the plain keys, so it never takes
    the name of one. Two keys that come out the same are both kept (the later one gets
    another ``user.``): no value is lost. A key that is not a str is left to the redactor.
    """
    if plain_names(fields, owned):
        return fields
    out: dict[str, Any] = {}
    odd: list[tuple[str, Any]] = []
    for key, value in fields.items():
        if type(key) is str:
            _put(out, user_name(key, allowed, owned), value)
        elif isinstance(key, str):
            odd.append((key, value))
        else:
            out[key] = value
    for key, value in odd:
        _put(out, user_name(key, owned=owned), value)
    return out


def _put(out: dict[str, Any], name: str, value: Any) -> None:
    while name in out:
        name = f"user.{name}"
    out[name] = value
