"""Every attribute the OTel record builder writes is ``to_otel_value`` of its field; the
fused path's parts build the record of their event dict.

The builder runs on the export thread and coerces each field itself; any shortcut it takes
(a per-key table, a cached class, an inlined fast path for common types) must not make an
exported record differ from the single coercion the contract names
(``obs.encode.to_otel_value``), or the JSON line and the collector's copy would disagree.
"""

from __future__ import annotations

import enum
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context

from obs import _lokifit
from obs._fields import OTEL_RECORD_FIELDS
from obs._fused import event_dict_of
from obs.encode import MAX_STR, to_otel_value
from obs.levels import level_class
from obs.otel.records import RecordBuilder
from obs.rank import RankInfo, RankResolver
from obs.settings import Settings


class Colour(str, enum.Enum):
    RED = "red"


class Loud(str):
    __slots__ = ()

    def __str__(self) -> str:
        return "LOUD"


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


#: Objects the coercion turns into text (drawn by index: Hypothesis reprs its strategies).
ODD: tuple[object, ...] = (Colour.RED, Loud("quiet"), BrokenRepr(), 1j, frozenset({1}), Ellipsis)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.integers(MAX_STR - 2, MAX_STR + 2).map(lambda n: "é" * n),
    st.integers(MAX_STR - 2, MAX_STR + 2).map(lambda n: "a" * n),
    st.binary(max_size=20),
    st.integers(0, len(ODD) - 1).map(ODD.__getitem__),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4),
    ),
    max_leaves=12,
)
NAMES = st.one_of(
    st.sampled_from(["n", "rank", "stage", "token", "api_key", "_obs_level", "body", "日本"]),
    st.sampled_from(sorted(OTEL_RECORD_FIELDS)),
    st.text(min_size=1, max_size=12),
)


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (a float the coercion kept), at any depth."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=300, deadline=None)
@given(fields=st.dictionaries(NAMES, VALUES, max_size=8), repeat=st.integers(1, 3))
def test_every_attribute_is_to_otel_value_of_its_field(fields: dict[str, Any], repeat: int) -> None:
    """Built once or several times (the per-key table warm), a record that was not folded
    carries exactly the fields that are attributes, each as ``to_otel_value`` gives it."""
    builder = RecordBuilder(Settings(service_name="svc"), RankResolver())
    ed = {"event": "ev", **fields}
    for _ in range(repeat):
        attrs = dict(builder.build((1, Context(), dict(ed)), 2).log_record.attributes or {})
    uid = attrs.pop("log.record.uid")
    assert isinstance(uid, str)
    if _lokifit.FOLDED in attrs:
        return  # fitted to Loki's limits: tests/test_loki_bounds.py owns that shape
    wanted = {
        k: v for k, v in ed.items() if k not in OTEL_RECORD_FIELDS and not k.startswith("_obs_")
    }
    assert attrs.keys() == wanted.keys()
    for key, value in wanted.items():
        assert same(attrs[key], to_otel_value(value)), key


#: Texts a few of which are over Loki's bytes, in all (by the cheap count or in fact).
BIG = st.one_of(
    st.integers(MAX_STR // 2, MAX_STR).map(lambda n: "a" * n),
    st.integers(MAX_STR // 4, MAX_STR // 2).map(lambda n: "é" * n),
)
LEVELS = st.one_of(st.sampled_from([5, 10, 20, 25, 30, 40, 50]), st.integers(-5, 70))
WHERE = st.one_of(
    st.none(), st.tuples(st.text(max_size=20), st.integers(0, 2**31), st.text(max_size=10))
)
INFOS = st.builds(
    RankInfo,
    rank=st.integers(0, 2**40),
    local_rank=st.integers(0, 7),
    world_size=st.integers(1, 2**40),
    node_rank=st.integers(0, 9),
    host=st.one_of(st.sampled_from(["h", "node-1"]), st.text(max_size=12)),
)


def _shape(record: Any) -> tuple[Any, ...]:
    """Everything a record carries but its uid (a counter: differs between two builds)."""
    rec = record.log_record
    attrs = dict(rec.attributes or {})
    attrs.pop("log.record.uid")
    return (
        rec.timestamp,
        rec.observed_timestamp,
        rec.severity_text,
        rec.severity_number,
        rec.body,
        rec.event_name,
        repr(attrs),  # (NaN kept as a float: equal by text)
        record.resource,
    )


@settings(max_examples=300, deadline=None)
@given(
    level=LEVELS,
    event=st.one_of(st.sampled_from(["ev", "workspace_attempt"]), st.text(max_size=12)),
    name=st.one_of(st.sampled_from(["app", "日本"]), st.text(max_size=8), st.integers()),
    kw=st.one_of(
        st.dictionaries(NAMES, VALUES, max_size=6),
        st.dictionaries(st.sampled_from("abcdef"), BIG, min_size=3, max_size=6),  # folded
    ),
    info=INFOS,
    where=WHERE,
    repeat=st.integers(1, 3),
)
def test_the_fused_parts_build_the_record_of_their_event_dict(  # noqa: PLR0917
    level: int, event: str, name: Any, kw: dict[str, Any], info: RankInfo, where: Any, repeat: int
) -> None:
    """What the fused path hands over (its parts, no dict) becomes the record that the
    chain's event dict of them (``event_dict_of``) becomes, however warm the builder's
    tables are: the same fields, attributes in order, severity, body, times, folded or not
    (counted alike)."""
    builder = RecordBuilder(Settings(service_name="svc"), RankResolver())
    resource = builder.resource()
    parts = (level, event, name, kw, info, where, "2026-01-01T00:00:00.000000Z")
    for _ in range(repeat):
        folded = builder.folded
        ours = builder.build((7, Context(), parts), level_class(level), resource)
        folded, ours_folded = builder.folded, builder.folded - folded
        theirs = builder.build(
            (7, Context(), event_dict_of(parts, 7)), level_class(level), resource
        )
        assert (_shape(ours), ours_folded) == (_shape(theirs), builder.folded - folded)
