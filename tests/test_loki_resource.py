"""The resource stays within its share of Loki's limits, and folding reaches the operator.

Loki stores every resource attribute it does not index beside every record
(tests/_loki.py). Before obs capped the resource, an ``OTEL_RESOURCE_ATTRIBUTES`` with many
keys or long values used up the 128 entries / 64KB by itself and Loki refused every
record, the alert's too; a resource attribute named ``_`` failed every push. And records
folded to fit were marked one by one only: ``obs.delivery()`` and the export stats did not
count them, so an operator never learned that context was folded away.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _loki import metadata_size, refusal
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context
from test_loki_bounds import ALERT, KEYS, check_stored, loki_entries

import obs
import obs.testing
from obs import _lokifit
from obs.otel.records import RecordBuilder, resource_attributes
from obs.rank import RankResolver
from obs.settings import Settings

KEPT = ("service.name", "service.instance.id", "host.name", "rank", "local_rank")
KEPT += ("world_size", "node_rank")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Any]:
    with obs.testing.OTLPReceiver() as rx:
        yield rx


RESOURCES = st.dictionaries(
    st.one_of(st.sampled_from(["_", "", "日本", "k8s.pod.name"]), st.text(max_size=300)),
    st.one_of(st.text(max_size=50), st.integers(0, 70000).map(lambda n: "r" * n)),
    max_size=300,
)


@settings(max_examples=60, deadline=None)
@given(extra=RESOURCES)
def test_any_resource_leaves_every_record_its_room(extra: dict[str, str]) -> None:
    cfg = Settings(service_name="svc", resource_attributes=extra)
    resource = resource_attributes(cfg, RankResolver().current())
    for key in KEPT:
        assert key in resource
    assert resource["service.name"] == "svc"
    entries = loki_entries(resource, {})  # raises PushRefused for a name Loki refuses
    assert len(entries) <= 8 + 2 + _lokifit.RESOURCE_MAX_ENTRIES
    assert metadata_size(entries) <= _lokifit.RESOURCE_MAX_BYTES + 400
    builder = RecordBuilder(cfg, RankResolver())
    fields = {"event": ALERT, **KEYS, **{f"f{i}": "x" * 900 for i in range(150)}}
    record = builder.build((1, Context(), fields), 3)
    attrs = dict(record.log_record.attributes or {})
    assert refusal(loki_entries(dict(record.resource.attributes), attrs)) is None
    assert attrs["event"] == ALERT


def test_a_huge_resource_is_cut_reported_once_and_records_still_stored(
    receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = ",".join(f"k{i}={'v' * 3000}" for i in range(100))
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", big + ",service.name=svc-big")
    obs.configure(stream="none", otlp_endpoint=receiver.http_endpoint, logs_exporter="otlp")
    for i in range(3):
        obs.get_logger("comm").error(ALERT, marker=f"res-{i}", **KEYS)
    obs.flush(timeout=10)
    records = receiver.wait_for(
        predicate=lambda r: str(r["attributes"].get("marker", "")).startswith("res-"),
        count=3,
        timeout=10,
    )
    for record in records:
        check_stored(record, {})
        assert record["resource"]["service.name"] == "svc-big"
    notes = receiver.wait_for(
        predicate=lambda r: r["attributes"].get("error_type") == "ResourceTooLarge",
        count=1,
        timeout=10,
    )
    assert len(notes) == 1
    assert "OTEL_RESOURCE_ATTRIBUTES" in notes[0]["attributes"]["error_message"]


def test_folded_records_and_lines_are_counted_where_the_operator_looks(
    receiver: Any, tmp_path: Path
) -> None:
    obs.configure(
        stream="none",
        file=str(tmp_path / "app.jsonl"),
        otlp_endpoint=receiver.http_endpoint,
        logs_exporter="otlp",
    )
    before = obs.delivery()
    assert before["folded"] == 0
    lines_before = before["folded_lines"]
    for i in range(2):
        obs.get_logger("comm").error(ALERT, marker=f"fold-{i}", **{f"f{j}": j for j in range(150)})
    obs.get_logger("comm").info("plain", n=1)
    obs.flush(timeout=10)
    after = obs.delivery()
    assert after["folded"] == 2
    assert after["folded_lines"] == lines_before + 2
    notes = receiver.wait_for(
        predicate=lambda r: r["attributes"].get("error_type") == "RecordsFolded",
        count=1,
        timeout=10,
    )
    assert notes[0]["severity_text"] == "WARNING"
    assert "obs.folded" in notes[0]["attributes"]["error_message"]
