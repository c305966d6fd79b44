"""The pytest plugin as a user's test suite meets it: obs_events, caplog, no leaking state."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import obs


class TestObsEvents:
    def test_events_are_captured(self, obs_events: list[dict[str, Any]]) -> None:
        """obs_events lists what passed the chain, with its control fields."""
        obs.get_logger("app").warning("disk_low", free_gb=3)
        assert [("disk_low", "WARNING", 3)] == [
            (e["event"], e["severity_text"], e["free_gb"]) for e in obs_events
        ]

    @pytest.mark.parametrize("run", [1, 2])
    def test_once_state_does_not_leak_between_tests(
        self, run: int, obs_events: list[dict[str, Any]]
    ) -> None:
        """A warning_once fires in every test that uses the fixture (on the first release
        a second test saw it suppressed by the first one's dedup table)."""
        obs.get_logger("app").warning_once("flag_deprecated", flag="--x")
        assert ["flag_deprecated"] == [e["event"] for e in obs_events], run


class TestCaplog:
    def test_caplog_sees_obs_records(self, caplog: pytest.LogCaptureFixture) -> None:
        """caplog shows obs records as LogRecords (the first release showed nothing)."""
        obs.configure(format="json", sdk_disabled=True)
        obs.get_logger("app").error("rank_failed", rank_hint=3)
        records = [r for r in caplog.records if getattr(r, "event", None) == "rank_failed"]
        assert 1 == len(records), caplog.records
        record: Any = records[0]
        assert ("app", logging.ERROR, 3) == (record.name, record.levelno, record.obs["rank_hint"])
        assert record.pathname.endswith("test_pytest_plugin.py")

    def test_caplog_level_filters(self, caplog: pytest.LogCaptureFixture) -> None:
        """caplog.set_level / at_level apply to obs records too."""
        obs.configure(format="json", sdk_disabled=True, level="DEBUG")
        with caplog.at_level(logging.WARNING):
            obs.get_logger("app").info("quiet")
            obs.get_logger("app").warning("loud")
        assert ["loud"] == [getattr(r, "event", None) for r in caplog.records]

    def test_survives_reconfigure_and_no_duplicates(self, caplog: pytest.LogCaptureFixture) -> None:
        """The mirror follows obs through configure() and writes each record once, even with
        the stdlib bridge on (no loop back through the root logger)."""
        obs.configure(format="json", sdk_disabled=True)
        obs.configure(format="json", sdk_disabled=True, stdlib_bridge=True)
        obs.get_logger("app").warning("once_only")
        assert 1 == sum(getattr(r, "event", None) == "once_only" for r in caplog.records)
