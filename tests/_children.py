"""Child processes that run without coverage's tracer (``make test`` measures children).

The tracer slows a child's imports of torch, flashinfer or vLLM by half. Children whose
data coverage never saves (the probe's launcher and ranks leave through ``os._exit``; a
child run in a temporary folder writes its data there, never combined) or whose obs and
comm lines other measured processes run, start untraced.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: The variable coverage's start-up hook reads in every new interpreter.
COVERAGE_VAR = "COVERAGE_PROCESS_START"
#: Its value in the test process (None when the run is not measured).
_MEASURED = os.environ.get(COVERAGE_VAR)
#: A sitecustomize that clears the variable in a child once its own coverage has started.
_SITE = Path(__file__).resolve().parent / "_untraced_site"


def untraced(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without coverage."""
    return {k: v for k, v in env.items() if k != COVERAGE_VAR}


def traced_parent(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a child that is measured while the processes it starts are not (the
    probe's command line: its launcher and ranks never save coverage data)."""
    if _MEASURED is None:
        return dict(env)
    path = os.pathsep.join(p for p in (str(_SITE), env.get("PYTHONPATH")) if p)
    return {**env, COVERAGE_VAR: _MEASURED, "PYTHONPATH": path}
