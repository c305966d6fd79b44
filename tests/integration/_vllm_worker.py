"""Launcher for the real-vLLM logging tests: a vLLM main process and its workers.

The main process does what vLLM 0.33 does when an engine is built: load the general plugins
(``EngineArgs.__post_init__``), then apply ``LoggingConfig()`` (``create_engine_config``).
Workers are started with the ``fork`` and ``spawn`` contexts and do what
``WorkerProc.worker_main`` and ``WorkerBase.__init__`` do: apply the config they were
handed, then load the general plugins. Every process logs the same records through vLLM's
own ``init_logger``; the test reads stdout, stderr and the OTLP receiver.

Usage: python _vllm_worker.py [fork] [spawn]  (exit code: the worst of the processes')
"""

from __future__ import annotations

import multiprocessing
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


def worker_main(logging_config: Any, where: str) -> None:
    """As vLLM's worker start-up: the handed config first, then the plugins."""
    from vllm.logger import configure_logging

    if logging_config is not None:
        configure_logging(logging_config)
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    log_all(where)


def main(methods: list[str]) -> int:
    """The main process, then one worker per start method in ``methods``."""
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    from vllm.config.logging import LoggingConfig
    from vllm.logger import configure_logging_if_needed

    config = LoggingConfig()
    configure_logging_if_needed(config)
    log_all("main")
    codes = []
    for method in methods:
        proc = multiprocessing.get_context(method).Process(
            target=worker_main, args=(config, method)
        )
        proc.start()
        proc.join(120)
        codes.append(proc.exitcode if proc.exitcode is not None else 99)
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
