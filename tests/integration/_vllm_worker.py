"""Launcher for the real-vLLM logging tests: a vLLM main process and its workers.

The main process does what vLLM 0.33 does when an engine is built: load the general plugins
(``EngineArgs.__post_init__``), then apply ``LoggingConfig()`` (``create_engine_config``).
Workers are started with the ``fork`` and ``spawn`` contexts and do what
``WorkerProc.worker_main`` and ``WorkerBase.__init__`` do: apply the config they were
handed, then load the general plugins. Every process logs the same records through vLLM's
own ``init_logger``; the test reads stdout, stderr and the OTLP receiver.

With ``cli`` among the arguments the main process applies its config first, as code that
calls ``configure_logging_from_args`` before it builds an engine does (``vllm serve`` loads
the plugins while it builds its parser, before that call): the ``LoggingConfig`` is built
and applied before the plugins load, naming no config file; each worker then also logs a
``vllm_early`` record between applying the config it was handed and loading the plugins.

With ``OBS_VLLM_FI_AR=1`` the main process also calls vLLM's FlashInfer allreduce getters
on a one-rank gloo group and prints ``FI_AR {json}``: which module the getters vLLM's
fusion modules import come from, and whether each returned None.

With ``untraced`` among the arguments, spawned workers start without coverage's tracer
(they import vLLM again; the main process and the forked workers run the same obs lines).

Usage: python _vllm_worker.py [untraced] [cli] [fork] [spawn]  (exit code: the worst of
the processes')
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from typing import Any


def log_all(where: str) -> None:
    """The records each process logs (their line numbers are what the test expects)."""
    from vllm.logger import init_logger

    import obs

    log = init_logger("vllm.obs_test")
    log.info("vllm_info %s", where)  # LINE_INFO
    log.warning("vllm_warning %s", where)
    log.info_once("vllm_once %s", where)
    log.info_once("vllm_once %s", where)
    obs.flush(timeout=10.0)


def worker_main(logging_config: Any, where: str, early: bool = False) -> None:
    """As vLLM's worker start-up: the handed config first, then the plugins."""
    from vllm.logger import configure_logging, init_logger

    if logging_config is not None:
        configure_logging(logging_config)
    if early:  # as platform.log_warnings() and the engine core's set-up do
        init_logger("vllm.obs_test").warning("vllm_early %s", where)
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    log_all(where)


def fi_ar() -> None:
    """vLLM's getters after the plugins loaded, called as vLLM's fusion code does."""
    import json

    if os.environ.get("OBS_VLLM_FI_AR") != "1":
        return

    import torch
    import torch.distributed as dist
    import vllm.distributed.device_communicators.flashinfer_all_reduce as vllm_fi_ar
    from vllm.distributed.device_communicators.flashinfer_all_reduce import (
        destroy_fi_ar_workspace,
        get_fi_ar_quant_workspace,
        get_fi_ar_workspace,
    )

    import obs

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    group = dist.new_group([0], backend="gloo")
    kwargs: dict[str, Any] = {
        "world_size": 1,
        "rank": 0,
        "max_token_num": 128,
        "hidden_dim": 256,
        "dtype": torch.bfloat16,
        "group": group,
    }
    ws = vllm_fi_ar.get_fi_ar_workspace(**kwargs)
    qws = get_fi_ar_quant_workspace(**kwargs)
    destroy_fi_ar_workspace()
    getters = (get_fi_ar_workspace, get_fi_ar_quant_workspace, destroy_fi_ar_workspace)
    result = {"modules": [f.__module__ for f in getters], "results": [ws is None, qws is None]}
    print("FI_AR", json.dumps(result), flush=True)
    obs.flush(timeout=10.0)
    dist.destroy_process_group()


def main(methods: list[str]) -> int:
    """The main process, then one worker per start method in ``methods``."""
    from vllm.plugins import load_general_plugins

    cli = "cli" in methods
    untraced = "untraced" in methods
    methods = [m for m in methods if m not in {"cli", "untraced"}]
    if cli:  # the config is built and applied before the plugins load
        import argparse

        from vllm.logger import configure_logging_from_args

        config = configure_logging_from_args(argparse.Namespace())
        load_general_plugins()
    else:  # an engine built in code: plugins (EngineArgs), then LoggingConfig()
        load_general_plugins()
        from vllm.config.logging import LoggingConfig
        from vllm.logger import configure_logging_if_needed

        config = LoggingConfig()
        configure_logging_if_needed(config)
    log_all("main")
    codes = []
    for method in methods:
        if method == "spawn" and untraced:  # a spawned worker inherits os.environ
            os.environ.pop("COVERAGE_PROCESS_START", None)
        proc = multiprocessing.get_context(method).Process(
            target=worker_main, args=(config, method, cli)
        )
        proc.start()
        proc.join(120)
        codes.append(proc.exitcode if proc.exitcode is not None else 99)
    fi_ar()  # after the workers: no fork under gloo's threads
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
