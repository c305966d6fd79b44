"""Which field names Loki can store beside the control fields without harm.

Loki makes a label name of every attribute name (each run of characters outside
``[A-Za-z0-9]`` becomes one ``_``; obs/_lokifit.py has the whole rule). A name with no ASCII
letter or digit has no label name and fails the whole push; a name that comes out as a
control field's label (``host_name``, ``host-name``, ``code.line-number`` beside obs'
``host.name``, ``code.line.number``) is a second entry of that name, and a query or an
alert's ``sum by (host_name)`` may read the caller's value. The renderer writes both kinds
as ``user.<name>``.
"""

from __future__ import annotations

__all__ = ["loki_safe"]

import re

from obs._fields import CONTROL_FIELDS, CONTROL_SET

_ALNUM = re.compile("[A-Za-z0-9]")
_RUNS = re.compile("[^A-Za-z0-9]+")
#: The label names of the control fields a differently spelled name can reach.
_CONTROL_LABELS = frozenset(_RUNS.sub("_", f) for f in CONTROL_FIELDS if not f.isalnum())


def loki_safe(name: str) -> bool:
    """True when Loki stores ``name`` under a label name of its own: it has an ASCII
    letter or digit, and it is a control field or comes out as no control field's label."""
    if _ALNUM.search(name) is None:
        return False
    if name.isalnum() or name in CONTROL_SET:  # most names: one C-level test
        return True
    return _RUNS.sub("_", name) not in _CONTROL_LABELS
