"""The alert's record survives any OBS_LEVEL: a terminal failure (the stage Grafana's rule
keys on, ``event="workspace_terminal_failure"``) is written at its stage's level on every
sink even when the configured level is above it, on every API; other records still follow
the level."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.stdlib
import obs.testing
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


RANKED = """
import logging
import obs
obs.configure()
log = obs.get_logger("app")
log.error_once("workspace_terminal_failure", stage="terminal_failure", chain="once")
log.error("workspace_terminal_failure", stage="terminal_failure", chain="glob", scope="global")
log.debug("workspace_terminal_failure", stage="TERMINAL_FAILURE", chain="ranks", scope=[0])
logging.getLogger("lib").error(
    "workspace_terminal_failure", extra={"stage": "terminal_failure", "chain": "lib", "scope": 0}
)
log.error("plain_error", scope="global")  # no stage: the export level decides
obs.flush(timeout=5)
"""


@pytest.mark.parametrize("export_level", ["CRITICAL", "ERROR"])
def test_terminal_failure_ships_from_every_rank_whatever_the_export_level(
    tmp_path: Path, export_level: str
) -> None:
    """Rank 3's terminal failure, scoped to rank 0's console, reaches OBS_FILE and OTLP with
    OBS_EXPORT_ALL_RANKS_LEVEL above ERROR too (it was dropped on rank 3: the export level
    is a level filter for shipping, and a terminal failure passes any level filter)."""
    with OTLPReceiver() as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        env.update(PYTHONPATH=str(ROOT), OBS_FORMAT="json", OBS_FILE=str(tmp_path / "f.jsonl"),
                   OBS_EXPORT_ALL_RANKS_LEVEL=export_level, OTEL_BLRP_SCHEDULE_DELAY="50",
                   OTEL_EXPORTER_OTLP_ENDPOINT=rx.http_endpoint, RANK="3", LOCAL_RANK="3",
                   WORLD_SIZE="4", LOCAL_WORLD_SIZE="4")  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(RANKED)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        chains = {"once", "glob", "ranks", "lib"}
        records = rx.wait_for(
            predicate=lambda r: r["attributes"].get("chain") in chains, count=4, timeout=30
        )
    lines = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()]
    filed = {(d["event"], d.get("chain"), d["severity_text"], d["rank"]) for d in lines}
    expected = {("workspace_terminal_failure", c, "ERROR", 3) for c in chains}
    assert expected <= filed
    exported = {
        (r["attributes"]["event"], r["attributes"]["chain"], r["severity_text"]) for r in records
    }
    assert {(e, c, s) for e, c, s, _ in expected} == exported
    assert proc.stderr.strip() == ""  # rank 3's console follows the scope
    assert ("plain_error" in {d["event"] for d in lines}) == (export_level == "ERROR")


#: Each API an ERROR call of the alert's event takes, with no ``stage`` given.
ROUTES = {
    "error": lambda log, e: log.error(e, chain="c"),
    "error_event_kw": lambda log, e: log.error(event=e, chain="c"),
    "exception": lambda log, e: log.exception(e, chain="c"),  # noqa: LOG004 - none handled
    "critical": lambda log, e: log.critical(e, chain="c"),
    "log_40": lambda log, e: log.log(40, e, chain="c"),
    "log_name": lambda log, e: log.log("error", e, chain="c"),
    "error_once": lambda log, e: log.error_once(e, chain="c"),
    "stdlib": lambda log, e: logging.getLogger("vllm.x").error(e, extra={"chain": "c"}),
    "drop_in": lambda log, e: obs.stdlib.init_logger("vllm.y").error(e, extra={"chain": "c"}),
}
#: Event names an alert keys on: the workspace chain's, another chain's, obs' generic one.
ALERT_NAMES = ["workspace_terminal_failure", "kv_connector_terminal_failure",
               "chain_terminal_failure", "terminal_failure"]  # fmt: skip


@given(
    route=st.sampled_from(sorted(ROUTES)),
    name=st.sampled_from(ALERT_NAMES),
    level=st.sampled_from(["CRITICAL", "ERROR", "INFO"]),
    export_level=st.sampled_from(["CRITICAL", "WARNING"]),
)
@settings(max_examples=60, deadline=None)
def test_the_alerts_event_named_without_a_stage(
    route: str, name: str, level: str, export_level: str
) -> None:
    """``log.error("workspace_terminal_failure")`` with no ``stage``: an ERROR call of an
    event named after the terminal-failure stage is a terminal failure, on every API. It
    was dropped by OBS_LEVEL=CRITICAL and by an export level above ERROR on another rank
    (failed on 863232b: the stage came only from a ``stage`` keyword); it is written once,
    at ERROR, with its stage, on rank 3 whose console the scope keeps quiet too."""
    import tempfile

    ranks = {"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}
    saved = {k: os.environ.get(k) for k in ranks}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        os.environ.update(ranks)
        try:
            obs.configure(format="json", sdk_disabled=True, file=path, stream="none",
                          level=level, export_all_ranks_level=export_level)  # fmt: skip
            log = obs.get_logger("app")
            ROUTES[route](log, name)
            log.error("plain_error", scope=0)  # no alert: the levels decide
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                lines = [json.loads(x) for x in fh.read().splitlines()]
        finally:
            obs.testing.reset()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    alerts = [x for x in lines if x["event"] == name]
    assert len(alerts) == 1, lines
    # The stage decides the level, a CRITICAL call's too, as with ``stage=``.
    assert (alerts[0]["stage"], alerts[0]["severity_text"]) == ("terminal_failure", "ERROR")
    assert (alerts[0]["chain"], alerts[0]["rank"]) == ("c", 3)
    shipped = level != "CRITICAL" and export_level != "CRITICAL"
    assert any(x["event"] == "plain_error" for x in lines) == shipped, lines
