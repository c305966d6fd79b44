"""Tests for obs.testing: capture_events() and reset()."""

from __future__ import annotations

import pytest

import obs
import obs.testing
from obs._config import STATE


class TestCaptureEvents:
    def test_collects_events_after_the_chain(self) -> None:
        """Captured events are the final dicts: dedup applied, control keys stripped."""
        obs.configure(format="json", sdk_disabled=True)
        log = obs.get_logger("t")
        with obs.testing.capture_events() as events:
            log.warning_once("dup", k=1)
            log.warning_once("dup", k=1)
            log.info("plain", scope="process")
        assert [("dup", 1), ("plain", None)] == [(e["event"], e.get("k")) for e in events]
        assert [] == [key for e in events for key in e if key.startswith("_obs_") or key == "scope"]

    def test_events_are_still_rendered(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Capturing does not stop the normal output."""
        obs.configure(format="json", sdk_disabled=True)
        with obs.testing.capture_events() as events:
            obs.get_logger("t").info("both")
        assert (1, True) == (len(events), '"event":"both"' in capsys.readouterr().err)

    def test_stops_after_the_block(self) -> None:
        """Events after the block are not collected."""
        obs.configure(format="json", sdk_disabled=True)
        with obs.testing.capture_events() as events:
            obs.get_logger("t").info("inside")
        obs.get_logger("t").info("outside")
        assert ["inside"] == [e["event"] for e in events]

    def test_nested_captures(self) -> None:
        """Nested captures both see the inner events."""
        obs.configure(format="json", sdk_disabled=True)
        log = obs.get_logger("t")
        with obs.testing.capture_events() as outer:
            log.info("a")
            with obs.testing.capture_events() as inner:
                log.info("b")
        assert (["a", "b"], ["b"]) == ([e["event"] for e in outer], [e["event"] for e in inner])

    def test_works_without_configure(self) -> None:
        """capture_events() before configure() uses the lazy default runtime."""
        with obs.testing.capture_events() as events:
            obs.get_logger("t").warning("unconfigured")
        assert ["unconfigured"] == [e["event"] for e in events]

    def test_internal_events_are_captured(self) -> None:
        """Summaries emitted by flush() inside the block are captured."""
        obs.configure(format="json", sdk_disabled=True, repeat_summary_seconds=0)
        log = obs.get_logger("t")
        with obs.testing.capture_events() as events:
            log.error_once("x")
            log.error_once("x")
            obs.flush()
        assert [("x", None), ("log_repeats_suppressed", 1)] == [
            (e["event"], e.get("suppressed_count")) for e in events
        ]


class TestReset:
    def test_reset_drops_runtime(self) -> None:
        """reset() leaves obs unconfigured."""
        obs.configure(format="json", sdk_disabled=True)
        obs.testing.reset()
        assert STATE.runtime is None

    def test_reset_forgets_dedup_keys(self) -> None:
        """After reset() a once key fires again (a fresh process as far as obs is concerned)."""
        obs.configure(format="json", sdk_disabled=True)
        with obs.testing.capture_events() as first:
            obs.get_logger("t").warning_once("k")
        obs.testing.reset()
        obs.configure(format="json", sdk_disabled=True)
        with obs.testing.capture_events() as second:
            obs.get_logger("t").warning_once("k")
        assert (1, 1) == (len(first), len(second))

    def test_unknown_attribute(self) -> None:
        """An unknown attribute of obs.testing raises AttributeError."""
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            obs.testing.nope  # noqa: B018
