"""Tests for comm.probe: the CLI end to end as a subprocess, and its reporting pieces."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _children import traced_parent

from comm import probe
from comm.probe import ChainReport, ProbeResult, ProbeSpec, RankReport, format_ranks
from comm.probe import cli as probe_cli
from comm.probe.launch import rank_env
from comm.probe.rank import init_dist
from comm.probe.spec import decode_spec, encode_spec
from obs._receiver import OTLPReceiver
from obs.fallback import Attempt

ROOT = Path(__file__).resolve().parents[2]


def run_probe(
    *args: str, log_dir: Path, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OBS_", "COMM_"))}
    env.update(extra_env or {})
    env = traced_parent(env)  # the launcher and ranks never save coverage data
    return subprocess.run(
        [sys.executable, "-m", "comm", "probe", *args, "--log-dir", str(log_dir)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=str(ROOT),
        env=env,
    )


def table_rows(stdout: str, header: str = "ranks  chain") -> list[list[str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 1 :]:
        if not line[:1].isdigit():
            break
        rows.append([cell for cell in line.split("  ") if cell.strip()])
    return [[c.strip() for c in row] for row in rows]


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """`python -m comm probe --world-size 2 --nodes 2` with the embedded receiver."""
    return run_probe("--world-size", "2", "--nodes", "2", log_dir=tmp_path_factory.mktemp("n2"))


@pytest.fixture(scope="module")
def one_node(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """`python -m comm probe --world-size 2 --nodes 1 --verbose` (one row per rank)."""
    return run_probe(
        "--world-size", "2", "--nodes", "1", "--verbose", log_dir=tmp_path_factory.mktemp("n1")
    )  # fmt: skip


@pytest.mark.integration
class TestProbeTwoNodes:
    def test_exit_code_terminal(self, two_nodes: subprocess.CompletedProcess[str]) -> None:
        """Terminal failure on the ranks (CPU: no CUDA) exits with 3."""
        assert 3 == two_nodes.returncode, two_nodes.stderr[-3000:]
        assert "exit 3: terminal failure" in two_nodes.stdout

    def test_table(self, two_nodes: subprocess.CompletedProcess[str]) -> None:
        """Ranks with the same outcome share a row: mnnvl no_cuda, trtllm skipped by the
        node rule, on ranks 0-1."""
        reason = "mnnvl: no_cuda; trtllm skipped: multi_node"
        assert [
            ["0-1", "fi_ar", "mnnvl", reason, "terminal_failure"],
            ["0-1", "fi_ar_quant", "mnnvl", reason, "terminal_failure"],
        ] == table_rows(two_nodes.stdout)

    def test_delivery_line_from_obs_counters(
        self, two_nodes: subprocess.CompletedProcess[str]
    ) -> None:
        """The report ends with what each rank's obs says it sent and the collector
        acknowledged, and the endpoint used (the first release said nothing)."""
        lines = two_nodes.stdout.splitlines()
        at = lines.index("OTLP delivery (each rank's own obs counters):")
        delivery = [line.strip() for line in lines[at + 1 :] if line.startswith("  ")]
        assert delivery, two_nodes.stdout
        for line in delivery:
            m = re.match(
                r"ranks? [\d, -]+: sent (\d+), acknowledged (\d+), spooled 0, dropped 0 -> "
                r"http://127\.0\.0\.1:\d+/v1/logs \(delivered\)$",
                line,
            )
            assert m is not None, line
            assert int(m[1]) == int(m[2]) > 0, line

    def test_progress_lines(self, two_nodes: subprocess.CompletedProcess[str]) -> None:
        """A progress line per rank as it starts, with its node, on stderr."""
        err = two_nodes.stderr
        assert "node 0, local rank 0)" in err
        assert "node 1, local rank 0)" in err
        assert err.count(" started (pid ") == 2

    def test_otlp_summary(self, two_nodes: subprocess.CompletedProcess[str]) -> None:
        """What arrived over OTLP, per event and rank: both ranks' terminal failures."""
        out = two_nodes.stdout
        assert (
            "  workspace_terminal_failure: 4 records, ranks 0-1 (fi_ar: 2, fi_ar_quant: 2), "
            "severity_number 17"
        ) in out
        assert (
            "  workspace_attempt_failed: 4 records, ranks 0-1 (fi_ar: 2, fi_ar_quant: 2), "
            "severity_number 13"
        ) in out
        # DEBUG attempts are scoped 'local': one per node's first rank, i.e. both here.
        assert "  workspace_attempt: 4 records, ranks 0-1" in out
        assert "workspace_fallback" not in out
        assert "every rank's workspace_terminal_failure arrived over OTLP" in out

    def test_rank_logs_are_json_lines(self, two_nodes: subprocess.CompletedProcess[str]) -> None:
        """Each rank's console output (JSON lines) and report land in the log dir."""
        log_dir = Path(next(x for x in two_nodes.stdout.splitlines() if x.startswith("rank logs:"))
                       .split(": ", 1)[1])  # fmt: skip
        lines = [json.loads(x) for x in (log_dir / "rank-1.log").read_text().splitlines()
                 if x.startswith("{")]  # fmt: skip
        terminal = [x for x in lines if x["event"] == "workspace_terminal_failure"]
        assert [(1, 1, "fi_ar"), (1, 1, "fi_ar_quant")] == [
            (x["rank"], x["node_rank"], x["chain"]) for x in terminal
        ]
        report = json.loads((log_dir / "rank-1.json").read_text())
        assert (1, 0, 1) == (report["rank"], report["local_rank"], report["node"])


@pytest.mark.integration
class TestProbeOneNode:
    def test_fallback_attempted(self, one_node: subprocess.CompletedProcess[str]) -> None:
        """On one node auto falls back to trtllm, which is tried and reported."""
        assert 3 == one_node.returncode, one_node.stderr[-3000:]
        reason = "mnnvl: no_cuda; trtllm: no_cuda"
        assert [
            ["0", "0", "fi_ar", "mnnvl, trtllm", reason, "terminal_failure"],
            ["0", "0", "fi_ar_quant", "mnnvl, trtllm", reason, "terminal_failure"],
            ["1", "0", "fi_ar", "mnnvl, trtllm", reason, "terminal_failure"],
            ["1", "0", "fi_ar_quant", "mnnvl, trtllm", reason, "terminal_failure"],
        ] == table_rows(one_node.stdout, "rank  node  chain")

    def test_otlp_summary(self, one_node: subprocess.CompletedProcess[str]) -> None:
        """Fallbacks and attempt failures arrive from both ranks; attempts from rank 0."""
        out = one_node.stdout
        assert (
            "  workspace_fallback: 4 records, ranks 0-1 (fi_ar: 2, fi_ar_quant: 2), "
            "severity_number 13"
        ) in out
        assert "  workspace_attempt_failed: 8 records, ranks 0-1" in out
        assert "  workspace_attempt: 4 records, ranks 0 (fi_ar: 2, fi_ar_quant: 2)" in out
        assert "  workspace_terminal_failure: 4 records, ranks 0-1" in out


class TestUsage:
    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["--world-size", "3", "--nodes", "2"], "is not a multiple of --nodes"),
            (["--world-size", "0"], "0 is not >= 1"),
            (["--world-size", "2", "--backend", "nvls"], "invalid choice: 'nvls'"),
            ([], "the following arguments are required: --world-size"),
            (
                ["--world-size", "2", "--otlp-endpoint", "http://x:1", "--embedded-receiver"],
                "not allowed with argument",
            ),
            (["--world-size", "2", "--otlp-endpoint", "ftp://x"], "otlp_endpoint='ftp://x'"),
            (["--world-size", "2", "--timeout", "0"], "0 is not a positive number"),
            (["--world-size", "2", "--timeout", "-5"], "-5 is not a positive number"),
            (["--world-size", "2", "--timeout", "nan"], "nan is not a positive number"),
            (["--world-size", "2", "--verbose", "--json"], "not allowed with argument"),
        ],
    )
    def test_bad_usage_exits_2(
        self, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Bad arguments exit with 2 and say what is wrong, before any rank starts."""
        assert 2 == probe.main(argv)
        assert message in capsys.readouterr().err

    @pytest.mark.parametrize(
        "where",
        ["a file", "under a file", "under /proc", "a long name", "read-only"],
    )
    def test_an_unusable_log_dir_is_bad_usage(self, tmp_path: Path, where: str) -> None:
        """--log-dir that cannot hold the run (a file, a path under one, /proc, a name
        too long, a folder it cannot write) exits 2 with one error line naming --log-dir,
        before any rank starts; it was a traceback and exit 1."""
        (tmp_path / "f").write_text("x")
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        path = {
            "a file": str(tmp_path / "f"),
            "under a file": str(tmp_path / "f" / "run"),
            "under /proc": "/proc/comm-probe-test/run",
            "a long name": str(tmp_path / ("x" * 300)),
            "read-only": str(ro / "run") if os.geteuid() else "/proc/sys/comm-probe",
        }[where]
        done = subprocess.run(
            [sys.executable, "-m", "comm", "probe", "--world-size", "1", "--log-dir", path],
            capture_output=True, text=True, timeout=120, check=False, cwd=str(ROOT),
        )  # fmt: skip
        errors = [line for line in done.stderr.splitlines() if "error:" in line]
        assert (2, 1) == (done.returncode, len(errors)), done.stderr
        assert "--log-dir" in errors[0]
        assert "Traceback" not in done.stderr
        assert "[probe]" not in done.stderr  # nothing started

    def test_module_entry_usage(self) -> None:
        """`python -m comm` without a command prints usage and exits 2; `--help` exits 0."""
        bare = subprocess.run([sys.executable, "-m", "comm"], capture_output=True, text=True,
                              timeout=60, check=False, cwd=str(ROOT))  # fmt: skip
        assert (2, True) == (bare.returncode, "usage: python -m comm probe" in bare.stdout)
        bad = subprocess.run([sys.executable, "-m", "comm", "nope"], capture_output=True,
                             text=True, timeout=60, check=False, cwd=str(ROOT))  # fmt: skip
        assert (2, True) == (bad.returncode, "unknown command 'nope'" in bad.stderr)


@pytest.mark.integration
class TestProbeDelivery:
    def test_full_logs_url_is_used_as_is(self, tmp_path: Path) -> None:
        """--otlp-endpoint http://host:port/v1/logs reaches the collector (the first release
        posted to /v1/logs/v1/logs and got 404 without saying so)."""
        receiver = OTLPReceiver(grpc=False).start()
        try:
            url = receiver.http_endpoint.rstrip("/") + "/v1/logs"
            proc = run_probe("--world-size", "2", "--otlp-endpoint", url, log_dir=tmp_path)
            assert 3 == proc.returncode, proc.stdout + proc.stderr[-3000:]
            assert receiver.by_event("workspace_terminal_failure"), proc.stdout
            assert f"-> {url} (delivered)" in proc.stdout
            assert "/v1/logs/v1/logs" not in proc.stdout
        finally:
            receiver.stop()

    def test_unreachable_endpoint_exits_4(self, tmp_path: Path) -> None:
        """Records that never reached the collector give exit 4 and a NOT DELIVERED line
        with the counts (the first release exited 3, silent about delivery)."""
        port = _closed_port()
        env = {"OBS_SPOOL_DIR": str(tmp_path / "spool")}
        proc = run_probe("--world-size", "2", "--otlp-endpoint", f"http://127.0.0.1:{port}",
                         log_dir=tmp_path / "logs", extra_env=env)  # fmt: skip
        assert 4 == proc.returncode, proc.stdout + proc.stderr[-3000:]
        assert "exit 4: records were not delivered over OTLP" in proc.stdout
        line = next(x for x in proc.stdout.splitlines() if "NOT DELIVERED" in x)
        assert "acknowledged 0, spooled " in line
        assert f"127.0.0.1:{port}/v1/logs" in line

    def test_without_torch_the_cause_is_on_screen(self, tmp_path: Path) -> None:
        """When the launcher cannot import torch, the screen says so (the first release
        said only "no report (crashed or timed out)")."""
        shadow = tmp_path / "shadow"
        shadow.mkdir()
        (shadow / "torch.py").write_text(
            "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n"
        )
        proc = run_probe("--world-size", "2", log_dir=tmp_path / "logs",
                         extra_env={"PYTHONPATH": str(shadow)})  # fmt: skip
        assert 1 == proc.returncode, proc.stdout
        assert "ranks 0-1: launcher: ModuleNotFoundError: No module named 'torch'" in proc.stdout


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _report(rank: int, *outcomes: str) -> RankReport:
    chains = tuple(
        ChainReport(
            chain,
            outcome,
            "trtllm" if outcome == "initialized" else None,
            False,
            outcome != "initialized",
            (Attempt("mnnvl", "no_multicast", "RuntimeError", "m", 1.0),)
            + ((Attempt("trtllm", None, None, None, 2.0),) if outcome == "initialized" else ()),
        )
        for chain, outcome in zip(("fi_ar", "fi_ar_quant"), outcomes, strict=True)
    )
    return RankReport(rank, rank, 0, 100 + rank, "gloo", chains, None, 0.1)


def _result(reports: dict[int, RankReport], world: int = 2, **kw: Any) -> ProbeResult:
    return ProbeResult(
        ProbeSpec(world_size=world), reports, kw.get("missing", ()), "fork", False, 1.0
    )


class TestReporting:
    def test_exit_codes(self) -> None:
        """0 all initialized, 3 any terminal failure, 1 a missing rank without one."""
        ok = {r: _report(r, "initialized", "initialized") for r in (0, 1)}
        assert 0 == _result(ok).exit_code
        bad = {0: _report(0, "initialized", "terminal_failure"), 1: ok[1]}
        assert 3 == _result(bad).exit_code
        assert 1 == _result({0: ok[0]}, missing=(1,)).exit_code
        assert 3 == _result({0: _report(0, "config_error", "config_error")}, missing=(1,)).exit_code

    def test_render_table_initialized(self) -> None:
        """An initialized chain shows the backends tried, the failure and the winner."""
        table = probe.render_table(_result({0: _report(0, "initialized", "initialized")}, 1))
        assert [
            "rank  node  chain        backend tried  reason               outcome",
            "0     0     fi_ar        mnnvl, trtllm  mnnvl: no_multicast  initialized (trtllm)",
            "0     0     fi_ar_quant  mnnvl, trtllm  mnnvl: no_multicast  initialized (trtllm)",
        ] == table.splitlines()

    def test_render_table_missing_rank(self) -> None:
        """A rank that never reported gets a row saying so."""
        table = probe.render_table(_result({}, 1, missing=(0,)))
        assert "no report (crashed or timed out)" in table.splitlines()[1]

    def test_summarize_records(self) -> None:
        """Typed events get one line each in stage order; other records per logger."""

        def rec(event: str, rank: int, sev: int, **attrs: Any) -> dict[str, Any]:
            return {"event_name": event, "severity_number": sev,
                    "attributes": {"event": event, "rank": rank, **attrs}}  # fmt: skip

        records = [
            rec("workspace_terminal_failure", 3, 17, chain="fi_ar"),
            rec("workspace_attempt_failed", 0, 13, chain="fi_ar"),
            rec("workspace_terminal_failure", 2, 17, chain="fi_ar"),
            rec("workspace_terminal_failure", 0, 17, chain="fi_ar_quant"),
            rec("some stdlib message 42", 1, 5, logger="root"),
        ]
        assert [
            "workspace_attempt_failed: 1 record, ranks 0 (fi_ar: 1), severity_number 13",
            "workspace_terminal_failure: 3 records, ranks 0, 2-3 (fi_ar: 2, fi_ar_quant: 1), "
            "severity_number 17",
            "other records from logger root: 1 record, ranks 1, severity_number 5",
        ] == probe.summarize_records(records)

    @pytest.mark.parametrize(
        ("ranks", "text"),
        [([], "none"), ([3], "3"), ([0, 1, 2, 3], "0-3"), ([5, 0, 1, 3, 2, 7], "0-3, 5, 7")],
    )
    def test_format_ranks(self, ranks: list[int], text: str) -> None:
        """Rank lists are compressed into ranges."""
        assert text == format_ranks(ranks)

    def test_rank_env_is_torchrun_style(self) -> None:
        """Rank 3 of 4 on 2 nodes gets torchrun's variables."""
        env = rank_env(probe.ProbeSpec(world_size=4, nodes=2, master_port=1234), 3)
        assert {
            "RANK": "3",
            "LOCAL_RANK": "1",
            "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "1",
            "NODE_RANK": "1",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "1234",
        } == env

    def test_main_output_to_stream(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """main() prints the table and verdict to its stream and returns the exit code."""
        fake = _result({r: _report(r, "initialized", "initialized") for r in (0, 1)})
        monkeypatch.setattr(probe_cli, "launch", lambda spec, on_message=None: fake)
        out = io.StringIO()
        assert 0 == probe.main(["--world-size", "2", "--otlp-endpoint", "http://127.0.0.1:9"],
                               out=out)  # fmt: skip
        text = out.getvalue()
        assert "exit 0: every rank initialized both workspaces" in text
        assert "OTLP records received" not in text  # an external endpoint: no summary


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(entry.name))
    return pids


@pytest.mark.integration
class TestLaunchFailures:
    @pytest.mark.usefixtures("untraced_children")
    def test_timeout_kills_every_rank(self, tmp_path: Path) -> None:
        """Past the timeout the launcher and ranks are killed; the result says timed out."""
        log_dir = tmp_path / "timeout"
        result = probe.launch(ProbeSpec(world_size=2, timeout=1.0, log_dir=str(log_dir)))
        assert (True, (0, 1), 1) == (result.timed_out, result.missing, result.exit_code)
        assert [] == _processes_mentioning(str(log_dir))

    @pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
    def test_signal_to_the_probe_kills_every_rank(self, tmp_path: Path, signum: int) -> None:
        """SIGTERM (timeout(1), Kubernetes, CI) or Ctrl-C to the probe while the launcher
        runs: the launcher and its ranks go with it, and the exit status is 128 + signal.
        SIGTERM killed the probe alone before: the launcher (its own session) went on."""
        log_dir = tmp_path / "signalled"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OBS_"))}
        proc = subprocess.Popen(
            [sys.executable, "-m", "comm", "probe", "--world-size", "2", "--log-dir",
             str(log_dir), "--timeout", "60"],
            cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        launched = json.dumps({"log_dir": str(log_dir)})[1:-1]  # in the launcher's argv
        try:
            deadline = time.monotonic() + 30
            while not _processes_mentioning(launched) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _processes_mentioning(launched), "the launcher never started"
            proc.send_signal(signum)
            code = proc.wait(timeout=20)
        finally:
            proc.kill()
        assert ([], 128 + signum) == (_processes_mentioning(launched), code)

    @pytest.mark.usefixtures("untraced_children")
    def test_rank_error_is_reported(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A rank that fails before the getters (bad obs setting) reports why; exit 1."""
        monkeypatch.setenv("OBS_LEVEL", "bogus")
        result = probe.launch(ProbeSpec(world_size=2, log_dir=str(tmp_path), timeout=120))
        assert () == result.missing
        errors = [result.reports[r].error or "" for r in (0, 1)]
        assert all(e.startswith("ConfigError: OBS_LEVEL='bogus' is not valid") for e in errors)
        assert 1 == result.exit_code
        assert "error" == probe.render_table(result).splitlines()[1].split()[-1]


def _delivery(sent: int, acked: int) -> dict[str, Any]:
    return {"exporting": True, "endpoint": "http://c:4318/v1/logs", "sent": sent,
            "acknowledged": acked, "spooled": sent - acked, "dropped": 0}  # fmt: skip


class TestUsability:
    def test_64_ranks_read_in_two_rows(self) -> None:
        """--world-size 64 with one outcome everywhere is two rows (one per chain), not 128."""
        reports = {r: _report(r, "terminal_failure", "terminal_failure") for r in range(64)}
        table = probe.render_grouped(_result(reports, 64))
        rows = table.splitlines()[1:]
        assert 2 == len(rows), table
        assert all(row.startswith("0-63  ") for row in rows)

    def test_undelivered_records_exit_4_over_3(self) -> None:
        """Sent but not acknowledged on any rank: exit 4, even with a terminal failure."""
        base = _report(0, "terminal_failure", "terminal_failure")
        ok = {0: dataclasses.replace(base, delivery=_delivery(5, 5))}
        assert (3, ()) == (_result(ok, 1).exit_code, _result(ok, 1).undelivered)
        lost = {0: dataclasses.replace(base, delivery=_delivery(5, 2))}
        assert (4, (0,)) == (_result(lost, 1).exit_code, _result(lost, 1).undelivered)
        lines = probe.render_delivery(_result(lost, 1))
        assert ["rank 0: sent 5, acknowledged 2, spooled 3, dropped 0 -> "
                "http://c:4318/v1/logs (NOT DELIVERED)"] == lines  # fmt: skip

    def test_json_output(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """--json prints one JSON document with every rank's report and the exit code."""
        fake = _result({r: _report(r, "initialized", "initialized") for r in (0, 1)})
        monkeypatch.setattr(probe_cli, "launch", lambda spec, on_message=None: fake)
        out = io.StringIO()
        argv = ["--world-size", "2", "--json", "--otlp-endpoint", "http://u:pw@127.0.0.1:9"]
        assert 0 == probe.main(argv, out=out)
        doc = json.loads(out.getvalue())
        assert (0, ["0", "1"]) == (doc["exit_code"], sorted(doc["reports"]))
        assert "pw" not in out.getvalue()

    def test_backend_from_the_environment(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Without --backend the probe uses COMM_FI_AR_BACKEND and says so in its banner
        (the first release ignored it); a bad value is a usage error."""
        seen: list[ProbeSpec] = []

        def fake(spec: ProbeSpec, on_message: Any = None) -> ProbeResult:
            seen.append(spec)
            return _result({r: _report(r, "initialized", "initialized") for r in (0, 1)})

        monkeypatch.setattr(probe_cli, "launch", fake)
        monkeypatch.setenv("COMM_FI_AR_BACKEND", "mnnvl")
        assert 0 == probe.main(["--world-size", "2", "--otlp-endpoint", "http://127.0.0.1:9"],
                               out=io.StringIO())  # fmt: skip
        assert "mnnvl" == seen[0].backend
        assert "backend=mnnvl (from COMM_FI_AR_BACKEND)" in capsys.readouterr().err
        monkeypatch.setenv("COMM_FI_AR_BACKEND", "nvls")
        assert 2 == probe.main(["--world-size", "2"], out=io.StringIO())
        assert "COMM_FI_AR_BACKEND='nvls'" in capsys.readouterr().err

    def test_every_option_has_help_and_shows_its_default(self) -> None:
        """--help explains every option and shows the defaults."""
        parser = probe.build_parser()
        for action in parser._actions:  # argparse has no public listing
            assert action.help, action.option_strings
        assert "(default: 120.0)" in parser.format_help()

    def test_nccl_without_gpus_says_why(self) -> None:
        """--dist-backend nccl on a CPU fails with a sentence, not a truncated
        AttributeError from torch.cuda."""
        spec = probe.ProbeSpec(world_size=1, dist_backend="nccl", timeout=5)
        with pytest.raises(RuntimeError, match="needs one CUDA GPU per local rank"):
            init_dist(spec, 0)

    def test_default_run_dirs_keep_the_last_n(self, tmp_path: Path) -> None:
        """Default run folders are pruned to the newest KEEP_RUNS (the first release left
        a comm-probe-* folder in /tmp per run, forever); other folders are left alone."""
        (tmp_path / "mine").mkdir()
        made = []
        for i in range(probe.KEEP_RUNS + 3):
            made.append(probe.new_run_dir(str(tmp_path), keep=probe.KEEP_RUNS))
            os.utime(made[-1], (1000 + i, 1000 + i))
        left = sorted(p.name for p in tmp_path.iterdir())
        assert sorted([*(Path(m).name for m in made[-probe.KEEP_RUNS :]), "mine"]) == left

    def test_last_exception_reads_a_traceback(self, tmp_path: Path) -> None:
        """The cause shown for a crashed rank is its log's last exception line."""
        log = tmp_path / "rank-0.log"
        log.write_text("Traceback (most recent call last):\n  File x\n"
                       "torch.distributed.DistStoreError: timed out\nbye\n")  # fmt: skip
        assert "torch.distributed.DistStoreError: timed out" == probe.last_exception(str(log))
        assert probe.last_exception(str(tmp_path / "none.log")) is None


def test_default_run_dir_parent_must_be_private(tmp_path: Path) -> None:
    """A shared, writable-by-others parent (or a symlink) is not used or pruned."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "run-victim").mkdir()
    made = probe.new_run_dir(str(shared), keep=1)
    assert not made.startswith(str(shared))
    assert (shared / "run-victim").is_dir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "private", target_is_directory=True)
    (tmp_path / "private").mkdir()
    assert not probe.new_run_dir(str(link)).startswith(str(link))


def test_the_launchers_argument_carries_the_spec_and_the_pipe() -> None:
    """The spec and pipe the launcher and ranks decode are the ones the probe encoded (the
    launcher process leaves through ``os._exit``: its own coverage is never saved)."""
    spec = ProbeSpec(world_size=4, nodes=2, timeout=7.5, log_dir="/tmp/x y", master_port=1234)
    assert (spec, 9) == decode_spec(encode_spec(spec, 9))
