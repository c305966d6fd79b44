"""structlog's other names for the bound logger's calls: ``log.msg(...)`` (INFO) and the
awaitable ``await log.ainfo(...)``, ``aexception``, ``alog``, ... A program written for
structlog's bound logger calls them; each writes what its plain call writes (the alert's
event too, at ERROR, below any level), never raises ``AttributeError`` into it."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing

#: Each name, and what its record's level is for a plain event.
NAMES = {"msg": "INFO", "adebug": "DEBUG", "ainfo": "INFO", "amsg": "INFO",
         "awarning": "WARNING", "awarn": "WARNING", "aerror": "ERROR", "aexception": "ERROR",
         "acritical": "CRITICAL", "afatal": "CRITICAL", "alog": "WARNING"}  # fmt: skip
ALERT = "workspace_terminal_failure"


def _lines(call: Callable[[obs.BoundLogger], None], level: str) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        obs.configure(format="json", sdk_disabled=True, file=path, stream="none", level=level)
        try:
            call(obs.get_logger("app"))
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                return [json.loads(x) for x in fh.read().splitlines()]
        finally:
            obs.testing.reset()


def _fail() -> None:
    raise ValueError("handled")


def _call(log: obs.BoundLogger, name: str, event: str) -> None:
    method = getattr(log, name)
    args = (30, event) if name == "alog" else (event,)
    if name.startswith("a"):

        async def main() -> None:
            try:
                _fail()
            except ValueError:
                await method(*args, k=1)

        asyncio.run(main())
    else:
        method(*args, k=1)


@given(
    name=st.sampled_from(sorted(NAMES)),
    alert=st.booleans(),
    level=st.sampled_from(["DEBUG", "INFO", "ERROR", "CRITICAL"]),
)
@settings(max_examples=40, deadline=None)
def test_structlogs_other_names_write_what_the_plain_call_writes(
    name: str, alert: bool, level: str
) -> None:
    """``log.msg("x")`` is ``log.info("x")``; ``await log.ainfo("x")`` is ``log.info``'s
    line, its callsite the awaiting function; the alert's event is written at ERROR by
    each. Failed before: AttributeError ('BoundLogger' object has no attribute 'msg')."""
    event = ALERT if alert else "structlog_name"
    lines = [x for x in _lines(lambda log: _call(log, name, event), level) if x["event"] == event]
    order = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
    want = "ERROR" if alert else NAMES[name]
    written = alert or order.index(NAMES[name]) >= order.index(level)
    assert [want] * written == [x["severity_text"] for x in lines], lines
    for line in lines:
        assert (line["k"], line["code.function.name"]) == (
            1,
            "_call" if name == "msg" else "_call.<locals>.main",
        )
        assert line["code.file.path"] == __file__
        assert ("exception.type" in line) == (name == "aexception")
