"""End to end: obs.configure() -> real SDK exporters over real gRPC/HTTP -> OTLPReceiver.

Every test here uses the real pieces: the obs chain, the SDK's OTLP exporters, grpcio and
requests on loopback, the bundled OTLPReceiver, real files for the spool and real
subprocesses where the measurement is a process exit.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import json
import logging
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import format_span_id, format_trace_id

import comm.events as comm_events
import obs
import obs.otel
import obs.otel.transport
import obs.render
from obs._config import STATE
from obs._receiver import OTLPReceiver, make_self_signed_cert
from obs.otel import ExportSink

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PROTOCOLS = ("grpc", "http/protobuf")
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def endpoint(receiver: OTLPReceiver, protocol: str) -> str:
    return receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint


def receiver_on(port: int, protocol: str, **kw: Any) -> OTLPReceiver:
    """A receiver whose ``protocol`` side listens on ``port`` (the other on a free port)."""
    if protocol == "grpc":
        return OTLPReceiver(grpc_port=port, **kw)
    return OTLPReceiver(http_port=port, **kw)


def configure(url: str, protocol: str, spool: Path, **kw: Any) -> None:
    kw.setdefault("blrp_schedule_delay_ms", 50)
    kw.setdefault("otlp_timeout", 2.0)
    obs.configure(
        logs_exporter="otlp",
        otlp_endpoint=url,
        otlp_protocol=protocol,
        format="json",
        spool_dir=str(spool),
        **kw,
    )


def sink() -> ExportSink:
    runtime = STATE.runtime
    assert runtime is not None
    assert isinstance(runtime.sink, ExportSink)
    return runtime.sink


def by_uid(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Records keyed by log.record.uid; asserts no uid arrived twice."""
    uids = [r["attributes"]["log.record.uid"] for r in records]
    assert len(uids) == len(set(uids)), "a record was delivered twice"
    return dict(zip(uids, records, strict=True))


def app_events(receiver: OTLPReceiver, prefix: str) -> list[dict[str, Any]]:
    return [r for r in receiver.records if str(r["event_name"]).startswith(prefix)]


def console(capture: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """The JSON lines obs wrote to stderr so far (consumed)."""
    err = capture.readouterr().err
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


@pytest.fixture
def receiver(otlp_receiver: OTLPReceiver) -> OTLPReceiver:
    """The plugin's receiver (gRPC + HTTP on free loopback ports)."""
    return otlp_receiver


@pytest.fixture
def console_out(capsys: pytest.CaptureFixture[str]) -> pytest.CaptureFixture[str]:
    """obs' console output (JSON lines on stderr), captured by pytest for the test."""
    return capsys


class TestMapping:
    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_every_field_arrives(
        self,
        receiver: OTLPReceiver,
        protocol: str,
        tmp_path: Path,
        console_out: pytest.CaptureFixture[str],
    ) -> None:
        """obs events, *_once events, typed stage events and bridged stdlib records arrive
        with every mapped field: event_name, event attribute, str body, severity, times,
        trace/span ids, exception.*, code.*, rank, stage/outcome, fields and the resource."""
        configure(endpoint(receiver, protocol), protocol, tmp_path, service_name="svc-e2e")
        log = obs.get_logger("tests.e2e")
        tracer = TracerProvider().get_tracer("t")
        start = time.time_ns()
        with tracer.start_as_current_span("request") as span:
            line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
            log.error("e2e_plain", chain="fi_ar", sizes=[1, 2], opts={"k": 1.5}, obj=object())
            ctx = span.get_span_context()
        for _ in range(3):
            log.warning_once("e2e_once", flag="x")
        obs.emit(
            comm_events.WorkspaceTerminalFailure(
                chain="fi_ar",
                backends_tried=("mnnvl", "trtllm"),
                reasons=("no_multicast", "no_cuda"),
                last_error_type="AssertionError",
                last_error_message="Torch not compiled with CUDA enabled",
                hint="run on GPUs",
            )
        )
        logging.getLogger("vllm.e2e").warning("cache %s is full", "kv")
        try:
            _ = 1 / 0
        except ZeroDivisionError:
            log.error("e2e_exc", exc_info=True)
        assert obs.flush(timeout=5.0)
        got = {r["event_name"]: r for r in app_events(receiver, "") if r["event_name"] != ""}
        got.update(
            {
                r["attributes"]["logger"]: r
                for r in receiver.records
                if r["attributes"].get("logger") == "vllm.e2e"
            }
        )

        plain = got["e2e_plain"]
        assert ("grpc" if protocol == "grpc" else "http") == plain["transport"]
        assert ("ERROR", 17, "e2e_plain") == (
            plain["severity_text"],
            plain["severity_number"],
            plain["body"],
        )
        assert (
            start <= plain["time_unix_nano"] <= plain["observed_time_unix_nano"] <= time.time_ns()
        )
        assert (format_trace_id(ctx.trace_id), format_span_id(ctx.span_id)) == (
            plain["trace_id"],
            plain["span_id"],
        )
        attrs = plain["attributes"]
        assert "e2e_plain" == attrs["event"]
        assert ("fi_ar", [1, 2], {"k": 1.5}) == (attrs["chain"], attrs["sizes"], attrs["opts"])
        assert attrs["obj"].startswith("<object object")
        assert (__file__, line, "TestMapping.test_every_field_arrives") == (
            attrs["code.file.path"],
            attrs["code.line.number"],
            attrs["code.function.name"],
        )
        assert (0, 0, 1, 0) == (
            attrs["rank"],
            attrs["local_rank"],
            attrs["world_size"],
            attrs["node_rank"],
        )
        assert socket.gethostname() == attrs["host.name"]
        assert not [
            k for k in attrs if k.startswith("_obs") or k in ("timestamp", "body", "severity_text")
        ]
        resource = plain["resource"]
        assert "svc-e2e" == resource["service.name"]
        assert (0, 0, 1, 0) == (
            resource["rank"],
            resource["local_rank"],
            resource["world_size"],
            resource["node_rank"],
        )
        assert f"{socket.gethostname()}:rank0" == resource["service.instance.id"]
        assert "obs" == plain["scope"]["name"]

        assert 1 == len(receiver.by_event("e2e_once"))
        assert ("WARNING", 13, "x") == (
            got["e2e_once"]["severity_text"],
            got["e2e_once"]["severity_number"],
            got["e2e_once"]["attributes"]["flag"],
        )
        typed = got["workspace_terminal_failure"]
        assert (17, "terminal_failure", "failure") == (
            typed["severity_number"],
            typed["attributes"]["stage"],
            typed["attributes"]["outcome"],
        )
        assert (
            "FlashInfer allreduce fusion workspace unavailable (fi_ar): tried mnnvl, trtllm"
            == typed["body"]
        )
        assert ["mnnvl", "trtllm"] == typed["attributes"]["backends_tried"]
        bridged = got["vllm.e2e"]
        assert ("cache kv is full", 13) == (bridged["body"], bridged["severity_number"])
        exc = got["e2e_exc"]["attributes"]
        assert ("ZeroDivisionError", "division by zero") == (
            exc["exception.type"],
            exc["exception.message"],
        )
        assert "1 / 0" in exc["exception.stacktrace"]


class TestCollectorFaults:
    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_down_at_start(
        self, protocol: str, tmp_path: Path, console_out: pytest.CaptureFixture[str]
    ) -> None:
        """With the collector down at start no WARNING+ record is lost (spooled, replayed
        once it is up) and every INFO is either delivered or counted as dropped."""
        port = free_port()
        configure(f"http://127.0.0.1:{port}", protocol, tmp_path)
        log = obs.get_logger("tests.down")
        for i in range(5):
            log.info("down_info", i=i)
            log.warning("down_warning", i=i)
            log.error("down_error", i=i)
        assert not obs.flush(timeout=1.5)
        with receiver_on(port, protocol) as rx:
            log.error("down_after", i=0)
            assert obs.flush(timeout=5.0)
            got = by_uid(app_events(rx, "down_"))
            names = sorted(r["event_name"] for r in got.values())
            assert 5 == names.count("down_warning")
            assert 5 == names.count("down_error")
            assert 1 == names.count("down_after")
            stats = sink().stats()
            assert 5 == names.count("down_info") + stats["dropped"].get("INFO", 0)
            assert stats["spooled"] >= 10
            assert stats["replayed"] >= 10
            dropped = rx.by_event("obs_records_dropped")
            assert sum(r["attributes"]["dropped"].get("INFO", 0) for r in dropped) == stats[
                "dropped"
            ].get("INFO", 0)

    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_down_mid_run_then_restarted(
        self,
        receiver: OTLPReceiver,
        protocol: str,
        tmp_path: Path,
        console_out: pytest.CaptureFixture[str],
    ) -> None:
        """A collector that goes away mid-run and comes back on the same port loses no
        WARNING+ record and delivers none twice."""
        configure(endpoint(receiver, protocol), protocol, tmp_path)
        log = obs.get_logger("tests.restart")
        log.error("mid_error", phase=1)
        assert obs.flush(timeout=3.0)
        receiver.stop()
        for i in range(4):
            log.error("mid_error", phase=2, i=i)
            log.info("mid_info", phase=2, i=i)
        assert not obs.flush(timeout=1.5)
        receiver.start()
        log.error("mid_error", phase=3)
        assert obs.flush(timeout=5.0)
        got = by_uid(app_events(receiver, "mid_"))
        errors = sorted(
            (r["attributes"]["phase"], r["attributes"].get("i", -1))
            for r in got.values()
            if r["event_name"] == "mid_error"
        )
        assert [(1, -1), (2, 0), (2, 1), (2, 2), (2, 3), (3, -1)] == errors
        infos = [r for r in got.values() if r["event_name"] == "mid_info"]
        assert 4 == len(infos) + sink().stats()["dropped"].get("INFO", 0)

    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_slow_collector(
        self,
        receiver: OTLPReceiver,
        protocol: str,
        tmp_path: Path,
        console_out: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A collector that holds its first export gets everything; every log call returns
        while it holds it (the caller never waits on an export)."""
        configure(endpoint(receiver, protocol), protocol, tmp_path, otlp_timeout=30.0)
        entered, release = threading.Event(), threading.Event()
        begin = receiver._begin_request

        def held(transport: str) -> Any:
            entered.set()
            release.wait(30.0)
            return begin(transport)

        monkeypatch.setattr(receiver, "_begin_request", held)
        log = obs.get_logger("tests.slow")

        def log_while_held() -> None:
            log.info("slow_info", i=0)
            if entered.wait(10.0):  # the first export is in the collector's hands
                for i in range(1, 20):
                    log.info("slow_info", i=i)

        logger = threading.Thread(target=log_while_held)
        logger.start()
        try:
            assert entered.wait(10.0), "the first record was never exported"
            logger.join(10.0)  # a call waiting on the held export: until release (not here)
            assert not logger.is_alive(), "a log call waited on the collector"
        finally:
            release.set()
            logger.join(30.0)
        assert obs.flush(timeout=10.0)
        assert list(range(20)) == sorted(
            r["attributes"]["i"] for r in by_uid(app_events(receiver, "slow_")).values()
        )

    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_tls_self_signed(
        self, protocol: str, tmp_path: Path, console_out: pytest.CaptureFixture[str]
    ) -> None:
        """Export over TLS to a collector with a self-signed certificate trusted as the CA."""
        cert, key = make_self_signed_cert(tmp_path / "tls")
        with OTLPReceiver(tls=(cert, key)) as rx:
            url = endpoint(rx, protocol)
            assert url.startswith("https://")
            configure(url, protocol, tmp_path / "spool", otlp_certificate=cert)
            obs.get_logger("tests.tls").error("tls_error")
            assert obs.flush(timeout=5.0)
            assert 1 == len(rx.by_event("tls_error"))

    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_wrong_ca_fails_cleanly(
        self, protocol: str, tmp_path: Path, console_out: pytest.CaptureFixture[str]
    ) -> None:
        """A CA that does not match fails the export without raising, spools WARNING+,
        reports it once; with the right CA the spool is replayed, nothing twice."""
        cert, key = make_self_signed_cert(tmp_path / "tls")
        other, _ = make_self_signed_cert(tmp_path / "other")
        with OTLPReceiver(tls=(cert, key)) as rx:
            url = endpoint(rx, protocol)
            configure(url, protocol, tmp_path / "spool", otlp_certificate=other)
            log = obs.get_logger("tests.tls")
            log.error("bad_ca_error", i=0)
            log.warning("bad_ca_warning", i=0)
            assert not obs.flush(timeout=2.5)
            assert [] == rx.records
            spooled = [
                json.loads(line)["name"]
                for f in (tmp_path / "spool").glob("spool*.jsonl")
                for line in f.read_text().splitlines()
            ]  # and the ExportFailed report, written ahead once the collector is down
            assert ["bad_ca_error", "bad_ca_warning"] == sorted(
                n for n in spooled if n.startswith("bad_ca_")
            )
            reported = [r for r in console(console_out) if r.get("event") == "obs_internal_error"]
            assert ["ExportFailed"] == [r["error_type"] for r in reported]
            configure(url, protocol, tmp_path / "spool", otlp_certificate=cert)
            assert obs.flush(timeout=5.0)
            got = by_uid(app_events(rx, "bad_ca_"))
            assert ["bad_ca_error", "bad_ca_warning"] == sorted(
                r["event_name"] for r in got.values()
            )


class TestOverflow:
    def test_low_severities_dropped_first_and_reported(
        self, receiver: OTLPReceiver, tmp_path: Path, console_out: pytest.CaptureFixture[str]
    ) -> None:
        """With a tiny queue and a stuck export, INFO is dropped before ERROR, every ERROR
        arrives and the drop count arrives as an obs_records_dropped event."""
        configure(
            receiver.http_endpoint,
            "http/protobuf",
            tmp_path,
            blrp_max_queue_size=10,
            blrp_max_export_batch_size=10,
            blrp_schedule_delay_ms=10_000,
        )
        receiver.set_fault(delay=0.5)
        log = obs.get_logger("tests.overflow")
        for i in range(10):
            log.info("ovf_first", i=i)  # a full batch: the export thread takes it and waits
        deadline = time.monotonic() + 5
        while receiver.requests["http"] < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        for i in range(20):
            log.info("ovf_info", i=i)
        for i in range(5):
            log.error("ovf_error", i=i)
        receiver.clear_fault()
        assert obs.flush(timeout=5.0)
        got = by_uid(app_events(receiver, "ovf_"))
        names = [r["event_name"] for r in got.values()]
        assert 10 == names.count("ovf_first")
        assert 5 == names.count("ovf_error")
        reports = receiver.by_event("obs_records_dropped")
        first = reports[0]["attributes"]
        assert ("queue_full", 13) == (first["reason"], reports[0]["severity_number"])
        assert set(first["dropped"]) == {"INFO"}
        assert first["dropped"]["INFO"] >= 15
        dropped_info = sum(r["attributes"]["dropped"].get("INFO", 0) for r in reports)
        assert 20 == names.count("ovf_info") + dropped_info
        assert {"INFO": dropped_info} == sink().stats()["dropped"]
        assert 0 == sink().stats()["failed_exports"]


class TestFork:
    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_child_exports_own_records_with_own_rank(
        self,
        receiver: OTLPReceiver,
        protocol: str,
        tmp_path: Path,
        console_out: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """After os.fork the child's records carry the child's rank; the parent's queued
        records are exported once, by the parent."""
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("WORLD_SIZE", "2")
        configure(endpoint(receiver, protocol), protocol, tmp_path, blrp_schedule_delay_ms=60_000)
        log = obs.get_logger("tests.fork")
        for i in range(3):
            log.error("fork_parent", i=i)  # queued, not exported yet (delay 60 s)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                os.environ["RANK"] = "1"
                os.environ["LOCAL_RANK"] = "1"
                obs.get_logger("tests.fork").error("fork_child")
                code = 0 if obs.flush(timeout=5.0) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert 0 == os.waitstatus_to_exitcode(status)
        assert obs.flush(timeout=5.0)
        got = by_uid(app_events(receiver, "fork_"))
        child = [r for r in got.values() if r["event_name"] == "fork_child"]
        parent = [r for r in got.values() if r["event_name"] == "fork_parent"]
        assert 1 == len(child)
        assert (1, 1, 1) == (
            child[0]["attributes"]["rank"],
            child[0]["resource"]["rank"],
            child[0]["resource"]["local_rank"],
        )
        assert child[0]["resource"]["service.instance.id"].endswith(":rank1")
        assert [0, 1, 2] == sorted(r["attributes"]["i"] for r in parent)
        assert {0} == {r["resource"]["rank"] for r in parent}


CHILD = r"""
import sys, time
import obs
mode, url, protocol, spool, budget, tag = sys.argv[1:7]
obs.configure(logs_exporter="otlp", otlp_endpoint=url, otlp_protocol=protocol, spool_dir=spool,
              format="json", shutdown_timeout=float(budget), otlp_timeout=10.0)
log = obs.get_logger("child")
for i in range(3):
    log.error("child_error", i=i, tag=tag)
    log.info("child_info", i=i, tag=tag)
sys.stderr.write(f"MARK {time.time()}\n")
sys.stderr.flush()
if mode == "shutdown":
    obs.shutdown(timeout=float(budget))
elif mode == "flush":
    sys.exit(0 if obs.flush(timeout=float(budget)) else 5)
"""


def run_child(*args: str) -> tuple[float, float, str, int]:
    """Run CHILD; return (mark time, exit time, stderr, exit code)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    _, err = proc.communicate(timeout=30)
    ended = time.time()
    marks = [float(line.split()[1]) for line in err.splitlines() if line.startswith("MARK ")]
    assert marks, err
    return marks[0], ended, err, proc.returncode


class TestShutdownBound:
    @pytest.mark.timeout(60)
    def test_exit_bounded_with_collector_unreachable(self, tmp_path: Path) -> None:
        """Process exit (explicit shutdown, or atexit alone) stays within the shutdown
        timeout plus a small margin with a blackholed or closed collector port, over gRPC
        and HTTP, and the undeliverable ERRORs end up in the spool (file mode 0600)."""
        budget = 1.5
        blackhole = socket.socket()
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(1)  # never accepts, never answers
        black_url = f"http://127.0.0.1:{blackhole.getsockname()[1]}"
        closed_url = f"http://127.0.0.1:{free_port()}"
        cases = {
            "blackhole-grpc": ("shutdown", black_url, "grpc"),
            "blackhole-http": ("shutdown", black_url, "http/protobuf"),
            "closed-grpc": ("shutdown", closed_url, "grpc"),
            "closed-http-atexit": ("atexit", closed_url, "http/protobuf"),
        }
        try:
            with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
                futures = {
                    name: pool.submit(
                        run_child, mode, url, proto, str(tmp_path / name), str(budget), name
                    )
                    for name, (mode, url, proto) in cases.items()
                }
                results = {name: f.result() for name, f in futures.items()}
        finally:
            blackhole.close()
        for name, (mark, ended, err, code) in results.items():
            assert 0 == code, err
            # The budget plus the interpreter's teardown (coverage's too: seconds on a loaded
            # machine, four children at once), well under the 10 s export timeout it waited.
            assert ended - mark < budget + 5.0, f"{name}: exit took {ended - mark:.2f}s"
            spool = tmp_path / name / "spool.jsonl"
            assert 0o600 == stat.S_IMODE(spool.stat().st_mode)
            lines = [json.loads(x) for x in spool.read_text().splitlines()]
            assert [0, 1, 2] == sorted(
                d["attrs"]["i"] for d in lines if d["name"] == "child_error"
            ), name

    @pytest.mark.timeout(60)
    def test_next_processes_replay_the_spool_once(self, tmp_path: Path) -> None:
        """A process that could not deliver leaves its ERRORs in the spool; two later
        processes sharing the spool dir replay them exactly once between them."""
        spool = str(tmp_path / "spool")
        _, _, err, code = run_child(
            "shutdown", f"http://127.0.0.1:{free_port()}", "http/protobuf", spool, "1.0", "first"
        )
        assert 0 == code, err
        with OTLPReceiver() as rx:
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                runs = [
                    pool.submit(
                        run_child,
                        "flush",
                        rx.http_endpoint,
                        "http/protobuf",
                        spool,
                        "5.0",
                        f"next{i}",
                    )
                    for i in range(2)
                ]
                for run in runs:
                    assert 0 == run.result()[3], run.result()[2]
            got = by_uid([r for r in rx.records if r["event_name"] == "child_error"])
            tags = sorted((r["attributes"]["tag"], r["attributes"]["i"]) for r in got.values())
            expected = sorted((tag, i) for tag in ("first", "next0", "next1") for i in range(3))
            assert expected == tags
            first = [r for r in got.values() if r["attributes"]["tag"] == "first"]
            assert all(r["attributes"]["obs.replayed"] is True for r in first)
        assert (
            not os.path.exists(os.path.join(spool, "spool.jsonl"))
            or os.path.getsize(os.path.join(spool, "spool.jsonl")) == 0
        )


class TestRecursion:
    def test_sdk_warnings_during_export_do_not_loop(
        self,
        receiver: OTLPReceiver,
        tmp_path: Path,
        console_out: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The SDK's (and any library's) warnings logged on the export thread while exports
        fail reach the console but are never exported, so a failing export cannot feed itself."""
        real_build = obs.otel.transport.build_exporter

        class Chatty:
            """The real OTLP exporter, plus a third-party library warning on every call."""

            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def export(self, batch: Any) -> Any:
                logging.getLogger("thirdparty.net").warning("socket hiccup on export")
                return self.inner.export(batch)

            def shutdown(self) -> None:
                self.inner.shutdown()

            def force_flush(self, timeout_millis: int = 30000) -> bool:
                return True

        build: Callable[..., Any] = lambda settings: Chatty(real_build(settings))  # noqa: E731
        monkeypatch.setattr(obs.otel.transport, "build_exporter", build)
        configure(receiver.http_endpoint, "http/protobuf", tmp_path)
        receiver.set_fault(fail=True, http_status=400)  # not retryable: the SDK logs an error
        log = obs.get_logger("tests.recursion")
        log.error("rec_error")
        assert not obs.flush(timeout=2.0)
        time.sleep(0.3)  # a loop would keep exporting here
        requests_while_failing = receiver.requests["http"]
        assert requests_while_failing <= 3
        receiver.clear_fault()
        assert obs.flush(timeout=5.0)
        loggers = {r["attributes"].get("logger") for r in receiver.records}
        assert not {
            name for name in loggers if str(name).startswith(("opentelemetry", "thirdparty"))
        }
        assert 1 == len(receiver.by_event("rec_error"))
        shown = {r.get("logger") for r in console(console_out)}
        assert "thirdparty.net" in shown
        assert any(str(name).startswith("opentelemetry") for name in shown)


class TestChainFailure:
    """A record the chain fails on is written by the last resort, on both routes: it
    reached the JSON line only, never OTLP (found by an adversarial review on b8ea922)."""

    @pytest.mark.parametrize(
        "odd",
        [
            {"once_key": 10**5000},  # the dedup key's text: str() of a 5,000-digit int
            {"_obs_time_ns": "x"},  # a private key the chain trusts
        ],
        ids=["huge_once_key", "bad_private_time"],
    )
    def test_terminal_failure_reaches_the_collector(
        self,
        receiver: OTLPReceiver,
        console_out: pytest.CaptureFixture[str],
        tmp_path: Path,
        odd: dict[str, Any],
    ) -> None:
        configure(receiver.http_endpoint, "http/protobuf", tmp_path)
        obs.get_logger("tests.lastresort").error("workspace_terminal_failure", **odd)
        assert obs.flush(timeout=5.0)
        lines = [r["event"] for r in console(console_out)]
        exported = receiver.by_event("workspace_terminal_failure")
        assert ("workspace_terminal_failure" in lines, 1) == (True, len(exported))
        assert "ERROR" == exported[0]["severity_text"]

    def test_a_failure_after_export_is_not_exported_twice(
        self,
        receiver: OTLPReceiver,
        console_out: pytest.CaptureFixture[str],
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The renderer failing (after the export step) leaves one exported record."""
        real = obs.render.JSONRenderer.__call__

        def render(self: Any, logger: Any, method: str, event_dict: Any) -> Any:
            if event_dict.get("event") == "render_fails":
                raise RuntimeError("renderer broke")
            return real(self, logger, method, event_dict)

        monkeypatch.setattr(obs.render.JSONRenderer, "__call__", render)
        configure(receiver.http_endpoint, "http/protobuf", tmp_path)
        obs.get_logger("tests.lastresort").bind(k=1).error("render_fails", nested={"a": 1})
        assert obs.flush(timeout=5.0)
        assert ["render_fails"] == [r["event"] for r in console(console_out)][:1]
        assert 1 == len(receiver.by_event("render_fails"))
