"""vLLM's own ``init_logger(...).warning_once`` under obs: once per key, the repeats
counted (``log_repeats_suppressed``), the scope decided by obs' ranks.

Real processes with the real vLLM 0.33 package: loggers vLLM made before its plugins
loaded and after, for both ways obs is set up (the plugin, or an application that
configured obs itself); ranks from the environment, as vLLM's workers have them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _children import untraced

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240), pytest.mark.vllm]

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
import obs
if sys.argv[1] == "app":
    obs.configure()
import vllm.logger
from vllm.plugins import load_general_plugins
early = vllm.logger.init_logger("vllm.early")  # made before the plugins loaded
load_general_plugins()
late = vllm.logger.init_logger("vllm.late")
for i in range(3):
    early.warning_once("early repeat %s", 1)
    late.warning_once("late repeat")
    late.info_once("global only", scope="global")
    late.error_once("local only", scope="local")
obs.flush(timeout=5.0)
"""

#: name: (environment, child argument)
SCENARIOS: dict[str, tuple[dict[str, str], str]] = {
    "plugin_rank0": ({"OBS_VLLM": "1"}, "-"),
    "app_rank0": ({}, "app"),
    "plugin_rank1_of_2_nodes": (
        {
            "OBS_VLLM": "1",
            "RANK": "1",
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "1",
        },
        "-",
    ),
    "plugin_rank1_same_node": (
        {
            "OBS_VLLM": "1",
            "RANK": "1",
            "LOCAL_RANK": "1",
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
        },
        "-",
    ),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    drop = ("OBS_", "OTEL_", "VLLM_", "RANK", "LOCAL_", "WORLD_SIZE", "SLURM_", "OMPI_")
    # Untraced: run in a temporary folder, their coverage data was never combined anyway.
    base = untraced({k: v for k, v in os.environ.items() if not k.startswith(drop)})
    procs = {}
    for name, (extra, arg) in SCENARIOS.items():
        env = {**base, **extra, "OBS_FORMAT": "json", "PYTHONPATH": str(ROOT)}
        procs[name] = subprocess.Popen(
            [sys.executable, "-c", CHILD, arg],
            cwd=tmp_path_factory.mktemp(name),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    out = {}
    for name, proc in procs.items():
        text, _ = proc.communicate(timeout=200)
        assert proc.returncode == 0, text
        lines = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
        assert len(lines) == len(text.splitlines()), text  # nothing but obs' JSON
        out[name] = lines
    return out


def _written(lines: list[dict[str, Any]]) -> list[str]:
    return [x["event"] for x in lines if x["event"] != "log_repeats_suppressed"]


def _counts(lines: list[dict[str, Any]]) -> dict[str, int]:
    """Repeats counted per key, over every summary: one is due each 60 s after configure,
    and a loaded machine's vLLM import alone can take that long (``app`` configures before
    it), so a key's repeats may be split across two summaries."""
    counts: dict[str, int] = {}
    for x in lines:
        if x["event"] == "log_repeats_suppressed":
            key = x["original_event"]
            counts[key] = counts.get(key, 0) + x["suppressed_count"]
    return counts


@pytest.mark.parametrize("name", ["plugin_rank0", "app_rank0"])
def test_once_and_counted(runs: dict[str, list[dict[str, Any]]], name: str) -> None:
    """Each key written once, with the caller's line; its two repeats counted."""
    lines = runs[name]
    assert sorted(_written(lines)) == sorted(
        ["early repeat %s", "late repeat", "global only", "local only"]
    )
    assert _counts(lines) == {
        "early repeat %s": 2,
        "late repeat": 2,
        "global only": 2,
        "local only": 2,
    }
    assert {x["code.line.number"] for x in lines if x["event"] == "late repeat"} == {13}


def test_scope_follows_obs_ranks(runs: dict[str, list[dict[str, Any]]]) -> None:
    """Rank 1: ``scope="global"`` keeps it quiet (nothing counted either); ``"local"``
    writes on a node's first rank (another node) and not on its second one."""
    other_node = runs["plugin_rank1_of_2_nodes"]
    same_node = runs["plugin_rank1_same_node"]
    assert "global only" not in _written(other_node) + _written(same_node)
    assert "local only" in _written(other_node)
    assert "local only" not in _written(same_node)
    assert _counts(other_node)["late repeat"] == 2
