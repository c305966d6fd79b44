"""Caller location: the user's line, not a logging wrapper's.

Walks up the stack past frames of logging machinery (obs, structlog, stdlib logging, any
prefixes the user adds, and modules that set ``__obs_callsite_skip__ = True``, as
``comm.flashinfer_allreduce`` does so its events point at the getter's caller), caching
the skip decision per code object so the walk costs a dict lookup per frame. Records that
already carry a location (bridged stdlib records, whose ``stacklevel`` was applied by
``logging``) keep theirs.

A call's ``stacklevel=n`` keyword (as stdlib ``logging`` takes it) names the caller of a
user's own logging helper: from the first frame outside the ignored modules, ``n - 1``
more frames outside them up, the stack's outermost frame when it runs out first.

An obs logger puts ``_obs_depth`` (how many frames up its caller sits) in the event, so
the walk starts there with one ``sys._getframe(depth)``: on CPython 3.11+ that leaves the
frames in between unmaterialised, which is most of what a callsite costs.
"""

from __future__ import annotations

__all__ = ["DEFAULT_IGNORES", "AddCallsite", "Location"]

import sys
from collections.abc import Iterable
from types import CodeType, FrameType
from typing import TYPE_CHECKING

from obs.encode import scrub_credentials

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger


DEFAULT_IGNORES: tuple[str, ...] = ("obs", "structlog", "logging")
#: ``(code.file.path, code.line.number, code.function.name)`` of a call site.
Location = tuple[str, int, str]
_MAX_WHERE = 16384


class AddCallsite:
    """Processor: add ``code.file.path``, ``code.line.number``, ``code.function.name``."""

    __slots__ = ("_keep", "_prefixes", "_skip", "_where")

    def __init__(self, additional_ignores: Iterable[str] = ()) -> None:
        self._prefixes = tuple(DEFAULT_IGNORES) + tuple(additional_ignores)
        #: Keyed by ``id(code)``: a code object's hash is not cached and walks all its
        #: bytecode and constants (6 us for a 300-line function, on every line logged).
        self._skip: dict[int, bool] = {}
        #: The code objects keyed above, kept alive so their ids cannot be reused.
        self._keep: list[CodeType] = []
        #: (id(code), instruction offset) -> the three fields: ``f_lineno`` scans the line
        #: table from the start (microseconds at the end of a long function).
        self._where: dict[tuple[int, int], Location] = {}

    def _is_internal(self, frame: FrameType) -> bool:
        code = frame.f_code
        hit = self._skip.get(id(code))
        if hit is None:
            glb = frame.f_globals
            name = glb.get("__name__") or ""
            hit = bool(glb.get("__obs_callsite_skip__")) or any(
                name == p or name.startswith(p + ".") for p in self._prefixes
            )
            if len(self._skip) < 8192:
                self._skip[id(code)] = hit
                self._keep.append(code)
        return hit

    def locate(self, depth: int = 1, stacklevel: int = 1) -> Location | None:
        """The caller's file, line and function: the first frame outside the ignored
        modules, ``depth`` frames up or above (with ``stacklevel`` n > 1, the n-th such
        frame: ``logging``'s rule). Cached per code object and instruction, so a call costs
        the same anywhere in any function. The walk is here, not in a helper: one frame
        fewer per line."""
        try:
            frame: FrameType | None = sys._getframe(depth + 1)
        except ValueError:  # a shallower stack than promised: walk from the start
            frame = sys._getframe(1)
        skip = self._skip
        found = None
        while frame is not None:
            hit = skip.get(id(frame.f_code))
            if hit is None:
                hit = self._is_internal(frame)
            if not hit:
                found = frame
                if stacklevel <= 1:
                    break
                stacklevel -= 1  # a frame of the user's helper: its caller is wanted
            frame = frame.f_back
        if found is None:
            return None
        code = found.f_code
        key = (id(code), found.f_lasti)
        where = self._where.get(key)
        if where is None:
            path = scrub_credentials(code.co_filename)  # as the chain scrubs every value
            where = (path, found.f_lineno, getattr(code, "co_qualname", code.co_name))
            if id(code) in self._skip and len(self._where) < _MAX_WHERE:  # codes kept alive
                self._where[key] = where
        return where

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        level = event_dict.pop("stacklevel", 1) if "stacklevel" in event_dict else 1
        if "code.file.path" in event_dict:
            return event_dict
        # logging's stacklevel: an int (a bool or anything else is the caller itself)
        level = level if type(level) is int and level > 1 else 1
        where = self.locate(event_dict.get("_obs_depth") or 1, level)
        if where is not None:
            event_dict["code.file.path"] = where[0]
            event_dict["code.line.number"] = where[1]
            event_dict["code.function.name"] = where[2]
        return event_dict
