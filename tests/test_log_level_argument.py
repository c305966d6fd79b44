"""``log.log(level, ...)`` with any level value: it never raises, and a terminal failure is
written as ERROR whatever the level says.

Before the fix a level that is not a number (``log.log("error", ...)``, as structlog and
the stdlib spell levels elsewhere, ``None``, bytes, an object whose comparison raises)
raised ``TypeError`` into the application, losing the ``workspace_terminal_failure`` it
carried; ``10**5000`` (a level past ``int``'s text limit) lost the record to an internal
error. A level name is now read as its number (``"error"``, ``"WARN"``, ``"40"``), a number
is clamped to 0..100 as a float already was, and anything else is INFO, reported once as
``obs_internal_error``.
"""

from __future__ import annotations

import decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing

ALERT = "workspace_terminal_failure"


class _Hostile:
    """A level whose every conversion and comparison raises."""

    def _raise(self, *_: Any) -> Any:
        raise RuntimeError("no level here")

    __int__ = __index__ = __float__ = __lt__ = __le__ = __gt__ = __ge__ = _raise


LEVEL_VALUES = st.one_of(
    st.sampled_from(["error", "ERROR", " Warning ", "WARN", "fatal", "critical", "40", "x"]),
    st.text(max_size=20),
    st.none(),
    st.binary(max_size=8),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**6000), max_value=10**6000),
    st.just(10**5000),
    st.just(decimal.Decimal("NaN")),
    st.just(complex(40, 0)),
    st.lists(st.integers(), max_size=2),
    st.builds(_Hostile),
)


def _log(level: object, event: str = ALERT, **kw: Any) -> list[dict[str, Any]]:
    obs.configure(stream="none", sdk_disabled=True, level="DEBUG")
    try:
        with obs.testing.capture_events() as events:
            obs.get_logger("app").log(level, event, chain="fi_ar", **kw)  # type: ignore[arg-type]
    finally:
        obs.testing.reset()
    return events


@settings(max_examples=150)
@given(level=LEVEL_VALUES, once=st.booleans())
def test_terminal_failure_at_any_level_value(level: object, once: bool) -> None:
    """Never raises; the terminal failure is written once, as ERROR, named as given."""
    kw: dict[str, Any] = {"stage": "terminal_failure"}
    if once:
        kw["once"] = True
    events = _log(level, **kw)
    alerts = [e for e in events if e["event"] == ALERT]
    assert [("ERROR", "terminal_failure", "fi_ar")] == [
        (e["severity_text"], e["stage"], e["chain"]) for e in alerts
    ]


@settings(max_examples=150)
@given(level=LEVEL_VALUES)
def test_any_level_value_is_written_at_a_level(level: object) -> None:
    """Without a stage: never raises, and what is written carries a level obs knows how to
    name (a class name or stdlib's ``Level N`` within 0..100)."""
    events = _log(level)
    for e in events:
        assert isinstance(e["severity_text"], str)
        assert len(e["severity_text"]) <= len("Level 100")
        assert 1 <= e["severity_number"] <= 24


def test_level_names_are_their_numbers() -> None:
    """A level name is its number, as ``logging.getLevelName`` reads it back (an event
    that is not the alert's: an ERROR call of that one is its stage, ERROR)."""
    for name, text in [("error", "ERROR"), (" Warning ", "WARNING"), ("WARN", "WARNING"),
                       ("fatal", "CRITICAL"), ("40", "ERROR"), ("debug", "DEBUG")]:  # fmt: skip
        (event,) = _log(name, "level_named")
        assert text == event["severity_text"], name


def test_an_unreadable_level_is_info_and_reported_once() -> None:
    """``None`` is INFO, and the bad argument is reported once as ``obs_internal_error``."""
    obs.configure(stream="none", sdk_disabled=True)
    try:
        with obs.testing.capture_events() as events:
            log = obs.get_logger("app")
            log.log(None, "first")  # type: ignore[arg-type]
            log.log(b"x", "second")  # type: ignore[arg-type]
            assert log.is_enabled_for("error")  # type: ignore[arg-type]
    finally:
        obs.testing.reset()
    assert [("first", "INFO"), ("second", "INFO")] == [
        (e["event"], e["severity_text"]) for e in events if e["event"] != "obs_internal_error"
    ]
    (report,) = [e for e in events if e["event"] == "obs_internal_error"]
    assert "level=None" in report["error_message"]
