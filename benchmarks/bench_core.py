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
    import obs.testing

    obs.testing.reset()
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


def _adversarial() -> list[tuple[str, Any]]:
    """Inputs that cost the first release seconds per call, as (name, call(log))."""
    big_dict = {f"k{i}": i for i in range(1_000_000)}
    big_list = list(range(1_000_000))
    chain: BaseException = ValueError("root")
    for i in range(50_000):
        err = RuntimeError(i)
        err.__cause__ = chain
        chain = err
    huge_key = {"k" * 50_000_000: 1}
    huge_str = "y" * 50_000_000
    return [
        ("1M-key dict value", lambda log: log.info("adv", d=big_dict)),
        ("1M-item list in a once key", lambda log: log.warning_once("adv", ids=big_list)),
        ("50,000-deep cause chain", lambda log: log.error("adv", exc_info=chain)),
        ("50 MB key in a dict value", lambda log: log.info("adv", d=huge_key)),
        ("50 MB field name", lambda log: log.info("adv", **huge_key)),
        ("50 MB string value", lambda log: log.info("adv", s=huge_str)),
        ("10**5000", lambda log: log.info("adv", n=10**5000)),
        (
            "300 fields of 2 KB",
            lambda log: log.info("adv", **{f"f{i}": "z" * 2000 for i in range(300)}),
        ),
    ]


def bench_worst_case(rounds: int) -> dict[str, Any]:
    """The slowest single call over adversarial inputs, against the 5 ms budget per call."""
    obs = _configure_obs()
    sink, saved = _Sink(), sys.stderr
    sys.stderr = sink
    times: dict[str, float] = {}
    try:
        log = obs.get_logger("bench")
        for name, call in _adversarial():
            call(log)  # first call: once keys, caches
            samples = []
            for _ in range(rounds):
                start = time.perf_counter_ns()
                call(log)
                samples.append((time.perf_counter_ns() - start) / 1e6)
            times[name] = statistics.median(samples)
    finally:
        sys.stderr = saved
        obs.testing.reset()
    worst = max(times, key=times.__getitem__)
    return row(
        "worst-case call, adversarial inputs (bounded cost)",
        times[worst],
        5.0,
        times[worst] / 5.0,
        1.0,
        "ms",
        f"anchor = the 5 ms budget per call; worst: {worst}; "
        + ", ".join(f"{k} {v:.2f}" for k, v in times.items()),
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
        bench_worst_case(3 if quick else 7),
    ]
