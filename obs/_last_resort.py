"""The last resort: write an event the chain failed on, as well as it can be written.

The record keeps its own level (its stage's, as the chain would give it) and time, its
event (or ``obs_unrenderable_event`` when the
name is not text), rank fields, redacted user fields and the failure; the runtime then
reports the failure once as ``obs_internal_error``.
"""

from __future__ import annotations

__all__ = ["write_unprocessed"]

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from obs._fields import CONTROL_SET
from obs._output import Output
from obs._own_events import ObsUnrenderableEvent
from obs._redactor import Redactor
from obs.encode import safe_repr, to_jsonable
from obs.levels import NAME_BY_LEVEL, level_name, severity_number
from obs.rank import RankResolver
from obs.render import JSONRenderer, TimeStamper
from obs.severity import DEFAULT_POLICY, StagePolicy

if TYPE_CHECKING:
    from structlog.typing import EventDict

_KEEP = frozenset({"event", "body", "logger", "stage"})


def write_unprocessed(  # noqa: PLR0917 - the runtime's parts, positional
    event_dict: EventDict,
    exc: Exception,
    resolver: RankResolver,
    output: Output,
    console: Callable[[EventDict], bytes],
    sink: Callable[[Any, str, EventDict], Any] | None = None,
    policy: StagePolicy = DEFAULT_POLICY,
) -> tuple[str, bool]:
    """Write ``event_dict`` without the chain, and hand it to the export ``sink`` (the
    JSON-lines and OTLP routes carry the same records): (where the chain failed, whether
    the line could be written). A known stage decides the level and outcome, as in the
    chain (``policy``): a terminal failure logged at DEBUG is still an ERROR."""
    where = _where(exc)
    level, stage = _level(event_dict, policy)
    try:
        safe: Any = to_jsonable(
            {k: v for k, v in event_dict.items() if not str(k).startswith("_obs_")}
        )
        safe = Redactor()(None, "", safe)  # the chain may have failed before redaction
        for key in list(safe):
            if key in CONTROL_SET and key not in _KEEP:
                del safe[key]  # the chain failed to set these: they are set below
        if stage is not None:
            safe["stage"], safe["outcome"] = stage, policy.rules[stage].outcome
        safe["severity_text"] = NAME_BY_LEVEL.get(level) or level_name(level)
        safe["severity_number"] = severity_number(level)
        ns = event_dict.get("_obs_time_ns")
        safe["timestamp"] = TimeStamper().stamp(ns if type(ns) is int else time.time_ns())
        try:
            for key, value in resolver.current()._fields.items():  # type: ignore[attr-defined]
                safe.setdefault(key, value)
        except Exception:  # the rank probe itself failed: the line goes out without
            safe.setdefault("rank", -1)  # rank fields rather than not at all
        if not isinstance(safe.get("event"), str):
            safe["event"] = ObsUnrenderableEvent.name
        safe.setdefault("obs_internal_error", f"{type(exc).__name__}: {safe_repr(exc, 300)}")
        line = JSONRenderer.line_bytes(safe)
        output.write(line if output.json else console(safe), line)
    except Exception:
        return where, False
    if sink is not None and not event_dict.get("_obs_exported"):  # never raises: an
        with contextlib.suppress(Exception):  # export sink counts its own failures
            sink(None, "error", {**safe, "_obs_level": level, "_obs_time_ns": time.time_ns()})
    return where, True


def _level(event_dict: EventDict, policy: StagePolicy) -> tuple[int, str | None]:
    """The record's level (its known stage's, else its own, else INFO) and stage name."""
    stage = policy.canonical(event_dict.get("stage"))  # never raises
    if stage is not None:
        return policy.rules[stage].level, stage
    level = event_dict.get("_obs_level", logging.INFO)
    return (level if type(level) is int else logging.INFO), None


def _where(exc: Exception) -> str:
    """The module and function the chain failed in (its innermost frame)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "chain"
    return f"{tb.tb_frame.f_globals.get('__name__', '?')}.{tb.tb_frame.f_code.co_name}"
