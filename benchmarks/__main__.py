"""``python -m benchmarks [--quick]``: run every benchmark module and print one table."""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
from typing import Any

MODULES = ("benchmarks.bench_core", "benchmarks.bench_otel", "benchmarks.bench_comm")


def _fmt(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.3g}"


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 0 even when a target is missed (the table says so)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="fewer loops (smoke run)")
    parser.add_argument("--only", help="run only modules whose name contains this")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for name in MODULES:
        if args.only and args.only not in name:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            print(f"# {name}: not available ({exc})", file=sys.stderr)
            continue
        rows.extend(module.run(quick=args.quick))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}"
    )
    print("| benchmark | ours | anchor | unit | ratio | target | met | anchor / note |")
    print("|---|---:|---:|---|---:|---:|---|---|")
    for r in rows:
        print(
            f"| {r['name']} | {_fmt(r['ours'])} | {_fmt(r['anchor'])} | {r['unit']} | "
            f"{r['ratio']:.2f} | <= {r['target']} | {'yes' if r['ok'] else 'NO'} | {r['note']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
