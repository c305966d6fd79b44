"""obs core benchmarks: each figure is ours / an anchor measured side by side in this run."""

from __future__ import annotations

import builtins
import gc
import io
import json
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


def _reset() -> None:
    import obs.testing

    obs.testing.reset()


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
        "repeated warning_once (suppressed)",
        o,
        a,
        r,
        0.35,
        "ns/call",
        "anchor: vLLM's real path (scope check + lru_cache)",
    )


def bench_warning_once_vs_lru(loops: int) -> dict[str, Any]:
    """A suppressed ``warning_once`` repeat vs a bare ``lru_cache``-wrapped printer."""
    import functools

    obs = _configure_obs()
    ours = obs.get_logger("bench")

    @functools.lru_cache
    def printer(msg: str, *args: Any) -> None:
        return None

    ours.warning_once("flag_deprecated", flag="x")
    o, a, r = compare(
        lambda: ours.warning_once("flag_deprecated", flag="x"),
        lambda: printer("flag %s deprecated", "x"),
        loops,
    )
    obs.testing.reset()
    return row(
        "repeated warning_once vs a bare lru_cache printer", o, a, r, 4.0, "ns/call",
        "anchor: functools.lru_cache printer (the floor of vLLM's idea)",
    )  # fmt: skip


class _FloorRepeat:
    """The least a counted repeat costs in pure Python: a method taking ``**kw``, one dict
    lookup, an exact argument check (equality and type), a clock read, a lock-free count,
    the last-seen time and the summary-due check. No rank check, no level, no safety."""

    __slots__ = ("_count", "_last", "_next", "_snap")

    def __init__(self) -> None:
        import itertools

        self._snap = {"flag_deprecated": ({"flag": "x"}, "flag", str)}
        self._count = itertools.count()
        self._last = 0.0
        self._next = float("inf")

    def warning_once(self, event: str, /, *args: Any, **kw: Any) -> None:
        row = self._snap.get(event)
        if row is not None and row[0] == kw and type(kw[row[1]]) is row[2]:
            now = time.time()
            next(self._count)
            self._last = now
            if now >= self._next:
                raise AssertionError("never due")


def bench_once_floor(loops: int) -> dict[str, Any]:
    """Reference: the pure-Python floor of a counted repeat vs the bare lru printer (what
    the 4x goal above means on this interpreter)."""
    import functools

    floor = _FloorRepeat()

    @functools.lru_cache
    def printer(msg: str, *args: Any) -> None:
        return None

    o, a, r = compare(
        lambda: floor.warning_once("flag_deprecated", flag="x"),
        lambda: printer("flag %s deprecated", "x"),
        loops,
    )
    return row(
        "reference: a counted repeat's pure-Python floor vs the bare lru_cache printer",
        o, a, r, 4.0, "ns/call",
        "ours: one dict lookup, exact compare, clock, count (no rank, level or safety)",
    )  # fmt: skip


_ONCE_WITHOUT_TORCH = """
import functools, json, sys
import obs
from benchmarks._harness import compare
obs.configure(format="json", stdlib_bridge=False, logs_exporter="none")
ours = obs.get_logger("bench")
@functools.lru_cache
def printer(msg, *args):
    return None
for _ in range(2):
    ours.warning_once("flag_deprecated", flag="x")
o, a, r = compare(
    lambda: ours.warning_once("flag_deprecated", flag="x"),
    lambda: printer("flag %s deprecated", "x"),
    int(sys.argv[1]),
)
assert "torch" not in sys.modules
print(json.dumps([o, a, r]))
"""


def bench_once_without_torch(loops: int) -> dict[str, Any]:
    """The suppressed repeat in a process that never imported torch (a fresh child: this
    one has) vs the bare lru_cache printer: no cliff where rank info comes from the env."""
    out = subprocess.run(
        [sys.executable, "-c", _ONCE_WITHOUT_TORCH, str(loops)],
        check=True,
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    ).stdout
    o, a, r = json.loads(out)
    return row(
        "repeated warning_once, torch never imported, vs a bare lru_cache printer", o, a, r,
        4.0, "ns/call", "anchor: functools.lru_cache printer; 2.7x the torch-loaded cost "
        "before issue 15's third round (the rank probe on every hit)",
    )  # fmt: skip


def bench_dropin_once(loops: int) -> dict[str, Any]:
    """vLLM's drop-in: ``obs.stdlib.init_logger(...).warning_once`` vs vLLM's real path."""
    import torch  # noqa: F401 - both sides see torch imported, as in vLLM

    import obs.stdlib
    from benchmarks._vllm_anchor import VllmStyleLogger

    obs = _configure_obs()
    ours = obs.stdlib.init_logger("bench.dropin")
    std = logging.getLogger("bench.vllm2")
    std.propagate = False
    std.addHandler(logging.NullHandler())
    theirs = VllmStyleLogger(std)
    ours.warning_once("repeat_me %s", 1)
    theirs.warning_once("repeat_me %s", 1)
    o, a, r = compare(
        lambda: ours.warning_once("repeat_me %s", 1),
        lambda: theirs.warning_once("repeat_me %s", 1),
        loops,
    )
    obs.testing.reset()
    return row(
        "stdlib drop-in init_logger().warning_once (suppressed)", o, a, r, 0.5, "ns/call",
        "anchor: vLLM's real path",
    )  # fmt: skip


def bench_scoped_once(loops: int) -> list[dict[str, Any]]:
    """``scope="global"`` repeats from both APIs vs vLLM's real path with the same scope
    (the scope is part of the once cache's snapshot, so a repeat skips the rank probe)."""
    import torch  # noqa: F401 - both sides see torch imported, as in vLLM

    import obs.stdlib
    from benchmarks._vllm_anchor import VllmStyleLogger

    obs = _configure_obs()
    ours, dropin = obs.get_logger("bench"), obs.stdlib.init_logger("bench.scoped")
    std = logging.getLogger("bench.vllm3")
    std.propagate = False
    std.addHandler(logging.NullHandler())
    theirs = VllmStyleLogger(std)
    calls = {
        "warning_once": lambda: ours.warning_once("repeat_me", n=1, scope="global"),
        "drop-in warning_once": lambda: dropin.warning_once("repeat_me %s", 1, scope="global"),
    }
    rows = []
    for name, call in calls.items():
        call(), call(), theirs.warning_once("repeat_me %s", 1, scope="global")
        o, a, r = compare(
            call, lambda: theirs.warning_once("repeat_me %s", 1, scope="global"), loops
        )
        rows.append(row(
            f'repeated {name}(..., scope="global") (suppressed)', o, a, r, 0.5, "ns/call",
            "anchor: vLLM's real path, same scope; 1.6x to 1.9x before issue 15's third "
            "round (scoped calls took the full path)",
        ))  # fmt: skip
    obs.testing.reset()
    return rows


def bench_sequence_once(loops: int) -> dict[str, Any]:
    """A suppressed repeat with a short list value vs the same call with a scalar: the
    table keeps flat sequences too (a list took the full path before, 15x the scalar)."""
    import torch  # noqa: F401 - as the other once rows

    obs = _configure_obs()
    ours = obs.get_logger("bench")
    for _ in range(2):
        ours.warning_once("repeat_me", ranks=[0, "a"])
        ours.warning_once("repeat_me", ranks="a")
    o, a, r = compare(
        lambda: ours.warning_once("repeat_me", ranks=[0, "a"]),
        lambda: ours.warning_once("repeat_me", ranks="a"),
        loops,
    )
    obs.testing.reset()
    return row(
        "repeated warning_once with a list value (suppressed)", o, a, r, 2.0, "ns/call",
        "anchor: the same call with a str value; 15x before issue 15's third round",
    )  # fmt: skip


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
    return row("below-level call", o, a, r, 1.0, "ns/call", "anchor: make_filtering_bound_logger")


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
        1.0,
        "ns/call",
        "ours: +rank, severity, scope, dedup, callsite, redaction; "
        "anchor: add_log_level+TimeStamper+orjson",
    )


def _to_sink(call: Any) -> Any:
    """Run ``call`` with obs writing to a discarding stderr."""
    saved = sys.stderr
    sys.stderr = _Sink()
    try:
        return call()
    finally:
        sys.stderr = saved


def bench_full_chain_floor(loops: int) -> dict[str, Any]:
    """One event -> JSON line vs the floor: a dict, an ISO time, orjson, one write."""
    import datetime as dt

    import orjson

    sink = _Sink()

    def floor() -> None:
        d = {
            "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(),
            "event": "request_done",
            "model": "llama",
            "tokens": 128,
            "latency_ms": 12.5,
        }
        sink.write(orjson.dumps(d, option=orjson.OPT_APPEND_NEWLINE).decode())

    def measure() -> tuple[float, float, float]:
        obs = _configure_obs(stream="stderr")
        log = obs.get_logger("bench")
        return compare(
            lambda: log.info("request_done", model="llama", tokens=128, latency_ms=12.5),
            floor,
            loops,
        )

    o, a, r = _to_sink(measure)
    _reset()
    return row(
        "one event -> JSON line vs the floor", o, a, r, 2.3, "ns/call",
        "anchor: dict + ISO time + orjson + one write",
    )  # fmt: skip


def bench_none_field(loops: int) -> dict[str, Any]:
    """The same event with a ``None`` field vs without it (no cliff on ``null``)."""

    def measure() -> tuple[float, float, float]:
        obs = _configure_obs(stream="stderr")
        log = obs.get_logger("bench")
        return compare(
            lambda: log.info("request_done", model=None, tokens=128, path="/dev/null"),
            lambda: log.info("request_done", model="llama", tokens=128, path="/dev/nul"),
            loops,
        )

    o, a, r = _to_sink(measure)
    _reset()
    return row(
        "the same event with a None field", o, a, r, 1.05, "ns/call",
        "anchor: the event without it",
    )  # fmt: skip


def bench_large_caller(loops: int) -> dict[str, Any]:
    """The same event logged from a 500-line function vs from a lambda: the callsite must
    not cost more in a large function (a code object's hash walks all its bytecode). The
    body's lines are expressions, not assignments: 500 local variables would cost every
    call of the function itself ~190 ns (CPython clears their slots), with or without obs."""

    def measure() -> tuple[float, float, float]:
        obs = _configure_obs(stream="stderr")
        namespace: dict[str, Any] = {"__name__": "bench_app", "log": obs.get_logger("bench")}
        body = "".join(f"        str(({i}, 's{i}', flag))\n" for i in range(500))
        source = "def large(flag=False):\n    if flag:\n" + body  # skipped: one jump
        source += "    log.info('request_done', model='llama', tokens=128)\n"
        exec(compile(source, "bench_app.py", "exec"), namespace)
        small = namespace["log"]
        return compare(
            namespace["large"],
            lambda: small.info("request_done", model="llama", tokens=128),
            loops,
        )

    o, a, r = _to_sink(measure)
    _reset()
    return row(
        "the same event from a 500-line function", o, a, r, 1.05, "ns/call",
        "anchor: from a lambda (the large function skips its body with one jump)",
    )  # fmt: skip


def bench_big_string(rounds: int) -> dict[str, Any]:
    """A 1 MB string value: its line is cut, so its cost must be too (50 us budget)."""
    big = "x" * 1_000_000

    def measure() -> float:
        obs = _configure_obs(stream="stderr")
        log = obs.get_logger("bench")
        log.info("big_value", v=big)
        samples = []
        for _ in range(rounds):
            start = time.perf_counter_ns()
            for _ in range(20):
                log.info("big_value", v=big)
            samples.append((time.perf_counter_ns() - start) / 20 / 1000)
        return statistics.median(samples)

    us = _to_sink(measure)
    _reset()
    return row(
        "a 1 MB string value", us, 50.0, us / 50.0, 1.0, "us/call",
        "anchor = the 50 us budget",
    )  # fmt: skip


def _threads_ns(threads: int, per_thread: int, call: Any) -> float:
    import threading

    barrier = threading.Barrier(threads + 1)

    def work() -> None:
        barrier.wait()
        for _ in range(per_thread):
            call()

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    start = time.perf_counter_ns()
    for t in pool:
        t.join()
    return (time.perf_counter_ns() - start) / (threads * per_thread)


def bench_thread_scaling(total: int) -> list[dict[str, Any]]:
    """ns per call with 1, 2, 8 and 32 threads sharing one process (the GIL): emitted
    lines and suppressed repeats; the ratio is 32 threads to 1."""

    def measure() -> list[dict[str, Any]]:
        obs = _configure_obs(stream="stderr")
        log = obs.get_logger("bench")
        log.warning_once("repeat_me", k="v")
        rows = []
        for name, call in (
            ("emitted lines", lambda: log.info("request_done", model="llama", tokens=128)),
            ("suppressed repeats", lambda: log.warning_once("repeat_me", k="v")),
        ):
            per = {n: _threads_ns(n, max(total // n, 1), call) for n in (1, 2, 8, 32)}
            rows.append(
                row(
                    f"thread scaling, {name} (32 threads vs 1)",
                    per[32],
                    per[1],
                    per[32] / per[1],
                    1.5,
                    "ns/call",
                    "ns/call at 1/2/8/32 threads: "
                    + ", ".join(f"{per[n]:,.0f}" for n in (1, 2, 8, 32)),
                )
            )
        return rows

    out = _to_sink(measure)
    _reset()
    return out


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
    # Byte-compiled as pip does at install (the anchors in site-packages are), also where
    # PYTHONDONTWRITEBYTECODE is set; a stale or missing .pyc would time the compiler.
    import compileall

    import obs

    compileall.compile_dir(os.path.dirname(obs.__file__), quiet=1)
    _wall(ours_cmd)
    _wall(anchor_cmd)
    o, a = [], []
    for _ in range(rounds):
        o.append(_wall(ours_cmd))
        a.append(_wall(anchor_cmd))
    mo, ma = statistics.median(o) * 1e3, statistics.median(a) * 1e3
    return row(
        "python -c 'import obs'", mo, ma, mo / ma, 0.5, "ms",
        "anchor: import structlog + OTel sdk._logs; obs byte-compiled; torch not imported "
        "(asserted)",
    )  # fmt: skip


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
    prose = ("the quick brown fox, jumps: over = lazy dog " * 50)[:2000]
    pairs = ("token=a," * 300)[:2000]
    encoded = ("api_key%3Dx%26" * 200)[:2000]
    breaks = (("Authorization:" + "\n" * 50) * 40)[:2000]
    long_keys = {f"n{j}": {f"aB{i}" * 150 + str(j): i for i in range(256)} for j in range(16)}
    pem_event = "-----BEGIN " * 1_000_000
    deep, noted = _deep_error(900), ValueError("noted")  # a RecursionError's depth
    for _ in range(16):
        noted.add_note(("token=a Bearer abcdefghijkl hf_" + "a" * 30 + " ") * 60)
    deep_group = _group([_group([deep] * 14) for _ in range(4)])
    noted_group = _group([_group([noted] * 15) for _ in range(4)])
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
        (  # every value has pair separators: each is tested for secret words
            "300 fields of 2 KB prose",
            lambda log: log.info("adv", **{f"f{i}": prose for i in range(300)}),
        ),
        (
            "300 fields of 2 KB secret pairs",
            lambda log: log.info("adv", **{f"f{i}": pairs for i in range(300)}),
        ),
        (  # decoded, scanned again
            "300 fields of 2 KB percent-encoded pairs",
            lambda log: log.info("adv", **{f"f{i}": encoded for i in range(300)}),
        ),
        (
            "300 fields of 2 KB line breaks after a name",
            lambda log: log.info("adv", **{f"f{i}": breaks for i in range(300)}),
        ),
        (  # each key tested for secret words (0.5-0.9 s a call before the name budget)
            "16 dicts of 256 long keys",
            lambda log: log.info("adv", d=long_keys),
        ),
        (  # lowered and searched whole by the fused path's hints (160 ms before the cut)
            "10 MB event name of PEM headers",
            lambda log: log.info(pem_event),
        ),
        (  # every frame's code position found, 50 kept (0.8 s before the frame bound)
            "56 members 900 frames deep",
            lambda log: log.error("adv", exc_info=deep_group),
        ),
        (  # 4 MB of notes scrubbed, 64 KB kept (1.1 s before the room bound)
            "60 members with 16 notes of 4 KB pairs",
            lambda log: log.error("adv", exc_info=noted_group),
        ),
    ]


def _deep_error(depth: int) -> BaseException:
    """An exception raised ``depth`` frames down."""

    def down(n: int) -> None:
        if n == 0:
            raise ValueError("innermost")
        down(n - 1)

    try:
        down(depth)
    except ValueError as exc:
        return exc
    return ValueError("not raised")


def _group(members: list[BaseException]) -> BaseException:
    """An exception group (Python 3.11) of ``members``; on 3.10 its first member."""
    cls = getattr(builtins, "ExceptionGroup", None)
    return members[0] if cls is None else cls("group", members)


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
        bench_warning_once_vs_lru(loops),
        bench_once_floor(loops),
        bench_once_without_torch(loops),
        bench_dropin_once(loops),
        *bench_scoped_once(loops),
        bench_sequence_once(loops),
        bench_below_level(loops),
        bench_full_chain(loops // 4),
        bench_full_chain_floor(loops // 4),
        bench_none_field(loops // 4),
        bench_large_caller(loops // 4),
        bench_big_string(5 if quick else 15),
        *bench_thread_scaling(4_000 if quick else 40_000),
        bench_import(3 if quick else 15),
        bench_dedup_memory(10_000, 100_000 if quick else 1_000_000),
        bench_worst_case(3 if quick else 7),
    ]
