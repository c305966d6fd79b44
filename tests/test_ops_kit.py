"""The ops kit stays honest: collector and Loki configs, dashboard, alerts, docs, demo.

No collector, Loki or Grafana runs here, so the configs are parsed and their mappings
re-implemented (the filelog operators in ``tests/_filelog.py``, Loki's OTLP label
selection below). Every LogQL query in the dashboard, the alerts, the README and
docs/OPERATIONS.md is checked against the event registry: a renamed event or field, a
stage or reason value that does not exist, or a stream label Loki does not index fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from _filelog import FilelogMapping, UnsupportedConfig

from comm.flashinfer_allreduce import REASONS, SKIP_MULTI_NODE
from obs._receiver import OTLPReceiver
from obs.events import COMMON_FIELDS, REGISTRY, STAGES
from obs.otel import resource_attributes
from obs.pytest_plugin import otlp_receiver  # noqa: F401 - the fixture, used by name
from obs.rank import RankInfo
from obs.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = ROOT / "examples" / "otel-collector.yaml"
LOKI = ROOT / "examples" / "loki-limits.yaml"
DASHBOARD = ROOT / "examples" / "grafana" / "dashboard.json"
ALERTS = ROOT / "examples" / "grafana" / "alerts.yaml"
DEMO = ROOT / "examples" / "torchrun_demo.py"
OPERATIONS = ROOT / "docs" / "OPERATIONS.md"
EVENTS_MD = ROOT / "docs" / "EVENTS.md"
README = ROOT / "README.md"

#: Loki's built-in list of resource attributes that become index labels
#: (grafana/loki pkg/loghttp/push/otlp_config.go, GlobalOTLPConfig.RegisterFlags).
LOKI_DEFAULT_INDEX_LABELS = (
    "service.name",
    "service.namespace",
    "service.instance.id",
    "deployment.environment",
    "deployment.environment.name",
    "cloud.region",
    "cloud.availability_zone",
    "k8s.cluster.name",
    "k8s.namespace.name",
    "k8s.pod.name",
    "k8s.container.name",
    "container.name",
    "k8s.replicaset.name",
    "k8s.deployment.name",
    "k8s.statefulset.name",
    "k8s.daemonset.name",
    "k8s.cronjob.name",
    "k8s.job.name",
)
#: Names Loki itself adds to every record (pipeline errors, the detected level).
LOKI_BUILTIN = frozenset({"__error__", "detected_level"})
#: Allowed values of fields that queries filter on.
FIELD_VALUES: dict[str, frozenset[str]] = {
    "stage": frozenset(STAGES),
    "outcome": frozenset(COMMON_FIELDS["outcome"][0]["enum"]),
    "severity_text": frozenset(COMMON_FIELDS["severity_text"][0]["enum"]),
    "reason": frozenset(REASONS) | {SKIP_MULTI_NODE},
    "chain": frozenset({"fi_ar", "fi_ar_quant"}),
    "backend": frozenset({"mnnvl", "trtllm"}),
    "from_backend": frozenset({"mnnvl", "trtllm"}),
    "to_backend": frozenset({"mnnvl", "trtllm"}),
}


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def loki_name(name: str) -> str:
    """The Loki label / structured-metadata name of an OTel attribute (dots -> _)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def obs_resource(rank: int = 3, host: str = "gpu-node-0", service: str = "vllm") -> dict:
    """The resource direct export sends for one rank of an 8-GPU node."""
    settings = Settings(service_name=service)
    info = RankInfo(
        rank=rank,
        local_rank=rank % 8,
        world_size=4000,
        local_world_size=8,
        node_rank=rank // 8,
        host=host,
    )
    return resource_attributes(settings, info)


# --- Loki's OTLP label selection, re-implemented ------------------------------------------


def loki_rules(otlp_config: Mapping[str, Any] | None) -> list[tuple[str, frozenset[str]]]:
    """(action, attributes) rules in Loki's order: the default index list is prepended
    as an index_label rule unless ignore_defaults (ApplyGlobalOTLPConfig)."""
    resource = (otlp_config or {}).get("resource_attributes") or {}
    rules = []
    if not resource.get("ignore_defaults", False):
        rules.append(("index_label", frozenset(LOKI_DEFAULT_INDEX_LABELS)))
    for rule in resource.get("attributes_config") or []:
        if "regex" in rule:
            raise AssertionError("regex rules are not modelled here")
        rules.append((rule.get("action", "structured_metadata"), frozenset(rule["attributes"])))
    return rules


def loki_action(attribute: str, rules: list[tuple[str, frozenset[str]]]) -> str:
    """The first matching rule wins; no match is structured metadata (actionForAttribute)."""
    for action, attributes in rules:
        if attribute in attributes:
            return action
    return "structured_metadata"


def index_labels(resource: Mapping[str, Any], rules: list[tuple[str, frozenset[str]]]) -> dict:
    return {
        loki_name(k): str(v) for k, v in resource.items() if loki_action(k, rules) == "index_label"
    }


def snippet_rules() -> list[tuple[str, frozenset[str]]]:
    return loki_rules(load_yaml(LOKI)["limits_config"]["otlp_config"])


# --- LogQL --------------------------------------------------------------------------------

_SELECTOR = re.compile(r"\{([^{}]*)\}")
_MATCHER = re.compile(r'([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_FILTER = re.compile(
    r'(?:\||\band\b|\bor\b)\s*([A-Za-z_]\w*)\s*(=~|!~|!=|==|>=|<=|=|>|<)\s*("(?:[^"\\]|\\.)*"|[-\w.]+)'
)
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_UNWRAP = re.compile(r"\bunwrap\s+(?:\w+\()?([A-Za-z_]\w*)")
_RANGE = re.compile(r"\[[^\]]*\]")
_LEGEND = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_TEMPLATE_LABEL = re.compile(r"\$labels\.([A-Za-z_]\w*)")


@dataclass
class Query:
    """One LogQL query, where it comes from, and the names shown from its result."""

    where: str
    expr: str
    shown: tuple[str, ...] = ()
    selectors: list[tuple[str, str, str]] = field(default_factory=list)
    filters: list[tuple[str, str, str]] = field(default_factory=list)
    groupings: list[str] = field(default_factory=list)
    unwraps: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        rest = self.expr
        for m in _SELECTOR.finditer(self.expr):
            self.selectors += [(n, op, v) for n, op, v in _MATCHER.findall(m.group(1))]
        rest = _RANGE.sub(" ", _SELECTOR.sub(" ", rest))
        self.filters = [(n, op, v.strip('"')) for n, op, v in _FILTER.findall(rest)]
        for m in _GROUPING.finditer(rest):
            self.groupings += [g.strip() for g in m.group(1).split(",") if g.strip()]
        self.unwraps = _UNWRAP.findall(rest)

    @property
    def events(self) -> list[str]:
        return [v for n, op, v in self.filters if n == "event" and op in ("=", "==")]


def event_fields(name: str) -> dict[str, Any]:
    """Field name -> annotation of a registered event."""
    return {spec.name: spec.type for spec in REGISTRY.fields(name)}


def check_query(q: Query) -> list[str]:
    """What in ``q`` does not exist: events, fields, values, labels (empty = all good)."""
    problems = []
    rules = snippet_rules()
    indexed = set(index_labels(obs_resource(), rules))
    for name, _, _ in q.selectors:
        if name not in indexed:
            problems.append(f"{q.where}: stream label {name!r} is not an index label")
    for name, op, _ in q.filters:
        if name == "event" and op not in ("=", "=="):
            problems.append(f"{q.where}: match events with =, not {op}")
    events = q.events
    for name in events:
        if name not in REGISTRY:
            problems.append(f"{q.where}: event {name!r} is not registered")
    selected = [e for e in events if e in REGISTRY] or list(REGISTRY.names())
    fields: dict[str, Any] = {}
    for name in selected:
        fields.update(event_fields(name))
    known = {loki_name(k): k for k in [*COMMON_FIELDS, *fields, *obs_resource()]}
    used = [n for n, _, _ in q.filters] + q.groupings + q.unwraps + list(q.shown)
    for name in used:
        if name not in known and name not in LOKI_BUILTIN and name not in indexed:
            problems.append(f"{q.where}: {name!r} is no field of {selected} nor a record field")
    for name, op, value in q.filters:
        allowed = FIELD_VALUES.get(name)
        if allowed is not None and op in ("=", "==", "!=") and value not in allowed:
            problems.append(f"{q.where}: {name}={value!r} is not one of {sorted(allowed)}")
    for name in q.unwraps:
        tp = fields.get(name)
        if tp not in (int, float):
            problems.append(f"{q.where}: unwrap {name!r} is not a numeric field of {selected}")
    if q.groupings:
        for name in q.shown:
            if name not in q.groupings:
                problems.append(f"{q.where}: shows {name!r}, which `by (...)` drops")
    return problems


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_queries() -> list[Query]:
    out = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            out.append(
                Query(
                    f"panel {panel['id']} {panel['title']!r}",
                    target["expr"],
                    tuple(_LEGEND.findall(target.get("legendFormat", ""))),
                )
            )
    for anno in dashboard()["annotations"]["list"]:
        if "expr" in anno:
            shown = tuple(_LEGEND.findall(anno.get("textFormat", "")))
            shown += tuple(t.strip() for t in anno.get("tagKeys", "").split(",") if t.strip())
            out.append(Query(f"annotation {anno['name']!r}", anno["expr"], shown))
            out.append(Query(f"annotation {anno['name']!r} target", anno["target"]["expr"], shown))
    return out


RUNBOOK = "https://runbooks.example.com/obs/OPERATIONS.md"
_ENV_REF = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z0-9_]+))")


def grafana_interpolate(value: str, env: Mapping[str, str]) -> str:
    """Grafana's provisioning interpolation of one string value (pkg/services/provisioning/
    values/values.go): split on ``$$``, ``os.ExpandEnv`` each part (an unset variable
    becomes ""), join with a literal ``$``."""
    parts = value.split("$$")
    return "$".join(
        _ENV_REF.sub(lambda m: env.get(m.group(1) or m.group(2), ""), part) for part in parts
    )


def provisioned(node: Any, env: Mapping[str, str]) -> Any:
    """The file as Grafana reads it: every string value interpolated (values.StringValue,
    StringMapValue and JSONValue all do), keys left alone."""
    if isinstance(node, str):
        return grafana_interpolate(node, env)
    if isinstance(node, list):
        return [provisioned(v, env) for v in node]
    if isinstance(node, dict):
        return {k: provisioned(v, env) for k, v in node.items()}
    return node


def alert_rules(env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The rules as Grafana provisions them, with OBS_RUNBOOK_URL set by the operator."""
    doc = provisioned(load_yaml(ALERTS), {"OBS_RUNBOOK_URL": RUNBOOK} if env is None else env)
    return [rule for group in doc["groups"] for rule in group["rules"]]


def alert_queries() -> list[Query]:
    out = []
    for rule in alert_rules():
        texts = " ".join(str(v) for v in rule.get("annotations", {}).values())
        shown = tuple(dict.fromkeys(_TEMPLATE_LABEL.findall(texts)))
        for item in rule["data"]:
            if item["datasourceUid"] != "__expr__":
                out.append(Query(f"alert {rule['uid']}", item["model"]["expr"], shown))
    return out


def logql_blocks(text: str) -> list[str]:
    """The queries of every ```logql block (one per non-comment line)."""
    out = []
    for block in re.findall(r"```logql\n(.*?)```", text, re.DOTALL):
        out += [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]
    return out


def readme_section() -> str:
    text = README.read_text()
    start = text.index("## Operating it\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def doc_queries() -> list[Query]:
    out = [Query("README Operating it", q) for q in logql_blocks(readme_section())]
    out += [Query("docs/OPERATIONS.md", q) for q in logql_blocks(OPERATIONS.read_text())]
    return out


def all_queries() -> list[Query]:
    return dashboard_queries() + alert_queries() + doc_queries()


def markdown_section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


# --- the collector config -----------------------------------------------------------------

SAMPLE_LINE = json.dumps(
    {
        "timestamp": "2026-12-02T15:30:14.123456Z",
        "severity_text": "ERROR",
        "severity_number": 17,
        "event": "workspace_terminal_failure",
        "body": "FlashInfer allreduce fusion workspace unavailable (fi_ar): tried mnnvl, trtllm",
        "logger": "comm.flashinfer_allreduce",
        "stage": "terminal_failure",
        "outcome": "failure",
        "rank": 3,
        "local_rank": 3,
        "world_size": 8,
        "node_rank": 0,
        "host.name": "gpu-node-0",
        "chain": "fi_ar",
        "backends_tried": ["mnnvl", "trtllm"],
        "duration_ms": 8.0,
    }
)
SAMPLE_NS = 1796225414_123456000  # 2026-12-02T15:30:14.123456Z


def filelog_receiver(**changes: Any) -> dict[str, Any]:
    receiver = dict(load_yaml(COLLECTOR)["receivers"]["filelog"])
    receiver.update(changes)
    return receiver


class TestCollectorConfig:
    def test_has_the_receivers_processors_and_exporters_of_the_design(self):
        """OTLP on 4317/4318 and filelog in; memory_limiter, batch; otlphttp to /otlp and debug."""
        doc = load_yaml(COLLECTOR)
        otlp = doc["receivers"]["otlp"]["protocols"]
        assert (otlp["grpc"]["endpoint"], otlp["http"]["endpoint"]) == (
            "0.0.0.0:4317",
            "0.0.0.0:4318",
        )
        assert doc["receivers"]["filelog"]["include"][0] == "/var/log/obs/*.jsonl"
        assert doc["receivers"]["filelog"]["operators"][0]["type"] == "json_parser"
        assert {"memory_limiter", "batch", "resource/filelog"} <= set(doc["processors"])
        assert doc["exporters"]["otlphttp/loki"]["endpoint"] == "http://loki:3100/otlp"
        assert doc["exporters"]["debug"]["verbosity"] == "basic"
        pipelines = doc["service"]["pipelines"]
        assert pipelines["logs/otlp"]["receivers"] == ["otlp"]
        assert pipelines["logs/filelog"]["receivers"] == ["filelog"]

    def test_every_pipeline_uses_defined_components_memory_limiter_first_batch_last(self):
        """Each pipeline's components exist; memory_limiter is first and batch last."""
        doc = load_yaml(COLLECTOR)
        for name, pipeline in doc["service"]["pipelines"].items():
            assert name.split("/")[0] == "logs"
            for kind in ("receivers", "processors", "exporters"):
                assert set(pipeline[kind]) <= set(doc[kind]), (name, kind)
            assert pipeline["processors"][0] == "memory_limiter"
            assert pipeline["processors"][-1] == "batch"
            assert "otlphttp/loki" in pipeline["exporters"]
        assert set(doc["service"]["extensions"]) == set(doc["extensions"])
        storages = {doc["receivers"]["filelog"]["storage"]}
        storages.add(doc["exporters"]["otlphttp/loki"]["sending_queue"]["storage"])
        assert storages <= set(doc["extensions"])

    def test_filelog_maps_a_json_line_to_the_otel_record(self):
        """The design's example line: timestamp, severity, body lifted; the rest attributes."""
        mapping = FilelogMapping.from_config(COLLECTOR, env={"OBS_SERVICE_NAME": "vllm"})
        rec = mapping.map_line(SAMPLE_LINE, "/var/log/obs/rank3.jsonl")
        assert rec.timestamp_ns == SAMPLE_NS
        assert (rec.severity_number, rec.severity_text) == (17, "ERROR")
        assert (
            rec.body
            == "FlashInfer allreduce fusion workspace unavailable (fi_ar): tried mnnvl, trtllm"
        )
        expected = json.loads(SAMPLE_LINE)
        for key in ("timestamp", "severity_text", "severity_number", "body"):
            del expected[key]
        assert rec.attributes == expected
        assert rec.resource == {"host.name": "gpu-node-0", "service.name": "vllm"}

    def test_filelog_service_name_defaults_to_unknown_service(self):
        """Without OBS_SERVICE_NAME in the collector's environment: unknown_service."""
        rec = FilelogMapping.from_config(COLLECTOR).map_line(SAMPLE_LINE, "/x.jsonl")
        assert rec.resource["service.name"] == "unknown_service"

    def test_every_obs_level_maps_to_its_otel_severity(self):
        """DEBUG..CRITICAL -> 5/9/13/17/21 with the text kept as obs wrote it."""
        mapping = FilelogMapping.from_config(COLLECTOR)
        got = {}
        for text, number in (
            ("DEBUG", 5),
            ("INFO", 9),
            ("WARNING", 13),
            ("ERROR", 17),
            ("CRITICAL", 21),
        ):
            line = json.loads(SAMPLE_LINE) | {"severity_text": text, "severity_number": number}
            rec = mapping.map_line(json.dumps(line), "/x.jsonl")
            got[text] = (rec.severity_text, rec.severity_number)
        assert got == {
            t: (t, n)
            for t, n in (
                ("DEBUG", 5),
                ("INFO", 9),
                ("WARNING", 13),
                ("ERROR", 17),
                ("CRITICAL", 21),
            )
        }

    def test_parse_ints_is_what_keeps_integers_integers(self):
        """Without parse_ints the collector would turn rank 3 into Double 3.0."""
        without = dict(filelog_receiver())
        ops = [dict(op) for op in without["operators"]]
        ops[0].pop("parse_ints")
        without["operators"] = ops
        rec = FilelogMapping(without).map_line(SAMPLE_LINE, "/x.jsonl")
        assert (type(rec.attributes["rank"]), rec.attributes["rank"]) == (float, 3.0)
        rec = FilelogMapping(filelog_receiver()).map_line(SAMPLE_LINE, "/x.jsonl")
        assert (type(rec.attributes["rank"]), type(rec.attributes["duration_ms"])) == (int, float)

    def test_strptime_layout_with_utc_location_reads_the_same_time(self):
        """The strptime equivalent of the gotime layout gives the same nanoseconds."""
        ops = [dict(op) for op in filelog_receiver()["operators"]]
        ops[0]["timestamp"] = {
            "parse_from": "attributes.timestamp",
            "layout_type": "strptime",
            "layout": "%Y-%m-%dT%H:%M:%S.%fZ",
            "location": "UTC",
        }
        rec = FilelogMapping(filelog_receiver(operators=ops)).map_line(SAMPLE_LINE, "/x.jsonl")
        assert rec.timestamp_ns == SAMPLE_NS

    def test_default_file_name_attribute_would_break_parity(self):
        """include_file_name defaults to true: log.file.name would be a filelog-only attribute."""
        receiver = filelog_receiver()
        del receiver["include_file_name"]
        rec = FilelogMapping(receiver).map_line(SAMPLE_LINE, "/var/log/obs/rank3.jsonl")
        assert rec.attributes["log.file.name"] == "rank3.jsonl"

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"type": "regex_parser", "regex": "(?P<x>.*)"}, "operator type 'regex_parser'"),
            ({"type": "remove", "field": "attributes.rank", "if": "true"}, "`if` expressions"),
            ({"type": "add", "field": "attributes.x", "value": "EXPR(1)"}, "expression value"),
        ],
    )
    def test_the_model_refuses_what_it_does_not_implement(self, change, message):
        """An operator the model does not know fails loudly instead of being ignored."""
        receiver = filelog_receiver(operators=[*filelog_receiver()["operators"], change])
        with pytest.raises(UnsupportedConfig, match=re.escape(message)):
            FilelogMapping(receiver)

    def test_a_layout_ending_in_z_reads_utc_without_location(self):
        """Upstream's setLocation: a layout ending in "Z" is read as UTC with no `location`
        (the first release's model and the config's comment said collector-local time)."""
        ops = [dict(op) for op in filelog_receiver()["operators"]]
        ops[0]["timestamp"] = {
            "parse_from": "attributes.timestamp",
            "layout_type": "strptime",
            "layout": "%Y-%m-%dT%H:%M:%S.%fZ",
        }
        rec = FilelogMapping(filelog_receiver(operators=ops)).map_line(SAMPLE_LINE, "/x.jsonl")
        assert SAMPLE_NS == rec.timestamp_ns

    def test_a_layout_without_zone_or_z_needs_location_utc(self):
        """A layout with neither a zone nor a trailing Z would read collector-local time."""
        ops = [dict(op) for op in filelog_receiver()["operators"]]
        ops[0]["timestamp"] = {
            "parse_from": "attributes.timestamp",
            "layout_type": "strptime",
            "layout": "%Y-%m-%dT%H:%M:%S.%f",
        }
        with pytest.raises(UnsupportedConfig, match="has no zone"):
            FilelogMapping(filelog_receiver(operators=ops))

    def test_hosted_loki_recipe_deletes_after_every_record_has_its_copy(self):
        """docs/OPERATIONS.md's transform: set in a log-context group, then delete in a
        resource-context group after it (deleting in the same log group left every record
        after the first in a batch without the id)."""
        text = (ROOT / "docs" / "OPERATIONS.md").read_text()
        blocks = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
        recipe = next(b for b in blocks if "transform/instance-id-to-log" in b)
        groups = yaml.safe_load(recipe)["processors"]["transform/instance-id-to-log"][
            "log_statements"
        ]
        contexts = [(g["context"], " ".join(g["statements"])) for g in groups]
        set_at = next(i for i, (c, st) in enumerate(contexts) if c == "log" and "set(" in st)
        delete_at = next(i for i, (_, st) in enumerate(contexts) if "delete_key" in st)
        assert set_at < delete_at
        assert "resource" == contexts[delete_at][0]
        assert "delete_key" not in contexts[set_at][1]
        # The resource group's statement works on resource attributes as `attributes`.
        assert 'delete_key(attributes, "service.instance.id")' in contexts[delete_at][1]

    def test_config_comments_say_what_upstream_does(self):
        """No comment claims a trailing Z is read in local time, or that the filelog
        receiver pauses under memory pressure (without retry_on_failure it drops)."""
        text = COLLECTOR.read_text()
        assert "collector's local zone unless" not in text
        assert "the filelog receiver pauses" not in text

    def test_filelog_retries_instead_of_dropping(self):
        """retry_on_failure is on for the filelog receiver: when memory_limiter refuses a
        batch the receiver backs off and re-sends it instead of dropping the lines (upstream
        logs "Enable retry_on_failure to slow down reading logs and avoid dropping")."""
        retry = load_yaml(COLLECTOR)["receivers"]["filelog"]["retry_on_failure"]
        assert retry["enabled"] is True
        assert 0 == retry["max_elapsed_time"]  # never give up: the file offset waits


class TestLokiLimits:
    def test_obs_resource_has_service_name_as_its_only_index_label(self):
        """service.name is the one label; rank, host and service.instance.id are not."""
        assert load_yaml(LOKI)["limits_config"]["allow_structured_metadata"] is True
        assert index_labels(obs_resource(), snippet_rules()) == {"service_name": "vllm"}

    def test_rank_host_and_instance_id_are_structured_metadata(self):
        """Per-rank resource attributes are stored as structured metadata."""
        rules = snippet_rules()
        per_rank = (
            "rank",
            "local_rank",
            "world_size",
            "node_rank",
            "host.name",
            "service.instance.id",
        )
        assert {a: loki_action(a, rules) for a in per_rank} == dict.fromkeys(
            per_rank, "structured_metadata"
        )
        assert obs_resource()["service.instance.id"] == "gpu-node-0:rank3"

    def test_4000_ranks_on_500_hosts_are_one_stream(self):
        """With the snippet 4,000 ranks make 1 stream; with Loki's defaults 4,000."""
        resources = [obs_resource(rank, f"gpu-node-{rank // 8}") for rank in range(4000)]

        def streams(rules):
            return {tuple(sorted(index_labels(r, rules).items())) for r in resources}

        assert len(streams(snippet_rules())) == 1
        assert len(streams(loki_rules(None))) == 4000

    def test_a_structured_metadata_rule_alone_does_not_demote_instance_id(self):
        """Without ignore_defaults the prepended default rule wins: why the snippet sets it."""
        config = load_yaml(LOKI)["limits_config"]["otlp_config"]
        resource = dict(config["resource_attributes"], ignore_defaults=False)
        rules = loki_rules({"resource_attributes": resource})
        assert loki_action("service.instance.id", rules) == "index_label"


class TestDashboard:
    def test_is_importable_json_with_a_loki_datasource_variable(self):
        """schemaVersion, uid, title, and a `datasource` variable of type loki."""
        d = dashboard()
        assert isinstance(d["schemaVersion"], int)
        assert (d["uid"], d["title"]) == (
            "obs-fi-ar-workspace",
            "obs: FlashInfer allreduce workspace",
        )
        variables = {v["name"]: v for v in d["templating"]["list"]}
        assert (variables["datasource"]["type"], variables["datasource"]["query"]) == (
            "datasource",
            "loki",
        )
        assert variables["service"]["definition"] == "label_values(service_name)"

    def test_every_panel_uses_the_datasource_variable_and_has_a_unique_id(self):
        """Panels and targets read from ${datasource}; panel ids are unique."""
        panels = dashboard()["panels"]
        assert len({p["id"] for p in panels}) == len(panels)
        for panel in panels:
            assert panel["datasource"] == {"type": "loki", "uid": "${datasource}"}
            assert {t["datasource"]["uid"] for t in panel["targets"]} == {"${datasource}"}
            assert {"h", "w", "x", "y"} <= set(panel["gridPos"])

    def test_has_the_panels_the_issue_asks_for(self):
        """Terminal failures by host and rank, fallbacks, reasons, suppressed repeats, logs."""
        by_title = {p["title"]: p for p in dashboard()["panels"]}
        expr = {t: p["targets"][0]["expr"] for t, p in by_title.items()}
        assert "sum by (host_name, rank)" in expr["Terminal failures by host and rank"]
        assert 'event="workspace_terminal_failure"' in expr["Terminal failures by host and rank"]
        assert "sum by (from_backend, to_backend)" in expr["Fallbacks by backend"]
        assert "sum by (backend, reason)" in expr["Attempt failures by reason"]
        assert "| unwrap suppressed_count" in expr["Suppressed repeats"]
        logs = by_title["Terminal failures (log lines)"]
        assert (logs["type"], logs["targets"][0]["expr"]) == (
            "logs",
            '{service_name=~"$service"} | stage="terminal_failure"',
        )


class TestAlerts:
    def test_is_grafana_alerting_provisioning(self):
        """apiVersion 1; groups with orgId/name/folder/interval; rules with unique uids."""
        doc = load_yaml(ALERTS)
        assert doc["apiVersion"] == 1
        for group in doc["groups"]:
            assert (group["orgId"], group["folder"], group["interval"]) == (1, "obs", "1m")
        rules = alert_rules()
        assert len({r["uid"] for r in rules}) == len(rules) == 3
        for rule in rules:
            assert {"uid", "title", "condition", "data", "labels", "annotations", "for"} <= set(
                rule
            )
            assert (rule["noDataState"], rule["execErrState"]) == ("OK", "Error")

    def test_templates_survive_provisioning_interpolation(self):
        """Grafana expands $NAME in provisioned values, so a raw ``{{ $labels.rank }}``
        would reach the alert as ``{{ .rank }}`` (a template error): the file writes $$."""
        go_vars = re.compile(r"\{\{[^}]*\}\}")
        for rule in alert_rules():
            for name, text in rule["annotations"].items():
                for block in go_vars.findall(text):
                    assert re.search(r"\$(labels|values?)\b", block), (rule["uid"], name, block)
            assert "$labels." in rule["annotations"]["summary"], rule["uid"]

    def test_runbook_url_is_the_operators_absolute_url(self):
        """runbook_url resolves from Grafana: the operator's OBS_RUNBOOK_URL, not a path
        relative to this repository (which Grafana cannot open)."""
        for rule in alert_rules():
            url = rule["annotations"]["runbook_url"]
            assert url.startswith(RUNBOOK + "#"), url
        raw = [r for g in load_yaml(ALERTS)["groups"] for r in g["rules"]]
        assert all("${OBS_RUNBOOK_URL}" in r["annotations"]["runbook_url"] for r in raw)

    def test_each_rule_is_a_windowed_query_reduced_and_thresholded(self):
        """A: Loki over 1 h (one record fires) or 5 min (the storm rate); B: reduce(A);
        C: threshold(B); the condition is C."""
        windows = {
            "obs-ws-terminal-failure": (3600, "[1h]"),
            "obs-ws-fallback-storm": (300, "[5m]"),
            "obs-records-dropped": (3600, "[1h]"),
        }
        for rule in alert_rules():
            a, b, c = rule["data"]
            seconds, range_ = windows[rule["uid"]]
            assert (a["refId"], a["datasourceUid"], a["relativeTimeRange"]) == (
                "A",
                "loki",
                {"from": seconds, "to": 0},
            )
            assert a["model"]["queryType"] == "instant"
            assert range_ in a["model"]["expr"]
            assert (b["model"]["type"], b["model"]["expression"]) == ("reduce", "A")
            assert (c["model"]["type"], c["model"]["expression"]) == ("threshold", "B")
            assert rule["condition"] == "C"

    def test_terminal_failure_fires_on_any_record_labelled_by_chain_host_rank(self):
        """Rule 1: any workspace_terminal_failure in 5 minutes, per chain, host and rank."""
        rule = next(r for r in alert_rules() if r["uid"] == "obs-ws-terminal-failure")
        q = Query("rule 1", rule["data"][0]["model"]["expr"])
        assert q.events == ["workspace_terminal_failure"]
        assert {"chain", "host_name", "rank"} <= set(q.groupings)
        assert rule["data"][2]["model"]["conditions"][0]["evaluator"] == {
            "type": "gt",
            "params": [0],
        }
        assert (rule["for"], rule["labels"]["severity"]) == ("0s", "critical")

    def test_fallback_storm_fires_above_50_in_5_minutes(self):
        """Rule 2: more than 50 workspace_fallback in 5 minutes."""
        rule = next(r for r in alert_rules() if r["uid"] == "obs-ws-fallback-storm")
        assert Query("rule 2", rule["data"][0]["model"]["expr"]).events == ["workspace_fallback"]
        assert rule["data"][2]["model"]["conditions"][0]["evaluator"] == {
            "type": "gt",
            "params": [50],
        }


FALLBACKS = (
    'sum by (from_backend, to_backend) (count_over_time({service_name=~"$service"}'
    ' | event="workspace_fallback" [5m]))'
)
REPEATS = (
    'sum(sum_over_time({service_name=~"$service"} | event="log_repeats_suppressed"'
    " | unwrap suppressed_count [5m]))"
)
REASON = '{service_name=~"$service"} | event="workspace_attempt_failed" | reason="no_multicast"'
TERMINAL = '{service_name=~"$service"} | stage="terminal_failure"'


class TestQueriesMatchTheRegistry:
    def test_every_query_uses_registered_events_fields_and_values(self):
        """Dashboard, alerts, README and OPERATIONS.md: nothing they name is missing."""
        queries = all_queries()
        assert len(queries) >= 20
        problems = [p for q in queries for p in check_query(q)]
        assert problems == []

    def test_the_queries_cover_the_workspace_and_obs_events(self):
        """The kit watches terminal failures, fallbacks, attempt failures and repeats."""
        used = {e for q in dashboard_queries() + alert_queries() for e in q.events}
        assert used == {
            "workspace_terminal_failure",
            "workspace_fallback",
            "workspace_attempt_failed",
            "workspace_initialized",
            "log_repeats_suppressed",
            "obs_records_dropped",
            "obs_internal_error",
        }

    @pytest.mark.parametrize(
        ("good", "bad", "problem"),
        [
            (
                FALLBACKS,
                FALLBACKS.replace('"workspace_fallback"', '"workspace_fellback"'),
                "is not registered",
            ),
            (
                FALLBACKS,
                FALLBACKS.replace("(from_backend,", "(source_backend,"),
                "'source_backend' is no field",
            ),
            (
                REPEATS,
                REPEATS.replace("unwrap suppressed_count", "unwrap original_event"),
                "not a numeric field",
            ),
            (REASON, REASON.replace("no_multicast", "no_nvswitch"), "reason='no_nvswitch'"),
            (TERMINAL, TERMINAL.replace('"terminal_failure"', '"terminal"'), "stage='terminal'"),
            (
                TERMINAL,
                TERMINAL.replace('service_name=~"$service"', 'host_name="n0"'),
                "'host_name' is not an index label",
            ),
        ],
    )
    def test_the_check_catches_renames(self, good, bad, problem):
        """A renamed event, field, unwrap, value or stream label is reported."""
        assert check_query(Query("good", good)) == []
        problems = check_query(Query("bad", bad))
        assert any(problem in p for p in problems), problems

    def test_the_check_catches_a_legend_the_grouping_drops(self):
        """A legend naming a label that `by (...)` does not keep is reported."""
        assert check_query(Query("good", FALLBACKS, ("from_backend", "to_backend"))) == []
        assert check_query(Query("bad", FALLBACKS, ("chain",))) == [
            "bad: shows 'chain', which `by (...)` drops"
        ]


class TestDocs:
    def test_events_md_is_the_current_generator_output(self):
        """docs/EVENTS.md equals `python -m obs schema --format markdown` byte for byte."""
        out = subprocess.run(
            [sys.executable, "-m", "obs", "schema", "--format", "markdown"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        assert EVENTS_MD.read_text() == out.stdout

    def test_every_registered_event_has_a_section_in_events_md(self):
        """Each registry name is a `## `name`` heading, and no other event is."""
        headings = re.findall(r"^## `([a-z0-9_]+)`$", EVENTS_MD.read_text(), re.MULTILINE)
        assert headings == list(REGISTRY.names())

    def test_operations_md_shows_exactly_the_dashboard_and_alert_queries(self):
        """Every panel and alert query is in OPERATIONS.md, and it has no stale ones."""
        documented = logql_blocks(OPERATIONS.read_text())
        kit = [
            q.expr
            for q in dashboard_queries() + alert_queries()
            if not q.where.startswith("annotation")
        ]
        assert sorted(set(documented)) == sorted(set(kit))

    def test_operations_md_covers_every_stage_and_reason(self):
        """A table row per stage, and per failure reason (plus the multi_node skip)."""
        text = OPERATIONS.read_text()
        stages = markdown_section(text, "## What each stage means")
        assert re.findall(r"^\| `([a-z_]+)` \|", stages, re.MULTILINE) == list(STAGES)
        reasons = markdown_section(text, "## What to do about each reason")
        rows = re.findall(r"^\| `([a-z_]+)`", reasons, re.MULTILINE)
        assert rows == [*REASONS, SKIP_MULTI_NODE]
        assert "expected on GPUs without NVSwitch" in reasons

    def test_operations_md_has_the_torchrun_line_and_resolving_links(self):
        """The demo's torchrun command is documented; relative links point at files."""
        text = OPERATIONS.read_text()
        assert "torchrun --nproc-per-node 2 examples/torchrun_demo.py" in text
        for target in re.findall(r"\]\(((?:\.\./|[A-Za-z])[^)#:]*)\)", text):
            assert (OPERATIONS.parent / target).exists(), target

    def test_readme_operating_it_links_the_kit_and_gives_three_queries(self):
        """The README section links every kit file and shows the three common queries."""
        section = readme_section()
        links = re.findall(r"\]\(([^)#]+)\)", section)
        assert {
            "docs/OPERATIONS.md",
            "docs/EVENTS.md",
            "examples/otel-collector.yaml",
            "examples/loki-limits.yaml",
            "examples/grafana/dashboard.json",
            "examples/grafana/alerts.yaml",
            "examples/torchrun_demo.py",
        } <= set(links)
        assert all((ROOT / link).exists() for link in links)
        queries = [Query("README", q) for q in logql_blocks(section)]
        assert [q.events or [f[2] for f in q.filters] for q in queries] == [
            ["workspace_terminal_failure"],
            ["workspace_attempt_failed"],
            ["terminal_failure"],
        ]


def demo_lines(stdout: str) -> dict[tuple[int, str], str]:
    """(rank, chain) -> outcome text of the demo's per-chain lines."""
    found = re.findall(r"^rank (\d+)/2 (fi_ar|fi_ar_quant): (.*)$", stdout, re.MULTILINE)
    return {(int(rank), chain): rest for rank, chain, rest in found}


#: On the demo's PYTHONPATH: rank 0 prints its first line 2 s late, so rank 1 is done (and
#: exits 3) first, as a slower rank is on a loaded machine; torchrun stops the other ranks
#: when one fails, so a rank that exits before its peers have reported cuts their reports off.
LATE_RANK_0 = """
import builtins, os, time
if os.environ.get("RANK") == "0":
    _print = builtins.print
    def _late_print(*args, **kwargs):
        builtins.print = _print
        time.sleep(2.0)
        _print(*args, **kwargs)
    builtins.print = _late_print
"""


@pytest.fixture
def demo_run(
    tmp_path: Path,
    otlp_receiver: OTLPReceiver,  # noqa: F811 - the imported fixture
) -> tuple[subprocess.CompletedProcess[str], OTLPReceiver]:
    """The demo on 2 ranks under torchrun, exporting to the receiver, configured by env;
    rank 0 is the late one."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(LATE_RANK_0)
    env = dict(os.environ)
    env.update(
        OTEL_SERVICE_NAME="torchrun-demo",
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp_receiver.http_endpoint,
        OBS_FORMAT="json",
        OBS_SPOOL_DIR=str(tmp_path / "spool"),
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p),
    )
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    proc = subprocess.run(
        [*cmd, str(DEMO)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return proc, otlp_receiver


@pytest.mark.integration
@pytest.mark.timeout(300)
class TestTorchrunDemo:
    def test_both_ranks_report_and_export_with_env_only_configuration(self, demo_run):
        """Each rank prints both chains, exits 0 or 3 accordingly, and its records arrive."""
        proc, receiver = demo_run
        lines = demo_lines(proc.stdout)
        assert set(lines) == {(r, c) for r in (0, 1) for c in ("fi_ar", "fi_ar_quant")}, (
            proc.stderr[-3000:]
        )
        finished = receiver.wait_for(
            2, predicate=lambda r: r["event_name"] == "torchrun_demo_finished", timeout=30
        )
        by_rank = {r["attributes"]["rank"]: r for r in finished}
        assert sorted(by_rank) == [0, 1]
        for rank, rec in by_rank.items():
            resource = rec["resource"]
            assert resource["service.name"] == "torchrun-demo"
            assert resource["service.instance.id"] == f"{resource['host.name']}:rank{rank}"
            assert (resource["rank"], resource["world_size"]) == (rank, 2)
        failed = [k for k, v in lines.items() if v.startswith("UNAVAILABLE")]
        terminal = receiver.by_event("workspace_terminal_failure")
        assert sorted(
            (r["attributes"]["rank"], r["attributes"]["chain"]) for r in terminal
        ) == sorted(failed)
        for rec in terminal:
            assert set(rec["attributes"]["reasons"]) <= set(REASONS)
        if failed:  # a rank exits 3; torchrun exits 1, names the rank's exit code and
            # stops the others (done reporting by then: the lines and records above)
            assert proc.returncode == 1
            assert re.search(r"exitcode\s*:\s*3", proc.stderr)
        else:
            assert proc.returncode == 0


def test_unwrap_fields_are_numeric_in_the_registry():
    """suppressed_count (the dashboard's unwrap) is an int field of log_repeats_suppressed."""
    assert typing.get_origin(event_fields("log_repeats_suppressed")["suppressed_count"]) is None
    assert event_fields("log_repeats_suppressed")["suppressed_count"] is int
