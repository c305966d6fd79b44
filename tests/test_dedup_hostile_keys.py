"""A ``*_once`` key made of hostile values never raises into the caller: the key's
readable text (the summaries' ``dedup_key``) is built without ``str()`` of a raw part (a
huge int raised ValueError past 4,300 digits; an event whose ``__str__`` raises, its
error)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing


class _NoStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError


HOSTILE: list[Any] = [10**5000, -(10**4400), _NoStr()]


def _once_calls(value: Any) -> list[Any]:
    log = obs.get_logger("app")
    return [
        lambda: log.error_once("ev", v=value),
        lambda: log.warning_once("ev", once_key=value),
        lambda: log.warning_once(value),
        lambda: log.info_once(value, value),
        lambda: log.error_once("ev", once_key=("v",), v=value),
    ]


@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_a_hostile_key_part_never_raises(index: int) -> None:
    """Each once route with a huge int or an event whose ``__str__`` raises logs (once)
    and returns; on main three of them raised ValueError or RuntimeError."""
    obs.configure(stream="none", sdk_disabled=True)
    try:
        with obs.testing.capture_events() as events:
            for call in _once_calls(HOSTILE[index]):
                call()
                call()  # the repeat, counted
    finally:
        obs.testing.reset()
    assert len(events) >= len(_once_calls(0)) - 1  # two calls share the key ``v``
    assert all(type(e["event"]) is str for e in events)


_VALUES = st.one_of(
    st.integers(min_value=10**4300, max_value=10**4400),
    st.integers(max_value=-(10**4300), min_value=-(10**4400)),
    st.builds(_NoStr),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    st.lists(st.integers(min_value=10**4300, max_value=10**4301), max_size=3),
)


@given(value=_VALUES, repeats=st.integers(1, 3))
@settings(max_examples=25, deadline=None)
def test_once_keys_of_hostile_values_never_raise(value: Any, repeats: int) -> None:
    """Any hostile value in any once route's key, repeated, then summarised at shutdown:
    nothing raises, every record's event is text."""
    obs.configure(stream="none", sdk_disabled=True)
    try:
        with obs.testing.capture_events() as events:
            for call in _once_calls(value):
                for _ in range(repeats):
                    call()
            obs.flush(2)  # the summaries of the repeats
    finally:
        obs.testing.reset()
    assert events
    assert all(type(e["event"]) is str for e in events)
