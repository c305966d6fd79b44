"""``configure()`` again with other dedup settings (the summary interval, the capacity)
keeps the keys the table retained: a once event never fires again, an every_n count goes
on, and every suppressed repeat is counted exactly once (the old table reports its own,
the new one those made after). A new table used to start empty, so each retained once
event was written again after the reconfigure."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.stdlib
import obs.testing

CHANGES = {
    "same": {},
    "summary": {"repeat_summary_seconds": 3600},
    "capacity": {"dedup_capacity": 500},
    "both": {"repeat_summary_seconds": 5, "dedup_capacity": 64},
}


def _call(api: str) -> None:
    if api == "bound":
        obs.get_logger("app").warning_once("rc_evt", k=1)
    elif api == "dropin":
        obs.stdlib.init_logger("app.d").warning_once("rc_evt %s", 1)
    else:
        obs.get_logger("app").warning("rc_evt", every_n=1000)


@settings(max_examples=40, deadline=None)
@given(
    api=st.sampled_from(["bound", "dropin", "every_n"]),
    change=st.sampled_from(sorted(CHANGES)),
    before=st.integers(0, 4),
    after=st.integers(0, 4),
)
def test_a_reconfigure_keeps_once_keys_and_exact_counts(
    api: str, change: str, before: int, after: int
) -> None:
    """One event written in all; the summaries add up to the suppressed calls."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.jsonl"
        base = {"file": str(path), "stream": "none", "sdk_disabled": True}
        obs.configure(**base, repeat_summary_seconds=0, dedup_capacity=100)
        try:
            for _ in range(1 + before):
                _call(api)
            obs.configure(**base, **{"repeat_summary_seconds": 0, "dedup_capacity": 100,
                                     **CHANGES[change]})  # fmt: skip
            for _ in range(after):
                _call(api)
            obs.shutdown()
        finally:
            obs.testing.reset()
        records = [json.loads(line) for line in path.read_text().splitlines()]
    written = [r for r in records if r["event"].startswith("rc_evt")]
    counted = sum(
        r["suppressed_count"]
        for r in records
        if r["event"] == "log_repeats_suppressed" and r["original_event"].startswith("rc_evt")
    )
    assert len(written) == 1, written
    assert counted == before + after


def test_a_smaller_capacity_keeps_the_first_keys() -> None:
    """Reconfigured to a table smaller than the keys retained: the first keys are kept,
    the rest go to the overflow slot (throttled, counted), never all written again."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.jsonl"
        base = {"file": str(path), "stream": "none", "sdk_disabled": True}
        obs.configure(**base, repeat_summary_seconds=0, dedup_capacity=10)
        log = obs.get_logger("app")
        try:
            for i in range(6):
                log.warning_once("cap_evt", i=i)
            obs.configure(**base, repeat_summary_seconds=0, dedup_capacity=3)
            for i in range(6):
                log.warning_once("cap_evt", i=i)
            obs.shutdown()
        finally:
            obs.testing.reset()
        records = [json.loads(line) for line in path.read_text().splitlines()]
    written = [r.get("i") for r in records if r["event"] == "cap_evt"]
    assert written == [0, 1, 2, 3, 4, 5, 3]  # 3 leads the overflow slot; 4 and 5 counted
    counted = sum(r["suppressed_count"] for r in records if r["event"] == "log_repeats_suppressed")
    assert counted == 5
