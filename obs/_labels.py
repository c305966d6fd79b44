"""Which field names Loki can store beside the control fields without harm.

Loki makes a label name of every attribute name (each run of characters outside
``[A-Za-z0-9]`` becomes one ``_``; obs/_lokifit.py has the whole rule). A name with no ASCII
letter or digit has no label name and fails the whole push; a name that comes out as a
control field's label (``host_name``, ``host-name``, ``code.line-number`` beside obs'
``host.name``, ``code.line.number``) is a second entry of that name, and a query or an
alert's ``sum by (host_name)`` may read the caller's value. A name whose label is one
Loki reads a record's level from (``level``, ``severity``, ``lvl``, ``SeverityText``,
``detected_level``...: pkg/distributor/field_detection.go takes a ``detected_level``
entry as it is, then any such entry, before the OTLP ``severity_number``) would store a
terminal failure at ERROR under the caller's level instead. The renderer writes all three
kinds as ``user.<name>``.
"""

from __future__ import annotations

__all__ = ["LEVEL_LABELS", "level_label", "loki_safe"]


from obs._fields import CONTROL_FIELDS, CONTROL_SET
from obs._lazy_re import lazy

_ALNUM = lazy("[A-Za-z0-9]")
_RUNS = lazy("[^A-Za-z0-9]+")
#: The label names of the control fields a differently spelled name can reach.
_CONTROL_LABELS = frozenset(_RUNS.sub("_", f) for f in CONTROL_FIELDS if not f.isalnum())
#: Label names (lower-cased) Loki derives a record's ``detected_level`` from: its default
#: ``log_level_fields`` (``level``, ``severity``, ``lvl`` in three cases, ``SeverityText``,
#: ``log.level``, newer ones ``severity_text`` too) and ``detected_level`` itself.
LEVEL_LABELS = frozenset(
    {"level", "severity", "lvl", "severitytext", "severity_text", "log_level", "detected_level"}
)


def loki_safe(name: str) -> bool:
    """True when Loki stores ``name`` under a label name of its own: it has an ASCII
    letter or digit, and it is a control field or comes out as no control field's label
    and as no label Loki reads the record's level from."""
    if _ALNUM.search(name) is None:  # (``日本`` is alphanumeric, with no label name)
        return False
    if name in CONTROL_SET:
        return True
    if name.isalnum():  # most names: C-level tests
        return name.lower() not in LEVEL_LABELS
    label = _RUNS.sub("_", name)
    return label not in _CONTROL_LABELS and label.lower() not in LEVEL_LABELS


def level_label(name: str) -> bool:
    """True when Loki reads a record's level from an attribute named ``name`` (a resource
    attribute too: Loki stores those it does not index beside each record)."""
    return _RUNS.sub("_", name).lower() in LEVEL_LABELS
