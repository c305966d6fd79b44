"""A caller's field never sets the level Loki stores a record under.

Loki derives a record's ``detected_level`` (pkg/distributor/field_detection.go) from a
``detected_level`` entry as it is, else from any entry named ``level``, ``severity``,
``lvl``, ``SeverityText``... (its ``log_level_fields``), and only then from the OTLP
``severity_number``. A caller's ``level="debug"`` (or ``detected_level="info"``) on a
terminal failure logged at ERROR stored it as debug: Grafana's level filter and colours,
and any query on ``detected_level``, lost it. Such a name is now written ``user.<name>``
on every route, and a resource attribute of such a name too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from _alert_routes import ALERT, ROUTES, log_alert_with
from _loki import LEVEL_FIELDS, detected_level, label_name, structured_metadata
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._receiver import OTLPReceiver

ROOT = Path(__file__).resolve().parent.parent
#: Spellings of the level fields as a caller may write them (Loki's own, and ones whose
#: label name is one: ``detected.level``, ``log.level``, ``Severity-Text``).
SPELLINGS = [*LEVEL_FIELDS, "detected_level", "detected.level", "Detected_Level", "log_level",
             "Severity-Text", "severity.text", "lEvEl"]  # fmt: skip


@settings(max_examples=80)
@given(
    name=st.sampled_from(SPELLINGS),
    route=st.sampled_from(ROUTES),
    value=st.sampled_from(["debug", "info", "trace", "warn"]),
)
def test_a_field_never_sets_the_level(name: str, route: str, value: str) -> None:
    """The record Loki would store: its detected level is obs' (error), the caller's
    value is kept under ``user.<name>``."""
    obs.configure(stream="none", sdk_disabled=True)
    try:
        with obs.testing.capture_events() as events:
            log_alert_with(route, name, value)
    finally:
        obs.testing.reset()
    (record,) = events
    assert record["severity_text"] == "ERROR"
    assert record.get(f"user.{name}") == value, record
    attributes = {k: v for k, v in record.items() if k not in ("severity_text", "severity_number")}
    entries = [(label_name(k), str(v)) for k, v in attributes.items() if not k.startswith("_")]
    entries += [("severity_number", "17"), ("severity_text", "ERROR")]
    assert detected_level(entries) == "error", entries


def test_loki_stores_the_alert_at_error(tmp_path: Path) -> None:
    """End to end: a terminal failure with a caller's ``level``, ``detected_level`` and
    ``severity``, and a resource attribute ``level``, exported to a real OTLP receiver;
    Loki's structured metadata (tests/_loki.py) gives detected_level error."""
    child = f"""
    import obs
    obs.configure()
    obs.get_logger("comm").error({ALERT!r}, stage="terminal_failure", chain="fi_ar",
                                 level="debug", detected_level="info", severity="trace")
    obs.flush(timeout=5)
    """
    with OTLPReceiver() as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        env.update(PYTHONPATH=str(ROOT), OTEL_BLRP_SCHEDULE_DELAY="50",
                   OTEL_RESOURCE_ATTRIBUTES="Level=debug,team=infra",
                   OTEL_EXPORTER_OTLP_ENDPOINT=rx.http_endpoint)  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(child)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        (record,) = rx.wait_for(predicate=lambda r: r["attributes"].get("event") == ALERT)
    entries: list[tuple[str, str]] = structured_metadata(record)
    assert detected_level(entries) == "error", entries
    found: dict[str, Any] = dict(entries)
    assert found["user_level"] == "debug"
    assert found["user_detected_level"] == "info"
    assert found["user_Level"] == "debug"  # the resource attribute
    assert found["team"] == "infra"
