"""A rank of the probe: configure obs, join the process group, run both getters, write
the report, shut obs down (its delivery counters go into the report)."""

from __future__ import annotations

__all__ = ["ERROR_LIMIT", "error_line", "init_dist", "rank_main", "run_getters"]

import contextlib
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

from comm.probe.pipe import send
from comm.probe.spec import ProbeSpec
from obs.encode import error_text
from obs.fallback import Attempt, error_type

#: The longest error message a rank's report keeps (its type name comes before it).
ERROR_LIMIT = 2000


def error_line(exc: BaseException) -> str:
    """``"SomeError: message"`` for a rank's report, as obs writes an exception's text in
    its events: the type's own name and the message scrubbed (URL passwords, bearer
    tokens, secret ``name=value`` pairs), then cut to :data:`ERROR_LIMIT` characters, so
    a secret or a megabyte in an exception never reaches the report, ``--json`` or the
    screen. Never raises."""
    return f"{error_type(exc)}: {error_text(exc, ERROR_LIMIT)}"


def rank_main(spec: ProbeSpec, rank: int, fd: int) -> int:
    """Configure obs, join the process group, run both getters, write the report."""
    started = time.monotonic()
    report: dict[str, Any] = {
        "rank": rank,
        "local_rank": spec.local_rank(rank),
        "node": spec.node_of(rank),
        "pid": os.getpid(),
        "dist_backend": "?",
        "chains": [],
        "error": None,
    }
    send(
        fd,
        {
            "kind": "started",
            "rank": rank,
            "pid": os.getpid(),
            "node": report["node"],
            "local_rank": report["local_rank"],
        },
    )
    obs_mod: Any = None
    try:
        import obs  # noqa: PLC0415

        obs_mod = obs
        obs.configure()
        report["dist_backend"], group = init_dist(spec, rank)
        report["chains"] = run_getters(spec, rank, group)
    except Exception as exc:
        report["error"] = error_line(exc)
    finally:
        report["duration_s"] = round(time.monotonic() - started, 3)
        if obs_mod is not None:
            with contextlib.suppress(Exception):
                obs_mod.shutdown(timeout=math.inf)  # bounded by OBS_SHUTDOWN_TIMEOUT (3 s)
                report["delivery"] = obs_mod.delivery()
        path = os.path.join(spec.log_dir, f"rank-{rank}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(report, f)
        send(fd, {"kind": "done", "rank": rank, "duration_s": report["duration_s"]})
    return 0


def init_dist(spec: ProbeSpec, rank: int) -> tuple[str, Any]:
    """Join the process group (gloo, or nccl with one GPU per local rank); its backend."""
    import datetime  # noqa: PLC0415

    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    import obs.stdlib  # noqa: PLC0415

    obs.stdlib.adopt_loggers()  # torch set up its own console loggers on import
    per_node = spec.ranks_per_node
    backend = spec.dist_backend
    if backend == "auto":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        backend = "nccl" if gpus >= per_node else "gloo"
    if backend == "nccl":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus < per_node:
            raise RuntimeError(
                f"--dist-backend nccl needs one CUDA GPU per local rank ({per_node}); "
                f"this machine has {gpus} (use --dist-backend gloo or auto)"
            )
        torch.cuda.set_device(rank % per_node)
    dist.init_process_group(
        backend,
        init_method="env://",
        rank=rank,
        world_size=spec.world_size,
        timeout=datetime.timedelta(seconds=spec.timeout),
    )
    return backend, dist.group.WORLD


def run_getters(spec: ProbeSpec, rank: int, group: Any) -> list[dict[str, Any]]:
    """Both getters with the spec's arguments: each one's outcome, attempts and error."""
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    from comm import flashinfer_allreduce as fa  # noqa: PLC0415

    dtype = getattr(torch, spec.dtype)
    args = (spec.world_size, rank, spec.max_token_num, spec.hidden_dim, dtype, group)
    getters: tuple[tuple[fa.Chain, Callable[..., Any]], ...] = (
        ("fi_ar", fa.get_fi_ar_workspace),
        ("fi_ar_quant", fa.get_fi_ar_quant_workspace),
    )
    out = []
    for chain, getter in getters:
        error, refused = None, None
        try:
            ws = getter(*args)
        except fa.BackendNotSupportedError as exc:  # the backend rules refused the topology
            ws, error, refused = None, error_line(exc), exc
        except ValueError as exc:  # another configuration error
            ws, error = None, error_line(exc)
        result = fa.default_manager().result(chain)
        if result is not None:
            attempts = [dataclasses.asdict(a) for a in result.attempts]
            outcome = "initialized" if result.ok else "terminal_failure"
            backend, reused = result.winner, result.reused
        else:  # refused before any attempt: say which backend was skipped, and why
            attempts = []
            if refused is not None:
                skipped = Attempt(refused.backend, refused.reason, None, None, 0.0, skipped=True)
                attempts.append(dataclasses.asdict(skipped))
            outcome, backend, reused = ("config_error" if error else "error"), None, False
        out.append(
            {
                "chain": chain,
                "outcome": outcome,
                "backend": backend,
                "reused": reused,
                "returned_none": ws is None,
                "attempts": attempts,
                "error": error,
            }
        )
    fa.destroy_fi_ar_workspace()
    dist.destroy_process_group()
    return out
