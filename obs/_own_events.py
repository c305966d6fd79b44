"""obs' own events: what the chain, the export sink and the settings report about obs itself.

Every one of them is a registered typed event: the runtime builds the record from an
instance (:meth:`obs._runtime.Runtime.report`), so a report cannot drift from the schema
(docs/EVENTS.md) in its name, fields or level. A report whose level depends on the case
(a repeat summary is logged at the repeated event's level) says so in its description.
"""

from __future__ import annotations

__all__ = [
    "OWN_EVENTS",
    "LogRepeatsSuppressed",
    "ObsDedupCapacityReached",
    "ObsExportProvider",
    "ObsInternalError",
    "ObsRecordsDropped",
    "ObsUnbridgeableRecord",
    "ObsUnrenderableEvent",
    "own_event_dict",
]

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from obs._bridge import CALL_KEYWORDS
from obs._fields import new_event_dict, user_fields
from obs._registry import REGISTRY, Event
from obs.encode import scrub_text

if TYPE_CHECKING:
    from structlog.typing import EventDict


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsInternalError(Event):
    """A processor, exporter, setting or call argument failed; logging went on."""

    name: ClassVar[str] = "obs_internal_error"
    level: ClassVar[int] = logging.ERROR
    description: ClassVar[str] = (
        "obs itself failed somewhere (or a call argument or setting was invalid); reported "
        "once per place and type (a failed or refused OTLP export once per kind of answer: "
        "status, gRPC code or client error). WARNING when an OTLP export failed and records "
        "were spooled."
    )
    message: ClassVar[str | None] = "{where}: {error_type}: {error_message}"

    where: str
    error_type: str
    error_message: str
    #: The variable a bad setting came from (settings errors only).
    variable: str | None = None


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsRecordsDropped(Event):
    """Records could not be written, delivered or spooled; counted, per level when known."""

    name: ClassVar[str] = "obs_records_dropped"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = (
        "Records were lost (queue full, export failed, spool full, rejected by the "
        "collector, re-entrant or unwritable): how many, why, and by level when known."
    )
    message: ClassVar[str | None] = "{count} log records were not delivered ({reason})"

    reason: str
    count: int
    dropped: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: The collector's own words, for records it rejected.
    collector_message: str | None = None


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class LogRepeatsSuppressed(Event):
    """A deduplicated event repeated; how often and when (logged at the original level)."""

    name: ClassVar[str] = "log_repeats_suppressed"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = (
        "A once/throttled event kept repeating: suppressed count and first/last seen "
        "(logged at the original event's level, under its logger)."
    )
    message: ClassVar[str | None] = "{original_event} repeated {suppressed_count} more times"

    dedup_key: str
    original_event: str
    suppressed_count: int
    first_seen: str
    last_seen: str


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsDedupCapacityReached(Event):
    """The dedup table is full; new keys share one throttled overflow slot."""

    name: ClassVar[str] = "obs_dedup_capacity_reached"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = "The dedup table is full; new keys now share one throttled slot."
    message: ClassVar[str | None] = (
        "dedup table full ({capacity} keys): new keys share a throttled slot"
    )

    capacity: int


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsExportProvider(Event):
    """obs exports through the application's global OpenTelemetry LoggerProvider."""

    name: ClassVar[str] = "obs_export_provider"
    level: ClassVar[int] = logging.INFO
    description: ClassVar[str] = (
        "Records are exported through the application's global LoggerProvider (installed "
        "by opentelemetry-instrument or the app), not obs' own exporter; WARNING when obs' "
        "OTLP endpoint setting is therefore not used."
    )
    message: ClassVar[str | None] = (
        "exporting through the application's global OpenTelemetry LoggerProvider"
    )

    provider: str


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsUnbridgeableRecord(Event):
    """A stdlib record whose attributes could not be read was written as well as it could."""

    name: ClassVar[str] = "obs_unbridgeable_record"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = (
        "A stdlib LogRecord whose attributes raised when read, and whose message is not "
        "plain text: written under this name at the record's own level, with its message "
        "as body and `user.error` saying why."
    )


@REGISTRY.register
@dataclasses.dataclass(frozen=True)
class ObsUnrenderableEvent(Event):
    """An event the chain failed on, whose name is not text, written by the fallback."""

    name: ClassVar[str] = "obs_unrenderable_event"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = (
        "The chain failed on an event whose name is not text: the fallback writer wrote it "
        "under this name at its own level, with the failure in `obs_internal_error` "
        "(the failure itself is reported once as obs_internal_error)."
    )


#: Every event obs emits about itself.
OWN_EVENTS: tuple[type[Event], ...] = (
    ObsInternalError,
    ObsRecordsDropped,
    LogRepeatsSuppressed,
    ObsDedupCapacityReached,
    ObsExportProvider,
    ObsUnbridgeableRecord,
    ObsUnrenderableEvent,
)


def own_event_dict(event: Event, level: int, body: str | None, logger: str | None) -> EventDict:
    """The event dict of one of obs' own events, as the runtime reports it (None-valued
    optional fields left out; its text scrubbed)."""
    fields = {k: v for k, v in event.fields().items() if v is not None}
    for key in ("error_message", "reason", "collector_message"):
        value = fields.get(key)
        if isinstance(value, str):
            fields[key] = scrub_text(value)
    ed: EventDict = new_event_dict(
        type(event).name, scrub_text(body if body is not None else event.body()), logger or "obs"
    )
    ed.update(user_fields(fields, CALL_KEYWORDS))
    ed["_obs_level"] = level
    return ed
