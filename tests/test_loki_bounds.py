"""Every record obs exports over OTLP is one Loki stores: within Loki's per-entry
structured-metadata limits, with no attribute name that fails the whole push.

Records go through obs' real chain and exporter to the real loopback receiver (gRPC and
HTTP); tests/_loki.py re-implements what Loki's OTLP ingestion makes of each (grafana/loki
65e30f8488e8a5ea2013c6881675f8103a8f6bc7, cited there) and its per-entry validation. Before
obs/_lokifit.py a call with 150 fields, a dict field with 150 keys or a few long texts
built a record Loki refused (structured_metadata_too_many / _too_large), and a field named
``_`` or ``""`` made Loki refuse the whole batch: a ``workspace_terminal_failure`` carrying
such context never reached the alert.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from _loki import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, refusal, structured_metadata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs import _lokifit as lokifit
from obs._fields import CALL_KEYWORDS, CONTROL_SET
from obs.otel.records import RecordBuilder
from obs.rank import RankResolver
from obs.settings import Settings

ALERT = "workspace_terminal_failure"
#: The alert keys and the values every record below carries.
KEYS = {"stage": "terminal_failure", "chain": "fi_ar", "last_error_type": "RuntimeError"}


@pytest.fixture(scope="module")
def receiver() -> Iterator[Any]:
    with obs.testing.OTLPReceiver() as rx:
        yield rx


def configure(rx: Any, transport: str) -> None:
    endpoint = rx.grpc_endpoint if transport == "grpc" else rx.http_endpoint
    obs.configure(
        stream="none",
        otlp_endpoint=endpoint,
        otlp_protocol="grpc" if transport == "grpc" else "http/protobuf",
        logs_exporter="otlp",
    )


def exported(rx: Any, marker: str) -> dict[str, Any]:
    """The one record whose ``marker`` attribute is set, once obs flushed it."""
    obs.flush(timeout=10)
    (record,) = rx.wait_for(
        predicate=lambda r: r["attributes"].get("marker") == marker, count=1, timeout=10
    )
    return record


def check_stored(record: dict[str, Any], fields: dict[str, Any]) -> None:
    """Loki stores it (default limits, every resource attribute as structured metadata:
    the strictest case), with its alert keys whole and anything folded marked."""
    entries = structured_metadata(record)  # raises PushRefused for a name Loki refuses
    assert refusal(entries, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_BYTES) is None, (
        len(entries),
        sorted(record["attributes"])[:20],
    )
    attrs = record["attributes"]
    assert record["event_name"] == attrs["event"] == ALERT
    assert record["severity_text"] == "ERROR"
    for key, value in KEYS.items():
        assert attrs[key] == value
    assert {"rank", "local_rank", "world_size", "node_rank", "host.name"} <= set(attrs)
    folded = attrs.get(lokifit.FOLDED_FIELDS, 0)
    missing = [k for k in fields if k not in attrs and f"user.{k}" not in attrs]
    if missing:  # a field not kept is counted, and its JSON is in obs.folded
        assert folded >= len(missing), (folded, missing)
        assert isinstance(attrs[lokifit.FOLDED], str)


SHAPES: dict[str, dict[str, Any]] = {
    "150 fields": {f"f{i}": i for i in range(150)},
    "a dict of 150 keys": {"ctx": {f"k{i}": "v" for i in range(150)}},
    "nested dicts": {"ctx": {f"a{i}": {f"b{j}": j for j in range(12)} for i in range(12)}},
    "ten 16 KiB texts": {f"s{i}": "x" * 16000 for i in range(10)},
    "non-ASCII texts": {f"s{i}": "é" * 12000 for i in range(4)},
    "a list of long texts": {"items": ["y" * 16000] * 10},
    "a field named _": {"_": 1},
    "a field named with punctuation only": {"...": 1, "-": 2},
    "a non-ASCII field name": {"日本": 1},
    "an empty field name": {"": 1},
    "long field names": {f"k{i}_" + "n" * 250: i for i in range(100)},
}


@pytest.mark.parametrize("transport", ["grpc", "http"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_terminal_failure_with_a_big_context_is_stored_by_loki(
    receiver: Any, transport: str, shape: str
) -> None:
    configure(receiver, transport)
    marker = f"{transport}-{shape}"
    fields = SHAPES[shape]
    obs.get_logger("comm").error(ALERT, marker=marker, **KEYS, **fields)
    check_stored(exported(receiver, marker), fields)


def test_a_record_that_fits_is_exported_as_it_is(receiver: Any) -> None:
    """The plain path: nothing folded, nothing added."""
    configure(receiver, "http")
    fields = {"n": 1, "text": "t" * 2000, "ctx": {"a": 1}, "items": [1, 2]}
    obs.get_logger("comm").error(ALERT, marker="plain", **KEYS, **fields)
    attrs = exported(receiver, "plain")["attributes"]
    assert lokifit.FOLDED not in attrs
    assert lokifit.FOLDED_FIELDS not in attrs
    assert {k: attrs[k] for k in fields} == fields


def test_the_folded_text_is_the_json_of_the_fields_that_did_not_fit(receiver: Any) -> None:
    configure(receiver, "grpc")
    fields = {f"f{i:03}": i for i in range(150)}
    obs.get_logger("comm").error(ALERT, marker="fold", **KEYS, **fields)
    attrs = exported(receiver, "fold")["attributes"]
    folded = json.loads(attrs[lokifit.FOLDED])
    assert attrs[lokifit.FOLDED_FIELDS] == len(folded) > 0
    assert {**{k: attrs[k] for k in fields if k in attrs}, **folded} == fields


def test_a_huge_stacktrace_keeps_its_innermost_frames(receiver: Any) -> None:
    configure(receiver, "http")

    def deep(n: int) -> None:
        if n == 0:
            raise RuntimeError("innermost " + "z" * 3000)
        deep(n - 1)

    try:
        deep(60)
    except RuntimeError:
        obs.get_logger("comm").error(
            ALERT, marker="stack", exc_info=True, **KEYS, **{f"s{i}": "x" * 9000 for i in range(6)}
        )
    record = exported(receiver, "stack")
    check_stored(record, {})
    assert record["attributes"]["exception.type"] == "RuntimeError"
    assert record["attributes"]["exception.stacktrace"].rstrip().endswith("z")


KEY = st.one_of(
    st.sampled_from(["_", "", "...", "日本", "a.b", "1x", "__x__", "____"]),
    st.text(min_size=0, max_size=60),
).filter(lambda k: k not in CONTROL_SET and k not in CALL_KEYWORDS and k not in KEYS)
LEAF = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    st.booleans(),
    st.none(),
    st.text(max_size=40),
    st.integers(0, 20000).map(lambda n: "v" * n),
    st.integers(0, 6000).map(lambda n: "ü" * n),
)
VALUE = st.recursive(
    LEAF,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(KEY, inner, max_size=12),
    max_leaves=40,
)


@st.composite
def contexts(draw: st.DrawFn) -> dict[str, Any]:
    """Many fields, wide and nested dicts, long keys and values, odd names."""
    count = draw(st.integers(0, 200))
    width = draw(st.integers(0, 200))
    key_len = draw(st.integers(1, 300))
    size = draw(st.integers(0, 16000))
    fields: dict[str, Any] = {
        f"f{i}_" + "k" * (key_len % 40): "s" * (size // 8) for i in range(count)
    }
    if width:
        fields["wide"] = {f"w{i}" + "q" * key_len: i for i in range(width)}
    fields.update(draw(st.dictionaries(KEY, VALUE, max_size=8)))
    return fields


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_any_context_is_stored_by_loki(receiver: Any, transport: str) -> None:
    configure(receiver, transport)
    seen = iter(range(10**9))

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(fields=contexts())
    def one(fields: dict[str, Any]) -> None:
        marker = f"any-{transport}-{next(seen)}"
        obs.get_logger("comm").error(ALERT, marker=marker, **KEYS, **fields)
        check_stored(exported(receiver, marker), fields)

    one()


def loki_entries(resource: dict[str, Any], attributes: dict[str, Any]) -> list[Any]:
    """Loki's structured metadata for an alert record of these attributes and resource."""
    record = {
        "attributes": attributes,
        "resource": resource,
        "scope": {"name": "obs", "version": "0.1.0"},
        "event_name": ALERT,
        "time_unix_nano": 1,
        "observed_time_unix_nano": 2,
        "severity_number": 17,
        "severity_text": "ERROR",
    }
    return structured_metadata(record)


def test_a_spooled_line_of_another_version_is_fitted_on_replay() -> None:
    """A line spooled without the bound (an older obs) is replayed within it."""
    builder = RecordBuilder(Settings(service_name="svc"), RankResolver())
    attrs = {"event": ALERT, **KEYS, **{f"f{i}": "x" * 900 for i in range(150)}, "_": 1}
    doc = {"v": 1, "cls": 3, "ts": 1, "ots": 2, "sn": 17, "st": "ERROR", "body": "b"}
    doc |= {"name": ALERT, "attrs": attrs, "res": {"service.name": "svc", "rank": 3}}
    rec = builder.from_spool(doc).log_record
    assert rec.attributes is not None
    assert refusal(loki_entries(doc["res"], dict(rec.attributes))) is None
    assert rec.attributes["obs.replayed"] is True
    assert rec.attributes[lokifit.FOLDED_FIELDS] > 0
