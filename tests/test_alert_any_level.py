"""The alert's event named at any level: ``log.debug("workspace_terminal_failure")`` is a
terminal failure as ``log.error(...)`` of it is, so it is written at ERROR with its stage
whatever ``OBS_LEVEL`` says ("a terminal event logged at a lower level is raised to its
stage's level"), on every route a caller names an event by."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable

import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.processors
import obs.stdlib
import obs.testing
from obs._config import STATE


def _stdlib(method: str, drop_in: bool = False) -> Callable[[obs.BoundLogger, str], None]:
    """A stdlib logger's call. Its own level must let the record be made: one below it
    (the root's, ``min(OBS_LEVEL, ERROR)``) never reaches obs (stdlib drops it first)."""

    def call(log: obs.BoundLogger, e: str) -> None:
        name = "lib.own_level"
        lib = obs.stdlib.init_logger(name) if drop_in else logging.getLogger(name)
        lib.setLevel(logging.DEBUG)
        getattr(lib, method)(e, extra={"chain": "c"})

    return call


#: Each API a call of the alert's event takes below ERROR, with no ``stage`` given.
ROUTES: dict[str, Callable[[obs.BoundLogger, str], None]] = {
    "debug": lambda log, e: log.debug(e, chain="c"),
    "info": lambda log, e: log.info(e, chain="c"),
    "warning": lambda log, e: log.warning(e, chain="c"),
    "warn": lambda log, e: log.warning(e, chain="c"),
    "debug_event_kw": lambda log, e: log.debug(event=e, chain="c"),
    "debug_bound": lambda log, e: log.bind(chain="c").debug(e),
    "debug_once": lambda log, e: log.debug_once(e, chain="c"),
    "info_once": lambda log, e: log.info_once(e, chain="c"),
    "warning_once": lambda log, e: log.warning_once(e, chain="c"),
    "log_5": lambda log, e: log.log(5, e, chain="c"),
    "log_name": lambda log, e: log.log("debug", e, chain="c"),
    "debug_stage_attempt": lambda log, e: log.debug(e, chain="c", stage="attempt"),
    "stdlib_debug": _stdlib("debug"),
    "stdlib_info": _stdlib("info"),
    "stdlib_warning": _stdlib("warning"),
    "drop_in_debug": _stdlib("debug", drop_in=True),
}
ALERT_NAMES = ["workspace_terminal_failure", "kv_connector_terminal_failure", "terminal_failure"]


@given(
    route=st.sampled_from(sorted(ROUTES)),
    name=st.sampled_from(ALERT_NAMES),
    level=st.sampled_from(["INFO", "WARNING", "ERROR", "CRITICAL"]),
)
@settings(max_examples=60, deadline=None)
def test_the_alerts_event_at_a_lower_level_is_raised(route: str, name: str, level: str) -> None:
    """``log.debug("workspace_terminal_failure")`` kept DEBUG and no stage, so OBS_LEVEL=INFO
    dropped it and the alert never fired (failed before: only an ERROR call was claimed).
    Now every route writes it once, at ERROR, at stage ``terminal_failure``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        try:
            obs.configure(format="json", sdk_disabled=True, file=path, stream="none", level=level)
            log = obs.get_logger("app")
            ROUTES[route](log, name)
            log.debug("plain_debug")  # no alert: the level decides
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                lines = [json.loads(x) for x in fh.read().splitlines()]
        finally:
            obs.testing.reset()
            logging.getLogger("lib.own_level").setLevel(logging.NOTSET)
    alerts = [x for x in lines if x["event"] == name]
    assert len(alerts) == 1, lines
    assert (alerts[0]["stage"], alerts[0]["severity_text"]) == ("terminal_failure", "ERROR")
    assert (alerts[0]["outcome"], alerts[0]["chain"]) == ("failure", "c")
    assert not any(x["event"] == "plain_debug" for x in lines)


@given(method=st.sampled_from(["debug", "info", "warning"]), name=st.sampled_from(ALERT_NAMES))
@settings(max_examples=20, deadline=None)
def test_an_own_structlog_chain_tags_the_alerts_event(method: str, name: str) -> None:
    """An application's own structlog chain (``obs.processors.chain()``): the alert's event
    at INFO was tagged INFO with no stage (failed before); it is tagged ERROR at its stage."""
    cap = structlog.testing.LogCapture()
    structlog.configure(processors=[*obs.processors.chain(), cap])
    try:
        getattr(structlog.get_logger("app"), method)(name, chain="c")
    finally:
        structlog.reset_defaults()
    (entry,) = cap.entries
    assert (entry["stage"], entry["severity_text"], entry["outcome"]) == (
        "terminal_failure",
        "ERROR",
        "failure",
    )


class _Str(str):
    """A str subclass whose ``in`` lies: its alert name must still be found."""

    __slots__ = ()

    def __contains__(self, other: object) -> bool:
        return False


_EVENTS = st.sampled_from(
    [
        "plain",
        "other_plain",
        "workspace_terminal_failure",
        "terminal_failure",
        _Str("workspace_terminal_failure"),
        b"terminal_failure",
    ]
)


@given(
    calls=st.lists(st.tuples(st.sampled_from(["debug", "info", "warning"]), _EVENTS), max_size=12)
)
@settings(max_examples=60, deadline=None)
def test_below_the_level_every_call_of_the_alerts_event_is_written(
    calls: list[tuple[str, object]],
) -> None:
    """A call below the level returns at once for a plain event it saw last (by identity);
    any sequence of plain and alert events, str subclasses included, writes each call of
    the alert's event and no plain one (the quiet methods' last-event cache is exact)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        try:
            obs.configure(format="json", sdk_disabled=True, file=path, stream="none", level="ERROR")
            log = obs.get_logger("app")
            for method, event in calls:
                getattr(log, method)(event)
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                lines = [json.loads(x) for x in fh.read().splitlines()]
        finally:
            obs.testing.reset()
    alerts = [e for _, e in calls if isinstance(e, str) and str.endswith(e, "terminal_failure")]
    written = [x["event"] for x in lines if x.get("stage") == "terminal_failure"]
    assert (written, [x["event"] for x in lines if "plain" in str(x["event"])]) == (
        [str(e) for e in alerts],
        [],
    )


#: The keywords a call takes as instructions (and ``event``, another route for the name).
_CONTROL = {"scope", "once", "once_key", "every_n", "every_seconds", "stage", "body"}
_CONTROL |= {"exc_info", "stacklevel", "event"}
_KWARGS = st.dictionaries(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(lambda k: k not in _CONTROL),
    st.one_of(st.integers(), st.text(max_size=8), st.none()),
    max_size=4,
)
_PLAIN_EVENTS = st.text(max_size=12).filter(lambda e: "terminal_failure" not in e)


@given(
    events=st.lists(st.one_of(_PLAIN_EVENTS, st.sampled_from(ALERT_NAMES)), min_size=1, max_size=4),
    calls=st.lists(
        st.tuples(
            st.sampled_from(["debug", "info", "msg", "warning", "warn"]),
            st.integers(0, 3),
            _KWARGS,
            st.sampled_from([None, "attempt", "fallback", "terminal_failure"]),
        ),
        max_size=12,
    ),
)
@settings(max_examples=15, deadline=None)
def test_below_the_level_only_the_alerts_event_or_a_stage_passes(
    events: list[str], calls: list[tuple[str, int, dict[str, object], str | None]]
) -> None:
    """At ERROR, a call below it of any event with any keywords (the same event object
    repeated, too) is dropped unless its event is the alert's (written at its stage) or a
    ``stage`` it gives raises it to the level."""
    levels = {"debug": 10, "info": 20, "msg": 20, "warning": 30, "warn": 30}
    written: list[str] = []
    expected: list[str] = []
    try:
        obs.configure(format="json", sdk_disabled=True, level="ERROR")
        runtime = STATE.runtime or STATE.ensure()
        log = obs.get_logger("app")
        with obs.testing.capture_events() as captured:
            for method, index, kwargs, stage in calls:
                event = events[index % len(events)]
                kw = dict(kwargs) if stage is None else {**kwargs, "stage": stage}
                getattr(log, method)(event, **kw)
                alert = event in ALERT_NAMES
                if alert or (stage and runtime.effective_level(levels[method], stage) >= 40):
                    expected.append(event)
            written = [e["event"] for e in captured]
    finally:
        obs.testing.reset()
    assert written == expected


#: Event names of any length: long ones take ``str.endswith`` (a mark's search of a 10 MB
#: name cost ms), and past MAX_STR the written name is cut, so the stage tells the alert.
_LONG_NAMES = st.builds(
    lambda filler, size, end: (filler * size)[:size] + end,
    filler=st.sampled_from(["-----BEGIN ", "x", "terminal_failure ", "a_terminal_failure"]),
    size=st.sampled_from([0, 1, 900, 1007, 1008, 1009, 1100, 16_380, 16_384, 40_000]),
    end=st.sampled_from([*ALERT_NAMES, "terminal_failure_", "terminal_failur", "", "_x"]),
)


@given(route=st.sampled_from(sorted(ROUTES)), name=_LONG_NAMES)
@settings(max_examples=80, deadline=None)
def test_a_long_names_alert_is_decided_by_its_end_as_a_short_ones(route: str, name: str) -> None:
    """The alert decision for a name of any length is the short-name rule (it ends with
    ``_terminal_failure`` or is ``terminal_failure``), on every route, at INFO."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        try:
            obs.configure(format="json", sdk_disabled=True, file=path, stream="none", level="INFO")
            ROUTES[route](obs.get_logger("app"), name)
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                lines = [json.loads(x) for x in fh.read().splitlines()]
        finally:
            obs.testing.reset()
            logging.getLogger("lib.own_level").setLevel(logging.NOTSET)
    alert = name.endswith("_terminal_failure") or name == "terminal_failure"
    written = [x for x in lines if x.get("chain") == "c"]
    if alert:
        assert [(x["stage"], x["severity_text"]) for x in written] == [
            ("terminal_failure", "ERROR")
        ], (route, len(name))
    else:
        assert all(x.get("stage") != "terminal_failure" for x in written), (route, len(name))
