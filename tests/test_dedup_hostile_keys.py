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
import obs.stdlib
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
        lambda: obs.stdlib.init_logger("vllm.k").warning_once("x %s", value),
        lambda: obs.stdlib.init_logger("vllm.k").warning_once(value),
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
    assert len(events) >= len(_once_calls(0)) - 2  # the drop-in pair may share a key
