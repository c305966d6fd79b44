"""Tests for obs.severity: the stage policy, OTel severity numbers, raising terminal events."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs.severity import (
    DEFAULT_POLICY,
    StagePolicy,
    StageRule,
    TagSeverity,
    level_name,
    severity_number,
)

STAGES = [
    # stage, level, severity_text, severity_number, outcome
    ("attempt", logging.DEBUG, "DEBUG", 5, "pending"),
    ("attempt_failed", logging.WARNING, "WARNING", 13, "failure"),
    ("fallback", logging.WARNING, "WARNING", 13, "degraded"),
    ("initialized", logging.INFO, "INFO", 9, "success"),
    ("terminal_failure", logging.ERROR, "ERROR", 17, "failure"),
]


class TestDefaultPolicy:
    @pytest.mark.parametrize(("stage", "level", "text", "number", "outcome"), STAGES)
    def test_stage_table(
        self, stage: str, level: int, text: str, number: int, outcome: str
    ) -> None:
        """Each stage has the DESIGN.md level and outcome; the terminal failure alerts (no
        configured level filters it out)."""
        alert = stage == "terminal_failure"
        assert StageRule(level, outcome, alert=alert) == DEFAULT_POLICY.rule(stage)

    @pytest.mark.parametrize(("stage", "level", "text", "number", "outcome"), STAGES)
    def test_debug_call_is_tagged_at_stage_level(
        self, stage: str, level: int, text: str, number: int, outcome: str
    ) -> None:
        """A stage event logged at DEBUG gets its stage's severity text/number and outcome."""
        out = TagSeverity()(None, "debug", {"event": "e", "stage": stage})
        assert (text, number, outcome, level) == (
            out["severity_text"],
            out["severity_number"],
            out["outcome"],
            out["_obs_level"],
        )

    def test_unknown_stage(self) -> None:
        """A stage the policy does not know is left alone: no outcome, the call's level."""
        assert None is DEFAULT_POLICY.rule("warming_up")
        out = TagSeverity()(None, "info", {"stage": "warming_up"})
        assert ("INFO", 9, False) == (
            out["severity_text"],
            out["severity_number"],
            "outcome" in out,
        )

    def test_terminal_failure_logged_as_warning_is_raised(self) -> None:
        """A terminal failure logged at WARNING is raised to ERROR (17)."""
        out = TagSeverity()(None, "warning", {"stage": "terminal_failure"})
        assert ("ERROR", 17) == (out["severity_text"], out["severity_number"])

    def test_stage_sets_the_level(self) -> None:
        """The stage decides the level: an attempt (DEBUG stage) logged at ERROR is DEBUG."""
        out = TagSeverity()(None, "error", {"stage": "attempt"})
        assert ("DEBUG", 5, "pending") == (
            out["severity_text"],
            out["severity_number"],
            out["outcome"],
        )

    def test_caller_outcome_is_kept_aside(self) -> None:
        """The stage owns ``outcome``; a caller's own one is kept as ``user.outcome``."""
        out = TagSeverity()(None, "info", {"stage": "fallback", "outcome": "recovered"})
        assert ("degraded", "recovered") == (out["outcome"], out["user.outcome"])

    def test_numeric_level_wins_over_method_name(self) -> None:
        """A numeric ``_obs_level`` from the logger is used instead of the method name."""
        out = TagSeverity()(None, "info", {"_obs_level": logging.CRITICAL})
        assert ("CRITICAL", 21) == (out["severity_text"], out["severity_number"])

    @pytest.mark.parametrize(
        ("method", "text", "number"),
        [
            ("debug", "DEBUG", 5),
            ("info", "INFO", 9),
            ("warning", "WARNING", 13),
            ("warn", "WARNING", 13),
            ("error", "ERROR", 17),
            ("exception", "ERROR", 17),
            ("critical", "CRITICAL", 21),
            ("msg", "INFO", 9),
        ],
    )
    def test_method_names(self, method: str, text: str, number: int) -> None:
        """Used alone in a structlog chain, the method name sets the level (unknown: INFO)."""
        out = TagSeverity()(None, method, {})
        assert (text, number) == (out["severity_text"], out["severity_number"])


class TestCustomPolicy:
    def test_replace_adds_and_overrides(self) -> None:
        """replace() returns a new policy with some rules changed; the default is untouched."""
        policy = DEFAULT_POLICY.replace(
            fallback=StageRule(logging.ERROR, "degraded"), warmup=StageRule(logging.INFO, "ok")
        )
        out = TagSeverity(policy)(None, "debug", {"stage": "fallback"})
        assert ("ERROR", StageRule(logging.INFO, "ok")) == (
            out["severity_text"],
            policy.rule("warmup"),
        )
        assert StageRule(logging.WARNING, "degraded") == DEFAULT_POLICY.rule("fallback")

    def test_policy_of_its_own(self) -> None:
        """A policy built from scratch knows only its own stages."""
        policy = StagePolicy({"probe": StageRule(logging.WARNING, "checked")})
        out = TagSeverity(policy)(None, "info", {"stage": "terminal_failure"})
        assert ("INFO", False) == (out["severity_text"], "outcome" in out)

    def test_unhashable_stage_is_not_a_known_stage(self) -> None:
        """A list as ``stage`` names no rule: the method's level, no outcome, no error."""
        out = TagSeverity()(None, "info", {"stage": ["attempt"]})
        assert ("INFO", None) == (out["severity_text"], out.get("outcome"))


class TestSeverityNumbers:
    @pytest.mark.parametrize(
        ("level", "number"),
        [
            (1, 1),
            (5, 1),
            (9, 1),
            (10, 5),
            (15, 7),
            (19, 8),
            (20, 9),
            (25, 11),
            (30, 13),
            (35, 15),
            (40, 17),
            (45, 19),
            (50, 21),
            (55, 23),
            (100, 24),
        ],
    )
    def test_custom_levels(self, level: int, number: int) -> None:
        """Custom levels map into the OTel range of the stdlib level below them (max 24)."""
        assert number == severity_number(level)

    def test_custom_level_name(self) -> None:
        """A custom level is named by logging (``Level 15`` or its registered name)."""
        logging.addLevelName(25, "NOTICE")
        try:
            assert ("NOTICE", "Level 15", "ERROR") == (
                level_name(25),
                level_name(15),
                level_name(40),
            )
        finally:
            del logging._levelToName[25]  # type: ignore[attr-defined]
            del logging._nameToLevel["NOTICE"]  # type: ignore[attr-defined]

    def test_custom_level_through_the_chain(
        self, configure_json: Callable[..., Callable[[], list[dict[str, Any]]]]
    ) -> None:
        """``log.log(25, ...)`` comes out with severity_number 11."""
        read = configure_json()
        obs.get_logger("t").log(25, "notice_like")
        (record,) = read()
        assert (11, "Level 25") == (record["severity_number"], record["severity_text"])


class TestThroughTheChain:
    def test_info_terminal_failure_is_an_error_line(
        self, configure_json: Callable[..., Callable[[], list[dict[str, Any]]]]
    ) -> None:
        """``log.info(..., stage="terminal_failure")`` is written as ERROR/17 with outcome."""
        read = configure_json()
        obs.get_logger("t").info("workspace_terminal_failure", stage="terminal_failure")
        (record,) = read()
        assert ("ERROR", 17, "terminal_failure", "failure") == (
            record["severity_text"],
            record["severity_number"],
            record["stage"],
            record["outcome"],
        )

    def test_stage_raises_past_the_level_filter(
        self, configure_json: Callable[..., Callable[[], list[dict[str, Any]]]]
    ) -> None:
        """With level WARNING an attempt_failed logged via warning_once still shows once."""
        read = configure_json(level="WARNING")
        log = obs.get_logger("t")
        log.warning_once("attempt_failed_evt", stage="attempt_failed")
        log.warning_once("attempt_failed_evt", stage="attempt_failed")
        assert [("WARNING", "failure")] == [(r["severity_text"], r["outcome"]) for r in read()]

    def test_once_key_uses_raised_level(
        self, configure_json: Callable[..., Callable[[], list[dict[str, Any]]]]
    ) -> None:
        """``info_once`` of a terminal failure is written at ERROR."""
        read = configure_json()
        obs.get_logger("t").info_once("tf", stage="terminal_failure")
        assert ["ERROR"] == [r["severity_text"] for r in read()]


class TestStageValues:
    """``stage`` is a control field: a text name or nothing, never a value of another type."""

    def test_str_enum_stage_is_written_as_its_text(
        self, configure_json: Callable[..., Callable[[], list[dict[str, Any]]]]
    ) -> None:
        """A str Enum member names its stage: the rule applies and the line says the text."""

        class Stage(str, enum.Enum):
            TERMINAL = "terminal_failure"

        read = configure_json()
        obs.get_logger("t").info("tf", stage=Stage.TERMINAL)
        (record,) = read()
        assert ("terminal_failure", "ERROR") == (record["stage"], record["severity_text"])

    @given(
        stage=st.one_of(
            st.integers(),
            st.binary(min_size=1, max_size=20),
            st.lists(st.text(max_size=5), max_size=3),
            st.floats(allow_nan=False),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        )
    )
    @settings(max_examples=40, deadline=None)
    def test_non_text_stage_becomes_user_data_and_is_reported(self, stage: object) -> None:
        """A stage that is not text is kept as ``user.stage``, the event keeps its level, and
        the bad argument is reported once (obs_internal_error naming ``stage``)."""
        obs.configure(stream="none")
        try:
            with obs.testing.capture_events() as events:
                obs.get_logger("t").info("evt", stage=stage)
                obs.get_logger("t").info("evt", stage=stage)
        finally:
            obs.testing.reset()
        written = [e for e in events if e["event"] == "evt"]
        reports = [e for e in events if e["event"] == "obs_internal_error"]
        assert (2, None, "INFO", 1) == (
            len(written),
            written[0].get("stage"),
            written[0]["severity_text"],
            len(reports),
        )
        assert "user.stage" in written[0]
        assert "stage=" in reports[0]["error_message"]
