"""Bounded reprs for obs' own text: :mod:`reprlib`, its cuts kept safe for secrets.

reprlib shortens a long text (or an object's long repr) by keeping its head and its tail
around ``...``: a cut through a secret pair's name kept the value behind a piece of the
name (``'aaa...word=x'``), and a cut through a URL kept its password without the ``@``
that marks it, so the scrub that runs on the whole repr after could not see either. Here
a long text keeps its head only, without a last token the cut left without its end
(:func:`~obs._secrets.cut_tail`); the name of a pair stays before its value.
"""

from __future__ import annotations

__all__ = ["BOUNDED"]

import builtins
import reprlib
from typing import Any

from obs._secrets import cut_tail


class _HeadRepr(reprlib.Repr):
    """:class:`reprlib.Repr` whose long texts and reprs keep their head only."""

    def repr_str(self, x: str, level: int) -> str:
        text = builtins.repr(x[: self.maxstring])
        if len(text) <= self.maxstring:
            return text
        return builtins.repr(cut_tail(x[: self.maxstring - 5])) + "..."

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = builtins.repr(x)
        except Exception:  # a broken __repr__: as reprlib shows it
            return f"<{type(x).__name__} instance at {id(x):#x}>"
        if len(text) <= self.maxother:
            return text
        return cut_tail(text[: self.maxother - 3]) + "..."


#: A few items of a container, a few levels deep, each text at most 200 characters.
BOUNDED = _HeadRepr()
BOUNDED.maxlevel = 3
BOUNDED.maxstring = 200
BOUNDED.maxother = 200
BOUNDED.maxlong = 60
for _name in ("maxlist", "maxtuple", "maxset", "maxfrozenset", "maxdict", "maxdeque", "maxarray"):
    setattr(BOUNDED, _name, 16)
