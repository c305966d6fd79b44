"""OTel export benchmarks, ours side by side with the OTel SDK's own pipeline.

Rows (``run(quick=False) -> list[dict]`` for ``python -m benchmarks``; run this file to
print them alone):

1. caller-thread cost of one exported event: an obs logger call with export on (console
   JSON to /dev/null) vs a stdlib logger with the SDK's ``LoggingHandler`` and a
   ``BatchLogRecordProcessor``, both on the same no-op exporter. Target ratio <= 0.3
   (issue 15); with it, the ceiling: records per second of process CPU through the whole
   pipeline (caller and export threads) until flushed, target >= 25,000.
2. the same for the export sink alone (``ExportSink.__call__``) vs ``LoggingHandler.emit``
   of a ready LogRecord: the export step itself, without the rest of either chain.
3. OTLP request encoding per record: obs.otlp_wire vs the SDK's ``encode_logs`` +
   ``SerializeToString`` on the same 512 records (the export thread's main cost).
   Target ratio <= 0.5.
4. sustained 10,000 events/s for 10 s (``--seconds``) into ``OTLPReceiver`` over HTTP, in a
   subprocess (the receiver decodes in this process): delivered fraction, with the SDK's
   default pipeline (LoggingHandler + BatchLogRecordProcessor + OTLP/HTTP) measured in
   the same run. The ratio is the fraction lost; target 0.
5. process exit with the collector unreachable (closed port): seconds from the last log
   call to process exit, ours vs the SDK default. The ratio is ours / 3 s; target 1.

    python benchmarks/bench_otel.py [--quick] [--seconds 10] [--rate 10000]
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a plain script
    sys.path.insert(0, str(ROOT))

from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler, ReadableLogRecord  # noqa: E402
from opentelemetry.sdk._logs.export import (  # noqa: E402
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)

from benchmarks._harness import compare, row  # noqa: E402

FIELDS = {
    "chain": "fi_ar",
    "backend": "mnnvl",
    "attempt": 2,
    "reason": "no_multicast",
    "duration_ms": 12.5,
}
EXIT_BUDGET_S = 3.0


class NoopExporter(LogRecordExporter):
    """Accepts every batch and does nothing: both pipelines pay only their own costs."""

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        return

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _sdk_logger(
    name: str, exporter: LogRecordExporter, queue: int
) -> tuple[logging.Logger, LoggerProvider]:
    """The SDK's documented stdlib path: LoggingHandler -> BatchLogRecordProcessor."""
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter, max_queue_size=queue))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        handler = LoggingHandler(logger_provider=provider)
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, provider


def _compare_cpu_and_wall(
    ours: Callable[[], None], anchor: Callable[[], None], loops: int, rounds: int = 7
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """Interleaved rounds; medians of (ours, anchor, ratio) for thread CPU and wall ns/call."""

    def timed(fn: Callable[[], None]) -> tuple[float, float]:
        gc.collect()
        gc.disable()
        try:
            cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
            for _ in range(loops):
                fn()
            return (time.thread_time_ns() - cpu) / loops, (time.perf_counter_ns() - wall) / loops
        finally:
            gc.enable()

    timed(ours)
    timed(anchor)
    samples: list[tuple[float, float, float, float]] = []
    for _ in range(rounds):
        o_cpu, o_wall = timed(ours)
        a_cpu, a_wall = timed(anchor)
        samples.append((o_cpu, a_cpu, o_wall, a_wall))
    med = statistics.median
    cpu = (
        med(x[0] for x in samples),
        med(x[1] for x in samples),
        med(x[0] / x[1] for x in samples),
    )
    wall = (
        med(x[2] for x in samples),
        med(x[3] for x in samples),
        med(x[2] / x[3] for x in samples),
    )
    return cpu, wall


#: Records per second one core must sustain through the whole pipeline (issue 15).
CEILING_TARGET = 25_000


def _ceilings(
    ours: Callable[[], None], anchor: Callable[[], None], provider: LoggerProvider, loops: int
) -> tuple[float, float]:
    """Records per second of process CPU (the caller and every export thread), each side
    logging ``loops`` records and flushing them; medians of three interleaved rounds."""
    import obs

    def rate(call: Callable[[], None], flush: Callable[[], object]) -> float:
        gc.collect()
        start = time.process_time_ns()
        for _ in range(loops):
            call()
        flush()
        return loops * 1e9 / (time.process_time_ns() - start)

    o, a = [], []
    for _ in range(3):
        o.append(rate(ours, lambda: obs.flush(60)))
        a.append(rate(anchor, lambda: provider.force_flush(60_000)))
    return statistics.median(o), statistics.median(a)


def bench_caller_cost(loops: int) -> list[dict[str, Any]]:
    """Rows 1 and 2: caller-thread ns per exported event, ours vs the SDK handler."""
    import obs
    import obs.otel.transport
    import obs.testing
    from obs._config import STATE

    queue = loops * 12  # never full: we time the enqueue, not the drop path
    real_build = obs.otel.transport.build_exporter
    obs.otel.transport.build_exporter = lambda settings: NoopExporter()  # type: ignore[assignment]
    devnull = open(os.devnull, "w")  # noqa: SIM115
    saved_stderr = sys.stderr
    sys.stderr = devnull
    try:
        obs.configure(
            logs_exporter="otlp",
            otlp_endpoint="http://127.0.0.1:9",
            format="json",
            stdlib_bridge=False,
            blrp_max_queue_size=queue,
            spool_dir=tempfile.mkdtemp(prefix="obs-bench-"),
        )
        log = obs.get_logger("bench.ours")
        anchor_logger, provider = _sdk_logger("bench.anchor", NoopExporter(), queue)

        def ours() -> None:
            log.info("workspace_attempt", **FIELDS)

        def anchor() -> None:
            anchor_logger.info("workspace_attempt", extra=FIELDS)

        (o_cpu, a_cpu, r_cpu), (o_wall, a_wall, r_wall) = _compare_cpu_and_wall(ours, anchor, loops)
        what = "obs log.info (chain + JSON to /dev/null + export) vs stdlib + SDK LoggingHandler"
        o_ceiling, a_ceiling = _ceilings(ours, anchor, provider, loops)
        rows = [
            row(
                "otel: caller-thread CPU per exported event",
                o_cpu,
                a_cpu,
                r_cpu,
                0.3,
                "ns",
                what + ", no-op exporter; thread CPU time of the calling thread",
            ),
            row(
                "otel: wall time per exported event",
                o_wall,
                a_wall,
                r_wall,
                1.0,
                "ns",
                "same calls, wall clock: includes waiting for the GIL while obs' export "
                "thread builds records (the SDK builds them in the caller)",
            ),
            row(
                "otel: records/s per core, the whole pipeline (ceiling)",
                o_ceiling,
                a_ceiling,
                CEILING_TARGET / o_ceiling,
                1.0,
                "records/s",
                f"process CPU (every thread) per record until flushed, no-op exporter; ratio = "
                f"{CEILING_TARGET:,} / ours; anchor: the SDK pipeline of row 1",
            ),
        ]
        sink = STATE.runtime.sink if STATE.runtime is not None else None
        assert sink is not None
        event = {
            "timestamp": "2026-12-02T15:30:14.123456Z",
            "severity_text": "INFO",
            "severity_number": 9,
            "event": "workspace_attempt",
            "body": "workspace_attempt",
            "logger": "bench.ours",
            "rank": 0,
            "local_rank": 0,
            "world_size": 1,
            "node_rank": 0,
            "host.name": "h",
            "code.file.path": __file__,
            "code.line.number": 1,
            "code.function.name": "f",
            "_obs_level": 20,
            "_obs_time_ns": time.time_ns(),
            **FIELDS,
        }
        handler = anchor_logger.handlers[0]
        record = anchor_logger.makeRecord(
            "bench.anchor", logging.INFO, __file__, 1, "workspace_attempt", (), None, extra=FIELDS
        )
        o2, a2, ratio2 = compare(
            lambda: sink(None, "info", event), lambda: handler.emit(record), loops, rounds=5
        )
        rows.append(
            row(
                "otel: export step alone (sink vs LoggingHandler.emit)",
                o2,
                a2,
                ratio2,
                0.7,
                "ns",
                "ExportSink.__call__ on a chain-shaped dict vs LoggingHandler.emit of a LogRecord",
            )
        )
        provider.shutdown()
        return rows
    finally:
        obs.testing.reset()
        obs.otel.transport.build_exporter = real_build  # type: ignore[assignment]
        sys.stderr = saved_stderr
        devnull.close()


LOAD = r"""
import json, logging, os, sys, tempfile, time, warnings
mode, url, seconds, rate = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
fields = json.loads(sys.argv[5])
if mode == "ours":
    import obs
    obs.configure(logs_exporter="otlp", otlp_endpoint=url, otlp_protocol="http/protobuf",
                  format="json", stream="stdout", spool_dir=tempfile.mkdtemp(prefix="obs-bench-"))
    log = obs.get_logger("bench.load")
    emit = lambda i: log.info("bench_event", i=i, **fields)
else:
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    provider = LoggerProvider()
    exporter = OTLPLogExporter(endpoint=url + "/v1/logs")
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    warnings.simplefilter("ignore", DeprecationWarning)
    logger = logging.getLogger("bench.load")
    logger.handlers[:] = [LoggingHandler(logger_provider=provider)]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    emit = lambda i: logger.info("bench_event", extra={"i": i, **fields})
tick = 0.01
per_tick = max(1, int(rate * tick))
start = time.perf_counter()
n = 0
while True:
    now = time.perf_counter() - start
    if now >= seconds:
        break
    for _ in range(per_tick):
        emit(n)
        n += 1
    ahead = (n / rate) - (time.perf_counter() - start)
    if ahead > 0:
        time.sleep(ahead)
elapsed = time.perf_counter() - start
t = time.perf_counter()
if mode == "ours":
    ok = obs.flush(timeout=30.0)
    stats = obs._config.STATE.runtime.sink.stats()
    obs.shutdown(timeout=5.0)
else:
    ok = provider.force_flush(30000)
    stats = {}
    provider.shutdown()
flush_s = time.perf_counter() - t
print(json.dumps({"sent": n, "elapsed": elapsed, "flush_s": flush_s, "ok": ok, "stats": stats}),
      file=sys.stderr)
"""


def _load(mode: str, url: str, seconds: float, rate: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", LOAD, mode, url, str(seconds), str(rate), json.dumps(FIELDS)],
        stdout=subprocess.DEVNULL,  # obs' console JSON lines: rendered, then discarded
        stderr=subprocess.PIPE,
        text=True,
        timeout=seconds * 6 + 60,
        cwd=ROOT,
        check=False,
    )
    lines = [line for line in proc.stderr.splitlines() if line.startswith('{"sent"')]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"load generator ({mode}) failed: {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def bench_sustained(seconds: float, rate: int) -> dict[str, Any]:
    """Row 4: delivered fraction at ``rate`` events/s for ``seconds``, ours and the SDK's."""
    from obs._receiver import OTLPReceiver

    fractions: dict[str, float] = {}
    notes = []
    for mode in ("ours", "sdk"):
        with OTLPReceiver(grpc=False) as rx:
            result = _load(mode, rx.http_endpoint, seconds, rate)
            time.sleep(0.2)  # let the receiver finish decoding the last request
            got = [r for r in rx.records if r["body"] == "bench_event"]
        fractions[mode] = len(got) / max(result["sent"], 1)
        achieved = result["sent"] / result["elapsed"]
        notes.append(
            f"{mode}: {len(got)}/{result['sent']} at {achieved:,.0f}/s, "
            f"flush {result['flush_s']:.1f}s"
        )
    return row(
        f"otel: {rate:,} events/s for {seconds:g} s over HTTP, delivered",
        fractions["ours"] * 100,
        fractions["sdk"] * 100,
        1.0 - fractions["ours"],
        0.0,
        "%",
        "anchor = SDK default pipeline; ratio = fraction lost; " + "; ".join(notes),
    )


def bench_encoding(quick: bool) -> dict[str, Any]:
    """Row 3: encoding one batch of 512 chain-shaped records to OTLP request bytes,
    obs.otlp_wire vs the SDK's ``encode_logs(...).SerializeToString()``."""
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    from obs.otel import _RecordBuilder
    from obs.otlp_wire import Encoder
    from obs.rank import RankResolver
    from obs.settings import load_settings

    builder = _RecordBuilder(load_settings({}, env={}), RankResolver())
    resource = builder.resource()
    now = time.time_ns()
    batch = []
    for i in range(512):  # the fields the sustained run logs, a unique uid and counter each
        event = {
            "event": "bench_event",
            "body": "bench_event",
            "logger": "bench.load",
            "severity_text": "INFO",
            "severity_number": 9,
            "i": i,
            **FIELDS,
            "rank": 0,
            "local_rank": 0,
            "world_size": 1,
            "node_rank": 0,
            "host.name": "bench-host",
            "code.file.path": "/srv/app/engine.py",
            "code.line.number": 120,
            "code.function.name": "step",
            "_obs_time_ns": now + i,
        }
        batch.append(builder.build((now + i, None, event), 1, resource))
    encoder = Encoder()
    o, a, r = compare(
        lambda: encoder.request(batch),
        lambda: encode_logs(batch).SerializeToString(),
        2 if quick else 10,
    )
    return row(
        "otel: OTLP request encoding per record",
        o / 512,
        a / 512,
        r,
        0.5,
        "ns",
        "obs.otlp_wire vs SDK encode_logs + SerializeToString, batches of 512; same message",
    )


EXIT = r"""
import logging, sys, tempfile, time, warnings
mode, url = sys.argv[1], sys.argv[2]
if mode == "ours":
    import obs
    obs.configure(logs_exporter="otlp", otlp_endpoint=url, otlp_protocol="http/protobuf",
                  format="json", stream="stdout", spool_dir=tempfile.mkdtemp(prefix="obs-bench-"))
    log = obs.get_logger("bench.exit")
    for i in range(100):
        log.error("bench_exit", i=i)
else:
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    provider = LoggerProvider()
    exporter = OTLPLogExporter(endpoint=url + "/v1/logs")
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    warnings.simplefilter("ignore", DeprecationWarning)
    logger = logging.getLogger("bench.exit")
    logger.addHandler(LoggingHandler(logger_provider=provider))
    logger.propagate = False
    for i in range(100):
        logger.error("bench_exit", extra={"i": i})
sys.stderr.write(f"MARK {time.time()}\n")
sys.stderr.flush()
"""


def _exit_seconds(mode: str, url: str, env: dict[str, str]) -> float:
    proc = subprocess.Popen(
        [sys.executable, "-c", EXIT, mode, url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    _, err = proc.communicate(timeout=120)
    ended = time.time()
    marks = [float(line.split()[1]) for line in err.splitlines() if line.startswith("MARK ")]
    if not marks:
        raise RuntimeError(f"exit benchmark ({mode}) failed: {err[-2000:]}")
    return ended - marks[0]


def bench_exit(quick: bool) -> dict[str, Any]:
    """Row 5: seconds from the last log call to process exit with a closed collector port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    ours = _exit_seconds("ours", url, env)
    sdk_env = dict(env)
    note = "anchor = SDK default (LoggingHandler + BLRP + OTLP/HTTP), collector port closed"
    if quick:  # the SDK default takes ~10-30 s; quick mode caps its request timeout
        sdk_env["OTEL_EXPORTER_OTLP_LOGS_TIMEOUT"] = "2"
        note += ", anchor with OTEL_EXPORTER_OTLP_LOGS_TIMEOUT=2 (quick)"
    anchor = _exit_seconds("sdk", url, sdk_env)
    return row(
        "otel: process exit, collector unreachable",
        ours,
        anchor,
        ours / EXIT_BUDGET_S,
        1.0,
        "s",
        note + f"; ratio = ours / {EXIT_BUDGET_S:g} s budget",
    )


def run(
    quick: bool = False, seconds: float | None = None, rate: int = 10_000
) -> list[dict[str, Any]]:
    """All OTel rows; ``quick`` shrinks loops, the sustained run (1 s) and the SDK exit wait."""
    loops = 5_000 if quick else 30_000
    duration = seconds if seconds is not None else (1.0 if quick else 10.0)
    return [
        *bench_caller_cost(loops),
        bench_encoding(quick),
        bench_sustained(duration, rate),
        bench_exit(quick),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_otel", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer loops, 1 s sustained run")
    parser.add_argument("--seconds", type=float, default=None, help="sustained run length")
    parser.add_argument("--rate", type=int, default=10_000, help="sustained events per second")
    args = parser.parse_args(argv)
    print("name | ours | anchor | ratio | target")
    for r in run(quick=args.quick, seconds=args.seconds, rate=args.rate):
        print(
            f"{r['name']} | {r['ours']:,.1f} {r['unit']} | {r['anchor']:,.1f} {r['unit']} | "
            f"{r['ratio']:.2f} | <= {r['target']}"
        )
        print(f"    {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
