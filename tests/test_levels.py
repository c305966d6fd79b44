"""obs.levels: the one table of level numbers, names, methods and OTel severities."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from obs import levels
from obs.levels import LEVELS, level_class, level_name, severity_class, severity_number


class TestTable:
    def test_numbers_and_names_are_the_stdlib_ones(self) -> None:
        """Each row's number and name are what the logging module calls that level."""
        assert [(lvl.number, lvl.name) for lvl in LEVELS] == [
            (logging.getLevelName(lvl.name), logging.getLevelName(lvl.number)) for lvl in LEVELS
        ]

    def test_methods_are_logger_methods(self) -> None:
        """Each row's method (and alias) is a stdlib Logger method at that level."""
        logger = logging.getLogger("obs.test.levels")
        assert all(callable(getattr(logger, m)) for m in levels.LEVEL_BY_METHOD)

    def test_severities_are_the_first_of_each_otel_range(self) -> None:
        """DEBUG=5, INFO=9, WARN=13, ERROR=17, FATAL=21 (the OTel log data model)."""
        assert [5, 9, 13, 17, 21] == [lvl.severity for lvl in LEVELS]

    def test_warning_class_is_warning(self) -> None:
        """WARNING_CLASS indexes the WARNING row."""
        assert "WARNING" == levels.CLASS_NAMES[levels.WARNING_CLASS]


class TestClasses:
    @given(st.integers(-10, 200))
    def test_level_class_is_the_highest_row_at_or_below(self, level: int) -> None:
        """A custom level's class is that of the highest named level at or below it."""
        below = [i for i, lvl in enumerate(LEVELS) if lvl.number <= level]
        assert (below[-1] if below else 0) == level_class(level)

    @given(st.integers(-5, 30))
    def test_severity_class_matches_level_class(self, number: int) -> None:
        """An OTel severity_number falls in the class of the level that produces that range;
        0 (unspecified) and out-of-range numbers count as INFO, TRACE as DEBUG."""
        if 0 < number <= 24:
            expected = max(i for i, lvl in enumerate(LEVELS) if lvl.severity <= max(number, 5))
        else:
            expected = levels.CLASS_NAMES.index("INFO")
        assert expected == severity_class(number)

    @given(st.integers(0, 100))
    def test_severity_number_round_trips_to_the_class(self, level: int) -> None:
        """severity_number(level) lands in level_class(level) for levels from DEBUG up."""
        if level >= logging.DEBUG:
            assert level_class(level) == severity_class(severity_number(level))

    def test_custom_level_names(self) -> None:
        """Named levels use the table; custom ones get the stdlib's 'Level 15' form."""
        assert ("WARNING", "Level 15") == (level_name(30), level_name(15))
