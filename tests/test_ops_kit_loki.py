"""The alert still fires at the scale the ops kit is sized for: Loki's query limits.

obs' JSON lines go through the collector's filelog mapping (``tests/_filelog.py``, built
from ``examples/otel-collector.yaml``) and then through Loki's OTLP ingestion, re-implemented
in ``tests/_loki.py`` from grafana/loki at 65e30f8488e8a5ea2013c6881675f8103a8f6bc7
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
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from _filelog import FilelogMapping
from _loki import attribute_entries, label_name
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ops_kit import (
    COLLECTOR,
    LOKI,
    OPERATIONS,
    ROOT,
    SAMPLE_LINE,
    Query,
    alert_queries,
    alert_rules,
    all_queries,
    dashboard_queries,
    index_labels,
    load_yaml,
    loki_action,
    obs_resource,
    snippet_rules,
)

#: Loki's default per-tenant series limit of a metric query (pkg/validation/limits.go:
#: ``querier.max-query-series``, 500).
LOKI_DEFAULT_MAX_QUERY_SERIES = 500
#: The fleet the kit is sized for (docs/OPERATIONS.md, examples/loki-limits.yaml).
RANKS, RANKS_PER_HOST = 4000, 8


def loki_labels(
    resource: Mapping[str, Any],
    attributes: Mapping[str, Any],
    rules: list[tuple[str, frozenset[str]]],
) -> dict[str, str]:
    """Every label a query sees for one record: the stream's index labels, then the
    structured metadata (log attributes, non-index resource attributes)."""
    labels: dict[str, str] = {}
    for key, value in attributes.items():
        labels.update(attribute_entries(key, value))
    for key, value in resource.items():
        if loki_action(key, rules) != "drop":
            labels.update(attribute_entries(key, value))
    return labels


def fleet_lines(ranks: int = RANKS) -> Iterator[tuple[str, str]]:
    """(file, JSON line) of what every rank of a failing fleet writes within an alert window: a
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
        assert label_name(attribute) == label


# --- LogQL grammar ------------------------------------------------------------------------

#: Grafana's own LogQL grammar (npm @grafana/lezer-logql, the parser of Grafana's Loki query
#: editor, generated from grafana/loki pkg/logql/syntax/expr.y); `make` installs it under
#: .venv/node. LOGQL_NODE_MODULES names another node_modules folder that holds it.
LEZER_LOGQL = "@grafana/lezer-logql"
NODE_MODULES = [
    Path(p)
    for p in (os.environ.get("LOGQL_NODE_MODULES"), ROOT / ".venv" / "node" / "node_modules")
    if p
]
REQUIRE_GRAMMAR = os.environ.get("OBS_REQUIRE_LOGQL") == "1"  # read before the env is reset
#: Grafana's variables, as Grafana interpolates them before the query reaches Loki.
GRAFANA_VARIABLES = {"$__range": "6h", "$__interval": "1m", "$__auto": "1m"}
_PARSE_JS = """
const { parser } = require(process.argv[1]);
const queries = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = queries.map((q) => {
  const errors = [];
  parser.parse(q).iterate({ enter: (n) => { if (n.type.isError) errors.push(n.from); } });
  return errors;
});
process.stdout.write(JSON.stringify(out));
"""


def _lezer_logql() -> Path | None:
    found = [d / LEZER_LOGQL for d in NODE_MODULES if (d / LEZER_LOGQL / "package.json").exists()]
    if shutil.which("node") is None or not found:
        if REQUIRE_GRAMMAR:
            pytest.fail(f"OBS_REQUIRE_LOGQL=1 but no node or {LEZER_LOGQL} in {NODE_MODULES}")
        pytest.skip(f"needs node and {LEZER_LOGQL} (make installs it under .venv/node)")
    return found[0]


def grafana_expand(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def logql_syntax_errors(queries: list[str]) -> list[list[int]]:
    """The offsets where Grafana's LogQL grammar finds an error, per query ([] = parses)."""
    module = _lezer_logql()
    proc = subprocess.run(
        ["node", "-e", _PARSE_JS, str(module)],
        input=json.dumps([grafana_expand(q) for q in queries]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(proc.stdout)


class TestLogQLGrammar:
    def test_every_query_of_the_kit_parses(self):
        """Dashboard panels and annotation, alert rules, README and OPERATIONS.md: every
        query is valid LogQL for Grafana's parser (Grafana variables interpolated)."""
        queries = all_queries()
        errors = logql_syntax_errors([q.expr for q in queries])
        bad = {q.where + ": " + q.expr: e for q, e in zip(queries, errors, strict=True) if e}
        assert bad == {}

    @pytest.mark.parametrize(
        "broken",
        [
            'sum by (chain) (count_over_time({service_name="x"} | event="a" [5m])',
            'sum by (chain) count_over_time({service_name="x"} | event="a" [5m])',
            '{service_name="x"} | event=workspace_terminal_failure',
            'count_over_time({service_name="x"} | event="a")',
        ],
    )
    def test_the_grammar_check_catches_a_broken_query(self, broken):
        """A missing parenthesis, an unquoted value, a range aggregation without [range]."""
        assert logql_syntax_errors([broken]) != [[]]


# --- late records ---------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_s(text: str | int) -> float:
    """A Go / Prometheus duration ("10m", "1s", "200ms", "1h30m") in seconds."""
    if isinstance(text, int):
        return float(text)
    parts = _DURATION.findall(text)
    assert parts, text
    assert "".join(n + u for n, u in parts) == text, text
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def delivery_delay_s() -> float:
    """How late the kit's own collector may still deliver a record to Loki: the exporter
    retries a batch for ``retry_on_failure.max_elapsed_time``, each try bounded by its
    ``timeout`` (default 30 s, exporterhelper TimeoutConfig), after waiting up to the
    batch processor's ``timeout`` and the filelog receiver's ``poll_interval`` (200 ms)."""
    doc = load_yaml(COLLECTOR)
    exporter = doc["exporters"]["otlphttp/loki"]
    retry = duration_s(exporter["retry_on_failure"]["max_elapsed_time"])
    request = duration_s(exporter.get("timeout", "30s"))
    batch = duration_s(doc["processors"]["batch"]["timeout"])
    poll = duration_s(doc["receivers"]["filelog"].get("poll_interval", "200ms"))
    return retry + request + batch + poll


def single_record_rules() -> list[dict[str, Any]]:
    """Rules that fire on one record (threshold > 0): a late record must still count."""
    return [
        rule
        for rule in alert_rules()
        if rule["data"][2]["model"]["conditions"][0]["evaluator"] == {"type": "gt", "params": [0]}
    ]


class TestLateRecords:
    def test_single_record_rules_look_back_further_than_the_collector_delivers_late(self):
        """Loki stores a record at its own timestamp, so one the collector delivers after
        retrying through a Loki outage (up to max_elapsed_time, 10 minutes) lands before
        a 5-minute window at every evaluation: the terminal-failure alert never fired.
        The query range and relativeTimeRange cover the collector's delivery delay."""
        delay = delivery_delay_s()
        short = {}
        for rule in single_record_rules():
            query = rule["data"][0]
            ranges = [duration_s(r) for r in re.findall(r"\[([^\]]+)\]", query["model"]["expr"])]
            window = min([*ranges, query["relativeTimeRange"]["from"]])
            if window < delay:
                short[rule["uid"]] = window
        assert {r["uid"] for r in single_record_rules()} >= {"obs-ws-terminal-failure"}
        assert short == {}, f"the collector may deliver {delay:.0f} s late"

    def test_query_range_and_relative_time_range_agree(self):
        """Each rule asks Loki for the range its count_over_time covers."""
        for rule in alert_rules():
            query = rule["data"][0]
            ranges = {duration_s(r) for r in re.findall(r"\[([^\]]+)\]", query["model"]["expr"])}
            assert ranges == {float(query["relativeTimeRange"]["from"])}, rule["uid"]


# --- Loki's out-of-order window -------------------------------------------------------------

#: grafana/loki pkg/ingester/ingester.go: ``ingester.max-chunk-age`` (2h); stream.go
#: refuses an entry older than the stream's newest entry minus max_chunk_age / 2
#: ("entry too far behind"), and the push answers 400, which the collector does not retry.
LOKI_DEFAULT_MAX_CHUNK_AGE_S = 2 * 3600


def loki_accepts(pushes: list[tuple[dict[str, str], float]], max_chunk_age_s: float) -> list[bool]:
    """Which (stream labels, timestamp) entries, pushed in this order, an ingester keeps."""
    highest: dict[tuple[tuple[str, str], ...], float] = {}
    out = []
    for labels, ts in pushes:
        key = tuple(sorted(labels.items()))
        newest = highest.get(key)
        ok = newest is None or ts >= newest - max_chunk_age_s / 2
        if ok:
            highest[key] = max(ts, newest if newest is not None else ts)
        out.append(ok)
    return out


def index_labels_of(host: str) -> dict[str, str]:
    """The stream labels of rank 3's records from ``host``, with the kit's Loki limits."""
    return index_labels(obs_resource(3, host), snippet_rules())


def max_chunk_age_s() -> float:
    ingester = load_yaml(LOKI).get("ingester") or {}
    return duration_s(ingester.get("max_chunk_age", LOKI_DEFAULT_MAX_CHUNK_AGE_S))


class TestOutOfOrderWindow:
    def test_a_backlog_behind_the_window_is_refused_and_the_docs_bound_it(self):
        """Host A's collector was down for 2 hours; the other hosts kept the service's one
        stream current. A's backlog (tailed files, a spool replay) older than the window
        is refused by Loki, so the docs may not promise "nothing lost while the file
        exists": they name the window, and it is the one the model finds."""
        now = 10_000.0
        host_a = index_labels_of("gpu-node-0")
        host_b = index_labels_of("gpu-node-1")
        assert host_a == host_b  # rank and host are not index labels: one stream
        live = [(host_b, now - 60.0 * m) for m in range(120, -1, -1)]
        backlog = [(host_a, now - 60.0 * m) for m in range(120, -1, -1)]
        kept = loki_accepts(live + backlog, max_chunk_age_s())[len(live) :]
        window_min = max_chunk_age_s() / 2 / 60
        refused_min = [120 - i for i, ok in enumerate(kept) if not ok]
        assert refused_min == [m for m in range(120, -1, -1) if m > window_min]
        text = " ".join(OPERATIONS.read_text().split())
        assert "nothing lost while the file exists" not in text
        hours = max_chunk_age_s() / 2 / 3600
        assert f"more than {hours:g} hour" in text
        assert "entry too far behind" in text
