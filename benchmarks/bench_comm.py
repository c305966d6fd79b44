"""Cached-path cost of the workspace getters, side by side with a bare global check.

The contract: once the workspace exists, ``get_fi_ar_workspace(...)`` does no logging and
costs at most 2x a bare ``if _ws is not None: return _ws`` function with the same
signature. Both are timed interleaved (best of N repeats, so noise from other processes
hits both alike) and the ratio printed; ``--check`` exits 1 when it is above 2.

    python benchmarks/bench_comm.py [--check] [--number 200000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import sys
import timeit
from typing import Any

import obs
from benchmarks._harness import row
from comm import flashinfer_allreduce as fa


class _Workspace:
    backend = "trtllm"

    def destroy(self) -> None:
        pass


class _Factory:
    def create(self, *, backend, **_):
        return _Workspace()


_ws: object | None = _Workspace()


def bare(world_size, rank, max_token_num, hidden_dim, dtype, group):  # noqa: PLR0917
    """The baseline: vLLM's cached path."""
    if _ws is not None:
        return _ws
    return None


def measure(number: int, repeat: int) -> dict[str, float]:
    """Best seconds per call of the bare check and each cached getter, interleaved."""
    obs.configure(level="WARNING", format="json", stdlib_bridge=False, logs_exporter="none")
    manager = fa.FiArWorkspaces(_Factory(), backend="auto", nodes=1)
    fa.reset_default_manager(manager)
    args = (8, 0, 2048, 4096, "bfloat16", None)
    assert fa.get_fi_ar_workspace(*args) is not None
    assert fa.get_fi_ar_quant_workspace(*args) is not None
    candidates = {
        "bare global check": bare,
        "get_fi_ar_workspace": fa.get_fi_ar_workspace,
        "get_fi_ar_quant_workspace": fa.get_fi_ar_quant_workspace,
        "FiArWorkspaces.get_fi_ar_workspace": manager.get_fi_ar_workspace,
        "require_fi_ar_workspace": fa.require_fi_ar_workspace,
        "require_fi_ar_quant_workspace": fa.require_fi_ar_quant_workspace,
    }
    # The statement is the call itself (no lambda around it, which would dilute the ratio).
    stmt = "f(8, 0, 2048, 4096, 'bfloat16', None)"
    best = dict.fromkeys(candidates, float("inf"))
    try:
        for _ in range(repeat):  # interleaved: each round times every candidate once
            for name, fn in candidates.items():
                t = timeit.timeit(stmt, number=number, globals={"f": fn}) / number
                best[name] = min(best[name], t)
    finally:
        fa.reset_default_manager()
    return best


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks``: each cached getter vs the bare check."""
    best = measure(20_000 if quick else 200_000, 5 if quick else 15)
    base = best.pop("bare global check")
    return [
        row(
            f"cached {name}",
            t * 1e9,
            base * 1e9,
            t / base,
            1.2,
            "ns/call",
            "anchor: bare global check",
        )
        for name, t in best.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--check", action="store_true", help="exit 1 if the ratio is > 2")
    opts = parser.parse_args(argv)
    best = measure(opts.number, opts.repeat)
    base = best["bare global check"]
    worst = 0.0
    for name, t in best.items():
        ratio = t / base
        if name != "bare global check":
            worst = max(worst, ratio)
        print(f"{name:38s} {t * 1e9:7.1f} ns/call  {ratio:4.2f}x")
    verdict = "ok" if worst <= 2.0 else "TOO SLOW"
    print(f"worst cached-path ratio {worst:.2f}x (limit 2.00x): {verdict}")
    return 1 if opts.check and worst > 2.0 else 0


if __name__ == "__main__":
    sys.exit(main())
