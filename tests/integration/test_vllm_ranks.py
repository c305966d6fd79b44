"""Two real gloo ranks (torchrun-style env): vLLM's own scoped ``*_once`` through obs.

A launcher imports torch and vLLM once and forks the ranks (as the multiprocess tests do:
importing them costs seconds per process). Each rank loads vLLM's plugins (``OBS_VLLM=1``),
initialises a gloo group and logs through ``vllm.logger.init_logger`` with each scope,
twice. The JSON lines say which ranks logged.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.vllm]

LAUNCHER = r"""
import os, sys
import torch.distributed as dist
from vllm.logger import init_logger
from vllm.plugins import load_general_plugins

port = sys.argv[1]


def rank_main(rank):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                      GROUP_RANK="0")
    load_general_plugins()
    dist.init_process_group("gloo", rank=rank, world_size=2)
    log = init_logger("vllm.ranks")
    for _ in range(2):
        log.warning_once("once_global", scope="global")
        log.warning_once("once_local", scope="local")
        log.warning_once("once_process", scope="process")
    dist.barrier()
    import obs
    obs.flush(timeout=5.0)
    dist.destroy_process_group()
    return 0


pids = []
for rank in range(2):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = rank_main(rank)
        finally:
            os._exit(code)
    pids.append(pid)
sys.exit(max(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_vllm_scoped_once_on_the_right_ranks() -> None:
    """global and local (one node): rank 0 only; process: both ranks; each once, its
    repeat counted where it was written (vLLM's own *_once go through obs' dedup)."""
    drop = ("OBS_", "OTEL_", "VLLM_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_", "OMPI_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(OBS_VLLM="1", OBS_FORMAT="json")
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(_free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr[-3000:]
    got: dict[str, list[int]] = {}
    counted: dict[str, list[int]] = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        if "once_" in line:  # every such line must be obs JSON
            record = json.loads(line)
            if record["event"] == "log_repeats_suppressed":
                counted.setdefault(record["original_event"], []).append(record["rank"])
            else:
                got.setdefault(record["body"], []).append(record["rank"])
    expected = {"once_global": [0], "once_local": [0], "once_process": [0, 1]}
    assert expected == {k: sorted(v) for k, v in got.items()}
    assert expected == {k: sorted(v) for k, v in counted.items()}
