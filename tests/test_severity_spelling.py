"""A stage spelled another way is the same stage: its level, outcome and name.

``stage="TERMINAL_FAILURE"`` (a constant's spelling), ``"terminal-failure"``, a padded
``" terminal_failure "`` or an Enum member whose value or name is one of those was left
at the call's level with no outcome and written as given, so the severity did not
reflect the outcome and a query on ``stage="terminal_failure"`` missed it.
"""

from __future__ import annotations

import enum
import logging

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.stdlib
import obs.testing
from obs.severity import DEFAULT_POLICY, TagSeverity

#: stage -> (severity_text, severity_number, outcome): DESIGN.md's table.
TABLE = {
    "attempt": ("DEBUG", 5, "pending"),
    "attempt_failed": ("WARNING", 13, "failure"),
    "fallback": ("WARNING", 13, "degraded"),
    "initialized": ("INFO", 9, "success"),
    "terminal_failure": ("ERROR", 17, "failure"),
}


@st.composite
def spellings(draw: st.DrawFn) -> tuple[str, str]:
    """(stage, another spelling of it): case, separators and padding changed."""
    stage = draw(st.sampled_from(sorted(TABLE)))
    sep = draw(st.sampled_from(["_", "-", " ", "__", " - "]))
    text = sep.join(stage.split("_"))
    upper = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    text = "".join(c.upper() if up else c for c, up in zip(text, upper, strict=True))
    pad = draw(st.sampled_from(["", " ", "\t", " \n"]))
    return stage, pad + text + pad


def _wrapped(kind: str, text: str) -> object:
    """``text`` as a str, a str Enum member, or a plain Enum member by value or by name."""
    if kind == "str_enum":
        return enum.Enum("S", {"X": text}, type=str).X  # type: ignore[attr-defined]
    if kind == "enum_value":
        return enum.Enum("S", {"X": text}).X  # type: ignore[attr-defined]
    if kind == "enum_name":
        return enum.Enum("S", {text: 1})[text]
    return text


def _log(api: str, event: str, stage: object) -> None:
    log = obs.get_logger("t")
    if api == "debug":  # below the level: the stage must raise it past the filter
        log.debug(event, stage=stage)
    elif api == "info":
        log.info(event, k=1, stage=stage)
    elif api == "error":
        log.error(event, stage=stage)
    elif api == "warning_once":
        log.warning_once(event, stage=stage)
    elif api == "debug_once":
        log.debug_once(event, stage=stage)
    elif api == "stdlib":
        logging.getLogger("app").warning(event, extra={"stage": stage})
    else:
        obs.stdlib.init_logger("app.d").info(event, extra={"stage": stage})


@settings(max_examples=150, deadline=None)
@given(
    spelled=spellings(),
    kind=st.sampled_from(["str", "str_enum", "enum_value", "enum_name"]),
    api=st.sampled_from(
        ["debug", "info", "error", "warning_once", "debug_once", "stdlib", "dropin"]
    ),
)
def test_a_stage_spelled_another_way_takes_its_rule(
    spelled: tuple[str, str], kind: str, api: str
) -> None:
    """Every API, every spelling: the stage's severity (text and number), its outcome, the
    stage written as its policy name; nothing reported as a bad argument."""
    stage, text = spelled
    value = _wrapped(kind, text)
    obs.configure(stream="none", level="INFO")
    logging.getLogger("app").setLevel(logging.DEBUG)
    try:
        with obs.testing.capture_events() as events:
            _log(api, "spelled", value)
    finally:
        obs.testing.reset()
    written = [e for e in events if e["event"] == "spelled"]
    assert not [e for e in events if e["event"] == "obs_internal_error"]
    severity, number, outcome = TABLE[stage]
    if severity == "DEBUG":  # attempt: below the configured level, whatever the call
        assert written == []
        return
    assert len(written) == 1
    record = written[0]
    assert (record["stage"], record["severity_text"], record["severity_number"]) == (
        stage,
        severity,
        number,
    )
    assert record["outcome"] == outcome


@given(text=st.text(max_size=80))
@settings(max_examples=200, deadline=None)
def test_text_that_is_no_stage_stays_as_written(text: str) -> None:
    """Any other text is no stage of the policy: the call's level, no outcome, the text
    kept (a stage of one's own policy is a name like any other)."""
    name = "_".join(text.lower().replace("-", " ").replace("_", " ").split())
    out = TagSeverity()(None, "info", {"event": "e", "stage": text})
    if name in TABLE:
        assert out["stage"] == name
        assert out["severity_text"] == TABLE[name][0]
    else:
        assert (out["stage"], out["severity_text"], "outcome" in out) == (text, "INFO", False)
        assert DEFAULT_POLICY.rule(text) is None


def test_a_long_text_is_never_normalised() -> None:
    """Text past 64 characters is never taken for a stage (the check stays bounded)."""
    text = " " * 100 + "terminal_failure"
    assert DEFAULT_POLICY.canonical(text) is None
    assert DEFAULT_POLICY.canonical(text.strip()) == "terminal_failure"


def test_a_policy_of_ones_own_keeps_its_exact_names() -> None:
    """A policy's own stage spelled in capitals is found by its exact name first."""
    from obs.severity import StageRule

    policy = DEFAULT_POLICY.replace(WarmUp=StageRule(logging.WARNING, "pending"))
    out = TagSeverity(policy)(None, "info", {"event": "e", "stage": "WarmUp"})
    assert (out["stage"], out["severity_text"]) == ("WarmUp", "WARNING")
