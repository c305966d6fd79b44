"""Log levels: the one table of level numbers, names, method names and OTel severities.

Every other module derives what it needs from :data:`LEVELS` (and the two alias tables), so
adding or renaming a level is one edit here. The numbers are the stdlib's; a "severity class"
is a level's index in :data:`LEVELS` (what the export queue and drop counts are keyed by).
"""

from __future__ import annotations

__all__ = [
    "CLASS_NAMES",
    "CRITICAL",
    "DEBUG",
    "ERROR",
    "INFO",
    "LEVELS",
    "LEVEL_BY_METHOD",
    "LEVEL_BY_NAME",
    "METHOD_BY_LEVEL",
    "NAME_BY_LEVEL",
    "SEVERITY_BY_LEVEL",
    "WARNING",
    "WARNING_CLASS",
    "Level",
    "as_level",
    "level_class",
    "level_name",
    "severity_class",
    "severity_number",
]

import bisect
import logging
from typing import NamedTuple

DEBUG = logging.DEBUG
INFO = logging.INFO
WARNING = logging.WARNING
ERROR = logging.ERROR
CRITICAL = logging.CRITICAL


class Level(NamedTuple):
    """One level: stdlib number, name, logger method and the first OTel severity_number."""

    number: int
    name: str
    method: str
    severity: int


#: The table. Order = severity class (0 = DEBUG .. 4 = CRITICAL).
LEVELS: tuple[Level, ...] = (
    Level(DEBUG, "DEBUG", "debug", 5),
    Level(INFO, "INFO", "info", 9),
    Level(WARNING, "WARNING", "warning", 13),
    Level(ERROR, "ERROR", "error", 17),
    Level(CRITICAL, "CRITICAL", "critical", 21),
)
#: Other names accepted for a level (``OBS_LEVEL=warn``, ``log.fatal``, ``log.exception``).
_NAME_ALIASES = {"WARN": WARNING}
_METHOD_ALIASES = {"warn": WARNING, "exception": ERROR, "fatal": CRITICAL}

NAME_BY_LEVEL: dict[int, str] = {lvl.number: lvl.name for lvl in LEVELS}
LEVEL_BY_NAME: dict[str, int] = {lvl.name: lvl.number for lvl in LEVELS} | _NAME_ALIASES
METHOD_BY_LEVEL: dict[int, str] = {lvl.number: lvl.method for lvl in LEVELS}
LEVEL_BY_METHOD: dict[str, int] = {lvl.method: lvl.number for lvl in LEVELS} | _METHOD_ALIASES
SEVERITY_BY_LEVEL: dict[int, int] = {lvl.number: lvl.severity for lvl in LEVELS}
#: Names of the severity classes, index = class (the keys of ``dropped`` counts).
CLASS_NAMES: tuple[str, ...] = tuple(lvl.name for lvl in LEVELS)
#: Classes at or above this one are never dropped by the export queue, only spooled.
WARNING_CLASS = CLASS_NAMES.index("WARNING")
_NUMBERS = tuple(lvl.number for lvl in LEVELS)
_SEVERITIES = tuple(lvl.severity for lvl in LEVELS)
_INFO_CLASS = CLASS_NAMES.index("INFO")


#: The range of a level number obs writes (a float level was already cut to it).
MIN_LEVEL, MAX_LEVEL = 0, 100


def as_level(value: object) -> int | None:
    """``value`` as a level number within 0..100: an int or any real number (clamped, an
    infinity too), a level or method name in any case (``"error"``, ``" Warn "``,
    ``"fatal"``) or its number as text (``"40"``); None for anything else (NaN, bytes, an
    object that is no number). Never raises: a value whose own conversion raises is None;
    a text is read only up to 32 characters."""
    if isinstance(value, str):
        text = str.__str__(value)
        if len(text) > 32:
            return None
        text = text.strip()
        number = LEVEL_BY_NAME.get(text.upper()) or LEVEL_BY_METHOD.get(text.lower())
        if number is not None or not text.isdigit():
            return number
        value = text  # digits: int() below ("²" is a digit int() refuses)
    elif isinstance(value, float):
        if value != value:  # noqa: PLR0124 - NaN
            return None
        value = max(float(MIN_LEVEL), min(value, float(MAX_LEVEL)))
    elif value is None or isinstance(value, (bytes, bytearray, complex)):
        return None
    try:
        whole: int = int(value)  # type: ignore[call-overload]
    except Exception:  # a Decimal NaN, an object that is no number
        return None
    return max(MIN_LEVEL, min(whole, MAX_LEVEL))


def level_name(level: int) -> str:
    """Name of a level, ``LEVEL15``-style for custom ones."""
    return NAME_BY_LEVEL.get(level) or logging.getLevelName(level)


def level_class(level: int) -> int:
    """The severity class (index into :data:`LEVELS`) of any stdlib level number."""
    return max(bisect.bisect_right(_NUMBERS, level) - 1, 0)


def severity_class(number: int) -> int:
    """The class of an OTel ``severity_number``: TRACE counts as DEBUG; 0 (unspecified) and
    out-of-range numbers as INFO."""
    if 0 < number <= 24:
        return max(bisect.bisect_right(_SEVERITIES, number) - 1, 0)
    return _INFO_CLASS


def severity_number(level: int) -> int:
    """OTel severity_number of a stdlib level, for custom levels too (TRACE..FATAL4)."""
    number = SEVERITY_BY_LEVEL.get(level)
    if number is not None:
        return number
    if level < DEBUG:
        return 1
    base = max(lvl for lvl in SEVERITY_BY_LEVEL if lvl <= level)
    return min(SEVERITY_BY_LEVEL[base] + (level - base) * 4 // 10, 24)
