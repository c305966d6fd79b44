"""The real flashinfer-python on a CPU-only machine: what the getters do, end to end.

No fakes: real torch.distributed (gloo), real ``flashinfer.comm``, real OTLP export to the
real ``OTLPReceiver``. On this machine every backend fails with "Torch not compiled with
CUDA enabled", so both getters must return None with reason ``no_cuda`` and every rank
must deliver one ``workspace_terminal_failure`` per chain. Runs in CI (never skipped):
flashinfer-python is a test dependency.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _children import COVERAGE_VAR

from comm.probe import ProbeResult, ProbeSpec, launch
from obs._receiver import OTLPReceiver

pytestmark = pytest.mark.integration

NO_CUDA = "Torch not compiled with CUDA enabled"


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProbeResult, Any]]:
    """Two gloo ranks on one node running both real getters, exporting to a receiver."""
    receiver = OTLPReceiver(grpc=False).start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv(COVERAGE_VAR, raising=False)  # the ranks leave through os._exit
            result = launch(
                ProbeSpec(
                    world_size=2,
                    nodes=1,
                    otlp_endpoint=receiver.http_endpoint,
                    log_dir=str(tmp_path_factory.mktemp("real")),
                    timeout=120,
                )
            )
        with contextlib.suppress(TimeoutError):  # the assertions below say what is missing
            receiver.wait_for(4, predicate=_terminal, timeout=10)
        yield result, receiver
    finally:
        receiver.stop()


def _terminal(record: dict[str, Any]) -> bool:
    return record["event_name"] == "workspace_terminal_failure"


def test_both_getters_return_none_no_cuda(two_ranks: tuple[ProbeResult, Any]) -> None:
    """On CPU both getters return None on every rank; every attempt is no_cuda."""
    result, _ = two_ranks
    assert () == result.missing, f"logs in {result.spec.log_dir}"
    for rank in (0, 1):
        report = result.reports[rank]
        assert (None, "gloo") == (report.error, report.dist_backend)
        got = [
            (c.chain, c.returned_none, c.outcome, [(a.backend, a.reason) for a in c.attempts])
            for c in report.chains
        ]
        assert [
            ("fi_ar", True, "terminal_failure", [("mnnvl", "no_cuda"), ("trtllm", "no_cuda")]),
            (
                "fi_ar_quant",
                True,
                "terminal_failure",
                [("mnnvl", "no_cuda"), ("trtllm", "no_cuda")],
            ),
        ] == got
        assert {NO_CUDA} == {a.error_message for c in report.chains for a in c.attempts}
    assert 3 == result.exit_code


def test_terminal_failure_per_rank_per_chain(two_ranks: tuple[ProbeResult, Any]) -> None:
    """One workspace_terminal_failure per rank per chain arrives over OTLP, severity 17."""
    _, receiver = two_ranks
    records = receiver.by_event("workspace_terminal_failure")
    got = sorted((r["attributes"]["rank"], r["attributes"]["chain"]) for r in records)
    assert [(0, "fi_ar"), (0, "fi_ar_quant"), (1, "fi_ar"), (1, "fi_ar_quant")] == got
    for record in records:
        attrs = record["attributes"]
        assert (17, "ERROR") == (record["severity_number"], record["severity_text"])
        assert {
            "event": "workspace_terminal_failure",
            "stage": "terminal_failure",
            "outcome": "failure",
            "logger": "comm.flashinfer_allreduce",
            "world_size": 2,
            "node_rank": 0,
            "local_rank": attrs["rank"],
            "backends_tried": ["mnnvl", "trtllm"],
            "reasons": ["no_cuda", "no_cuda"],
            "last_error_type": "AssertionError",
            "last_error_message": NO_CUDA,
        } == {
            k: attrs[k]
            for k in (
                "event",
                "stage",
                "outcome",
                "logger",
                "world_size",
                "node_rank",
                "local_rank",
                "backends_tried",
                "reasons",
                "last_error_type",
                "last_error_message",
            )
        }
        assert attrs["host.name"]
        assert attrs["rank"] == record["resource"]["rank"]
        assert isinstance(record["body"], str)
        assert record["body"].startswith("FlashInfer allreduce fusion workspace unavailable")


def test_attempt_failures_from_every_rank(two_ranks: tuple[ProbeResult, Any]) -> None:
    """Attempt failures (WARNING) are exported from both ranks, though scoped 'local'."""
    _, receiver = two_ranks
    failed = receiver.by_event("workspace_attempt_failed")
    got = sorted(
        (r["attributes"]["rank"], r["attributes"]["chain"], r["attributes"]["backend"])
        for r in failed
    )
    assert [
        (0, "fi_ar", "mnnvl"),
        (0, "fi_ar", "trtllm"),
        (0, "fi_ar_quant", "mnnvl"),
        (0, "fi_ar_quant", "trtllm"),
        (1, "fi_ar", "mnnvl"),
        (1, "fi_ar", "trtllm"),
        (1, "fi_ar_quant", "mnnvl"),
        (1, "fi_ar_quant", "trtllm"),
    ] == got
    assert {13} == {r["severity_number"] for r in failed}
    assert {"no_cuda"} == {r["attributes"]["reason"] for r in failed}
    fallbacks = receiver.by_event("workspace_fallback")
    assert 4 == len(fallbacks)


def test_debug_attempts_only_from_local_first_rank(two_ranks: tuple[ProbeResult, Any]) -> None:
    """workspace_attempt (DEBUG, scope local) is exported by local rank 0 only."""
    _, receiver = two_ranks
    attempts = receiver.by_event("workspace_attempt")
    assert {0} == {r["attributes"]["rank"] for r in attempts}
    assert 4 == len(attempts)


_IN_PROCESS = textwrap.dedent(
    """
    import json, os, random, socket
    import torch.distributed as dist
    from comm.flashinfer_allreduce import FiArWorkspaces
    import obs, obs.testing

    obs.configure(level="DEBUG", format="json", sdk_disabled=True)
    out = {}
    with obs.testing.capture_events() as evs:
        m = FiArWorkspaces(backend="auto", nodes=1)
        out["uninit"] = m.get_fi_ar_workspace(1, 0, 2048, 4096, None, None)
        out["uninit_reasons"] = list(m.result("fi_ar").attempts[i].reason for i in (0, 1))
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=1)
        import torch
        random.seed(1234)
        before = random.getstate()
        m2 = FiArWorkspaces(backend="trtllm", nodes=1)
        out["init"] = m2.get_fi_ar_workspace(1, 0, 2048, 4096, torch.bfloat16, dist.group.WORLD)
        out["random_restored"] = random.getstate() == before
        out["init_attempt"] = [(a.backend, a.reason, a.error_type, a.error_message)
                               for a in m2.result("fi_ar").attempts]
        dist.destroy_process_group()
    out["events"] = [(e["event"], e.get("reason") or e.get("reasons")) for e in evs
                     if e["event"].startswith("workspace_")]
    print("RESULT " + json.dumps(out, default=str))
    os._exit(0)
    """
)


def test_real_factory_in_one_process(tmp_path: Path) -> None:
    """Real factory: no process group -> dist_not_initialized (caught, unlike vLLM);
    gloo world 1 -> no_cuda; Python's random state is restored around creation."""
    proc = subprocess.run(
        [sys.executable, "-c", _IN_PROCESS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    out = json.loads(line[len("RESULT ") :])
    # TorchDistBackend(group=None) raises before either backend is tried.
    assert (None, ["dist_not_initialized"] * 2) == (out["uninit"], out["uninit_reasons"])
    assert out["init"] is None
    assert [["trtllm", "no_cuda", "AssertionError", "Torch not compiled with CUDA enabled"]] == (
        out["init_attempt"]
    )
    assert out["random_restored"] is True
    assert [
        ["workspace_attempt", None],
        ["workspace_attempt_failed", "dist_not_initialized"],
        ["workspace_fallback", "dist_not_initialized"],
        ["workspace_attempt", None],
        ["workspace_attempt_failed", "dist_not_initialized"],
        ["workspace_terminal_failure", ["dist_not_initialized", "dist_not_initialized"]],
        ["workspace_attempt", None],
        ["workspace_attempt_failed", "no_cuda"],
        ["workspace_terminal_failure", ["no_cuda"]],
    ] == out["events"]


_FLASHINFER_LOGGERS = textwrap.dedent(
    """
    import os, socket
    import torch
    import torch.distributed as dist
    from comm.flashinfer_allreduce import FiArWorkspaces
    import obs

    obs.configure(format="json", sdk_disabled=True)
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    # comm imports flashinfer here, lazily, long after obs.configure()
    FiArWorkspaces(backend="trtllm", nodes=1).get_fi_ar_workspace(
        1, 0, 2048, 4096, torch.bfloat16, dist.group.WORLD
    )
    dist.destroy_process_group()
    import flashinfer.artifacts, flashinfer.jit.core

    flashinfer.jit.core.logger.warning("FI_JIT_MARK %s", 1)
    flashinfer.artifacts.logger.warning("FI_ARTIFACTS_MARK %s", 2)
    obs.flush(timeout=5)
    os._exit(0)
    """
)


def test_flashinfer_loggers_come_out_once_as_obs_json(tmp_path: Path) -> None:
    """After comm imported the real flashinfer lazily (obs configured long before), a record
    of flashinfer.jit's logger (a Logger flashinfer builds outside logging's tree, with its
    own console handler) and one of flashinfer.artifacts' (a console handler added at
    import) each come out once, as an obs JSON line."""
    proc = subprocess.run(
        [sys.executable, "-c", _FLASHINFER_LOGGERS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=str(Path(__file__).resolve().parents[2]),
        env={**os.environ, "FLASHINFER_WORKSPACE_BASE": str(tmp_path)},
    )
    assert 0 == proc.returncode, proc.stderr[-3000:]
    output = (proc.stdout + proc.stderr).splitlines()
    got = {
        mark: [
            (json.loads(ln)["body"], json.loads(ln)["logger"]) if ln.startswith("{") else ln
            for ln in output
            if mark in ln
        ]
        for mark in ("FI_JIT_MARK", "FI_ARTIFACTS_MARK")
    }
    assert {
        "FI_JIT_MARK": [("FI_JIT_MARK 1", "flashinfer.jit")],
        "FI_ARTIFACTS_MARK": [("FI_ARTIFACTS_MARK 2", "flashinfer.artifacts")],
    } == got
