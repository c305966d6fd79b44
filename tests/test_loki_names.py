"""A caller's field never shadows a control field in Loki.

Loki turns every attribute name into a label name (each run of characters outside
``[A-Za-z0-9]`` becomes one ``_``), so a caller's ``host_name`` (or ``host-name``,
``code.line-number``, ``exception_type``...) landed beside obs' ``host.name`` as a second
``host_name`` entry of the record's structured metadata, and the alert's ``sum by (chain,
host_name, rank)`` grouped terminal failures under the caller's value. Such a name is now
written ``user.<name>`` (label ``user_host_name``), on every route.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from _alert_routes import ALERT, log_alert_with
from _loki import structured_metadata
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._fields import CONTROL_FIELDS
from obs._receiver import OTLPReceiver

ROOT = Path(__file__).resolve().parent.parent
_RUN = re.compile(r"[^A-Za-z0-9]+")
#: The control fields a differently spelled name can reach in Loki (they hold a separator).
SPELLED = [f for f in CONTROL_FIELDS if not f.isalnum()]


def label(name: str) -> str:
    return _RUN.sub("_", name)


@st.composite
def shadows(draw: st.DrawFn) -> str:
    """Another spelling of a control field's Loki label name (never the field's own)."""
    field = draw(st.sampled_from(SPELLED))
    parts = _RUN.split(field)
    seps = draw(st.lists(st.sampled_from(["_", "-", ".", "/", " ", "__", ":", "._"]),
                         min_size=len(parts) - 1, max_size=len(parts) - 1))  # fmt: skip
    name = parts[0] + "".join(sep + part for sep, part in zip(seps, parts[1:], strict=True))
    assume(name != field)
    return name


@settings(max_examples=80)
@given(name=shadows(), route=st.sampled_from(["call", "bind", "contextvars", "stdlib"]))
def test_a_field_never_shadows_a_control_label(name: str, route: str) -> None:
    """Each Loki label name of the record is held by one field: the control field's."""
    obs.configure(stream="none", sdk_disabled=True)
    try:
        with obs.testing.capture_events() as events:
            log_alert_with(route, name, "CALLER-VALUE")
    finally:
        obs.testing.reset()
    (record,) = events
    assert record["event"] == ALERT
    holders: dict[str, list[str]] = {}
    for key in record:
        holders.setdefault(label(key), []).append(key)
    assert "CALLER-VALUE" in record.values()
    for key in SPELLED:
        assert holders.get(label(key), [key]) == [key], (name, holders.get(label(key)))


def test_loki_groups_the_alert_by_obs_host(tmp_path: Path) -> None:
    """End to end: a terminal failure with a caller's ``host_name`` exported to a real OTLP
    receiver; Loki's structured metadata (tests/_loki.py) has host_name = the real host
    only, and the caller's value under user_host_name."""
    child = f"""
    import obs
    obs.configure()
    obs.get_logger("comm").error({ALERT!r}, stage="terminal_failure", chain="fi_ar",
                                 host_name="not-this-host")
    obs.flush(timeout=5)
    """
    with OTLPReceiver() as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        env.update(PYTHONPATH=str(ROOT), OTEL_BLRP_SCHEDULE_DELAY="50",
                   OTEL_EXPORTER_OTLP_ENDPOINT=rx.http_endpoint)  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(child)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        (record,) = rx.wait_for(predicate=lambda r: r["attributes"].get("event") == ALERT)
    entries: dict[str, set[Any]] = {}
    for key, value in structured_metadata(record):
        entries.setdefault(key, set()).add(value)
    assert {"not-this-host"} == entries["user_host_name"]
    assert "not-this-host" not in entries["host_name"]
    assert len(entries["host_name"]) == 1
