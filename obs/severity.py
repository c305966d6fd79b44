"""Severity tagging: the level reflects the outcome of a stage, not the caller's mood.

A fallback chain's attempt that fails and is recovered from is a WARNING; running out of
options is an ERROR. The policy is data (:class:`StagePolicy`) so it can be overridden, and
every record carries ``stage`` and ``outcome`` so alerts never depend on the level alone.
"""

from __future__ import annotations

__all__ = [
    "ALERT_LEVEL",
    "ALERT_MARK",
    "ALERT_SCAN",
    "DEFAULT_POLICY",
    "LEVEL_NAMES",
    "METHOD_LEVELS",
    "SEVERITY_NUMBERS",
    "StagePolicy",
    "StageRule",
    "TagSeverity",
    "alert_level",
    "alert_stage",
    "claim_alert",
    "level_name",
    "severity_number",
]

import dataclasses
import enum
import logging
from collections.abc import Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from obs.levels import (
    LEVEL_BY_METHOD,
    NAME_BY_LEVEL,
    SEVERITY_BY_LEVEL,
    as_level,
    level_name,
    severity_number,
)

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

#: Kept for importers of the old names; the table lives in :mod:`obs.levels`.
SEVERITY_NUMBERS = SEVERITY_BY_LEVEL
LEVEL_NAMES = NAME_BY_LEVEL
METHOD_LEVELS = LEVEL_BY_METHOD


@dataclasses.dataclass(frozen=True)
class StageRule:
    """The level and outcome a stage implies. ``alert``: alerts key on the stage's records
    (a terminal failure), so no configured level filters them out; they are still written
    at ``level``."""

    level: int
    outcome: str
    alert: bool = False


@dataclasses.dataclass(frozen=True)
class StagePolicy:
    """stage -> :class:`StageRule`. Events logged below their stage's level are raised."""

    rules: Mapping[str, StageRule]

    def rule(self, stage: object) -> StageRule | None:
        """The rule of ``stage`` (any spelling :meth:`canonical` takes), or None for a stage
        this policy does not know; never raises."""
        try:
            rule: StageRule | None = self.rules.get(stage)  # type: ignore[call-overload]
        except Exception:  # an unhashable stage
            rule = None
        if rule is None:
            name = self.canonical(stage)
            rule = self.rules[name] if name is not None else None
        return rule

    def canonical(self, stage: object) -> str | None:
        """The policy's name of ``stage``: ``"TERMINAL_FAILURE"``, ``"Terminal-Failure"``,
        ``" terminal failure "`` and an Enum member whose value (or name) is one of those
        all name ``terminal_failure``, so the level, the outcome and a Loki query on
        ``stage`` never depend on the spelling. None for no stage of this policy."""
        try:
            if isinstance(stage, enum.Enum):
                value = stage.value
                text = value if isinstance(value, str) else stage.name
            elif isinstance(stage, str):
                text = stage
            else:
                return None
            text = str.__str__(text)
            if text in self.rules:
                return text
            if len(text) > _MAX_STAGE:  # bounded: no stage name is that long
                return None
            name = "_".join(text.lower().replace("-", " ").replace("_", " ").split())
        except Exception:  # an Enum whose value or name cannot be read
            return None
        return name if name in self.rules else None

    def replace(self, **rules: StageRule) -> StagePolicy:
        """A copy with some stages' rules replaced or added."""
        return StagePolicy({**self.rules, **rules})


DEFAULT_POLICY = StagePolicy(
    {
        "attempt": StageRule(logging.DEBUG, "pending"),
        "attempt_failed": StageRule(logging.WARNING, "failure"),
        "fallback": StageRule(logging.WARNING, "degraded"),
        "initialized": StageRule(logging.INFO, "success"),
        "terminal_failure": StageRule(logging.ERROR, "failure", alert=True),
    }
)

#: The lowest level of an alert stage's records: the stdlib root logger never filters
#: below it, so a library's terminal failure reaches obs whatever ``OBS_LEVEL`` says.
ALERT_LEVEL = min(r.level for r in DEFAULT_POLICY.rules.values() if r.alert)
#: The alert stages, each with the suffix of the event names that are its by name.
_ALERT_NAMES = tuple((n, f"_{n}") for n, r in DEFAULT_POLICY.rules.items() if r.alert)
#: Text in every event named after an alert stage (the default policy has one): a str
#: event without it is no alert's, so the hot paths ask :func:`claim_alert` only when
#: ``type(event) is not str or len(event) > ALERT_SCAN or ALERT_MARK in event``.
(ALERT_MARK,) = (n for n, _ in _ALERT_NAMES)
#: A longer name is not searched for the mark (3.7 ms for a 10 MB name of PEM headers):
#: :func:`claim_alert` asks its end, as it asks a short one's (the same answer).
ALERT_SCAN = 1024


def alert_stage(event: object) -> str | None:
    """The alert stage ``event`` is named after (``workspace_terminal_failure``, any
    ``<chain>_terminal_failure``: ``terminal_failure``), else None. A call of such an
    event at any level is that stage: the alert keys on the name, so no level filter may
    drop it (``str``'s own methods: a subclass' overrides are not asked)."""
    if issubclass(type(event), str):  # not isinstance: it reads a proxy's ``__class__``
        name: str = event  # type: ignore[assignment]
        for stage, suffix in _ALERT_NAMES:
            if str.endswith(name, suffix) or str.__eq__(name, stage) is True:
                return stage
    return None


def alert_level(policy: StagePolicy, event: object) -> int | None:
    """The level of the alert stage ``event`` is named after, under ``policy``; else None."""
    stage = alert_stage(event)
    rule = policy.rule(stage) if stage is not None else None
    return rule.level if rule is not None and rule.alert else None


def claim_alert(event: object, fields: MutableMapping[str, Any]) -> None:
    """Give a call of an event named after an alert stage, at any level, that stage,
    whatever ``stage`` it gave (another one is kept as ``user.stage``): the alert keys on
    the name, so neither a level filter, a lower level (``log.debug(...)``: raised to the
    stage's) nor a caller's stage (``stage="attempt"``: DEBUG) drops it."""
    stage = alert_stage(event)
    if stage is not None:
        given = fields.get("stage", stage)
        if given is not stage and DEFAULT_POLICY.canonical(given) != stage:
            fields.setdefault("user.stage", given)
        fields["stage"] = stage


#: Longer text is never taken for a stage's spelling (keeps :meth:`StagePolicy.canonical`
#: bounded whatever a caller passes).
_MAX_STAGE = 64


def _as_level(level: object, method_name: str) -> int:
    """An int level from a float, a level name or a missing one (``log(25.5, ...)`` is
    level 25); the method's level when ``level`` is none of those."""
    number = as_level(level)
    return number if number is not None else LEVEL_BY_METHOD.get(method_name, logging.INFO)


class TagSeverity:
    """Processor: set ``severity_text``/``severity_number`` (and ``outcome`` for a stage).

    The level comes from the method name (``warning``) or a numeric ``_obs_level`` the
    logger already put there; a known ``stage`` sets it to the stage's level and sets the
    stage's ``outcome`` (a caller's own ``outcome`` is kept as ``user.outcome``). A stage
    that is not text is no stage: it is kept as ``user.stage`` and ``on_bad_argument`` is
    told, so the control field always holds a name. An event named after an alert stage
    is that stage at any level (:func:`claim_alert`).
    """

    __slots__ = ("_on_bad_argument", "_policy")

    def __init__(
        self,
        policy: StagePolicy = DEFAULT_POLICY,
        on_bad_argument: Callable[[str, object, str, str], None] | None = None,
    ) -> None:
        self._policy = policy
        self._on_bad_argument = on_bad_argument

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        event = event_dict.get("event")
        if type(event) is not str or len(event) > ALERT_SCAN or ALERT_MARK in event:  # by name
            claim_alert(event, event_dict)
        level = event_dict.get("_obs_level")
        if type(level) is not int:
            level = _as_level(level, method_name)
        stage = event_dict.get("stage")
        if stage is not None:
            rules = self._policy.rules
            rule = rules.get(stage) if type(stage) is str else None
            if rule is None:
                name = self._policy.canonical(stage)
                if name is not None:  # another spelling of a stage: written as its name
                    event_dict["stage"] = name
                    rule = rules[name]
                elif type(stage) is not str:
                    self._plain_stage(event_dict, stage)
            if rule is not None:
                level = rule.level  # the stage decides the level
                if "outcome" in event_dict and event_dict["outcome"] != rule.outcome:
                    event_dict["user.outcome"] = event_dict["outcome"]
                event_dict["outcome"] = rule.outcome
        event_dict["_obs_level"] = level
        event_dict["severity_text"] = NAME_BY_LEVEL.get(level) or level_name(level)
        event_dict["severity_number"] = SEVERITY_BY_LEVEL.get(level) or severity_number(level)
        return event_dict

    def _plain_stage(self, event_dict: EventDict, stage: object) -> None:
        """A str subclass (a str Enum) becomes its text; anything else moves to user.stage."""
        if issubclass(type(stage), str):
            event_dict["stage"] = str.__str__(stage)
            return
        event_dict["user.stage"] = event_dict.pop("stage")
        if self._on_bad_argument is not None:
            self._on_bad_argument("stage", stage, "a stage name, a str", "kept as user.stage")
