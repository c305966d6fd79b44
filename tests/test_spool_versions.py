"""Spool lines of another format version (a newer obs sharing the directory wrote them):
never replayed as this version's records, kept as they were, counted, and reported.

Real spool files, a real replay (the Spool's, the export worker's and the
``python -m obs spool`` command's) to a real loopback OTLP receiver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _spooled import spooled_doc
from hypothesis import given, settings
from hypothesis import strategies as st

from obs._receiver import OTLPReceiver
from obs._spool import Spool

ROOT = Path(__file__).resolve().parents[1]


#: "v" values another format version may write (1.0 and true are not this version's 1).
OTHER_V = st.one_of(
    st.integers(min_value=2, max_value=1 << 70),
    st.integers(max_value=0),
    st.sampled_from(["1", "2", 1.0, 2.5, True, None, [1], {"major": 2}]),
)


class Flaky:
    """A replay ``export``: takes the first ``n`` of a batch per planned answer."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.got: list[dict[str, Any]] = []

    def __call__(self, batch: list[dict[str, Any]]) -> bool | int:
        n = self.answers.pop(0) if self.answers else len(batch)
        self.got.extend(batch[: max(n, 0)])
        return True if n >= len(batch) else n


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(st.one_of(st.none(), OTHER_V), min_size=1, max_size=30),
    answers=st.lists(st.integers(min_value=0, max_value=4), max_size=6),
    batch=st.integers(min_value=1, max_value=4),
)
def test_other_versions_are_kept_not_replayed(
    kinds: list[object], answers: list[int], batch: int
) -> None:
    """Whatever the mix of this version's lines and other versions' (``None`` here: a v1
    record), and however the collector takes parts of batches: every v1 record is
    replayed once, in order, no other-version line is replayed, and each of those is kept
    once, byte for byte, in spool.other.jsonl and counted."""
    with tempfile.TemporaryDirectory() as tmp:
        spool = Spool(tmp, 1 << 22)
        docs = [spooled_doc(i) if v is None else spooled_doc(i, v=v) for i, v in enumerate(kinds)]
        assert len(docs) == spool.append(docs)
        raw = Path(tmp, "spool.jsonl").read_bytes().splitlines(keepends=True)
        export = Flaky(list(answers))
        kept = 0
        for _ in range(len(answers) + 2):
            result = spool.replay(export, batch_size=batch)
            kept += result.kept
            assert 0 == result.corrupt
            if not spool.pending():
                break
        assert not spool.pending()
        want = [d["attrs"]["i"] for d, v in zip(docs, kinds, strict=True) if v is None]
        assert want == [d["attrs"]["i"] for d in export.got]
        others = [line for line, v in zip(raw, kinds, strict=True) if v is not None]
        other_file = Path(tmp, "spool.other.jsonl")
        assert others == (other_file.read_bytes().splitlines(keepends=True) if others else [])
        assert len(others) == kept == spool.kept()
        assert spool.size() == sum(map(len, others))  # they count against the bound
        assert [] == list(spool.scan())  # list shows this version's records only
        assert spool.purge()
        assert not other_file.exists()


def test_the_worker_replays_v1_only_and_reports_the_rest(tmp_path: Path) -> None:
    """The export sink's start-up replay, to a real receiver: the v1 records arrive, the
    v2 line does not (neither as a record nor as garbage), and the count reaches the
    operator: ``stats()['spool_kept']`` and an ``obs_internal_error`` naming the file."""
    from obs.otel import ExportSink
    from obs.rank import RankResolver
    from obs.settings import load_settings

    directory = tmp_path / "spool"
    spool = Spool(str(directory), 1 << 20)
    newer = {**spooled_doc(99, v=2), "body": {"parts": ["a", "b"]}, "name": "from_the_future"}
    spool.append([spooled_doc(0), newer, spooled_doc(1)])
    reports: list[tuple[str, str]] = []

    def report(event: Any, level: int | None = None, *, body: str | None = None) -> None:
        reports.append((type(event).name, body or event.body()))

    with OTLPReceiver() as rx:
        settings_ = load_settings(
            {
                "logs_exporter": "otlp",
                "spool_dir": str(directory),
                "otlp_endpoint": rx.http_endpoint,
                "otlp_protocol": "http/protobuf",
            }
        )
        sink = ExportSink(settings_, RankResolver(env={}, host="h"), report)
        try:
            assert sink.force_flush(10.0)
            got = rx.wait_for(2, predicate=lambda r: r["event_name"] == "spooled_error")
            time.sleep(0.2)
            names = [r["event_name"] for r in rx.records]
        finally:
            sink.shutdown(2.0)
    assert [0, 1] == sorted(r["attributes"]["i"] for r in got)
    assert "from_the_future" not in names
    stats = sink.stats()
    assert (2, 1, 0) == (stats["replayed"], stats["spool_kept"], stats["spool_corrupt"])
    assert any("spool.other.jsonl" in text and "v=2" in text for _, text in reports), reports
    assert json.loads((directory / "spool.other.jsonl").read_text()) == newer


def test_the_spool_command_lists_and_keeps_them(tmp_path: Path) -> None:
    """``python -m obs spool list`` shows the kept lines apart from the records waiting;
    ``replay`` delivers the v1 records, says how many lines it kept, and ends with
    nothing pending (exit 0); the kept line is still there for the version that wrote
    it."""
    directory = tmp_path / "spool"
    Spool(str(directory), 1 << 20).append([spooled_doc(0), spooled_doc(7, v=3), spooled_doc(1)])

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "obs", "spool", *args, "--dir", str(directory)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    assert "trainer: 2 records" in cli("list").stdout
    with OTLPReceiver() as rx:
        replayed = cli("replay", "--endpoint", rx.http_endpoint)
        assert 0 == replayed.returncode, replayed.stderr
        got = rx.wait_for(2, predicate=lambda r: r["event_name"] == "spooled_error")
    assert [0, 1] == sorted(r["attributes"]["i"] for r in got)
    assert "kept 1 lines of another spool format version" in replayed.stdout
    listed = cli("list").stdout
    assert "1 lines of another spool format version" in listed, listed
    assert 7 == json.loads((directory / "spool.other.jsonl").read_text())["attrs"]["i"]
