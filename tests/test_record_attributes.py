"""Every attribute the OTel record builder writes is ``to_otel_value`` of its field.

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
from obs.encode import MAX_STR, to_otel_value
from obs.otel.records import RecordBuilder
from obs.rank import RankResolver
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
