"""The real vLLM 0.33 package, set up the ways applications set it up.

Each scenario is a real process that imports vLLM, loads its general plugins and applies
vLLM's own ``configure_logging(LoggingConfig(...))`` as building an engine does, then logs
through vLLM's ``init_logger`` at every level. Records must come out as obs JSON, each
once, no vLLM text line, and at the level vLLM was asked for (``VLLM_LOGGING_LEVEL`` or
the config's ``log_level``): obs' dictConfig replaces vLLM's text config, not its level.
The scenarios run at once (importing vLLM costs seconds of CPU per process).
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
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

CHILD = """
import sys
order, level = sys.argv[1], sys.argv[2]
import obs
if order == "obs_first":
    obs.configure()
import vllm.logger
from vllm.config import LoggingConfig
from vllm.plugins import load_general_plugins
if order == "obs_after_import":
    obs.configure()
if order == "worker":  # a spawned worker: the config its parent built after the plugin
    from obs.vllm_plugin import CONFIG_PATH  # loaded (obs' file), applied before its own

    handed = LoggingConfig(log_level=level, pylogging_config_file=CONFIG_PATH)
    vllm.logger.configure_logging(handed)  # then vLLM's platform warnings, *_once:
    vllm.logger.init_logger("vllm.app_order").warning_once("rec_ONCE")
load_general_plugins()
config = LoggingConfig(log_level=level) if level != "-" else LoggingConfig()
if order == "obs_after_setup":  # an engine was built before the app configured obs
    vllm.logger.configure_logging(config)
    obs.configure()
if order != "worker":  # a worker's plugins load after its configure_logging, none after
    vllm.logger.configure_logging(config)
log = vllm.logger.init_logger("vllm.app_order")
log.debug("rec_DEBUG")
log.info("rec_INFO")
log.warning("rec_WARNING")
log.error("rec_ERROR")
for _ in range(3):
    log.warning_once("rec_ONCE")
obs.flush(timeout=5.0)
"""

#: name: (environment, child arguments, the lowest level that must come out)
SCENARIOS: dict[str, tuple[dict[str, str], tuple[str, str], str]] = {
    "plugin_env_debug": ({"OBS_VLLM": "1", "VLLM_LOGGING_LEVEL": "DEBUG"}, ("-", "-"), "DEBUG"),
    "plugin_env_warning": (
        {"OBS_VLLM": "1", "VLLM_LOGGING_LEVEL": "WARNING"},
        ("-", "-"),
        "WARNING",
    ),
    "plugin_config_debug": ({"OBS_VLLM": "1"}, ("-", "DEBUG"), "DEBUG"),
    "plugin_worker_debug": ({"OBS_VLLM": "1"}, ("worker", "DEBUG"), "DEBUG"),
    "app_obs_first": ({}, ("obs_first", "-"), "INFO"),
    "app_obs_after_import": ({}, ("obs_after_import", "-"), "INFO"),
    "app_obs_first_debug": ({"VLLM_LOGGING_LEVEL": "DEBUG"}, ("obs_first", "-"), "DEBUG"),
    "app_obs_after_setup": ({}, ("obs_after_setup", "-"), "INFO"),
    "app_obs_after_setup_debug": ({}, ("obs_after_setup", "DEBUG"), "DEBUG"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    drop = ("OBS_", "OTEL_", "VLLM_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_", "OMPI_")
    # Untraced: run in a temporary folder, their coverage data was never combined anyway.
    base = untraced({k: v for k, v in os.environ.items() if not k.startswith(drop)})
    procs = {}
    for name, (extra, args, _) in SCENARIOS.items():
        cwd = tmp_path_factory.mktemp(name)
        env = {**base, **extra, "OBS_FORMAT": "json", "PYTHONPATH": str(ROOT)}
        env["OBS_REPEAT_SUMMARY_SECONDS"] = "3600"  # one summary, at exit, however slow
        procs[name] = subprocess.Popen(
            [sys.executable, "-c", CHILD, *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    done = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=200)
        done[name] = (proc.returncode, out)
    return done


def _records(out: str) -> tuple[list[str], list[str]]:
    """(the rec_* events written as obs JSON, the lines naming a rec_* that are not JSON)."""
    events, text = [], []
    for line in out.splitlines():
        if "rec_" not in line:
            continue
        try:
            doc: Any = json.loads(line)
        except ValueError:
            text.append(line)
            continue
        events.append(doc["event"])
        if doc["event"] == "log_repeats_suppressed":
            events[-1] += f"={doc.get('suppressed_count')}"
    return events, text


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_records_once_as_obs_json_at_vllms_level(
    runs: dict[str, tuple[int, str]], scenario: str
) -> None:
    """Every record at or above vLLM's level comes out once as obs JSON; nothing below
    it, no text. With the plugin, VLLM_LOGGING_LEVEL and the config's log_level used to
    be ignored (obs' dictConfig set INFO); an application that configured obs itself
    got vLLM's text handler back from vLLM's configure_logging (records bypassed obs),
    and one that configured obs after vLLM had loaded its plugins (an engine built
    first) still did on the next configure_logging, with vLLM's ``*_once`` repeats
    swallowed uncounted. A ``warning_once`` repeat is counted in every order. A spawned
    worker (its config applied before its plugins load) kept obs' file level (INFO), and
    a ``*_once`` key it logged before the plugins loaded was logged again after."""
    code, out = runs[scenario]
    lowest = SCENARIOS[scenario][2]
    levels = [f"rec_{lv}" for lv in LEVELS[LEVELS.index(lowest) :]]
    if SCENARIOS[scenario][1][0] == "worker":  # its first warning_once: before the plugins
        want = ["rec_ONCE", *levels, "log_repeats_suppressed=3"]
    else:
        want = [*levels, "rec_ONCE", "log_repeats_suppressed=2"]
    assert (0, want, []) == (code, *_records(out)), out[-3000:]
