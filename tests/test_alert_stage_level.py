"""The alert's record survives any OBS_LEVEL: a terminal failure (the stage Grafana's rule
keys on, ``event="workspace_terminal_failure"``) is written at its stage's level on every
sink even when the configured level is above it, on every API; other records still follow
the level."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from obs._receiver import OTLPReceiver

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import logging
import obs
from comm.flashinfer_allreduce import FiArWorkspaces

class Failing:
    def create(self, **kw):
        raise RuntimeError("Torch not compiled with CUDA enabled")

obs.configure()
FiArWorkspaces(Failing(), backend="auto", nodes=1).get_fi_ar_workspace(2, 0, 16, 16, None, None)
log = obs.get_logger("app")
log.debug("app_terminal", stage="terminal_failure", chain="c")
log.error_once("app_terminal_once", stage="terminal_failure", chain="c")
log.log(5, "app_terminal_log", stage="Terminal-Failure", chain="c")
logging.getLogger("lib").error("lib_terminal", extra={"stage": "terminal_failure"})
log.error("plain_error")  # no stage: the level decides
log.critical("plain_critical")
obs.flush(timeout=5)
"""

ALERTS = {"app_terminal", "app_terminal_once", "app_terminal_log", "lib_terminal"}


@pytest.mark.parametrize("level", ["CRITICAL", "ERROR", "50", "60"])
def test_a_terminal_failure_is_written_whatever_the_level(tmp_path: Path, level: str) -> None:
    """OBS_LEVEL=CRITICAL (or a custom level above it) dropped every terminal failure, the
    workspace chain's included, on every sink: the alert that "matches the event, not the
    level" never fired. Now each is written once as ERROR on the console, OBS_FILE and
    OTLP; a plain ERROR still follows the level."""
    (tmp_path / "c.py").write_text(textwrap.dedent(CHILD))
    with OTLPReceiver(grpc=False) as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        env.update(PYTHONPATH=str(ROOT), OBS_FILE=str(tmp_path / "f.jsonl"), OBS_FORMAT="json")
        env.update(OBS_LEVEL=level, OTEL_BLRP_SCHEDULE_DELAY="50")
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.http_endpoint)
        proc = subprocess.run(
            [sys.executable, str(tmp_path / "c.py")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        want = {"workspace_terminal_failure", *ALERTS}
        rx.wait_for(
            predicate=lambda r: r["attributes"].get("event") in want, count=len(want), timeout=20
        )
        received = [{**r["attributes"], "severity_text": r["severity_text"]} for r in rx.records]
    console = [json.loads(x) for x in proc.stderr.splitlines() if x.startswith("{")]
    written = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()]
    for sink, lines in (("console", console), ("file", written), ("otlp", received)):
        alerts = [x for x in lines if x.get("event") in want]
        assert sorted(want) == sorted(x["event"] for x in alerts), (sink, lines)
        for x in alerts:
            assert (x["stage"], x["severity_text"]) == ("terminal_failure", "ERROR"), (sink, x)
        events = {x.get("event") for x in lines}
        numeric = int(level) if level.isdigit() else {"ERROR": 40, "CRITICAL": 50}[level]
        assert ("plain_error" in events) == (numeric <= 40), (sink, events)
        assert ("plain_critical" in events) == (numeric <= 50), (sink, events)
