"""Multi-process export: 4 torch.distributed (gloo) ranks exporting into one OTLPReceiver.

The ranks are real processes (2 "nodes" x 2 local ranks, torchrun-style environment,
MASTER_ADDR=127.0.0.1 and a free port) that initialise a gloo process group, so the rank
comes from an initialised torch.distributed as in production. A launcher imports torch
once and forks the ranks (as torch.multiprocessing's fork start method does): importing
torch costs seconds of CPU per process, which would dominate the test otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from obs._receiver import OTLPReceiver

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(90),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch"),
]

WORLD = 4
LOCAL_WORLD = 2

LAUNCHER = r"""
import os, sys
import torch.distributed as dist
import obs

url, spool, port, world, local_world = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])


def rank_main(rank):
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank % local_world), LOCAL_WORLD_SIZE=str(local_world),
        GROUP_RANK=str(rank // local_world),
    )
    obs.configure(logs_exporter="otlp", otlp_endpoint=url, otlp_protocol="http/protobuf",
                  format="json", spool_dir=f"{spool}/{rank}", blrp_schedule_delay_ms=50)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    log = obs.get_logger("tests.multiprocess")
    log.error("mp_global_error", scope="global", detail="visible from every rank")
    log.info("mp_global_info", scope="global")
    dist.barrier()
    ok = obs.flush(timeout=10.0)
    dist.destroy_process_group()
    obs.shutdown(timeout=2.0)
    return 0 if ok else 3


pids = []
for rank in range(world):
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_global_error_from_every_rank_info_once(
    otlp_receiver: OTLPReceiver, tmp_path: Path
) -> None:
    """An ERROR logged with scope="global" reaches the receiver from all 4 ranks, each
    with its own rank attributes and resource; an INFO with the same scope arrives once."""
    args = [
        otlp_receiver.http_endpoint,
        str(tmp_path),
        str(free_port()),
        str(WORLD),
        str(LOCAL_WORLD),
    ]
    env_drop = ("OBS_", "OTEL_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_", "OMPI_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(env_drop)}
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=80,
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr[-3000:]

    errors = otlp_receiver.by_event("mp_global_error")
    assert list(range(WORLD)) == sorted(r["attributes"]["rank"] for r in errors)
    for record in errors:
        attrs, resource = record["attributes"], record["resource"]
        rank = attrs["rank"]
        expected = (rank, rank % LOCAL_WORLD, WORLD, rank // LOCAL_WORLD)
        assert expected == (
            attrs["rank"],
            attrs["local_rank"],
            attrs["world_size"],
            attrs["node_rank"],
        )
        assert expected == (
            resource["rank"],
            resource["local_rank"],
            resource["world_size"],
            resource["node_rank"],
        )
        assert resource["service.instance.id"].endswith(f":rank{rank}")
        assert (17, "visible from every rank") == (record["severity_number"], attrs["detail"])
    assert WORLD == len({r["resource"]["service.instance.id"] for r in errors})
    infos = otlp_receiver.by_event("mp_global_info")
    assert [0] == [r["attributes"]["rank"] for r in infos]
