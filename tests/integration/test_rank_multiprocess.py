"""Multi-process rank scoping: 4 real processes acting as 2 nodes of 2 ranks.

With a real gloo ``torch.distributed`` group, and then with only torchrun, only SLURM and
only Open MPI env vars: ``scope="global"`` gives 1 line, ``"local"`` 2 and ``"process"`` 4.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("_rank_worker.py")
MODES = {
    "torch": "torch.distributed",
    "torchrun": "torchrun",
    "slurm": "slurm",
    "openmpi": "openmpi",
}
_CLEAN_PREFIXES = ("OBS_", "OTEL_", "SLURM_", "OMPI_", "MASTER_", "GLOO_")
_CLEAN = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(_CLEAN_PREFIXES) and k not in _CLEAN
    }
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run the four jobs in parallel; per mode: the JSON lines and what each rank resolved."""
    procs = {}
    for mode in MODES:
        out = tmp_path_factory.mktemp(mode)
        args = [sys.executable, str(WORKER), mode, str(out), str(_free_port())]
        procs[mode] = (out, subprocess.Popen(args, env=_env(), stderr=subprocess.PIPE, text=True))
    results: dict[str, dict[str, Any]] = {}
    for mode, (out, proc) in procs.items():
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        files = {
            p.name: [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted(out.glob("rank*.jsonl"))
        }
        lines = [line for file_lines in files.values() for line in file_lines]
        infos = {int(p.stem[4:]): json.loads(p.read_text()) for p in sorted(out.glob("rank?.json"))}
        results[mode] = {
            "rc": proc.returncode,
            "stderr": err,
            "files": files,
            "lines": lines,
            "infos": infos,
        }
    return results


@pytest.mark.parametrize("mode", list(MODES))
class TestRankScoping:
    def test_job_succeeded(self, mode: str, jobs: dict[str, dict[str, Any]]) -> None:
        """All four ranks ran to completion."""
        job = jobs[mode]
        assert (0, [0, 1, 2, 3]) == (job["rc"], sorted(job["infos"])), job["stderr"]

    def test_one_file_per_rank(self, mode: str, jobs: dict[str, dict[str, Any]]) -> None:
        """OBS_FILE's {rank} placeholder gives each rank its own file with its own lines."""
        ranks_per_file = {
            name: sorted({line["rank"] for line in lines})
            for name, lines in jobs[mode]["files"].items()
        }
        assert {f"rank{r}.jsonl": [r] for r in range(4)} == ranks_per_file

    def test_line_counts(self, mode: str, jobs: dict[str, dict[str, Any]]) -> None:
        """scope global -> 1 line, local -> 2 lines, process -> 4 lines across the job."""
        counts = Counter(line["event"] for line in jobs[mode]["lines"])
        del counts["log_repeats_suppressed"]
        expected = {"scope_global": 1, "scope_local": 2, "scope_process": 4, "shipped_warning": 4}
        assert expected == dict(counts)

    def test_which_ranks_logged(self, mode: str, jobs: dict[str, dict[str, Any]]) -> None:
        """global: rank 0; local: ranks 0 and 2 (local rank 0 of each node); process: all."""
        by_event: dict[str, list[int]] = {}
        for line in jobs[mode]["lines"]:
            if line["event"] != "log_repeats_suppressed":
                by_event.setdefault(line["event"], []).append(line["rank"])
        assert {
            "scope_global": [0],
            "scope_local": [0, 2],
            "scope_process": [0, 1, 2, 3],
            "shipped_warning": [0, 1, 2, 3],  # OBS_FILE ships WARNING+ from every rank
        } == {event: sorted(ranks) for event, ranks in by_event.items()}

    def test_repeats_counted_only_where_logged(
        self, mode: str, jobs: dict[str, dict[str, Any]]
    ) -> None:
        """Each rank that logged an event summarises its 2 repeats; hidden ranks used no key."""
        summaries = sorted(
            (line["original_event"], line["rank"], line["suppressed_count"])
            for line in jobs[mode]["lines"]
            if line["event"] == "log_repeats_suppressed"
        )
        assert [
            ("scope_global", 0, 2),
            ("scope_local", 0, 2),
            ("scope_local", 2, 2),
            ("scope_process", 0, 2),
            ("scope_process", 1, 2),
            ("scope_process", 2, 2),
            ("scope_process", 3, 2),
        ] == summaries

    def test_rank_fields(self, mode: str, jobs: dict[str, dict[str, Any]]) -> None:
        """Every line carries the right rank, local rank, node and world size."""
        fields = {
            (line["rank"], line["local_rank"], line["node_rank"], line["world_size"])
            for line in jobs[mode]["lines"]
        }
        assert {(0, 0, 0, 4), (1, 1, 0, 4), (2, 0, 1, 4), (3, 1, 1, 4)} == fields

    def test_source(self, mode: str, jobs: dict[str, dict[str, Any]]) -> None:
        """The rank info came from the expected source; env modes never imported torch."""
        infos = jobs[mode]["infos"]
        expected = (MODES[mode], mode == "torch")
        assert {expected} == {(i["source"], i["torch_imported"]) for i in infos.values()}
