"""Rank scoping: which ranks show an event on the console, and which export it anyway.

``"global"`` shows on global rank 0, ``"local"`` on local rank 0 of each node,
``"process"`` everywhere, a rank or a collection of ranks (ints >= 0, numpy's integers
too) on those ranks. A record at or above
``export_all_ranks_level`` is still exported from every rank (tagged with its rank) when
its console scope hides it, so a failure on node 7 is never invisible.
"""

from __future__ import annotations

__all__ = ["EXPECTED", "SCOPES", "DecideScope", "scope_allows", "scope_problem"]

import itertools
import logging
import numbers
import operator
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from obs import errors
from obs.rank import RankInfo, RankResolver
from obs.severity import DEFAULT_POLICY, StagePolicy

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

SCOPES = ("global", "local", "process")


#: What a valid scope is, for reports.
EXPECTED = "global, local, process, a rank (int >= 0) or a collection of ranks"
_MAX_RANKS = 1 << 16  # members checked in an explicit collection


def scope_problem(scope: object) -> str | None:  # noqa: PLR0911 - a reason per kind of scope
    """Why ``scope`` is not a valid scope, or None when it is. Never raises."""
    if scope is None:
        return None
    if isinstance(scope, str):
        return None if str.__str__(scope) in SCOPES else "an unknown scope name"
    if isinstance(scope, bool):
        return "a bool"
    if isinstance(scope, numbers.Integral):  # an int, or numpy's integers
        return None if _rank_of(scope) is not None else "a negative rank"
    if type(scope) is range:
        return None if scope.start >= 0 and scope.step > 0 else "a range with negative ranks"
    if isinstance(scope, (bytes, bytearray, Mapping)) or not isinstance(scope, Collection):
        return f"a {type(scope).__name__}"
    try:
        members = list(itertools.islice(iter(scope), _MAX_RANKS + 1))
    except BaseException:
        return "a collection that cannot be read"
    if len(members) > _MAX_RANKS:
        return f"more than {_MAX_RANKS} ranks"
    if not all((type(m) is int and m >= 0) or _rank_of(m) is not None for m in members):
        return "a collection holding something other than ranks"
    return None


def _rank_of(value: object) -> int | None:
    """``value`` as a rank: an int >= 0 or an integer-like one (numpy's), never a bool."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    try:
        rank = operator.index(value)
    except BaseException:
        return None
    return rank if rank >= 0 else None


def scope_allows(scope: object, info: RankInfo) -> bool:  # noqa: PLR0911 - hot, fail-open returns
    """True when ``scope`` lets this rank log. Invalid or broken scopes fail open (log).

    Never calls a scope object's own ``__eq__`` for the named scopes, so a scope with a
    broken ``__eq__`` cannot raise here.
    """
    if scope is None:
        return True
    if isinstance(scope, str):
        name = str.__str__(scope)
        if name == "local":
            return info.local_rank == 0
        if name == "global":
            return info.rank == 0
        return True  # "process" and unknown names
    if type(scope) is int:
        return scope < 0 or info.rank == scope
    if scope_problem(scope) is not None:
        return True
    if isinstance(scope, numbers.Integral):  # a single numpy integer
        return info.rank == _rank_of(scope)
    try:
        return info.rank in scope  # type: ignore[operator]
    except BaseException:
        return True


class DecideScope:
    """Processor: pop ``scope``; drop the event, or mark it export-only (``_obs_console``).

    The default scope is ``"process"`` (stdlib semantics); ``*_once`` calls pass
    ``"local"``. Runs before dedup so a rank that does not log never uses up a key. A
    record of one of ``policy``'s alert stages (a terminal failure) hidden by its scope is
    shipped whatever ``export_all_ranks_level`` says, as it passes any level filter.
    """

    __slots__ = ("_alerts", "_export_level", "_on_bad_argument", "_resolver")

    def __init__(
        self,
        resolver: RankResolver | None = None,
        export_all_ranks_level: int | None = logging.WARNING,
        on_bad_argument: Callable[[str, object, str, str], None] | None = None,
        policy: StagePolicy = DEFAULT_POLICY,
    ) -> None:
        self._resolver = resolver or RankResolver()
        self._on_bad_argument = on_bad_argument
        # None: there is no export sink, so a hidden event is simply dropped.
        self._export_level = (
            export_all_ranks_level if export_all_ranks_level is not None else 1 << 30
        )
        alerts = (name for name, rule in policy.rules.items() if rule.alert)
        self._alerts = frozenset(alerts) if export_all_ranks_level is not None else frozenset()

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        scope = event_dict.pop("scope", None)
        if scope is None or (type(scope) is str and scope == "process"):
            event_dict["_obs_console"] = True
            return event_dict
        if self._on_bad_argument is not None and (type(scope) is not str or scope not in SCOPES):
            problem = scope_problem(scope)
            if problem is not None:
                self._on_bad_argument("scope", scope, EXPECTED, f"{problem}: logged on every rank")
        info = event_dict.get("_obs_rank") or self._resolver.current()
        if scope_allows(scope, info):
            event_dict["_obs_console"] = True
            return event_dict
        stage = event_dict.get("stage")  # a stage's name once TagSeverity ran
        if event_dict.get("_obs_level", 0) >= self._export_level or (
            type(stage) is str and stage in self._alerts
        ):
            event_dict["_obs_console"] = False
            return event_dict
        raise errors.DropEvent
