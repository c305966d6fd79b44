"""Nothing WARNING+ lost uncounted at exit (issue 11 items 1 and 3), in real processes.

A child process logs a burst of ERRORs towards a blackholed collector (a port that
accepts connections and never answers) and exits; the test then does the accounting from
what the child left behind: every ERROR is in the spool or counted in an
``obs_records_dropped`` report (on the console or itself spooled).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from obs._receiver import OTLPReceiver
from obs.otel import ExportSink
from obs.rank import RankResolver
from obs.settings import Settings, load_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]
ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import atexit, sys, time
import obs
url, protocol, spool, logfile, n, queue, budget, mode, export = sys.argv[1:10]
# Registered before obs' handlers, so it runs after them (atexit runs the last first):
# the child's own clock from its last log call to the end of obs' exit work, without the
# interpreter's teardown and coverage's data save behind it (seconds on a loaded machine).
atexit.register(lambda: sys.stderr.write(f"DONE {time.time()}\n"))
obs.configure(logs_exporter="otlp", otlp_endpoint=url, otlp_protocol=protocol,
              spool_dir=spool, stream="none", file=logfile, format="json",
              shutdown_timeout=float(budget), otlp_timeout=float(export),
              blrp_export_timeout_ms=float(export) * 1000,
              blrp_max_queue_size=int(queue), blrp_schedule_delay_ms=50)
log = obs.get_logger("child")
for i in range(int(n)):
    log.error("burst_error", i=i)
sys.stderr.write(f"MARK {time.time()}\n")
sys.stderr.flush()
if mode == "shutdown":
    obs.shutdown()
"""


def run(
    url: str, protocol: str, tmp: Path, *, n: int, queue: int, budget: float, export: float
) -> Any:
    """Run CHILD; its spool, its log file and the seconds its exit took by its own clock
    (from its last log call to the end of obs' exit handlers)."""
    spool, logfile = tmp / "spool", tmp / "log.jsonl"
    args = [url, protocol, str(spool), str(logfile), str(n), str(queue), str(budget), "atexit"]
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *args, str(export)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=export + 60,  # a hung exit ends here (a failure) rather than at the mark's
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr
    said = {x.split()[0]: float(x.split()[1]) for x in proc.stderr.splitlines()
            if x.startswith(("MARK ", "DONE "))}  # fmt: skip
    return spool, logfile, said["DONE"] - said["MARK"]


def spooled_lines(spool: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in sorted(spool.glob("spool*.jsonl")):
        out.extend(json.loads(x) for x in f.read_text().splitlines() if x.endswith("}"))
    return out


def reported_drops(docs: list[dict[str, Any]], level: str, reason: str | None = None) -> int:
    """Records of ``level`` counted in obs_records_dropped reports among console or spool
    lines (only those of ``reason`` when given)."""
    total = 0
    for d in docs:
        if (d.get("event") or d.get("name")) != "obs_records_dropped":
            continue
        if reason is not None and reason != (
            d.get("reason") or (d.get("attrs") or {}).get("reason")
        ):
            continue
        dropped = d.get("dropped") or (d.get("attrs") or {}).get("dropped") or {}
        if isinstance(dropped, str):
            dropped = json.loads(dropped)
        total += int(dropped.get(level, 0))
    return total


def assert_accounted(
    lines: list[dict[str, Any]], reports: list[dict[str, Any]], n: int
) -> set[int]:
    """The accounting identity for a burst of ``n`` ERRORs none of which is received:
    sent = spooled + reported dropped, each record spooled at most once, nothing of
    another severity counted. The one overlap allowed is the batch shutdown counts as
    ``shutdown_in_flight`` while an abandoned thread is still spooling it (counted
    twice, never lost): spooled + counted - in_flight <= sent <= spooled + counted."""
    ids = [d["attrs"]["i"] for d in lines if d.get("name") == "burst_error"]
    spooled = set(ids)
    assert len(ids) == len(spooled), "a record spooled twice"
    assert spooled <= set(range(n))
    for level in ("TRACE", "DEBUG", "INFO", "WARNING", "CRITICAL"):
        assert 0 == reported_drops(reports, level), level
    counted = reported_drops(reports, "ERROR")
    in_flight = reported_drops(reports, "ERROR", "shutdown_in_flight")
    assert len(spooled) + counted - in_flight <= n <= len(spooled) + counted, (
        len(spooled),
        counted,
        in_flight,
    )
    return spooled


@pytest.mark.timeout(180)  # a hung exit: the child's own timeout (120 s) fails it first
@pytest.mark.parametrize(
    "case", [("grpc", 32768, 32768), ("http/protobuf", 16000, 16384)], ids=["grpc", "http"]
)
def test_burst_at_exit_is_spooled_or_counted(
    blackhole: str, tmp_path: Path, case: tuple[str, int, int]
) -> None:
    """A burst of ERRORs queued at exit towards a blackholed collector: each is spooled
    or counted as dropped (sent = received 0 + spooled + reported), and exit ends by the
    shutdown budget instead of waiting for the stuck export."""
    protocol, n, queue = case
    budget, export = 1.0, 60.0
    spool, logfile, took = run(
        blackhole, protocol, tmp_path, n=n, queue=queue, budget=budget, export=export
    )
    lines = spooled_lines(spool)
    console = [json.loads(x) for x in logfile.read_text().splitlines() if x.startswith("{")]
    reports = max(console, lines, key=lambda docs: reported_drops(docs, "ERROR"))
    spooled = assert_accounted(lines, reports, n)
    counted = reported_drops(reports, "ERROR")
    print(f"{protocol}: sent {n} spooled {len(spooled)} counted {counted} exit {took:.2f}s")
    # Without the budget exit waits for the blackholed export (38 s of its 60 s timeout,
    # measured with the budget broken); with it, the budget plus obs' own bounded work,
    # which a loaded machine (2 cores, two suites, coverage) stretches several-fold (3.5 s
    # seen): bounded at a third of the export's timeout, the test fails only when exit
    # waited for the export, never for being slow.
    assert took < export / 3, f"exit took {took:.1f}s: it waited for the stuck export"


def test_drop_counts_of_a_full_spool_reach_the_collector(tmp_path: Path) -> None:
    """With the spool full, the count of what it refused is itself spooled (the spool
    keeps room for it) and reaches the collector with the next replay: sent = replayed +
    reported spool_full drops."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    n = 400
    child = CHILD.replace(
        "blrp_schedule_delay_ms=50)", "blrp_schedule_delay_ms=50, spool_max_bytes=60000)"
    )
    spool, logfile = tmp_path / "spool", tmp_path / "log.jsonl"
    args = [closed, "http/protobuf", str(spool), str(logfile), str(n), "2048", "2.0", "atexit"]
    proc = subprocess.run(
        [sys.executable, "-c", child, *args, "10.0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr
    with OTLPReceiver() as rx:
        settings = Settings(
            logs_exporter="otlp",
            otlp_endpoint=rx.http_endpoint,
            spool_dir=str(spool),
            blrp_schedule_delay_ms=20.0,
        )
        sink = ExportSink(settings, RankResolver(env={}, host="h"), lambda *a, **k: None)
        try:
            assert sink.force_flush(20.0)
        finally:
            sink.shutdown(2.0)
        delivered = {r["attributes"]["i"] for r in rx.records if r["event_name"] == "burst_error"}
        reports = [
            {"event": "obs_records_dropped", **r["attributes"]}
            for r in rx.records
            if r["event_name"] == "obs_records_dropped"
        ]
    # Every report is on the child's console (its file) as well: a loaded machine's exit
    # budget may also count records as shutdown drops, which only the console can carry.
    console = [json.loads(x) for x in logfile.read_text().splitlines() if x.startswith("{")]
    counted = reported_drops(console, "ERROR")
    in_flight = reported_drops(console, "ERROR", "shutdown_in_flight")
    full = reported_drops([r for r in reports if r.get("reason") == "spool_full"], "ERROR")
    print(f"sent {n} replayed {len(delivered)} counted {counted} (spool_full replayed {full})")
    assert 0 < full  # the spool's own count reached the collector
    assert len(delivered) + counted - in_flight <= n <= len(delivered) + counted


def _spooling_sink(url: str, spool: Path, **kw: Any) -> ExportSink:
    options: dict[str, Any] = {
        "logs_exporter": "otlp",
        "otlp_endpoint": url,
        "otlp_timeout": 1.0,
        "spool_dir": str(spool),
        "blrp_schedule_delay_ms": 20.0,
    }
    options.update(kw)
    return ExportSink(Settings(**options), RankResolver(env={}, host="h"), lambda *a, **k: None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_worker_replays_its_own_spool_when_the_collector_returns(tmp_path: Path) -> None:
    """A process that logs nothing after the collector comes back still delivers what it
    spooled while it was down: the worker probes and replays on its own schedule."""
    port = _free_port()
    sink = _spooling_sink(f"http://127.0.0.1:{port}", tmp_path / "spool")
    try:
        for i in range(600):
            sink(None, "error", {"event": "while_down", "i": i, "_obs_level": logging.ERROR})
        assert not sink.force_flush(5.0)
        assert 600 == sink.stats()["spooled"]
        with OTLPReceiver(http_port=port) as rx:
            got = rx.wait_for(600, predicate=lambda r: r["event_name"] == "while_down", timeout=30)
            assert list(range(600)) == sorted(r["attributes"]["i"] for r in got)
    finally:
        sink.shutdown(1.0)


def test_shutdown_replays_within_its_budget(tmp_path: Path) -> None:
    """shutdown() replays the spool when the collector answers, within its budget."""
    port = _free_port()
    sink = _spooling_sink(
        f"http://127.0.0.1:{port}", tmp_path / "spool", blrp_schedule_delay_ms=60_000.0
    )
    try:
        for i in range(100):
            sink(None, "error", {"event": "spooled", "i": i, "_obs_level": logging.ERROR})
        assert not sink.force_flush(5.0)
        with OTLPReceiver(http_port=port) as rx:
            sink(None, "error", {"event": "last", "_obs_level": logging.ERROR})
            assert sink.shutdown(10.0)
            names = [r["event_name"] for r in rx.records]
            assert (100, 1) == (names.count("spooled"), names.count("last"))
    finally:
        sink.shutdown(1.0)


SIGNAL_CHILD = r"""
import os, signal, sys, time
import obs
url, spool, n, case = sys.argv[1:5]
if case == "chained":
    def previous(signum, frame):
        sys.stderr.write("PREVIOUS HANDLER\n")
        sys.stderr.flush()
        os._exit(7)
    signal.signal(signal.SIGTERM, previous)
obs.configure(logs_exporter="otlp", otlp_endpoint=url, spool_dir=spool, stream="none",
              shutdown_timeout=2.0, otlp_timeout=1.0 if case == "ahead" else 2.0,
              blrp_max_queue_size=4096)
log = obs.get_logger("child")
if case == "ahead":  # learn that the collector is down, then log: written ahead
    log.error("probe")
    assert not obs.flush(timeout=5.0)
    sink = obs._config.STATE.runtime.sink
    before = sink.stats()["spooled"]
for i in range(int(n)):
    log.error("burst_error", i=i)
if case == "ahead":
    deadline = time.monotonic() + 2.0
    while sink.stats()["spooled"] - before < int(n) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)
sys.stderr.write("READY\n")
sys.stderr.flush()
# An application's main loop: its own SIGTERM handler runs when the main thread next runs
# bytecode (a signal landing in the instant before one long sleep would wait for it, as
# without obs: CPython's race; a main thread stuck in C is test_sigterm_blocked.py's).
while True:
    time.sleep(0.2)
"""


def run_signalled(url: str, spool: Path, n: int, case: str) -> tuple[int, str]:
    """Run SIGNAL_CHILD; SIGTERM it once READY (unless it kills itself first)."""
    env = {**os.environ, "OBS_HANDLE_SIGTERM": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGNAL_CHILD, url, str(spool), str(n), case],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("READY"):
            proc.send_signal(signal.SIGTERM)
            break
    _, rest = proc.communicate(timeout=30)
    return proc.returncode, "".join(lines) + rest


@pytest.mark.parametrize("case", ["default", "chained"])
def test_sigterm_flushes_then_chains(blackhole: str, tmp_path: Path, case: str) -> None:
    """With OBS_HANDLE_SIGTERM, a SIGTERM with a burst queued for a blackholed collector
    spools or counts every ERROR within the budget, then acts as before: the default
    action (death by SIGTERM) or the application's own handler."""
    n = 3000
    code, err = run_signalled(blackhole, tmp_path / "spool", n, case)
    lines = spooled_lines(tmp_path / "spool")
    spooled = assert_accounted(lines, lines, n)
    counted = reported_drops(lines, "ERROR")
    print(f"{case}: sent {n} spooled {len(spooled)} counted {counted} exit {code}")
    if case == "default":
        assert -signal.SIGTERM == code, err
    else:
        assert (7, True) == (code, "PREVIOUS HANDLER" in err), err


def test_write_ahead_survives_sigkill(blackhole: str, tmp_path: Path) -> None:
    """Once the collector is known to be down (here: a blackhole, each export hangs for
    its whole timeout), ERRORs are written to the spool as they are logged, not after the
    next failed export: a SIGKILL soon after the burst loses none of them."""
    n = 1000
    code, _ = run_signalled(blackhole, tmp_path / "spool", n, "ahead")
    assert -signal.SIGKILL == code
    lines = spooled_lines(tmp_path / "spool")
    assert n == len(assert_accounted(lines, lines, n))
    assert 0 == reported_drops(lines, "ERROR")  # all spooled, none counted as lost


def test_default_spool_is_per_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default each service spools under its own directory: a program replays only its
    own records, with their original resource, and a loose shared root is refused."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    closed = f"http://127.0.0.1:{_free_port()}"

    def sink_for(service: str, url: str) -> ExportSink:
        settings = load_settings(
            {
                "logs_exporter": "otlp",
                "otlp_endpoint": url,
                "otlp_timeout": 1.0,
                "service_name": service,
                "blrp_schedule_delay_ms": 20,
            },
            env={},
        )
        return ExportSink(settings, RankResolver(env={}, host="h"), lambda *a, **k: None)

    down = sink_for("trainer", closed)
    down(None, "error", {"event": "trainer_error", "_obs_level": logging.ERROR})
    assert not down.force_flush(3.0)
    down.shutdown(1.0)
    root = tmp_path / f"obs-spool-{os.getuid()}"
    assert list((root / "trainer").glob("spool*.jsonl"))
    with OTLPReceiver() as rx:
        other = sink_for("server", rx.http_endpoint)
        other(None, "error", {"event": "server_error", "_obs_level": logging.ERROR})
        assert other.force_flush(5.0)
        other.shutdown(1.0)
        assert ["server_error"] == [r["event_name"] for r in rx.records]
        again = sink_for("trainer", rx.http_endpoint)
        assert again.force_flush(5.0)
        again.shutdown(1.0)
        (replayed,) = [r for r in rx.records if r["event_name"] == "trainer_error"]
        assert "trainer" == replayed["resource"]["service.name"]
    root.chmod(0o777)
    loose = sink_for("third", closed)
    loose(None, "error", {"event": "e", "_obs_level": logging.ERROR})
    loose.force_flush(3.0)
    loose.shutdown(1.0)
    assert {"ERROR": 1} == loose.stats()["dropped_by_reason"]["spool_error"]
    assert not (root / "third").exists()
