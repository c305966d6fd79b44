"""obs core benchmarks: each figure is ours / an anchor measured side by side in this run."""

from __future__ import annotations

import gc
import io
import logging
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks._harness import compare, row


class _Sink(io.TextIOBase):
    """A text stream that discards writes (like /dev/null without the syscall)."""

    def write(self, s: str) -> int:
        return len(s)


def _configure_obs(**kw: Any) -> Any:
    import obs

    obs.testing.reset() if hasattr(obs, "testing") else None
    obs.configure(format="json", stdlib_bridge=False, logs_exporter="none", **kw)
    return obs


def bench_warning_once_repeat(loops: int) -> dict[str, Any]:
    """A suppressed ``warning_once`` repeat vs vLLM's lru_cache ``warning_once``."""
    import torch  # noqa: F401 - both sides see torch imported, as in vLLM

    import obs
    import obs.testing
    from benchmarks._vllm_anchor import VllmStyleLogger

    obs.testing.reset()
    obs.configure(format="json", stdlib_bridge=False, logs_exporter="none")
    ours = obs.get_logger("bench")
    std = logging.getLogger("bench.vllm")
    std.propagate = False
    std.addHandler(logging.NullHandler())
    theirs = VllmStyleLogger(std)
    ours.warning_once("flag_deprecated", flag="x")
    theirs.warning_once("flag %s deprecated", "x")
    o, a, r = compare(
        lambda: ours.warning_once("flag_deprecated", flag="x"),
        lambda: theirs.warning_once("flag %s deprecated", "x"),
        loops,
    )
    obs.testing.reset()
    return row(
        "repeated warning_once (suppressed)", o, a, r, 1.0, "ns/call", "anchor: vLLM lru_cache path"
    )


def bench_below_level(loops: int) -> dict[str, Any]:
    """A call below the level vs structlog's make_filtering_bound_logger."""
    import structlog

    import obs
    import obs.testing

    obs.testing.reset()
    obs.configure(format="json", stdlib_bridge=False, logs_exporter="none", level="INFO")
    ours = obs.get_logger("bench")
    theirs = structlog.wrap_logger(
        structlog.WriteLogger(_Sink()),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        processors=[structlog.processors.JSONRenderer()],
    ).bind()  # the concrete filtering logger, not the lazy proxy
    o, a, r = compare(
        lambda: ours.debug("skipped", a=1), lambda: theirs.debug("skipped", a=1), loops
    )
    obs.testing.reset()
    return row("below-level call", o, a, r, 1.5, "ns/call", "anchor: make_filtering_bound_logger")


def bench_full_chain(loops: int) -> dict[str, Any]:
    """One emitted event to a JSON line through the whole chain vs a minimal structlog chain."""
    import orjson
    import structlog

    import obs
    import obs.testing

    sink = _Sink()
    saved = sys.stderr
    sys.stderr = sink  # obs writes to the stream it finds at write time
    try:
        obs.testing.reset()
        obs.configure(format="json", stdlib_bridge=False, logs_exporter="none", stream="stderr")
        ours = obs.get_logger("bench")
        theirs = structlog.wrap_logger(
            structlog.WriteLogger(_Sink()),
            wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.JSONRenderer(
                    serializer=lambda o, **_: orjson.dumps(o).decode()
                ),
            ],
        ).bind()  # the concrete bound logger, not the lazy proxy
        o, a, r = compare(
            lambda: ours.info("request_done", model="llama", tokens=128, latency_ms=12.5),
            lambda: theirs.info("request_done", model="llama", tokens=128, latency_ms=12.5),
            loops,
        )
    finally:
        sys.stderr = saved
        obs.testing.reset()
    return row(
        "one event -> JSON line (full chain)",
        o,
        a,
        r,
        1.5,
        "ns/call",
        "ours: +rank, severity, scope, dedup, callsite, redaction; "
        "anchor: add_log_level+TimeStamper+orjson",
    )


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    return time.perf_counter() - start


def bench_import(rounds: int) -> dict[str, Any]:
    """``python -c 'import obs'`` wall time vs importing structlog and the OTel logs SDK."""
    ours_cmd = [
        sys.executable,
        "-c",
        "import obs, sys; assert 'torch' not in sys.modules and 'flashinfer' not in sys.modules",
    ]
    anchor_cmd = [sys.executable, "-c", "import structlog, opentelemetry.sdk._logs"]
    _wall(ours_cmd)
    _wall(anchor_cmd)
    o, a = [], []
    for _ in range(rounds):
        o.append(_wall(ours_cmd))
        a.append(_wall(anchor_cmd))
    mo, ma = statistics.median(o) * 1e3, statistics.median(a) * 1e3
    return row(
        "python -c 'import obs'", mo, ma, mo / ma, 1.3, "ms", "torch not imported (asserted)"
    )


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_dedup_memory(capacity: int, distinct: int) -> dict[str, Any]:
    """RSS growth for ``distinct`` keys vs growth for ``capacity`` keys (the bound)."""
    from obs.dedup import Deduper, make_key

    gc.collect()
    deduper = Deduper(capacity=capacity, summary_seconds=0)
    base = _rss_bytes()
    for i in range(capacity):
        deduper.admit(make_key("bench", 30, "evt", {"i": i}), event="evt", level=30)
    at_capacity = _rss_bytes() - base
    for i in range(capacity, distinct):
        deduper.admit(make_key("bench", 30, "evt", {"i": i}), event="evt", level=30)
    gc.collect()
    after = _rss_bytes() - base
    assert len(deduper) == capacity
    return row(
        f"dedup RSS growth, {distinct:,} distinct keys",
        after / 2**20,
        max(at_capacity, 1) / 2**20,
        after / max(at_capacity, 1),
        1.2,
        "MiB",
        f"anchor: growth at capacity ({capacity:,} keys)",
    )


def run(quick: bool = False) -> list[dict[str, Any]]:
    """All core rows; ``quick`` shrinks loop counts for a smoke run."""
    loops = 20_000 if quick else 200_000
    return [
        bench_warning_once_repeat(loops),
        bench_below_level(loops),
        bench_full_chain(loops // 4),
        bench_import(3 if quick else 15),
        bench_dedup_memory(10_000, 100_000 if quick else 1_000_000),
    ]
