"""obs._fields: the one table of the fields the chain owns, checked on real lines."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from _keys import OddKey as _OddKey
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
from obs._fields import (
    CALL_KEYWORDS,
    CONTROL_FIELDS,
    FIELDS,
    INT_FIELDS,
    NOT_KEYED,
    PRIVATE_KEYS,
    PRIVATE_PREFIX,
    new_event_dict,
    user_fields,
)
from obs.levels import CLASS_NAMES
from obs.severity import DEFAULT_POLICY

Read = Callable[..., Callable[[], list[dict[str, Any]]]]
REQUIRED = [f.name for f in FIELDS if f.required]


def _lines(configure_json: Read) -> list[dict[str, Any]]:
    read = configure_json()
    log = obs.get_logger("fields")
    log.info("plain_event", n=1)
    log.warning("staged_event", stage="attempt_failed")
    logging.getLogger("fields.stdlib").error("stdlib %s", "record")
    try:
        int("boom")
    except ValueError:
        log.exception("failed_event")
    return read()


class TestTable:
    def test_enums_come_from_their_own_tables(self) -> None:
        """severity_text's enum is the levels table, stage's the stage policy's."""
        schema = {f.name: f.schema for f in FIELDS}
        assert (list(CLASS_NAMES), list(DEFAULT_POLICY.rules)) == (
            schema["severity_text"]["enum"],
            schema["stage"]["enum"],
        )

    def test_skeleton_keeps_the_line_order(self) -> None:
        """new_event_dict starts with the first six control fields, in the table's order."""
        assert list(CONTROL_FIELDS[:6]) == list(new_event_dict("e", "b", "l"))

    def test_dedup_ignores_what_is_the_same_for_every_call(self) -> None:
        """Rank, host, callsite, time and the call's instructions are never part of a key;
        the body, stage and exception are."""
        assert {"rank", "host.name", "code.line.number", "timestamp", "scope", "once_key"} <= (
            NOT_KEYED
        )
        assert {"body", "stage", "exception.type"}.isdisjoint(NOT_KEYED)


class TestOnRealLines:
    def test_required_fields_are_on_every_line_first_and_in_order(
        self, configure_json: Read
    ) -> None:
        """Every line (logger call, stdlib record, exception) carries every required field,
        and the first six control fields lead the line in the table's order."""
        lines = _lines(configure_json)
        assert 4 == len(lines)
        for line in lines:
            assert [] == [name for name in REQUIRED if name not in line]
            assert list(CONTROL_FIELDS[:6]) == list(line)[:6]

    def test_int_fields_are_ints_and_no_private_key_leaks(self, configure_json: Read) -> None:
        """Integer control fields are JSON integers; no _obs_ key and no call keyword is
        ever written."""
        for line in _lines(configure_json):
            assert all(type(line[k]) is int for k in INT_FIELDS if k in line)
            assert [] == [k for k in line if k.startswith(PRIVATE_PREFIX)]
            assert [] == [k for k in line if k in CALL_KEYWORDS]

    @given(name=st.sampled_from(CONTROL_FIELDS), value=st.text(max_size=10))
    @settings(max_examples=60, deadline=None)
    def test_a_caller_never_overwrites_a_control_field(self, name: str, value: str) -> None:
        """A keyword named like a control field (but stage) is kept as user.<name>; the
        chain's own value stays."""
        obs.configure(stream="none")
        try:
            with obs.testing.capture_events() as events:
                obs.get_logger("fields").info("guarded_event", **{name: value})
        finally:
            obs.testing.reset()
        (line,) = [e for e in events if e["event"] == "guarded_event"]
        if name in {"stage", "body"}:  # the call's own keywords
            return
        assert value == line[f"user.{name}"]

    @given(
        name=st.one_of(
            st.sampled_from(PRIVATE_KEYS), st.from_regex(r"_obs_[a-z_]{0,12}", fullmatch=True)
        ),
        value=st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
        bound=st.booleans(),
    )
    @settings(max_examples=60, deadline=None)
    def test_a_caller_never_sets_a_private_key(self, name: str, value: object, bound: bool) -> None:
        """A keyword or bound value named like obs' private ``_obs_*`` keys is kept as
        user.<name>; the record's level, time and identity are the chain's own."""
        obs.configure(stream="none")
        try:
            with obs.testing.capture_events() as events:
                log = obs.get_logger("fields")
                if bound:
                    log.bind(**{name: value}).warning("guarded_event")
                else:
                    log.warning("guarded_event", **{name: value})
        finally:
            obs.testing.reset()
        (line,) = [e for e in events if e["event"] == "guarded_event"]
        assert (value, "WARNING", "guarded_event", str) == (
            line[f"user.{name}"],
            line["severity_text"],
            line["body"],
            type(line["timestamp"]),
        )
        assert [] == [k for k in line if k.startswith(PRIVATE_PREFIX)]


class TestStrSubclassKeys:
    @pytest.mark.parametrize(
        "name", ["event", "severity_text", "timestamp", "logger", "_obs_no_export", "_obs_level"]
    )
    @pytest.mark.parametrize("bound", [False, True])
    def test_never_overwrites_nor_acts(
        self, name: str, bound: bool, configure_json: Read, fake_sink: Any
    ) -> None:
        """A keyword whose name is a str subclass with its own __hash__/__eq__ is kept as
        user.<its text> when that text is a control or private name: event, level and time
        stay the chain's, and the record is still exported."""
        read = configure_json(sdk_disabled=False)
        log = obs.get_logger("fields")
        fields = {_OddKey(name): f"user_{name}"}
        if bound:
            log.bind(**fields).error("workspace_terminal_failure")
        else:
            log.error("workspace_terminal_failure", **fields)
        (line,) = read()
        (exported,) = [e for e in fake_sink.received if e.get("logger") == "fields"]
        assert ("workspace_terminal_failure", "ERROR", "fields", f"user_{name}") == (
            line["event"],
            line["severity_text"],
            line["logger"],
            line[f"user.{name}"],
        )
        assert line["timestamp"].endswith("Z")
        assert ("workspace_terminal_failure", f"user_{name}", False) == (
            exported["event"],
            exported[f"user.{name}"],
            bool(exported.get("_obs_no_export")),
        )

    @given(
        keys=st.lists(
            st.one_of(
                st.sampled_from([*CONTROL_FIELDS, *PRIVATE_KEYS, "user.event", "x"]),
                st.sampled_from([*CONTROL_FIELDS, *PRIVATE_KEYS, "x"]).map(_OddKey),
                st.text(max_size=6),
            ),
            max_size=8,
        ),
        allowed=st.sets(st.sampled_from(CONTROL_FIELDS), max_size=3).map(frozenset),
    )
    def test_user_fields_keeps_every_value_under_a_free_name(
        self, keys: list[str], allowed: frozenset[str]
    ) -> None:
        """Every key comes out a plain str; only a plain key of an ``allowed`` name keeps a
        control name, no private name survives, and no value is lost."""
        fields = {key: i for i, key in enumerate(keys)}
        out = user_fields(fields, allowed)
        assert sorted(fields.values()) == sorted(out.values())
        assert all(type(k) is str for k in out)
        assert [] == [k for k in out if k.startswith(PRIVATE_PREFIX)]
        owned = {k for k in out if k in CONTROL_FIELDS}
        assert owned <= {k for k in fields if type(k) is str and k in allowed}
