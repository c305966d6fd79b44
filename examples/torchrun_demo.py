"""The FlashInfer allreduce workspace getters under torchrun, obs configured from env only.

    OTEL_SERVICE_NAME=fi-ar-demo OBS_FORMAT=json \\
        torchrun --nproc-per-node 2 examples/torchrun_demo.py

Each rank joins a process group (nccl when CUDA is available, else gloo on CPU), calls
``get_fi_ar_workspace`` and ``get_fi_ar_quant_workspace`` with vLLM's signature, prints
one line per chain, and exits 0 when both workspaces exist on this rank, 3 when either is
unavailable (a ``workspace_terminal_failure`` event was reported), once every rank has
reported (torchrun stops the other ranks when one exits non-zero). On a machine without
GPUs every rank reports the real failure story (mnnvl, then trtllm: ``no_cuda``).

obs reads only its environment (``obs.configure()`` without arguments): ``OBS_FORMAT``,
``OBS_FILE``, ``OBS_LEVEL``, ``OTEL_SERVICE_NAME``, and ``OTEL_EXPORTER_OTLP_ENDPOINT``
to export to a collector (see docs/OPERATIONS.md). ``COMM_FI_AR_BACKEND`` picks the
backend (auto, mnnvl, trtllm).
"""

from __future__ import annotations

import argparse
import os
import sys

import obs

EXIT_OK, EXIT_TERMINAL = 0, 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Workspace sizes (obs takes no arguments: it is configured from the environment)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--max-token-num", type=int, default=2048)
    parser.add_argument("--hidden-dim", type=int, default=4096)
    parser.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run both getters on this rank; 0 when both workspaces exist, 3 otherwise."""
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    from comm import flashinfer_allreduce as fi_ar

    # After importing torch, so its console loggers are adopted (OBS_ADOPT_LOGGERS).
    obs.configure()  # OBS_* / OTEL_* environment variables only
    log = obs.get_logger("examples.torchrun_demo")

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    try:
        world_size, rank = dist.get_world_size(), dist.get_rank()
        dtype = getattr(torch, args.dtype)
        group = dist.group.WORLD
        workspaces = {
            "fi_ar": fi_ar.get_fi_ar_workspace(
                world_size, rank, args.max_token_num, args.hidden_dim, dtype, group
            ),
            "fi_ar_quant": fi_ar.get_fi_ar_quant_workspace(
                world_size, rank, args.max_token_num, args.hidden_dim, dtype, group
            ),
        }
        manager = fi_ar.default_manager()
        for chain, workspace in workspaces.items():
            result = manager.result(chain)  # type: ignore[arg-type]
            detail = result.describe() if result is not None else "no result"
            outcome = f"backend {workspace.backend}" if workspace is not None else "UNAVAILABLE"
            print(f"rank {rank}/{world_size} {chain}: {outcome} ({detail})", flush=True)
        ok = all(w is not None for w in workspaces.values())
        log.info("torchrun_demo_finished", ok=ok, chains=sorted(workspaces))
        return EXIT_OK if ok else EXIT_TERMINAL
    finally:
        fi_ar.destroy_fi_ar_workspace()
        obs.shutdown()  # this rank's records delivered (or spooled) before it may exit
        # torchrun stops every other rank once one exits non-zero: exit only when all have
        # reported, or a faster rank's exit 3 cuts a slower rank's lines and records off.
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
