"""vLLM's ``*_once`` path, re-implemented faithfully as the benchmark anchor.

From vllm/logger.py and vllm/distributed/parallel_state.py: ``warning_once`` checks the
scope (importing ``is_local_first_rank`` inside the function, as vLLM does), then calls an
``lru_cache``-wrapped printer keyed on ``(logger, msg, *args)``.
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache
from typing import Any

import torch

_WORLD: Any = None


def is_local_first_rank() -> bool:
    """vLLM's check, verbatim in logic."""
    try:
        if _WORLD is not None:
            return _WORLD.local_rank == 0
        if not torch.distributed.is_initialized():
            return True
        try:
            return int(os.environ["LOCAL_RANK"]) == 0
        except Exception:
            return torch.distributed.get_rank() == 0
    except Exception:
        return True


def is_global_first_rank() -> bool:
    """vLLM's check, verbatim in logic."""
    try:
        if _WORLD is not None:
            return _WORLD.is_first_rank
        if not torch.distributed.is_initialized():
            return True
        return torch.distributed.get_rank() == 0
    except Exception:
        return True


def _should_log_with_scope(scope: str) -> bool:
    if scope == "global":
        from benchmarks._vllm_anchor import is_global_first_rank as check

        return check()
    if scope == "local":
        from benchmarks._vllm_anchor import is_local_first_rank as check

        return check()
    return True


@lru_cache
def _print_warning_once(logger: logging.Logger, msg: str, *args: Any) -> None:
    logger.warning(msg, *args, stacklevel=3)


class VllmStyleLogger:
    """The methods vLLM patches onto a ``logging.Logger``."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def warning_once(self, msg: str, *args: Any, scope: str = "local") -> None:
        if not _should_log_with_scope(scope):
            return
        _print_warning_once(self.logger, msg, *args)
