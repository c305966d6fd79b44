"""The event given as a keyword (structlog's ``log.error(event="x")``): it is the event, on
every method and route, and a call without any event never raises into the application."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._receiver import OTLPReceiver

ROOT = Path(__file__).resolve().parent.parent
ALERT = "workspace_terminal_failure"
METHODS = ["debug", "info", "warning", "warn", "error", "exception", "critical", "fatal",
           "debug_once", "info_once", "warning_once", "error_once", "log"]  # fmt: skip


def _call(log: Any, method: str, **kw: Any) -> None:
    if method == "log":
        log.log(logging.ERROR, **kw)
    else:
        getattr(log, method)(**kw)


@settings(max_examples=80, deadline=None)
@given(
    method=st.sampled_from(METHODS),
    bound=st.sampled_from([{}, {"event": "bound_name"}, {"k": 1}]),
    level=st.sampled_from(["DEBUG", "INFO", "ERROR"]),
    extra=st.sampled_from([{}, {"k": 2}, {"severity_text": "DEBUG", "timestamp": 0}]),
)
def test_keyword_event_is_the_event(
    method: str, bound: dict[str, Any], level: str, extra: dict[str, Any]
) -> None:
    """``log.<method>(event=ALERT, stage="terminal_failure")`` writes ``event=ALERT`` (it
    raised TypeError: missing positional argument), whatever the level, the method, the
    bound context (a bound ``event`` stays ``user.event``) and other fields."""
    obs.configure(stream="none", sdk_disabled=True, level=level)
    try:
        with obs.testing.capture_events() as events:
            log = obs.get_logger("app").bind(**bound)
            _call(log, method, event=ALERT, stage="terminal_failure", **extra)
    finally:
        obs.testing.reset()
    (record,) = events
    assert record["event"] == ALERT
    assert record["severity_text"] == "ERROR"
    assert record.get("user.event") == bound.get("event")


@settings(max_examples=30, deadline=None)
@given(method=st.sampled_from(METHODS))
def test_no_event_at_all_never_raises(method: str) -> None:
    """A call with no event at all is written (event ``None``), as structlog writes it."""
    obs.configure(stream="none", sdk_disabled=True, level="DEBUG")
    try:
        with obs.testing.capture_events() as events:
            _call(obs.get_logger("app"), method)
    finally:
        obs.testing.reset()
    assert ["None"] == [e["event"] for e in events]


def test_keyword_event_on_every_route(tmp_path: Path) -> None:
    """The keyword event reaches the JSON line, OBS_FILE and a real OTLP receiver (the
    record's ``event`` attribute and its event name) intact."""
    child = f"""
    import obs
    obs.configure()
    obs.get_logger("app").bind(event="bound").error(event={ALERT!r}, chain="c")
    obs.flush(timeout=5)
    """
    with OTLPReceiver() as rx:
        (tmp_path / "c.py").write_text(textwrap.dedent(child))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        env.update(PYTHONPATH=str(ROOT), OBS_FILE=str(tmp_path / "f.jsonl"), OBS_FORMAT="json")
        env.update(OTEL_BLRP_SCHEDULE_DELAY="50", OTEL_EXPORTER_OTLP_ENDPOINT=rx.http_endpoint)
        proc = subprocess.run(
            [sys.executable, str(tmp_path / "c.py")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        (record,) = rx.wait_for(predicate=lambda r: r["attributes"].get("chain") == "c")
    (line,) = [json.loads(x) for x in proc.stderr.splitlines()]
    (written,) = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert ALERT == line["event"] == written["event"] == record["attributes"]["event"]
    assert ALERT == record["event_name"]
    assert "bound" == line["user.event"] == record["attributes"]["user.event"]
