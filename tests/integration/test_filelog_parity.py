"""JSON lines through the collector's filelog mapping == direct OTLP export.

obs writes every record twice in one run: as a JSON line to a file, and as an OTLP log
record exported over HTTP to a real :class:`OTLPReceiver`. The file's lines go through
``tests/_filelog.py``, which builds the filelog receiver's operators and the pipeline's
resource processors FROM ``examples/otel-collector.yaml``; what comes out must match what
the receiver got, record by record: attribute keys, values and OTLP value types, body,
severity number and text, timestamp (to the microsecond the line carries), and the
resource attributes the filelog pipeline sets. Differences are listed explicitly below.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _filelog import FilelogMapping, MappedRecord

import comm.events as comm_events
import obs
from obs._receiver import OTLPReceiver
from obs.pytest_plugin import otlp_receiver  # noqa: F401 - the fixture, used by name

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "otel-collector.yaml"
SERVICE = "filelog-parity"

#: Attributes only direct export adds: a per-record uid for downstream dedup of spool
#: replays (``obs.replayed`` is added too, on replayed records only). A JSON line has none.
EXPORTER_ONLY_ATTRIBUTES = frozenset({"log.record.uid"})
#: Resource attributes the filelog pipeline sets (operators + resource/filelog processor);
#: direct export's resource has more (rank attributes, service.instance.id, process.pid,
#: telemetry.sdk.*), which the JSON line carries as log attributes instead.
FILELOG_RESOURCE = frozenset({"host.name", "service.name"})
#: Fields whose float value is not finite: JSON has no NaN/Infinity, so the line carries
#: the strings "nan"/"inf"/"-inf", and direct export sends the same strings.
NON_FINITE = {"ratio_nan": "nan", "ratio_inf": "inf", "ratio_ninf": "-inf"}


def typed(value: Any) -> Any:
    """A value with its OTLP AnyValue type spelled out, so Int 3 != Double 3.0."""
    if value is None:
        return ("empty", None)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("double", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, bytes):
        return ("bytes", value)
    if isinstance(value, (list, tuple)):
        return ("array", tuple(typed(v) for v in value))
    if isinstance(value, dict):
        return ("kvlist", tuple(sorted((k, typed(v)) for k, v in value.items())))
    raise TypeError(f"not an OTLP value: {value!r}")


def log_everything(tmp_path: Path) -> None:
    """Plain, *_once, typed workspace, stdlib, exception and CRITICAL records."""
    log = obs.get_logger("parity.app")
    log.info(
        "engine_started",
        model="llama-3-70b",
        tp=8,
        gpu_util=0.9,
        whole_float=3.0,
        flags=["--enforce-eager", "--tp=8"],
        config={"max_tokens": 2048, "nested": {"fp8": True}},
        missing=None,
        text="naïve ✓\nsecond line",
        big=2**70,
        dtype_set={"bf16"},
        **{k: float(v) for k, v in NON_FINITE.items()},
    )
    for _ in range(3):
        log.warning_once("flag_deprecated", flag="--x")
    obs.emit(comm_events.WorkspaceAttempt(chain="fi_ar", backend="mnnvl", attempt=1))
    obs.emit(
        comm_events.WorkspaceAttemptFailed(
            chain="fi_ar",
            backend="mnnvl",
            attempt=1,
            reason="no_multicast",
            error_type="RuntimeError",
            error_message="[SymmDeviceMemory] Device does not support multicasting.",
            duration_ms=12.5,
        )
    )
    obs.emit(
        comm_events.WorkspaceFallback(
            chain="fi_ar", from_backend="mnnvl", to_backend="trtllm", reason="no_multicast"
        )
    )
    obs.emit(
        comm_events.WorkspaceInitialized(
            chain="fi_ar", backend="trtllm", attempts=2, duration_ms=40.0
        )
    )
    obs.emit(
        comm_events.WorkspaceTerminalFailure(
            chain="fi_ar_quant",
            backends_tried=("mnnvl", "trtllm"),
            reasons=("no_cuda", "dist_not_initialized"),
            last_error_type=None,
            last_error_message=None,
            hint="needs NVIDIA GPUs",
        )
    )
    logging.getLogger("vllm.worker").warning("rank %d lost %s", 3, "heartbeat")
    try:
        int("bad shape (3, 4)")
    except ValueError:
        log.error("step_failed", exc_info=True, step=7)
    log.critical("engine_dead", cause="oom")


@pytest.fixture
def pairs(
    tmp_path: Path,
    otlp_receiver: OTLPReceiver,  # noqa: F811 - the imported fixture
) -> Iterator[list[tuple[MappedRecord, dict[str, Any]]]]:
    """(filelog-mapped line, OTLP record) pairs of one run, matched by event and time."""
    # At DEBUG the HTTP exporter's own urllib3 records reach the JSON lines but, logged on
    # the export thread, are never exported (no feedback loop): keep them out of the run.
    urllib3 = logging.getLogger("urllib3")
    level = urllib3.level
    urllib3.setLevel(logging.WARNING)
    path = tmp_path / "logs" / "rank0.jsonl"
    obs.configure(
        format="json",
        file=str(path),
        logs_exporter="otlp",
        otlp_endpoint=otlp_receiver.http_endpoint,
        otlp_protocol="http/protobuf",
        spool_dir=str(tmp_path / "spool"),
        service_name=SERVICE,
        level="DEBUG",
        repeat_summary_seconds=0,
        blrp_schedule_delay_ms=50,
    )
    log_everything(tmp_path)
    assert obs.flush(timeout=5.0)
    mapping = FilelogMapping.from_config(CONFIG, env={"OBS_SERVICE_NAME": SERVICE})
    mapped = mapping.map_file(path)
    received = otlp_receiver.wait_for(len(mapped), timeout=10.0)

    def key(event: Any, ns: int | None) -> tuple[Any, int]:
        assert ns is not None
        return (event, ns // 1000)

    by_key = {key(r["attributes"].get("event"), r["time_unix_nano"]): r for r in received}
    assert len(by_key) == len(received) == len(mapped), "records do not pair one to one"
    out = []
    for rec in mapped:
        k = key(rec.attributes.get("event"), rec.timestamp_ns)
        assert k in by_key, f"line {k} has no exported counterpart"
        out.append((rec, by_key.pop(k)))
    try:
        yield out
    finally:
        urllib3.setLevel(level)


def events_of(pairs: list[tuple[MappedRecord, dict[str, Any]]]) -> list[str]:
    """The event names of the pairs, in file order."""
    return [rec.attributes["event"] for rec, _ in pairs]


class TestFilelogParity:
    def test_every_line_has_one_exported_record(self, pairs):
        """Each JSON line pairs with exactly one OTLP record: plain, once, typed, stdlib."""
        assert events_of(pairs) == [
            "engine_started",
            "flag_deprecated",
            "workspace_attempt",
            "workspace_attempt_failed",
            "workspace_fallback",
            "workspace_initialized",
            "workspace_terminal_failure",
            "rank %d lost %s",
            "step_failed",
            "engine_dead",
            "log_repeats_suppressed",
        ]

    def test_same_attributes_with_the_same_types(self, pairs):
        """Attribute keys, values and OTLP types match, apart from EXPORTER_ONLY_ATTRIBUTES."""
        for rec, otlp in pairs:
            exported = {
                k: v for k, v in otlp["attributes"].items() if k not in EXPORTER_ONLY_ATTRIBUTES
            }
            assert typed(rec.attributes) == typed(exported), rec.attributes["event"]

    def test_exporter_only_attributes_are_exactly_the_listed_ones(self, pairs):
        """Direct export adds log.record.uid to every record and nothing else."""
        for rec, otlp in pairs:
            assert set(otlp["attributes"]) - set(rec.attributes) == EXPORTER_ONLY_ATTRIBUTES
            assert set(rec.attributes) - set(otlp["attributes"]) == set()
            assert otlp["attributes"]["log.record.uid"].rsplit("-", 1)[1].isdigit()

    def test_timestamp_severity_and_body_are_lifted_out_of_the_attributes(self, pairs):
        """No timestamp/severity_*/body attribute remains; the record fields carry them."""
        for rec, otlp in pairs:
            assert {"timestamp", "severity_text", "severity_number", "body"} & set(
                rec.attributes
            ) == set()
            assert rec.body == otlp["body"]
            assert isinstance(rec.body, str)
            assert (rec.severity_number, rec.severity_text) == (
                otlp["severity_number"],
                otlp["severity_text"],
            )
            assert rec.timestamp_ns == otlp["time_unix_nano"] // 1000 * 1000

    def test_severity_of_each_level(self, pairs):
        """DEBUG..CRITICAL map to 5/9/13/17/21 on both paths (CRITICAL needs the mapping)."""
        got = {
            rec.attributes["event"]: (rec.severity_text, rec.severity_number) for rec, _ in pairs
        }
        assert got["workspace_attempt"] == ("DEBUG", 5)
        assert got["engine_started"] == ("INFO", 9)
        assert got["workspace_fallback"] == ("WARNING", 13)
        assert got["workspace_terminal_failure"] == ("ERROR", 17)
        assert got["engine_dead"] == ("CRITICAL", 21)

    def test_typed_event_fields_arrive_as_typed_values(self, pairs):
        """Workspace event fields keep their types through the filelog path."""
        records = {rec.attributes["event"]: rec for rec, _ in pairs}
        failed = records["workspace_attempt_failed"].attributes
        assert (failed["reason"], failed["attempt"], failed["duration_ms"]) == (
            "no_multicast",
            1,
            12.5,
        )
        assert (failed["stage"], failed["outcome"], failed["chain"]) == (
            "attempt_failed",
            "failure",
            "fi_ar",
        )
        terminal = records["workspace_terminal_failure"]
        assert terminal.attributes["backends_tried"] == ["mnnvl", "trtllm"]
        assert terminal.attributes["reasons"] == ["no_cuda", "dist_not_initialized"]
        assert terminal.attributes["last_error_type"] is None
        assert terminal.body == (
            "FlashInfer allreduce fusion workspace unavailable (fi_ar_quant): tried mnnvl, trtllm"
        )
        suppressed = records["log_repeats_suppressed"].attributes
        assert (suppressed["original_event"], suppressed["suppressed_count"]) == (
            "flag_deprecated",
            2,
        )
        started = records["engine_started"].attributes
        assert typed(started["tp"]) == ("int", 8)
        assert typed(started["whole_float"]) == ("double", 3.0)
        assert typed(started["rank"]) == ("int", 0)
        assert started["config"] == {"max_tokens": 2048, "nested": {"fp8": True}}
        assert started["text"] == "naïve ✓\nsecond line"

    def test_stdlib_and_exception_records(self, pairs):
        """A bridged stdlib record and exc_info fields survive the filelog path unchanged."""
        records = {rec.attributes["event"]: (rec, otlp) for rec, otlp in pairs}
        rec, otlp = records["rank %d lost %s"]
        assert (rec.body, rec.attributes["logger"]) == ("rank 3 lost heartbeat", "vllm.worker")
        assert rec.body == otlp["body"]
        rec, otlp = records["step_failed"]
        assert rec.attributes["exception.type"] == "ValueError"
        assert rec.attributes["exception.message"] == (
            "invalid literal for int() with base 10: 'bad shape (3, 4)'"
        )
        assert rec.attributes["exception.stacktrace"] == otlp["attributes"]["exception.stacktrace"]

    def test_resource_attributes_the_filelog_pipeline_sets(self, pairs):
        """host.name (copied from the line) and service.name (processor) match direct export."""
        for rec, otlp in pairs:
            assert set(rec.resource) == FILELOG_RESOURCE
            assert rec.resource == {k: otlp["resource"][k] for k in FILELOG_RESOURCE}
            assert rec.resource["service.name"] == SERVICE

    def test_event_name_is_a_field_only_direct_export_sets(self, pairs):
        """Direct export sets LogRecord.event_name = event; filelog carries only the attribute."""
        for rec, otlp in pairs:
            assert otlp["event_name"] == otlp["attributes"]["event"] == rec.attributes["event"]
            assert not hasattr(rec, "event_name")

    def test_non_finite_floats_are_the_same_strings_on_both_routes(self, pairs):
        """NaN/Infinity: the JSON line and direct export both carry "nan"/"inf"/"-inf"."""
        rec, otlp = next(p for p in pairs if p[0].attributes["event"] == "engine_started")
        assert {k: rec.attributes[k] for k in NON_FINITE} == NON_FINITE
        assert {k: otlp["attributes"][k] for k in NON_FINITE} == NON_FINITE
