"""Rank scoping: which ranks show an event on the console, and which export it anyway.

``"global"`` shows on global rank 0, ``"local"`` on local rank 0 of each node,
``"process"`` everywhere, a collection of ints on those ranks. A record at or above
``export_all_ranks_level`` is still exported from every rank (tagged with its rank) when
its console scope hides it, so a failure on node 7 is never invisible.
"""

from __future__ import annotations

__all__ = ["SCOPES", "DecideScope", "scope_allows"]

import logging
from collections.abc import Collection

from structlog import DropEvent
from structlog.typing import EventDict, WrappedLogger

from obs.rank import RankInfo, RankResolver

SCOPES = ("global", "local", "process")


def scope_allows(scope: object, info: RankInfo) -> bool:
    """True when ``scope`` lets this rank log. Unknown or broken scopes fail open (log).

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
    if isinstance(scope, int) and not isinstance(scope, bool):
        return info.rank == int(scope)
    try:
        if isinstance(scope, Collection) and not isinstance(scope, bytes):
            return info.rank in scope
    except Exception:
        return True
    return True


class DecideScope:
    """Processor: pop ``scope``; drop the event, or mark it export-only (``_obs_console``).

    The default scope is ``"process"`` (stdlib semantics); ``*_once`` calls pass
    ``"local"``. Runs before dedup so a rank that does not log never uses up a key.
    """

    __slots__ = ("_export_level", "_resolver")

    def __init__(
        self,
        resolver: RankResolver | None = None,
        export_all_ranks_level: int | None = logging.WARNING,
    ) -> None:
        self._resolver = resolver or RankResolver()
        # None: there is no export sink, so a hidden event is simply dropped.
        self._export_level = (
            export_all_ranks_level if export_all_ranks_level is not None else 1 << 30
        )

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        scope = event_dict.pop("scope", None)
        if scope is None or (type(scope) is str and scope == "process"):
            event_dict["_obs_console"] = True
            return event_dict
        info = event_dict.get("_obs_rank") or self._resolver.current()
        if scope_allows(scope, info):
            event_dict["_obs_console"] = True
            return event_dict
        if event_dict.get("_obs_level", 0) >= self._export_level:
            event_dict["_obs_console"] = False
            return event_dict
        raise DropEvent
