"""CPU-time bounds for tests that guard a cost (an unbounded walk took 0.5 s to 1 s a call).

The calling thread's CPU time, not wall time: a loaded machine's wait for a core does not
inflate it (wall time read 51-104 ms of 50 with four CPU hogs on two cores). Coverage
traces every line, about doubling it, so a bound is twice as wide under a tracer.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


def least_cpu(call: Callable[[], Any], rounds: int = 3) -> float:
    """The least CPU time of the calling thread over ``rounds`` calls of ``call``."""
    best = float("inf")
    for _ in range(rounds):
        start = time.thread_time()
        call()
        best = min(best, time.thread_time() - start)
    return best


def cpu_bound(seconds: float) -> float:
    """``seconds``, twice that while a tracer (coverage) runs."""
    return seconds * 2 if sys.gettrace() is not None else seconds
