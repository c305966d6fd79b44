"""The probe when a rank dies: a real forked rank killed by a real signal, or exiting with
a status of its own, before it reports. The result names the rank and how it ended, and
the ranks left waiting for it are the ones that timed out."""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path

import pytest

from comm import probe
from comm.probe import ProbeSpec
from comm.probe.report import failure_causes, result_json

#: Loaded by the launcher (sitecustomize, through PYTHONPATH): the named ranks end as told
#: as soon as they start, before joining the process group.
_SITECUSTOMIZE = textwrap.dedent(
    """
    import importlib, os, signal

    _plan = {int(r): how for r, _, how in
             (p.partition(":") for p in os.environ.get("PROBE_TEST_DEATHS", "").split(",") if p)}
    if _plan:
        _launch = importlib.import_module("comm.probe.launch")
        _real = _launch.rank_main

        def _rank_main(spec, rank, fd):
            how = _plan.get(rank)
            if how is not None:
                if how.startswith("SIG"):
                    os.kill(os.getpid(), getattr(signal, how))
                os._exit(int(how))
            return _real(spec, rank, fd)

        _launch.rank_main = _rank_main
    """
)


@pytest.mark.parametrize(
    ("deaths", "said"),
    [
        ({1: "SIGKILL"}, {1: "killed by SIGKILL"}),
        ({1: "SIGSEGV", 2: "7"}, {1: "killed by SIGSEGV", 2: "exited with status 7"}),
    ],
)
def test_a_rank_that_dies_is_named_with_how_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deaths: dict[int, str], said: dict[int, str]
) -> None:
    """Rank 1 killed by SIGKILL (the OOM killer) or SIGSEGV, rank 2 exiting with status 7,
    right after starting: the causes (screen and --json) say so for those ranks, and
    "timed out" only for the ranks that waited for them. Every missing rank read "timed
    out after N s", and --json carried no word of the dead rank (its exit status was only
    a progress line on stderr, not printed with --json)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("PROBE_TEST_DEATHS", ",".join(f"{r}:{h}" for r, h in deaths.items()))
    result = probe.launch(ProbeSpec(world_size=3, timeout=12.0, log_dir=str(tmp_path / "run")))
    assert (0, 1, 2) == result.missing
    assert 1 == result.exit_code
    causes = failure_causes(result)
    for rank, text in said.items():
        assert any(c.startswith(f"rank {rank}: ") and text in c for c in causes), causes
    waited = [r for r in range(3) if r not in deaths]
    assert any(
        c.startswith(f"rank{'s' if len(waited) > 1 else ''} {probe.format_ranks(waited)}: ")
        and "timed out" in c
        for c in causes
    ), causes
    for cause in causes:
        if cause.startswith("rank ") and int(cause.split()[1].rstrip(":")) in deaths:
            assert "timed out" not in cause, cause
    statuses = {
        r: -getattr(signal, h) if h.startswith("SIG") else int(h) for r, h in deaths.items()
    }
    doc = json.loads(json.dumps(result_json(result), default=str))
    assert {str(r): s for r, s in statuses.items()} == {
        r: s for r, s in doc["exits"].items() if int(r) in deaths
    }, doc["exits"]
    assert doc["causes"] == causes
