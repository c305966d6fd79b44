"""Tests for obs.events: the typed-event registry, its schema output and emit()."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import comm.events as comm_events
import obs
import obs.testing
from obs import events
from obs.events import REGISTRY, Event, EventRegistry, Stage, emit, json_schema, markdown
from obs.severity import DEFAULT_POLICY

# DESIGN.md "comm: ... Events" (the Grafana contract) and INTERNALS.md "Internal events":
# the names and the fields each must have at least, with their JSON types.
DESIGN_EVENTS: dict[str, dict[str, Any]] = {
    "workspace_attempt": {"chain": "string", "backend": "string", "attempt": "integer"},
    "workspace_attempt_failed": {
        "chain": "string",
        "backend": "string",
        "attempt": "integer",
        "reason": "string",
        "error_type": "string",
        "error_message": "string",
        "duration_ms": "number",
    },
    "workspace_fallback": {
        "chain": "string",
        "from_backend": "string",
        "to_backend": "string",
        "reason": "string",
    },
    "workspace_initialized": {
        "chain": "string",
        "backend": "string",
        "attempts": "integer",
        "duration_ms": "number",
        "reused": "boolean",
    },
    "workspace_terminal_failure": {
        "chain": "string",
        "backends_tried": "array",
        "reasons": "array",
        "last_error_type": None,  # str | None
        "last_error_message": None,
        "hint": "string",
    },
    "obs_internal_error": {"where": "string", "error_type": "string", "error_message": "string"},
    "obs_records_dropped": {"dropped": "object", "reason": "string"},
    "log_repeats_suppressed": {
        "dedup_key": "string",
        "original_event": "string",
        "suppressed_count": "integer",
        "first_seen": "string",
        "last_seen": "string",
    },
    "obs_dedup_capacity_reached": {"capacity": "integer"},
}
DESIGN_STAGES = {
    "workspace_attempt": ("attempt", logging.DEBUG),
    "workspace_attempt_failed": ("attempt_failed", logging.WARNING),
    "workspace_fallback": ("fallback", logging.WARNING),
    "workspace_initialized": ("initialized", logging.INFO),
    "workspace_terminal_failure": ("terminal_failure", logging.ERROR),
}


@pytest.fixture
def captured() -> Any:
    """Configure obs for DEBUG JSON without export and capture the chain's events."""
    obs.configure(level="DEBUG", format="json", sdk_disabled=True, repeat_summary_seconds=0)
    with obs.testing.capture_events() as evs:
        yield evs


class TestRegistryContents:
    def test_design_events_are_registered(self) -> None:
        """Every event DESIGN.md and INTERNALS.md name is in the default registry."""
        assert set(DESIGN_EVENTS) <= set(REGISTRY.names())

    @pytest.mark.parametrize("name", sorted(DESIGN_EVENTS))
    def test_design_fields_and_types(self, name: str) -> None:
        """Each design event has at least the listed fields, with the listed JSON types."""
        schema = json_schema(REGISTRY)["$defs"][name]["properties"]
        for field, json_type in DESIGN_EVENTS[name].items():
            assert field in schema, f"{name} lacks {field}"
            if json_type is not None:
                assert json_type == schema[field]["type"]
        nullable = schema.get("last_error_type")
        if nullable is not None:
            assert {"type": "null"} in nullable["anyOf"]

    @pytest.mark.parametrize("name", sorted(DESIGN_STAGES))
    def test_workspace_stage_and_level(self, name: str) -> None:
        """Workspace events carry DESIGN.md's stage, with the default policy's level."""
        cls = REGISTRY[name]
        stage, level = DESIGN_STAGES[name]
        assert (stage, level) == (cls.stage, cls.level)
        rule = DEFAULT_POLICY.rule(stage)
        assert rule is not None
        assert rule.level == cls.level

    def test_internal_event_levels(self) -> None:
        """obs's internal events register at the levels the chain emits them at."""
        levels = {n: REGISTRY[n].level for n in DESIGN_EVENTS if n.startswith(("obs_", "log_"))}
        assert {
            "obs_internal_error": logging.ERROR,
            "obs_records_dropped": logging.WARNING,
            "log_repeats_suppressed": logging.WARNING,
            "obs_dedup_capacity_reached": logging.WARNING,
        } == levels

    def test_every_event_is_documented(self) -> None:
        """Every registered event has a one-line description and a snake_case name."""
        for cls in REGISTRY:
            assert cls.description
            assert "\n" not in cls.description
            assert cls.name == cls.name.lower()
            assert " " not in cls.name

    def test_stage_events_level_matches_policy(self) -> None:
        """No staged event registers below its stage's level (the policy would raise it)."""
        for cls in REGISTRY:
            if cls.stage is not None:
                rule = DEFAULT_POLICY.rule(cls.stage)
                assert rule is not None
                assert cls.level == rule.level, cls.name

    def test_lookup_api(self) -> None:
        """get/[]/in/len/iter/all/names agree with each other."""
        assert REGISTRY.get("workspace_fallback") is comm_events.WorkspaceFallback
        assert REGISTRY["workspace_fallback"] is comm_events.WorkspaceFallback
        assert REGISTRY.get("nope") is None
        assert "workspace_fallback" in REGISTRY
        assert len(REGISTRY) == len(REGISTRY.names()) == len(REGISTRY.all())
        assert [c.name for c in REGISTRY] == list(REGISTRY.names())
        assert list(REGISTRY.names()) == sorted(REGISTRY.names())
        with pytest.raises(KeyError, match="no event 'nope'; known: chain_attempt"):
            REGISTRY["nope"]

    def test_field_specs(self) -> None:
        """fields() reports each field's type name and whether it is required."""
        specs = {s.name: s for s in REGISTRY.fields("workspace_terminal_failure")}
        assert specs["backends_tried"].type_name == "list[str]"
        assert specs["backends_tried"].required is True
        assert specs["backends_skipped"].required is False
        assert specs["last_error_type"].type_name == "str \\| null"


class TestRegister:
    def test_rejects_non_frozen(self) -> None:
        """A mutable dataclass cannot be an event."""
        reg = EventRegistry()

        @dataclasses.dataclass
        class Mutable(Event):
            name: ClassVar[str] = "mutable_event"

        with pytest.raises(TypeError, match="must be a frozen dataclass"):
            reg.register(Mutable)

    def test_rejects_bad_name(self) -> None:
        """Names must be snake_case: they are the Grafana contract."""
        reg = EventRegistry()

        @dataclasses.dataclass(frozen=True)
        class Bad(Event):
            name: ClassVar[str] = "Bad-Name"

        with pytest.raises(ValueError, match="snake_case"):
            reg.register(Bad)

    def test_rejects_duplicate_name(self) -> None:
        """Two classes cannot share a name; re-registering the same class is a no-op."""
        reg = EventRegistry()

        @dataclasses.dataclass(frozen=True)
        class One(Event):
            name: ClassVar[str] = "same_name"

        @dataclasses.dataclass(frozen=True)
        class Two(Event):
            name: ClassVar[str] = "same_name"

        assert reg.register(One) is One
        assert reg.register(One) is One
        with pytest.raises(ValueError, match="already registered by One"):
            reg.register(Two)

    def test_rejects_reserved_field(self) -> None:
        """A field may not shadow a record key (rank) or a control keyword (scope)."""
        reg = EventRegistry()

        @dataclasses.dataclass(frozen=True)
        class Clash(Event):
            name: ClassVar[str] = "clash_event"
            rank: int
            scope: str

        with pytest.raises(ValueError, match=r"\['rank', 'scope'\]"):
            reg.register(Clash)

    def test_rejects_unknown_template_field(self) -> None:
        """A body template may only name fields the event has."""
        reg = EventRegistry()

        @dataclasses.dataclass(frozen=True)
        class Templ(Event):
            name: ClassVar[str] = "templ_event"
            message: ClassVar[str | None] = "{missing} broke"
            present: str

        with pytest.raises(ValueError, match=r"unknown fields \['missing'\]"):
            reg.register(Templ)

    def test_rejects_unknown_stage(self) -> None:
        """The stage must be one the severity policy knows."""
        reg = EventRegistry()

        @dataclasses.dataclass(frozen=True)
        class Staged(Event):
            name: ClassVar[str] = "staged_event"
            stage: ClassVar[Stage | None] = "retrying"  # type: ignore[assignment]

        with pytest.raises(ValueError, match="'retrying' is not one of"):
            reg.register(Staged)


class TestBody:
    def test_template_joins_lists(self) -> None:
        """Lists render as 'a, b' in the body, as DESIGN.md's record example shows."""
        event = comm_events.WorkspaceTerminalFailure(
            "fi_ar", ("mnnvl", "trtllm"), ("no_cuda", "no_cuda"), "AssertionError", "x", "h"
        )
        assert (
            "FlashInfer allreduce fusion workspace unavailable (fi_ar): tried mnnvl, trtllm"
            == event.body()
        )

    def test_no_template_is_name(self) -> None:
        """Without a template the body is the event name."""
        assert "obs_unrenderable_event" == events.ObsUnrenderableEvent().body()


class TestSchema:
    def test_json_schema_document(self) -> None:
        """One 2020-12 document, a $defs entry per event and a oneOf over them."""
        doc = json_schema(REGISTRY)
        assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert list(doc["$defs"]) == list(REGISTRY.names())
        assert [{"$ref": f"#/$defs/{n}"} for n in REGISTRY.names()] == doc["oneOf"]

    def test_event_schema_consts_and_required(self) -> None:
        """event/stage/outcome are consts; required lists record and event fields."""
        schema = json_schema(REGISTRY)["$defs"]["workspace_terminal_failure"]
        props = schema["properties"]
        assert {"const": "workspace_terminal_failure"} == {"const": props["event"]["const"]}
        assert {"const": "terminal_failure"} == props["stage"]
        assert {"const": "failure"} == props["outcome"]
        assert {"type": "array", "items": {"type": "string"}} == props["backends_tried"]
        for key in ("rank", "local_rank", "world_size", "node_rank", "host.name"):
            assert key in schema["required"]
        for key in ("severity_text", "severity_number", "stage", "outcome", "chain", "hint"):
            assert key in schema["required"]
        assert "backends_skipped" not in schema["required"]
        assert "code.file.path" in props
        assert "ERROR" == schema["x-obs-level"]

    def test_mapping_field_schema(self) -> None:
        """dict[str, int] fields are objects of integers."""
        props = json_schema(REGISTRY)["$defs"]["obs_records_dropped"]["properties"]
        assert {"type": "object", "additionalProperties": {"type": "integer"}} == props["dropped"]

    def test_markdown_lists_every_event_and_field(self) -> None:
        """The Markdown has a section per event and a row per field."""
        text = markdown(REGISTRY)
        for cls in REGISTRY:
            assert f"## `{cls.name}`" in text
            for spec in REGISTRY.fields(cls.name):
                assert f"| `{spec.name}` |" in text
        assert "- stage: `terminal_failure` (outcome `failure`)" in text
        assert "| `host.name` | string | yes | host name |" in text

    def test_cli_json(self, capsys: pytest.CaptureFixture[str]) -> None:
        """cli_schema --format json prints the JSON Schema document."""
        assert 0 == events.cli_schema(["--format", "json"])
        doc = json.loads(capsys.readouterr().out)
        assert json_schema(REGISTRY) == doc

    def test_cli_markdown_default_and_schema_prefix(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Markdown is the default; a leading 'schema' argument is accepted."""
        assert 0 == events.cli_schema(["schema"])
        assert markdown(REGISTRY) == capsys.readouterr().out

    def test_cli_bad_format(self, capsys: pytest.CaptureFixture[str]) -> None:
        """An unknown format is bad usage: exit status 2 and a message on stderr."""
        assert 2 == events.cli_schema(["--format", "yaml"])
        assert "invalid choice: 'yaml'" in capsys.readouterr().err

    def test_python_m_obs_schema(self) -> None:
        """`python -m obs schema --format json` prints the registry and exits 0."""
        proc = subprocess.run(
            [sys.executable, "-m", "obs", "schema", "--format", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert 0 == proc.returncode, proc.stderr
        assert set(DESIGN_EVENTS) <= set(json.loads(proc.stdout)["$defs"])


class TestEmit:
    def test_emit_logs_level_stage_body_fields(self, captured: list[dict[str, Any]]) -> None:
        """emit() logs the event name at its level with stage, outcome, body and fields."""
        emit(comm_events.WorkspaceFallback("fi_ar", "mnnvl", "trtllm", "no_multicast"), logger="t")
        assert 1 == len(captured)
        ev = captured[0]
        assert {
            "event": "workspace_fallback",
            "logger": "t",
            "severity_text": "WARNING",
            "severity_number": 13,
            "stage": "fallback",
            "outcome": "degraded",
            "chain": "fi_ar",
            "from_backend": "mnnvl",
            "to_backend": "trtllm",
            "reason": "no_multicast",
            "body": "FlashInfer allreduce fusion workspace (fi_ar): falling back from mnnvl "
            "to trtllm (no_multicast)",
        } == {k: ev[k] for k in ("event", "logger", "severity_text", "severity_number",
                                 "stage", "outcome", "chain", "from_backend", "to_backend",
                                 "reason", "body")}  # fmt: skip
        assert "comm.events" == events.REGISTRY["workspace_fallback"].__module__

    def test_default_logger_name(self, captured: list[dict[str, Any]]) -> None:
        """Without logger= the record's logger is obs.events."""
        emit(events.ObsDedupCapacityReached(5))
        assert ["obs.events"] == [e["logger"] for e in captured]

    def test_once_keys_on_identity(self, captured: list[dict[str, Any]]) -> None:
        """once=True dedups on the identity fields: a different duration is a repeat."""
        for took in (1.0, 2.0, 3.0):
            emit(
                comm_events.WorkspaceAttemptFailed("fi_ar", "mnnvl", 1, "no_cuda", "E", "m", took),
                once=True,
            )
        emit(
            comm_events.WorkspaceAttemptFailed("fi_ar", "trtllm", 2, "no_cuda", "E", "m", 1.0),
            once=True,
        )
        assert [("mnnvl", 1.0), ("trtllm", 1.0)] == [
            (e["backend"], e["duration_ms"]) for e in captured if e["event"].startswith("work")
        ]

    def test_control_passthrough_body_override(self, captured: list[dict[str, Any]]) -> None:
        """Control keywords reach the logger: body= overrides the template."""
        emit(events.ObsDedupCapacityReached(5), body="custom body", scope="global")
        assert ["custom body"] == [e["body"] for e in captured]

    def test_stage_level_not_lowered(self, captured: list[dict[str, Any]]) -> None:
        """A terminal failure is ERROR (17) whatever emits it."""
        emit(events.ChainTerminalFailure("kv", (), (), None, None, ""))
        assert [(17, "failure")] == [(e["severity_number"], e["outcome"]) for e in captured]

    def test_emit_never_raises(self, captured: list[dict[str, Any]]) -> None:
        """A broken event is reported as obs_internal_error instead of raising."""

        @dataclasses.dataclass(frozen=True)
        class Broken(Event):
            name: ClassVar[str] = "broken_event"

            def fields(self) -> dict[str, Any]:
                raise RuntimeError("boom")

        emit(Broken())
        assert [("obs_internal_error", "obs.events.emit", "RuntimeError")] == [
            (e["event"], e["where"], e["error_type"]) for e in captured
        ]


class _NoStr:
    """A value whose str() and repr() raise."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    __repr__ = __str__


class _NoStrShown(_NoStr):
    """str() raises; repr() works (Hypothesis shows the examples it draws)."""

    def __repr__(self) -> str:
        return "_NoStrShown()"


def _cyclic() -> list[Any]:
    cyc: list[Any] = ["mnnvl"]
    cyc.append(cyc)
    return cyc


class TestEmitOddValues:
    """A typed event with one odd value is still written: only that value is shown
    differently (it lost the whole event, found by an adversarial review on b8ea922)."""

    BASE: ClassVar[dict[str, Any]] = {
        "chain": "fi_ar",
        "backends_tried": ["mnnvl"],
        "reasons": ["no_cuda"],
        "last_error_type": None,
        "last_error_message": None,
        "hint": "h",
    }

    @pytest.mark.parametrize(
        "odd",
        [
            {"hint": _NoStr()},
            {"reasons": _cyclic()},
            {"last_error_message": 10**5000},
            {"last_error_type": _NoStr()},
            {"backends_tried": [_NoStr(), 1.5, None]},
        ],
    )
    def test_terminal_failure_is_written(
        self, odd: dict[str, Any], captured: list[dict[str, Any]]
    ) -> None:
        emit(comm_events.WorkspaceTerminalFailure(**{**self.BASE, **odd}))
        assert [("workspace_terminal_failure", "ERROR", True)] == [
            (e["event"], e["severity_text"], isinstance(e["body"], str)) for e in captured
        ]

    @settings(max_examples=100, deadline=None)
    @given(value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
        | st.just(_NoStrShown()),
        lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner),
        max_leaves=8,
    ))  # fmt: skip
    def test_any_field_value_keeps_the_event(self, value: object) -> None:
        """Whatever a field holds, body() returns bounded text and never raises."""
        event = comm_events.WorkspaceTerminalFailure(**{**self.BASE, "hint": value})
        body = event.body()
        assert (str, True) == (type(body), len(body) < 20_000)


class TestImports:
    def test_import_obs_and_comm_do_not_import_torch(self) -> None:
        """`import obs, obs.events, obs.fallback, comm` loads neither torch nor flashinfer."""
        code = (
            "import sys, obs, obs.events, obs.fallback, comm, comm.probe;"
            "print(sorted(m for m in ('torch', 'flashinfer') if m in sys.modules))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
        assert "[]" == proc.stdout.strip()


class TestOwnEvents:
    """Every event obs emits about itself is a registered typed event, built from its class."""

    def test_every_obs_event_name_in_the_source_is_registered(self) -> None:
        """Each obs_* event name written anywhere in obs/ or comm/ is in the registry (the
        pytest fixture name obs_events is not an event)."""
        import ast
        from pathlib import Path

        root = Path(__file__).resolve().parents[1]
        names: set[str] = set()
        for package in ("obs", "comm"):
            for path in (root / package).rglob("*.py"):
                for node in ast.walk(ast.parse(path.read_text())):
                    if isinstance(node, ast.Constant) and isinstance(node.value, str):
                        text = node.value
                        if text.startswith("obs_") and text.isidentifier() and text.islower():
                            names.add(text)
        names -= {"obs_events"}
        assert {"obs_unbridgeable_record", "obs_unrenderable_event"} <= names
        assert [] == sorted(n for n in names if n not in REGISTRY)

    def test_runtime_reports_are_typed_events(self, captured: list[dict[str, Any]]) -> None:
        """A report is built from its class: name, registered level, fields and body."""
        from obs._config import STATE
        from obs._own_events import ObsDedupCapacityReached, ObsRecordsDropped

        runtime = STATE.runtime
        assert runtime is not None
        runtime.report(ObsDedupCapacityReached(capacity=7))
        runtime.report(ObsRecordsDropped(reason="write_failed", count=2))
        got = [(e["event"], e["severity_text"], e["body"]) for e in captured]
        assert [
            (
                "obs_dedup_capacity_reached",
                "WARNING",
                "dedup table full (7 keys): new keys share a throttled slot",
            ),
            ("obs_records_dropped", "WARNING", "2 log records were not delivered (write_failed)"),
        ] == got
        assert ({}, 2) == (captured[1]["dropped"], captured[1]["count"])

    def test_reports_without_optional_fields_omit_them(
        self, captured: list[dict[str, Any]]
    ) -> None:
        """An optional field left None (variable, collector_message) is not written."""
        from obs._config import STATE
        from obs._own_events import ObsInternalError

        runtime = STATE.runtime
        assert runtime is not None
        runtime.report(ObsInternalError(where="w", error_type="E", error_message="m"))
        assert "variable" not in captured[-1]
        assert ("w: E: m", "ERROR") == (captured[-1]["body"], captured[-1]["severity_text"])

    def test_stage_literal_is_the_policys(self) -> None:
        """The Stage type lists exactly the stage policy's stages, in order."""
        import typing

        from obs.severity import DEFAULT_POLICY

        assert tuple(DEFAULT_POLICY.rules) == typing.get_args(Stage) == events.STAGES
