"""Interleaved timing: ours and the anchor alternate, so machine noise hits both alike."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any


def per_call_ns(fn: Callable[[], Any], loops: int) -> float:
    """Mean ns per call of ``fn`` over ``loops`` calls (GC off while timing)."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        return (time.perf_counter_ns() - start) / loops
    finally:
        if gc_was:
            gc.enable()


def compare(
    ours: Callable[[], Any], anchor: Callable[[], Any], loops: int, rounds: int = 7
) -> tuple[float, float, float]:
    """(ours ns, anchor ns, median of per-round ratios), rounds interleaved."""
    per_call_ns(ours, loops // 10 or 1)  # warm both up
    per_call_ns(anchor, loops // 10 or 1)
    o, a, ratios = [], [], []
    for _ in range(rounds):
        x = per_call_ns(ours, loops)
        y = per_call_ns(anchor, loops)
        o.append(x)
        a.append(y)
        ratios.append(x / y)
    return statistics.median(o), statistics.median(a), statistics.median(ratios)


def row(  # noqa: PLR0917 - a table row reads best positionally
    name: str, ours: float, anchor: float, ratio: float, target: float, unit: str, note: str = ""
) -> dict[str, Any]:
    """One table row; ``ok`` says whether the ratio meets its target (<=)."""
    return {
        "name": name,
        "ours": ours,
        "anchor": anchor,
        "unit": unit,
        "ratio": ratio,
        "target": target,
        "ok": ratio <= target,
        "note": note,
    }
