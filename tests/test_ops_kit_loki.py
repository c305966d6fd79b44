"""The alert still fires at the scale the ops kit is sized for: Loki's query limits.

obs' JSON lines go through the collector's filelog mapping (``tests/_filelog.py``, built
from ``examples/otel-collector.yaml``) and then through Loki's OTLP ingestion, re-implemented
below from grafana/loki at 65e30f8488e8a5ea2013c6881675f8103a8f6bc7
(pkg/loghttp/push/otlplabels/labels.go: ResourceAttrsToStreamLabels, LogAttrsToLabels,
AttributeToLabels; vendor/github.com/prometheus/otlptranslator/strconv.go:
sanitizeLabelName). Each alert and dashboard query is then evaluated over a whole fleet's
records, and the number of series it returns is held against the tenant's
``max_query_series`` (pkg/validation/limits.go, default 500): over it, Loki answers the
instant query with an error (pkg/logql/engine.go JoinSampleVector), the rule goes to its
execution-error state and the workspace_terminal_failure alert itself never fires.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from _filelog import FilelogMapping
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ops_kit import (
    COLLECTOR,
    LOKI,
    SAMPLE_LINE,
    Query,
    alert_queries,
    dashboard_queries,
    load_yaml,
    loki_action,
    snippet_rules,
)

#: Loki's default per-tenant series limit of a metric query (pkg/validation/limits.go:
#: ``querier.max-query-series``, 500).
LOKI_DEFAULT_MAX_QUERY_SERIES = 500
#: The fleet the kit is sized for (docs/OPERATIONS.md, examples/loki-limits.yaml).
RANKS, RANKS_PER_HOST = 4000, 8


def loki_label_name(name: str) -> str:
    """otlptranslator LabelNamer.Build with Loki's settings (no UTF-8, no
    PreserveMultipleUnderscores): each run of invalid characters becomes one ``_``, a
    leading digit gets ``key_``."""
    out = re.sub(r"[^A-Za-z0-9_]+", "_", name)
    return "key_" + out if out[:1].isdigit() else out


def _as_string(value: Any) -> str:
    """pcommon.Value.AsString of the value a JSON line carries."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _attribute_labels(key: str, value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """AttributeToLabels: a map attribute is flattened with its key as prefix."""
    name = loki_label_name(f"{prefix}_{key}" if prefix else key)
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _attribute_labels(k, v, name)
    else:
        yield name, _as_string(value)


def loki_labels(
    resource: Mapping[str, Any],
    attributes: Mapping[str, Any],
    rules: list[tuple[str, frozenset[str]]],
) -> dict[str, str]:
    """Every label a query sees for one record: the stream's index labels, then the
    structured metadata (log attributes, non-index resource attributes)."""
    labels: dict[str, str] = {}
    for key, value in attributes.items():
        labels.update(_attribute_labels(key, value))
    for key, value in resource.items():
        if loki_action(key, rules) != "drop":
            labels.update(_attribute_labels(key, value))
    return labels


def fleet_lines(ranks: int = RANKS) -> Iterator[tuple[str, str]]:
    """(file, JSON line) of what every rank of a failing fleet writes within 5 minutes: a
    fallback and a terminal failure on both chains, and dropped-record reports for a
    collector outage (queue_full and export_failed)."""
    template = json.loads(SAMPLE_LINE)
    for rank in range(ranks):
        host = f"gpu-node-{rank // RANKS_PER_HOST}"
        common = {"rank": rank, "local_rank": rank % RANKS_PER_HOST, "world_size": ranks}
        common |= {"node_rank": rank // RANKS_PER_HOST, "host.name": host}
        path = f"/var/log/obs/vllm-{host}-rank{rank}.jsonl"
        for chain in ("fi_ar", "fi_ar_quant"):
            fallback = template | common | {"event": "workspace_fallback", "chain": chain}
            fallback |= {"stage": "fallback", "from_backend": "mnnvl", "to_backend": "trtllm"}
            yield path, json.dumps(fallback | {"reason": "no_multicast"})
            yield path, json.dumps(template | common | {"chain": chain})
        for reason in ("queue_full", "export_failed"):
            dropped = {"event": "obs_records_dropped", "reason": reason, "dropped": {"INFO": 3}}
            yield path, json.dumps(template | common | dropped)


def series_of(query: Query, records: list[dict[str, str]]) -> set[tuple[str, ...]]:
    """The series a ``sum by (...) (count_over_time(... | name="value" ...))`` returns."""
    out = set()
    for labels in records:
        if all(labels.get(name) == value for name, op, value in query.filters if op in ("=", "==")):
            out.add(tuple(labels.get(name, "") for name in query.groupings))
    return out


def fleet_records(ranks: int = RANKS) -> list[dict[str, str]]:
    """The labels Loki stores for each of the fleet's lines, through the kit's configs."""
    mapping = FilelogMapping.from_config(COLLECTOR, env={"OBS_SERVICE_NAME": "vllm"})
    rules = snippet_rules()
    out = []
    for path, line in fleet_lines(ranks):
        rec = mapping.map_line(line, path)
        out.append(loki_labels(rec.resource, rec.attributes, rules))
    return out


@pytest.fixture(scope="module")
def whole_fleet() -> list[dict[str, str]]:
    return fleet_records()


def max_query_series() -> int:
    limits = load_yaml(LOKI)["limits_config"]
    return int(limits.get("max_query_series", LOKI_DEFAULT_MAX_QUERY_SERIES))


def per_series_queries() -> list[Query]:
    """Alert queries, and dashboard panels whose result is one series per label set."""
    return [q for q in alert_queries() + dashboard_queries() if q.groupings]


class TestQuerySeriesLimit:
    def test_a_whole_fleet_failing_stays_within_max_query_series(self, whole_fleet):
        """4,000 ranks on 500 hosts all failing: every alert and panel query returns at
        most max_query_series series (the terminal-failure rule alone is 8,000: one per
        rank and chain; with Loki's default 500 the query errors and the alert never
        fires)."""
        limit = max_query_series()
        counts = {q.where: len(series_of(q, whole_fleet)) for q in per_series_queries()}
        terminal = "alert obs-ws-terminal-failure"
        assert counts[terminal] == RANKS * 2
        assert {w: n for w, n in counts.items() if n > limit} == {}, limit

    @settings(max_examples=6, deadline=None)
    @given(st.integers(min_value=1, max_value=RANKS))
    def test_the_terminal_rule_has_one_series_per_failing_rank_and_chain(self, ranks):
        """Any fleet size: one alert instance per (host, rank, chain), none lost."""
        records = fleet_records(ranks)
        rule = next(q for q in alert_queries() if q.where == "alert obs-ws-terminal-failure")
        series = series_of(rule, records)
        assert len(series) == ranks * 2 <= max_query_series()
        assert {s[0] for s in series} == {"vllm"}


class TestLokiLabelNames:
    @pytest.mark.parametrize(
        ("attribute", "label"),
        [
            ("host.name", "host_name"),
            ("code.line.number", "code_line_number"),
            ("service.instance.id", "service_instance_id"),
            ("a..b", "a_b"),
            ("3d", "key_3d"),
            ("rank", "rank"),
        ],
    )
    def test_names_follow_otlptranslator(self, attribute, label):
        """Dots (runs of invalid characters) become one underscore; a digit start key_."""
        assert loki_label_name(attribute) == label
