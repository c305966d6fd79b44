"""Regular expressions compiled on their first use, not at import: ``import obs`` pays for
none of the scrubber's patterns (a few milliseconds of its import), the first call that
needs one pays for that one once."""

from __future__ import annotations

__all__ = ["lazy"]

import re
from typing import Any, cast

#: The pattern methods bound as the stand-in's own attributes once compiled: a call then
#: costs what the compiled pattern's does (no Python frame in between).
_METHODS = ("finditer", "findall", "fullmatch", "match", "search", "split", "sub", "subn")


class _Lazy:
    """A compiled pattern's stand-in until its first use (see :func:`lazy`)."""

    __slots__ = ("_compiled", "_flags", "_source", *_METHODS)

    def __init__(self, source: str, flags: int) -> None:
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        """Compile (once), keep the methods as this object's own, answer ``name``. Two
        threads compiling at once make the same pattern: either binding is right."""
        compiled = self._compiled
        if compiled is None:
            compiled = re.compile(self._source, self._flags)
            for method in _METHODS:
                setattr(self, method, getattr(compiled, method))
            self._compiled = compiled
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._source!r})"


def lazy(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(source, flags)``, done the first time a method is called."""
    return cast("re.Pattern[str]", _Lazy(source, flags))
