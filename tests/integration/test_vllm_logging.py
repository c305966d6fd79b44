"""The real vLLM 0.33 package: every ``vllm.*`` record through obs exactly once.

Four settings, each a real vLLM main process (plugins loaded, then vLLM's own
``configure_logging(LoggingConfig())``) with a fork and a spawn worker started as vLLM's
worker start-up does (``_vllm_worker.py``): obs' plugin with vLLM's default logging, the
plugin with ``VLLM_CONFIGURE_LOGGING=0``, ``VLLM_LOGGING_CONFIG_PATH`` naming
``examples/vllm-logging.json`` without the plugin, and the plugin where the
``LoggingConfig`` is built and applied before the plugins load (naming no config file
until the plugin loads). The four run at once (importing vLLM
costs seconds of CPU per process); each is told apart at the receiver by a resource
attribute. Needs vLLM (``make`` installs it); ``OBS_REQUIRE_VLLM=1`` (set by ``make``)
turns a missing vLLM into a failure rather than a skip.

The plugin scenario also sets ``OBS_VLLM_FI_AR=1``: its main process calls vLLM's FlashInfer
allreduce getters on a real gloo group with the real flashinfer on a CPU (one vLLM import
for both checks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _children import untraced

from obs._receiver import OTLPReceiver

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240), pytest.mark.vllm]

HERE = Path(__file__).resolve().parent
LAUNCHER = HERE / "_vllm_worker.py"
EXAMPLE = HERE.parents[1] / "examples" / "vllm-logging.json"
PROCESSES = ("main", "fork", "spawn")
SCENARIOS = {
    "plugin": {"OBS_VLLM": "1", "OBS_VLLM_FI_AR": "1"},
    "plugin_no_vllm_config": {"OBS_VLLM": "1", "VLLM_CONFIGURE_LOGGING": "0"},
    "config_path": {"VLLM_LOGGING_CONFIG_PATH": str(EXAMPLE)},
    "plugin_cli_order": {"OBS_VLLM": "1"},
}
#: Workers per scenario. A spawned worker costs ~10 s of CPU (it imports vLLM again); the
#: plugin's spawn worker already applies the config path the plugin set (the handed
#: LoggingConfig carries it), which is the config_path scenario's mechanism.
METHODS = {
    "plugin": PROCESSES[1:],
    "plugin_no_vllm_config": PROCESSES[1:],
    "config_path": ("fork",),
    "plugin_cli_order": PROCESSES[1:],
}
#: Launcher arguments before the start methods: the config applied first, then the plugins.
ORDER = {"plugin_cli_order": ("cli",)}
#: Coverage's tracer slows vLLM's import by half: plugin_cli_order runs untraced, and so do
#: the spawned workers (each imports vLLM again) but the plugin's (``untraced`` among the
#: launcher's arguments). The traced processes run every obs line the untraced ones do.
UNTRACED = ("plugin_cli_order",)
TRACED_SPAWN = ("plugin",)
#: The launcher's log_all: info, warning, then info_once twice.
LINE_INFO = next(
    i for i, text in enumerate(LAUNCHER.read_text().splitlines(), 1) if "# LINE_INFO" in text
)


class Run:
    """What one scenario's processes wrote: stdout, stderr, exit code."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.out, self.err = proc.communicate(timeout=200)
        self.code = proc.returncode

    def lines_with(self, marker: str) -> list[str]:
        """Every output line (stdout and stderr) that mentions ``marker``."""
        return [ln for ln in (self.out + self.err).splitlines() if marker in ln]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Run], Any]]:
    """Run the three scenarios at once against one real OTLP receiver."""
    with OTLPReceiver() as receiver:
        drop = ("OBS_", "OTEL_", "VLLM_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_", "OMPI_")
        base = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        procs = {}
        for name, extra in SCENARIOS.items():
            env = {
                **base,
                **extra,
                "OBS_FORMAT": "json",
                "OBS_SPOOL_DIR": str(tmp_path_factory.mktemp(name)),
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.http_endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_BLRP_SCHEDULE_DELAY": "50",
                "OTEL_RESOURCE_ATTRIBUTES": f"scenario={name}",
                "PYTHONPATH": str(HERE.parents[1]),
            }
            procs[name] = subprocess.Popen(
                [
                    sys.executable,
                    str(LAUNCHER),
                    *(() if name in TRACED_SPAWN else ("untraced",)),
                    *ORDER.get(name, ()),
                    *METHODS[name],
                ],
                env=untraced(env) if name in UNTRACED else env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        yield {name: Run(proc) for name, proc in procs.items()}, receiver


@pytest.mark.parametrize(
    ("scenario", "where"),
    [(name, where) for name in SCENARIOS for where in ("main", *METHODS[name])],
)
def test_each_record_once_as_obs_json(
    runs: tuple[dict[str, Run], Any], scenario: str, where: str
) -> None:
    """In every process, each vllm.* record is one obs JSON line (nothing in vLLM's text
    format), with rank fields and the caller's file and line; vLLM's own info_once logs
    once, and its repeat is counted (obs' dedup)."""
    run = runs[0][scenario]
    assert 0 == run.code, run.err[-3000:]
    got = {}
    for offset, kind in enumerate(("vllm_info", "vllm_warning", "vllm_once")):
        found = run.lines_with(f"{kind} {where}")
        summaries = [json.loads(x) for x in found if "log_repeats_suppressed" in x]
        lines = [x for x in found if "log_repeats_suppressed" not in x]
        assert 1 == len(lines), lines
        # Counted in every scenario: config_path's obs is configured by vLLM's dictConfig
        # after the plugin loaded (off), whose hook then routes vLLM's *_once.
        counted = kind == "vllm_once"
        assert [1] * counted == [x["suppressed_count"] for x in summaries]
        record = json.loads(lines[0])
        got[kind] = (
            record["body"],
            record["logger"],
            record["rank"],
            record["world_size"],
            Path(record["code.file.path"]).name,
            record["code.line.number"] - offset,
        )
    assert {
        kind: (f"{kind} {where}", "vllm.obs_test", 0, 1, LAUNCHER.name, LINE_INFO)
        for kind in ("vllm_info", "vllm_warning", "vllm_once")
    } == got


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_record_reaches_the_receiver_once(
    runs: tuple[dict[str, Run], OTLPReceiver], scenario: str
) -> None:
    """Every process's records arrive at the OTLP receiver, each exactly once."""
    receiver = runs[1]
    mine = [
        r
        for r in receiver.records
        if r["resource"].get("scenario") == scenario
        and r["body"].startswith("vllm_")
        and not r["body"].startswith("vllm_early")  # plugin_cli_order's: its own test
        and r["event_name"] != "log_repeats_suppressed"  # the info_once repeat, counted
    ]
    expected = sorted(
        f"{kind} {where}"
        for kind in ("vllm_info", "vllm_warning", "vllm_once")
        for where in ("main", *METHODS[scenario])
    )
    assert expected == sorted(r["body"] for r in mine)


def test_fi_ar_getters_are_comms_and_report_no_cuda(
    runs: tuple[dict[str, Run], OTLPReceiver],
) -> None:
    """OBS_VLLM_FI_AR=1: after vLLM loads its plugins, the getters its fusion modules import
    are comm's; on a CPU both return None and the receiver gets one
    workspace_terminal_failure per chain with the real flashinfer failure, reason no_cuda."""
    run, receiver = runs[0]["plugin"], runs[1]
    (line,) = run.lines_with("FI_AR ")
    assert {"modules": ["comm.flashinfer_allreduce"] * 3, "results": [True, True]} == json.loads(
        line.split("FI_AR ", 1)[1]
    )
    terminal = [
        r
        for r in receiver.records
        if r["event_name"] == "workspace_terminal_failure"
        and r["resource"].get("scenario") == "plugin"
    ]
    assert [("fi_ar", ["no_cuda", "no_cuda"]), ("fi_ar_quant", ["no_cuda", "no_cuda"])] == sorted(
        (r["attributes"]["chain"], list(r["attributes"]["reasons"])) for r in terminal
    )


@pytest.mark.parametrize("where", METHODS["plugin_cli_order"])
def test_cli_order_worker_routes_from_vllms_configure_logging_on(
    runs: tuple[dict[str, Run], OTLPReceiver], where: str
) -> None:
    """A config built and applied before the plugins loaded (vLLM's text handler on
    ``vllm``; code that calls ``configure_logging_from_args`` before building its engine),
    handed to a worker that applies it, then loads the plugins. The plugin made that
    config name obs' dictConfig when it loaded, so a forked worker and a spawned one (which
    has not imported obs before it applies the config) both write every vllm record as one
    obs JSON line from their ``configure_logging`` on, and export it once. Nothing in
    vLLM's text format."""
    run, receiver = runs[0]["plugin_cli_order"], runs[1]
    assert 0 == run.code, run.err[-3000:]
    kinds = ("vllm_early", "vllm_info")
    lines = {kind: run.lines_with(f"{kind} {where}") for kind in kinds}
    assert {kind: [True] for kind in kinds} == {
        kind: [ln.startswith("{") and json.loads(ln)["body"] == f"{kind} {where}" for ln in got]
        for kind, got in lines.items()
    }
    assert [] == [ln for ln in run.lines_with(f" {where}") if not ln.startswith("{")]
    exported = [
        r["body"]
        for r in receiver.records
        if r["resource"].get("scenario") == "plugin_cli_order"
        and r["body"] == f"{kinds[0]} {where}"
    ]
    assert [f"{kinds[0]} {where}"] == exported
