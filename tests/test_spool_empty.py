"""A spool line that is JSON but holds no record (``{"v": 1}``, a hand edit, a line
whose fields were cut away) is counted ``spool_corrupt``, never replayed as an empty
record the collector stores as if something had been logged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _spooled import spooled_doc
from hypothesis import given, settings
from hypothesis import strategies as st

from obs._receiver import OTLPReceiver
from obs._spool import Spool
from obs.otel.records import RecordBuilder
from obs.rank import RankResolver
from obs.settings import Settings

#: What a record says: its event name or its body (to_spool writes both, always).
CONTENT = ("name", "body")


@settings(max_examples=60, deadline=None)
@given(keep=st.sets(st.sampled_from(sorted(spooled_doc(0)))))
def test_a_line_without_content_is_no_record(keep: set[str]) -> None:
    """Any subset of a spooled record's fields rebuilds a record only when it still has
    its name or its body; otherwise ``from_spool`` refuses it (counted corrupt)."""
    full = spooled_doc(0)
    doc: dict[str, Any] = {k: full[k] for k in keep}
    builder = RecordBuilder(Settings(service_name="svc"), RankResolver(env={}, host="h"))
    if keep.isdisjoint(CONTENT):
        with pytest.raises(ValueError, match="no record"):
            builder.from_spool(doc)
    else:
        record = builder.from_spool(doc).log_record
        assert record.event_name == doc.get("name")


def test_the_worker_counts_an_empty_line_corrupt(tmp_path: Path) -> None:
    """``{"v": 1}`` (and ``{}``, ``{"cls": 3}``) in the spool was replayed as an empty
    record with only ``obs.replayed`` set (failed before: 5 records arrived); now the two
    real records arrive, alone, and the three lines are counted ``spool_corrupt``."""
    from obs.otel import ExportSink
    from obs.settings import load_settings

    directory = tmp_path / "spool"
    spool = Spool(str(directory), 1 << 20)
    spool.append([spooled_doc(0), {"v": 1}, {}, {"v": 1, "cls": 3}, spooled_doc(1)])
    with OTLPReceiver() as rx:
        settings_ = load_settings(
            {
                "logs_exporter": "otlp",
                "spool_dir": str(directory),
                "otlp_endpoint": rx.http_endpoint,
                "otlp_protocol": "http/protobuf",
            }
        )
        sink = ExportSink(settings_, RankResolver(env={}, host="h"), lambda *a, **k: None)
        try:
            assert sink.force_flush(10.0)
            rx.wait_for(2, predicate=lambda r: r["event_name"] == "spooled_error")
            records = list(rx.records)
        finally:
            sink.shutdown(2.0)
    assert [0, 1] == [r["attributes"]["i"] for r in records], records
    assert 3 == sink.stats()["spool_corrupt"]  # "replayed" counts every line a replay took
