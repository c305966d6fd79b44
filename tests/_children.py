"""Child processes that run without coverage's tracer (``make test`` measures children)."""

from __future__ import annotations

from collections.abc import Mapping

#: The variable coverage's start-up hook reads in every new interpreter.
COVERAGE_VAR = "COVERAGE_PROCESS_START"


def untraced(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without coverage: for children that import torch or vLLM (the tracer slows
    their imports by half) whose obs and comm lines other measured children already run."""
    return {k: v for k, v in env.items() if k != COVERAGE_VAR}
