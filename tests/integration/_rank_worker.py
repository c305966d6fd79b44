"""Helper for test_rank_multiprocess: run 4 ranks (2 nodes x 2) that each log three
``info_once`` calls (scope global, local, process) and one scoped WARNING as JSON lines to
its own file.

    python _rank_worker.py MODE OUT_DIR [MASTER_PORT]

MODE is ``torch`` (torchrun env + a real gloo ``init_process_group``), ``torchrun``,
``slurm`` or ``openmpi`` (only that launcher's env vars, no torch at all). The parent imports
torch once (torch mode only) and forks the 4 ranks, so the job costs one torch import; each
rank configures obs itself after the fork (the unconfigured module is imported once, before).
Each rank writes ``rank<N>.jsonl`` (the log) and ``rank<N>.json`` (what obs resolved).
"""

from __future__ import annotations

import json
import os
import sys
import traceback

WORLD, PER_NODE = 4, 2


def launcher_env(mode: str, rank: int) -> dict[str, str]:
    """The variables the launcher of ``mode`` sets for ``rank`` of 2 nodes x 2."""
    local, node = rank % PER_NODE, rank // PER_NODE
    if mode in ("torch", "torchrun"):
        return {
            "RANK": str(rank),
            "LOCAL_RANK": str(local),
            "WORLD_SIZE": str(WORLD),
            "LOCAL_WORLD_SIZE": str(PER_NODE),
            "GROUP_RANK": str(node),
        }
    if mode == "slurm":
        return {
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(local),
            "SLURM_NODEID": str(node),
            "SLURM_NTASKS": str(WORLD),
            "SLURM_NTASKS_PER_NODE": str(PER_NODE),
        }
    if mode == "openmpi":  # NODE_RANK is the rank on the node, as mpirun sets it
        return {
            "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
            "OMPI_COMM_WORLD_SIZE": str(WORLD),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(PER_NODE),
            "OMPI_COMM_WORLD_NODE_RANK": str(local),
        }
    raise SystemExit(f"unknown mode {mode!r}")


def run_rank(mode: str, rank: int, out_dir: str, port: str) -> None:
    """One rank: (init the process group,) configure obs, log the three scopes."""
    os.environ.update(launcher_env(mode, rank))
    if mode == "torch":
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=WORLD)

    import obs
    from obs._config import STATE

    obs.configure(
        format="json",
        file=os.path.join(out_dir, "rank{rank}.jsonl"),  # filled in by obs per process
        sdk_disabled=True,
        repeat_summary_seconds=0,
    )
    log = obs.get_logger("rank_worker")
    for _ in range(3):
        log.info_once("scope_global", scope="global")
        log.info_once("scope_local", scope="local")
        log.info_once("scope_process", scope="process")
    # OBS_FILE is a shipping sink: a WARNING reaches it from every rank whatever its scope.
    log.warning("shipped_warning", scope="global")
    info = STATE.runtime.resolver.current()  # type: ignore[union-attr]
    obs.shutdown()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "source": info.source,
                "rank": info.rank,
                "local_rank": info.local_rank,
                "node_rank": info.node_rank,
                "world_size": info.world_size,
                "torch_imported": "torch" in sys.modules,
            },
            f,
        )
    if mode == "torch":
        dist.barrier()
        dist.destroy_process_group()


def main() -> int:
    """Fork the 4 ranks and return non-zero if any of them failed."""
    mode, out_dir = sys.argv[1], sys.argv[2]
    port = sys.argv[3] if len(sys.argv) > 3 else "0"
    if mode == "torch":
        import torch.distributed  # noqa: F401 - once, before the fork

        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # all ranks on loopback
    import obs  # noqa: F401 - imported (never configured) before the fork: one import per job

    pids = []
    for rank in range(WORLD):
        pid = os.fork()
        if pid == 0:  # the rank
            code = 0
            try:
                run_rank(mode, rank, out_dir, port)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    failed = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        failed += os.waitstatus_to_exitcode(status) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
