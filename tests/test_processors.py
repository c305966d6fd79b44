"""obs.processors in a user's own structlog chain, rendered by structlog's renderers."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from _keys import OddKey as _OddKey

import obs.processors


@pytest.fixture
def user_chain() -> Iterator[tuple[Any, io.StringIO]]:
    """structlog configured the way an application would, with obs' processors inside."""
    out = io.StringIO()
    structlog.configure(
        processors=[*obs.processors.chain(), structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    try:
        yield structlog.get_logger("app"), out
    finally:
        structlog.reset_defaults()


class TestUserChain:
    def test_clean_output_with_structlogs_renderer(self, user_chain: tuple[Any, Any]) -> None:
        """No _obs_* key leaks; rank fields, callsite and severity are there; `level` agrees
        with severity_text on a stage event (it said "info" next to WARNING before)."""
        log, out = user_chain
        log.info("workspace_attempt_failed", stage="attempt_failed", backend="mnnvl")
        record = json.loads(out.getvalue())
        assert not [k for k in record if k.startswith("_obs")], record
        assert ("warning", "WARNING", "failure") == (
            record["level"],
            record["severity_text"],
            record["outcome"],
        )
        assert record["code.file.path"].endswith("test_processors.py")
        assert {"rank", "local_rank", "world_size", "node_rank", "host.name"} <= set(record)

    def test_redaction_and_once(self, user_chain: tuple[Any, Any]) -> None:
        """Secrets are redacted and once-calls are deduplicated in the user's chain too."""
        log, out = user_chain
        for _ in range(3):
            log.warning("token_used", hf_token="hf_SECRET", once=True)
        lines = out.getvalue().splitlines()
        assert 1 == len(lines)
        assert "hf_SECRET" not in lines[0]

    def test_console_renderer_shows_the_stage_level(self) -> None:
        """structlog's ConsoleRenderer prints the level the stage decided."""
        out = io.StringIO()
        structlog.configure(
            processors=[
                *obs.processors.chain(),
                structlog.dev.ConsoleRenderer(colors=False),
            ],
            logger_factory=structlog.PrintLoggerFactory(out),
        )
        try:
            structlog.get_logger().info("workspace_terminal_failure", stage="terminal_failure")
        finally:
            structlog.reset_defaults()
        assert "[error" in out.getvalue()
        assert "_obs" not in out.getvalue()


class TestFlatMark:
    @pytest.mark.parametrize("how", ["keyword", "contextvar"])
    def test_a_caller_cannot_switch_off_nested_redaction(
        self, user_chain: tuple[Any, io.StringIO], how: str
    ) -> None:
        """``_obs_flat=True`` from the caller (a keyword or a bound contextvar) is not obs'
        own mark: a nested secret is still redacted."""
        log, out = user_chain
        try:
            if how == "keyword":
                log.info("kw", cfg={"password": "hunter2SECRET"}, _obs_flat=True)
            else:
                structlog.contextvars.bind_contextvars(_obs_flat=True)
                log.info("cv", cfg={"password": "hunter2SECRET"})
        finally:
            structlog.contextvars.clear_contextvars()
        record = json.loads(out.getvalue())
        assert ({"password": "[REDACTED]"}, "hunter2SECRET" in out.getvalue()) == (
            record["cfg"],
            False,
        )


class TestPrivateNames:
    def test_a_callers_obs_keys_are_user_fields(self, user_chain: tuple[Any, io.StringIO]) -> None:
        """``_obs_time_ns="x"`` / ``_obs_level="x"`` from the caller neither crash the
        chain nor set the time or level: they are written as ``user._obs_*``."""
        log, out = user_chain
        log.error("workspace_terminal_failure", _obs_time_ns="x", _obs_level="x", _obs_rank=1)
        record = json.loads(out.getvalue())
        assert ("x", "x", 1, "ERROR", "error") == (
            record["user._obs_time_ns"],
            record["user._obs_level"],
            record["user._obs_rank"],
            record["severity_text"],
            record["level"],
        )
        assert record["timestamp"].endswith("Z")


class TestStrSubclassKeys:
    @pytest.mark.parametrize("name", ["event", "severity_text", "timestamp", "_obs_flat"])
    def test_kept_as_user_fields(self, user_chain: tuple[Any, io.StringIO], name: str) -> None:
        """In a user's own chain a str-subclass key named like a control or private field is
        written as user.<name>; the event, level and time are obs' own."""
        log, out = user_chain
        log.error("workspace_terminal_failure", **{_OddKey(name): {"password": "p"}})
        record = json.loads(out.getvalue())
        assert ("workspace_terminal_failure", "ERROR", {"password": "[REDACTED]"}) == (
            record["event"],
            record["severity_text"],
            record[f"user.{name}"],
        )
        assert record["timestamp"].endswith("Z")
