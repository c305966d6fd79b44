"""The event registry: the :class:`Event` base, :class:`EventRegistry` and ``REGISTRY``.

An event class names its stable snake_case ``name`` (the Grafana contract), its ``stage``
(which drives severity and ``outcome``), a default ``level``, a one-line ``description``
and an optional ``message`` template for the human ``body``; its dataclass fields are the
record's typed fields. This module sits low (the runtime builds obs' own events from it);
:mod:`obs.events` is the public face with ``emit``, :mod:`obs._schema` renders the registry.
Other packages register their events through the ``obs.events`` entry point group (a
callable taking the registry), loaded the first time the registry is listed.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "ENTRY_POINT_GROUP",
    "REGISTRY",
    "STAGES",
    "Event",
    "EventRegistry",
    "FieldSpec",
    "Stage",
    "field_specs",
    "outcome_of",
]

import dataclasses
import logging
import re
import string
import threading
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeVar

from obs._fields import CALL_KEYWORDS, CONTROL_SET
from obs._secrets import cut_tail
from obs.encode import safe_repr
from obs.severity import DEFAULT_POLICY

#: A stage name (for type checkers; the values are the stage policy's, a test checks).
Stage = Literal["attempt", "attempt_failed", "fallback", "initialized", "terminal_failure"]
#: The stages of a fallback chain, in the order they happen: the stage policy's.
STAGES: tuple[Stage, ...] = tuple(DEFAULT_POLICY.rules)  # type: ignore[arg-type]

_NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
#: An event field must not reuse a record field, nor a keyword ``emit`` passes on.
_RESERVED = CONTROL_SET | frozenset(CALL_KEYWORDS)
#: The entry point group other packages register their events through.
ENTRY_POINT_GROUP = "obs.events"


def outcome_of(stage: str) -> str:
    """The outcome the default severity policy attaches to ``stage``."""
    rule = DEFAULT_POLICY.rule(stage)
    return rule.outcome if rule is not None else ""


class Event:
    """Base of typed events; subclasses are frozen dataclasses registered in a registry."""

    __slots__ = ()

    name: ClassVar[str]
    stage: ClassVar[Stage | None] = None
    level: ClassVar[int] = logging.INFO
    description: ClassVar[str] = ""
    #: ``str.format`` template over the fields for ``body``; lists render "a, b".
    message: ClassVar[str | None] = None
    #: Fields that identify an occurrence for ``once=True`` (None: every field).
    identity: ClassVar[tuple[str, ...] | None] = None

    def fields(self) -> dict[str, Any]:
        """The event's fields as a dict (shallow: values are the objects themselves)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def body(self) -> str:
        """The human message: the template filled in, else the event name."""
        template = type(self).message
        if template is None:
            return type(self).name
        shown = {k: _display(v) for k, v in self.fields().items()}
        return template.format_map(shown)

    def once_key(self) -> tuple[str, ...]:
        """Field names that make the dedup key of ``emit(event, once=True)``."""
        identity = type(self).identity
        if identity is not None:
            return identity
        return tuple(f.name for f in dataclasses.fields(self))  # type: ignore[arg-type]


#: A field value in a body: at most this many characters, items, levels of nesting.
_SHOWN_CHARS, _SHOWN_ITEMS, _SHOWN_DEPTH = 1000, 20, 3


def _display(value: object, depth: int = 0) -> str:  # noqa: PLR0911 - one return per kind
    """A field value as the body shows it. Never raises and is bounded: a value whose
    str() raises, a cyclic list or a 5,000-digit int costs the body that value's text,
    never the event."""
    try:
        if value is None:
            return "-"
        if isinstance(value, (list, tuple)):
            if not value:
                return "none"
            if depth >= _SHOWN_DEPTH:
                return "..."
            shown = [_display(v, depth + 1) for v in value[:_SHOWN_ITEMS]]
            return ", ".join(shown) + (", ..." if len(value) > _SHOWN_ITEMS else "")
        if isinstance(value, float):
            return f"{value:.1f}"
        text = str(value)  # cut at its head, never inside a credential (the body is scrubbed)
        return text if len(text) <= _SHOWN_CHARS else cut_tail(text[:_SHOWN_CHARS])
    except Exception:
        return safe_repr(value, _SHOWN_CHARS)


E = TypeVar("E", bound=type[Event])


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """One typed field of an event, as introspected from the dataclass."""

    name: str
    type: Any
    required: bool
    type_name: str
    schema: dict[str, Any]


class EventRegistry:
    """Every known event class, by name; ``register`` is the class decorator."""

    __slots__ = ("_events", "_group", "_lock", "_plugins_loaded")

    def __init__(self, entry_point_group: str | None = None) -> None:
        self._events: dict[str, type[Event]] = {}
        self._lock = threading.Lock()
        self._group = entry_point_group
        self._plugins_loaded = entry_point_group is None

    def load_plugins(self) -> list[str]:
        """Call every ``obs.events`` entry point once (each registers its package's events);
        returns the names of those that failed (a broken plugin never breaks logging)."""
        if self._plugins_loaded or self._group is None:
            return []
        self._plugins_loaded = True
        from importlib.metadata import entry_points  # noqa: PLC0415 - only when listed

        failed = []
        for ep in entry_points(group=self._group):
            try:
                ep.load()(self)
            except Exception:
                failed.append(ep.name)
        return failed

    def register(self, cls: E) -> E:
        """Validate and add an event class (use as ``@REGISTRY.register`` over the dataclass).

        Raises TypeError/ValueError for a class that is not a frozen dataclass, a name that
        is not snake_case or is taken, an unknown stage, a field that reuses a record key,
        or a message template naming a field that does not exist.
        """
        if not (isinstance(cls, type) and issubclass(cls, Event)):
            raise TypeError(f"{cls!r} is not an obs.events.Event subclass")
        if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
            raise TypeError(f"{cls.__name__} must be a frozen dataclass")
        name = cls.__dict__.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"{cls.__name__}.name must be a snake_case str, got {name!r}")
        if cls.stage is not None and cls.stage not in STAGES:
            raise ValueError(f"{cls.__name__}.stage {cls.stage!r} is not one of {STAGES}")
        _check_fields(cls)
        with self._lock:
            known = self._events.get(name)
            if known is not None and known is not cls:
                raise ValueError(f"event name {name!r} already registered by {known.__name__}")
            self._events[name] = cls
        return cls

    def get(self, name: str) -> type[Event] | None:
        """The class registered as ``name``, or None."""
        self.load_plugins()
        return self._events.get(name)

    def __getitem__(self, name: str) -> type[Event]:
        self.load_plugins()
        try:
            return self._events[name]
        except KeyError:
            raise KeyError(f"no event {name!r}; known: {', '.join(self.names())}") from None

    def __contains__(self, name: object) -> bool:
        self.load_plugins()
        return name in self._events

    def __iter__(self) -> Iterator[type[Event]]:
        return iter(self.all())

    def __len__(self) -> int:
        self.load_plugins()
        return len(self._events)

    def all(self) -> tuple[type[Event], ...]:
        """Every registered class, sorted by name."""
        return tuple(self._events[n] for n in self.names())

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted."""
        self.load_plugins()
        return tuple(sorted(self._events))

    def fields(self, name: str) -> tuple[FieldSpec, ...]:
        """The typed fields of event ``name``, in declaration order."""
        return field_specs(self[name])


def _check_fields(cls: type[Event]) -> None:
    """Raise ValueError for a field that reuses a record key, or a message template or an
    identity naming a field that does not exist."""
    names = {s.name for s in field_specs(cls)}
    clash = sorted(names & _RESERVED)
    if clash:
        raise ValueError(f"{cls.__name__} fields reuse record/control keys: {clash}")
    if cls.message is not None:
        used = {f for _, f, _, _ in string.Formatter().parse(cls.message) if f}
        missing = sorted(used - names)
        if missing:
            raise ValueError(f"{cls.__name__}.message names unknown fields {missing}")
    unknown = sorted(set(cls.identity or ()) - names)
    if unknown:
        raise ValueError(f"{cls.__name__}.identity names unknown fields {unknown}")


def field_specs(cls: type[Event]) -> tuple[FieldSpec, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        tp = hints.get(f.name, Any)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        specs.append(FieldSpec(f.name, tp, required, _type_name(tp), _json_type(tp)))
    return tuple(specs)


def _is_union(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is typing.Union or origin is types.UnionType


def _json_type(tp: Any) -> dict[str, Any]:  # noqa: PLR0911 - one return per JSON type
    """The JSON Schema of a field annotation (tuples and lists are arrays)."""
    if tp is Any:
        return {}
    if _is_union(tp):
        return {"anyOf": [_json_type(a) for a in typing.get_args(tp)]}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (tuple, list, Sequence, typing.Sequence):
        item = args[0] if args else Any
        return {"type": "array", "items": _json_type(item)}
    if origin in (dict, Mapping, typing.Mapping):
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": _json_type(value)}
    simple = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string"}
    if tp in simple:
        return {"type": simple[tp]}
    return {}


def _type_name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    if _is_union(tp):
        return " \\| ".join(_type_name(a) for a in typing.get_args(tp))
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return " \\| ".join(repr(a) for a in args)
    if origin in (tuple, list, Sequence, typing.Sequence):
        return f"list[{_type_name(args[0]) if args else 'any'}]"
    if origin in (dict, Mapping, typing.Mapping):
        return f"map[{_type_name(args[0])}, {_type_name(args[1])}]" if args else "map"
    return getattr(tp, "__name__", str(tp))


#: The default registry: obs' own events, obs.events' generic ones and every plugin's.
REGISTRY = EventRegistry(ENTRY_POINT_GROUP)
