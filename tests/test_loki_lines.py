"""Every JSON line obs writes is one Loki stores after the collector's filelog pipeline.

Users ship obs' JSON lines (``OBS_FILE``, or stdout) through ``examples/otel-collector.yaml``:
its filelog receiver parses each line into attributes (tests/_filelog.py builds that
pipeline from the config file) and Loki stores them as structured metadata (tests/_loki.py,
ported from grafana/loki 65e30f8). Before obs bounded the line, a line with 150 fields, a
dict of 150 keys, more than 64KB of values (structured_metadata_too_many / _too_large: the
line is dropped) or a field named ``_``, ``""`` or ``日本`` (Loki cannot make a label name
of it and refuses the whole push, every rank's lines batched with it) was lost, a
``workspace_terminal_failure`` among them. Now the line is folded as the OTLP record is
(obs/_lokifit.py): alert keys whole, the rest in ``obs.folded`` / ``obs.folded_fields``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _filelog import FilelogMapping
from _loki import refusal, structured_metadata
from hypothesis import HealthCheck, given, settings
from test_loki_bounds import ALERT, KEYS, SHAPES, contexts

import obs
from obs import _lokifit

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "otel-collector.yaml"
#: The longest service.name / host.name the test's resource uses (the collector's own).
MAPPING = FilelogMapping.from_config(CONFIG, env={"OBS_SERVICE_NAME": "s" * 60})


def last_line(path: Path) -> dict[str, Any]:
    obs.flush(timeout=5)
    line = path.read_bytes().splitlines()[-1].decode()
    return json.loads(line)


def stored(path: Path) -> dict[str, Any]:
    """The last line of ``path`` through the filelog pipeline into Loki: its attributes,
    once Loki accepted it (a PushRefused or a refusal fails the test)."""
    obs.flush(timeout=5)
    raw = path.read_bytes().splitlines()[-1].decode()
    mapped = MAPPING.map_line(raw, str(path))
    record = {
        "attributes": mapped.attributes,
        "resource": mapped.resource,
        "time_unix_nano": mapped.timestamp_ns,
        "observed_time_unix_nano": 1_700_000_000_000_000_000,  # the receiver's clock
        "severity_number": mapped.severity_number,
        "severity_text": mapped.severity_text,
    }
    entries = structured_metadata(record)  # raises PushRefused: the whole push refused
    assert refusal(entries) is None, (len(entries), sorted(mapped.attributes)[:20])
    attrs = mapped.attributes
    assert attrs["event"] == ALERT
    assert mapped.severity_text == "ERROR"
    for key, value in KEYS.items():
        assert attrs[key] == value
    assert {"rank", "local_rank", "world_size", "node_rank", "host.name"} <= set(attrs)
    return attrs


def configure(path: Path) -> None:
    obs.configure(stream="none", file=str(path), logs_exporter="none")


def check_fields(attrs: dict[str, Any], fields: dict[str, Any]) -> None:
    """A field not kept (under its name or ``user.<name>``) is counted as folded."""
    missing = [k for k in fields if k not in attrs and f"user.{k}" not in attrs]
    if missing:
        assert attrs[_lokifit.FOLDED_FIELDS] >= len(missing), missing
        assert isinstance(attrs[_lokifit.FOLDED], str)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_terminal_failure_line_with_a_big_context_is_stored_by_loki(
    tmp_path: Path, shape: str
) -> None:
    path = tmp_path / "app.jsonl"
    configure(path)
    fields = SHAPES[shape]
    obs.get_logger("comm").error(ALERT, **KEYS, **fields)
    check_fields(stored(path), fields)


def test_a_plain_line_is_written_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "app.jsonl"
    configure(path)
    fields = {"n": 1, "text": "t" * 2000, "ctx": {"a": 1}, "items": [1, 2]}
    obs.get_logger("comm").error(ALERT, **KEYS, **fields)
    line = last_line(path)
    assert _lokifit.FOLDED not in line
    assert {k: line[k] for k in fields} == fields


def test_the_line_folds_what_the_otlp_record_folds(tmp_path: Path) -> None:
    """One rule for both routes: the same fields kept, the same JSON folded."""
    path = tmp_path / "app.jsonl"
    configure(path)
    fields = {f"f{i:03}": i for i in range(150)}
    obs.get_logger("comm").error(ALERT, **KEYS, **fields)
    line = last_line(path)
    folded = json.loads(line[_lokifit.FOLDED])
    assert line[_lokifit.FOLDED_FIELDS] == len(folded) > 0
    assert {**{k: line[k] for k in fields if k in line}, **folded} == fields


def test_odd_names_are_kept_under_a_name_loki_stores(tmp_path: Path) -> None:
    path = tmp_path / "app.jsonl"
    configure(path)
    obs.get_logger("comm").error(ALERT, **KEYS, **{"_": 1, "": 2, "日本": 3, "...": 4})
    attrs = stored(path)
    assert (attrs["user._"], attrs["user."], attrs["user.日本"], attrs["user...."]) == (1, 2, 3, 4)


def test_any_line_is_stored_by_loki(tmp_path: Path) -> None:
    path = tmp_path / "app.jsonl"
    configure(path)

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(fields=contexts())
    def one(fields: dict[str, Any]) -> None:
        obs.get_logger("comm").error(ALERT, **KEYS, **fields)
        check_fields(stored(path), fields)

    one()


class _Unreadable:
    """A value whose repr raises: only the renderer's safe copy can write it."""

    def __repr__(self) -> str:
        raise RuntimeError("broken repr")


@pytest.mark.parametrize("int_key", [False, True])
@pytest.mark.parametrize("count", [10, 100])
def test_the_renderer_in_an_applications_chain_folds_raw_values(count: int, int_key: bool) -> None:
    """JSONRenderer given raw values (an application's own structlog chain: no redactor
    before it), past Loki's limits, with a value whose repr raises and keys that are not
    text: one JSON object within the limits, never an exception (the fold read the raw
    value's repr and raised out of the renderer, found by test_properties)."""
    from obs.render import JSONRenderer

    ed: dict[Any, Any] = {"event": ALERT, **{f"f{i}": "x" * 2000 for i in range(count)}}
    ed["bad"] = _Unreadable()  # last: among the folded fields when there are too many
    ed[":"] = (None, _Unreadable())  # a name Loki cannot store: always folded
    if int_key:
        ed[7] = "a key that is not text"
    line = JSONRenderer()(None, "error", ed)
    doc = json.loads(line)
    assert ALERT == doc["event"]
    attributes = {k: v for k, v in doc.items() if k not in ("timestamp", "body")}
    record = {"attributes": attributes, "resource": {}, "scope": {}, "event_name": ALERT}
    assert refusal(structured_metadata(record)) is None
