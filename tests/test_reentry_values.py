"""A value whose ``__repr__``/``__str__`` logs is read by obs with its thread marked as
inside a log call, on every entry point (``*_once`` keys, the drop-in ``*_once`` gate, a
bridged record's %-args): one call writes a bounded number of lines, however high the
recursion limit, instead of recursing once per stack frame."""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs.stdlib import init_logger

#: The most lines one call may write: itself, what the value's repr logs (deferred once),
#: what those log in turn (once more), a drop report and a repeat summary.
MAX_LINES = 16

ENTRIES = ("info_once", "warning_once", "once_key", "dropin_once", "stdlib_args", "plain")
NESTED = ("warning", "warning_args", "info_once", "stdlib", "dropin_once")


class Chatty:
    """A value that logs whenever it is turned into text (a lazily loaded config, say)."""

    def __init__(self, nested: str) -> None:
        self.nested = nested

    def __repr__(self) -> str:
        log = obs.get_logger("chatty")
        if self.nested == "warning":
            log.warning("from_repr", v=self)
        elif self.nested == "warning_args":
            log.warning("from_repr %s", self)
        elif self.nested == "info_once":
            log.info_once("from_repr_once", v=self)
        elif self.nested == "stdlib":
            logging.getLogger("chatty.std").warning("from_repr %s", self)
        else:
            init_logger("vllm.chatty").warning_once("from_repr %s", self)
        return "Chatty()"

    __str__ = __repr__


def call(entry: str, value: Chatty) -> None:
    """One logging call of kind ``entry`` carrying ``value``."""
    log = obs.get_logger("caller")
    if entry == "info_once":
        log.info_once("outer", v=value)
    elif entry == "warning_once":
        log.warning_once("outer %s", value)
    elif entry == "once_key":
        log.info("outer", once=True, once_key=(value,))
    elif entry == "dropin_once":
        init_logger("vllm.caller").info_once("outer %s", value)
    elif entry == "stdlib_args":
        logging.getLogger("caller.std").warning("outer %s %r", value, value)
    else:
        log.info("outer", v=value)


@settings(max_examples=40, deadline=None)
@given(entry=st.sampled_from(ENTRIES), nested=st.sampled_from(NESTED))
def test_one_call_with_a_logging_value_writes_a_bounded_number_of_lines(
    entry: str, nested: str
) -> None:
    """On main ``info_once`` wrote ~100 lines, the drop-in ``*_once`` ~190 and a bridged
    record with %-args ~100 (one per stack frame up to the recursion limit, and a C stack
    overflow with a raised limit); a plain call 7."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 3000))
    root = logging.getLogger()
    others = root.handlers[:]  # pytest's capture handler recurses by itself: only obs'
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.jsonl"
        try:
            root.handlers.clear()
            obs.configure(file=str(path), stream="none", stdlib_bridge=True)
            call(entry, Chatty(nested))
            obs.shutdown(1.0)
        finally:
            obs.testing.reset()
            root.handlers[:] = others
            sys.setrecursionlimit(limit)
        records: list[dict[str, Any]] = [
            json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
        ]
    events = Counter(r["event"] for r in records)
    assert len(records) <= MAX_LINES, events
    assert sum(n for e, n in events.items() if e.startswith("outer")) == 1, events
