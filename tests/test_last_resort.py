"""The last resort (a record the chain failed on) says what the chain would have said of
its stage: the stage's level and outcome, in its policy's name, never the call's level."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._config import STATE
from obs.levels import NAME_BY_LEVEL
from obs.severity import DEFAULT_POLICY

SPELLINGS = [
    *DEFAULT_POLICY.rules,
    "TERMINAL_FAILURE",
    "Terminal-Failure",
    " attempt failed ",
    "Fallback",
]


def _broken(logger: object, method: str, event_dict: dict[str, Any]) -> Any:
    raise RuntimeError("processor down")


@given(
    stage=st.sampled_from(SPELLINGS),
    method=st.sampled_from(["debug", "info", "warning", "error"]),
    named=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_the_last_resort_keeps_the_stages_level(stage: str, method: str, named: bool) -> None:
    """``log.debug("x", stage="terminal_failure")`` that the chain failed on was written
    as DEBUG with no outcome (failed before: the last resort read the call's level); the
    alert's event named with no stage likewise. Now the stage decides, as in the chain."""
    name = DEFAULT_POLICY.canonical(stage)
    assert name is not None
    rule = DEFAULT_POLICY.rules[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        try:
            obs.configure(format="json", sdk_disabled=True, file=path, stream="none", level=1)
            runtime = STATE.runtime
            assert runtime is not None
            runtime.processors = (_broken, *runtime.processors)
            log = obs.get_logger("t")
            if named:  # the alert's event by name: its stage, whatever the call gave
                getattr(log, method)("workspace_terminal_failure", stage=stage)
                name, rule = "terminal_failure", DEFAULT_POLICY.rules["terminal_failure"]
            else:
                getattr(log, method)("x", stage=stage)
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                lines = [json.loads(x) for x in fh.read().splitlines()]
        finally:
            obs.testing.reset()
    first = lines[0]
    assert "obs_internal_error" in first, lines  # it took the last resort
    assert (first["stage"], first["outcome"], first["severity_text"]) == (
        name,
        rule.outcome,
        NAME_BY_LEVEL[rule.level],
    ), first
