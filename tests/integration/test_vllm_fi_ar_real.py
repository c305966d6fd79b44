"""OBS_VLLM_FI_AR=1 with the real vLLM 0.33 package and the real flashinfer on a CPU.

A real vLLM process loads its general plugins; afterwards the getters that vLLM's fusion
modules import (``from ...flashinfer_all_reduce import get_fi_ar_workspace, ...``) are
comm's, and calling vLLM's getter on a real gloo group emits comm's typed events with the
real flashinfer failure (terminal failure, reason ``no_cuda``), exported over OTLP. The
fusion modules themselves cannot be imported on a CPU-only torch (they need vLLM's
compiled ops), so which names they bind is read from their source.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from comm.vllm_fi_ar import FUSION_MODULES, GETTERS, VLLM_MODULE
from obs._receiver import OTLPReceiver

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180), pytest.mark.vllm]

SCRIPT = r"""
import json, sys
from vllm.plugins import load_general_plugins

load_general_plugins()
import torch, torch.distributed as dist
from vllm.distributed.device_communicators.flashinfer_all_reduce import (
    destroy_fi_ar_workspace, get_fi_ar_quant_workspace, get_fi_ar_workspace,
)
import vllm.distributed.device_communicators.flashinfer_all_reduce as vllm_fi_ar
import obs

dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
group = dist.new_group([0], backend="gloo")
kwargs = dict(world_size=1, rank=0, max_token_num=128, hidden_dim=256,
              dtype=torch.bfloat16, group=group)
ws = vllm_fi_ar.get_fi_ar_workspace(**kwargs)
qws = get_fi_ar_quant_workspace(**kwargs)
destroy_fi_ar_workspace()
print(json.dumps({
    "modules": [f.__module__ for f in (get_fi_ar_workspace, get_fi_ar_quant_workspace,
                                        destroy_fi_ar_workspace)],
    "results": [ws is None, qws is None],
}))
obs.flush(timeout=10.0)
dist.destroy_process_group()
"""


def _imported_names(module: str) -> set[str]:
    """The names ``module`` imports from vLLM's flashinfer_all_reduce module."""
    spec = importlib.util.find_spec("vllm")  # top level: found without importing vLLM
    assert spec is not None
    assert spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations))).parent
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text())
    return {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == VLLM_MODULE
        for alias in node.names
    }


@pytest.mark.parametrize("module", FUSION_MODULES)
def test_fusion_modules_bind_only_replaced_getters(module: str) -> None:
    """Each workspace getter a fusion module binds at import is one the plugin replaces."""
    getters = {n for n in _imported_names(module) if "fi_ar" in n}
    assert (True, set()) == (bool(getters), getters - set(GETTERS))


def test_vllm_getters_are_comms_and_report_no_cuda(tmp_path: Path) -> None:
    """After vLLM loads its plugins, the getters are comm's; on a CPU both return None and
    the receiver gets one workspace_terminal_failure per chain, reason no_cuda."""
    drop = ("OBS_", "OTEL_", "VLLM_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_", "OMPI_")
    with OTLPReceiver(grpc=False) as receiver:
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        env.update(
            OBS_VLLM="1",
            OBS_VLLM_FI_AR="1",
            OBS_FORMAT="json",
            OBS_SPOOL_DIR=str(tmp_path),
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.http_endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_BLRP_SCHEDULE_DELAY="50",
        )
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=160,
            check=False,
        )
        assert 0 == proc.returncode, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert {
            "modules": ["comm.flashinfer_allreduce"] * 3,
            "results": [True, True],
        } == out
        terminal = receiver.wait_for(
            2, predicate=lambda r: r["event_name"] == "workspace_terminal_failure"
        )
    assert [("fi_ar", ["no_cuda", "no_cuda"]), ("fi_ar_quant", ["no_cuda", "no_cuda"])] == sorted(
        (r["attributes"]["chain"], list(r["attributes"]["reasons"])) for r in terminal
    )
