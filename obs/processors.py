"""obs' processors for your own ``structlog.configure(...)`` chain.

``obs.configure()`` is the supported way in; this is for applications that already own a
structlog chain and want obs' rank fields, stage severity, scope, dedup, callsite and
redaction in it, rendered by structlog's own renderers::

    structlog.configure(
        processors=[*obs.processors.chain(), structlog.processors.JSONRenderer()],
    )

The list starts with :class:`KeepUserFields` (a caller's ``_obs_*`` key is kept as
``user._obs_*``, never acted on) and ends with :class:`StripInternal` (obs' ``_obs_*``
bookkeeping keys never reach your renderer) after :class:`SyncLevel` (structlog's
``level`` key says what ``severity_text`` says, so a ``stage="attempt_failed"`` INFO call
reads ``warning`` everywhere). Not included: OTLP export, repeat summaries and the
shipping sinks, which need obs' own runtime; and structlog's filtering bound logger drops a
call below its level before any processor runs, so a stage cannot raise it.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

__all__ = ["KeepUserFields", "StripInternal", "SyncLevel", "chain"]

from typing import TYPE_CHECKING, Any

from obs._fields import CONTROL_SET, plain_names, user_fields
from obs._redactor import Redactor
from obs.callsite import AddCallsite
from obs.context import merge_contextvars
from obs.dedup import Dedup, Deduper
from obs.rank import RankResolver, add_rank_info
from obs.render import TimeStamper, strip_control_keys
from obs.scope import DecideScope
from obs.severity import DEFAULT_POLICY, StagePolicy, TagSeverity

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger


_NO_NAMES: frozenset[str] = frozenset()


class KeepUserFields:
    """Processor (first): a caller's field under one of obs' private ``_obs_*`` names is
    kept as ``user.<name>``, so it is never acted on as obs' own bookkeeping
    (``_obs_time_ns="x"`` neither sets the time nor breaks the chain). Control-field names
    are left alone: ``event`` is structlog's own key here.
    """

    __slots__ = ()

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        if plain_names(event_dict, _NO_NAMES):
            return event_dict
        return user_fields(dict(event_dict), CONTROL_SET)


class StripInternal:
    """Processor: remove obs' ``_obs_*`` bookkeeping keys (last before the renderer)."""

    __slots__ = ()

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        return strip_control_keys(event_dict)


class SyncLevel:
    """Processor: structlog's ``level`` key from obs' ``severity_text`` (lower case), so
    structlog's renderers show the level the stage decided."""

    __slots__ = ()

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        text = event_dict.get("severity_text")
        if isinstance(text, str):
            event_dict["level"] = text.lower()
        return event_dict


def chain(
    *,
    policy: StagePolicy = DEFAULT_POLICY,
    dedup_capacity: int = 10_000,
    resolver: RankResolver | None = None,
) -> list[Any]:
    """obs' processors in obs' order, for a structlog chain of your own (add a renderer)."""
    resolver = resolver or RankResolver()
    return [
        KeepUserFields(),
        merge_contextvars,
        add_rank_info(resolver),
        TagSeverity(policy),
        DecideScope(resolver, None),
        Dedup(Deduper(dedup_capacity, 0.0), policy=policy),
        AddCallsite(),
        TimeStamper(),
        Redactor(),
        SyncLevel(),
        StripInternal(),
    ]
