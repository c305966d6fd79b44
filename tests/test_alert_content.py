"""A terminal failure is never dropped or folded into another one's repeat count because
of what else the call carries: a stage the caller gave, the exception being handled, or a
drop-in ``*_once`` keyword (``exc_info=``, ``extra=``, ...) that vLLM's own logger takes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.stdlib
import obs.testing

ALERT = "workspace_terminal_failure"


def _lines(path: Path) -> list[dict[str, Any]]:
    obs.flush(timeout=2)
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _alerts(path: Path) -> list[dict[str, Any]]:
    return [x for x in _lines(path) if x.get("event") == ALERT]


def _fail(message: str) -> None:
    raise KeyError(message)


def _raise_and_log(message: str, log: Any) -> None:
    try:
        _fail(message)
    except KeyError:
        log.exception(ALERT, once=True)


class TestAlertStage:
    """A call of the alert's event at ERROR keeps the alert's stage whatever stage it gives."""

    def test_a_conflicting_stage_does_not_drop_the_alert(self, tmp_path: Path) -> None:
        """``log.error(ALERT, stage="attempt")`` was tagged DEBUG and dropped at the
        default level (the stdlib route too): the alert never fired. Now it is the
        terminal failure at ERROR, the caller's stage kept as ``user.stage``."""
        obs.configure(file=str(tmp_path / "f.jsonl"), format="json")
        obs.get_logger("app").error(ALERT, stage="attempt", route="call")
        logging.getLogger("lib").error(ALERT, extra={"stage": "attempt", "route": "stdlib"})
        got = {x["route"]: x for x in _alerts(tmp_path / "f.jsonl")}
        assert ["call", "stdlib"] == sorted(got)
        for record in got.values():
            assert ("ERROR", "terminal_failure") == (record["severity_text"], record["stage"])
            assert "attempt" == record["user.stage"]

    @settings(max_examples=40)
    @given(
        stage=st.one_of(
            st.sampled_from(["attempt", "fallback", "initialized", "attempt_failed", "x"]),
            st.text(max_size=12),
        ),
        method=st.sampled_from(["error", "exception", "critical", "error_once", "log", "stdlib"]),
        level=st.sampled_from(["INFO", "ERROR", "CRITICAL"]),
    )
    def test_any_stage_any_method(
        self, tmp_path_factory: Any, stage: str, method: str, level: str
    ) -> None:
        """Whatever stage the call gives, on every ERROR-level method and the stdlib
        route, under any OBS_LEVEL, the alert is written once at ERROR or above."""
        path = tmp_path_factory.mktemp("s") / "f.jsonl"
        obs.testing.reset()
        obs.configure(file=str(path), format="json", level=level)
        log = obs.get_logger("app")
        if method == "log":
            log.log(logging.ERROR, ALERT, stage=stage)
        elif method == "stdlib":
            logging.getLogger("lib").error(ALERT, extra={"stage": stage})
        else:
            getattr(log, method)(ALERT, stage=stage)
        (record,) = _alerts(path)
        assert "terminal_failure" == record["stage"]
        assert record["severity_number"] >= 17


class TestAlertDedupContent:
    """Two terminal failures that differ in their exception are two records."""

    def test_exc_info_true_keys_on_the_exception(self, tmp_path: Path) -> None:
        """``log.exception(ALERT, once=True)`` in two ``except`` blocks of different
        errors keyed both as ``exc_info=True``: the second failure was only counted.
        Now each exception is its own key; the same one again is still a repeat."""
        obs.configure(file=str(tmp_path / "f.jsonl"), format="json")
        log = obs.get_logger("app")
        for message in ("k1", "k2", "k2"):
            _raise_and_log(message, log)
        assert ["'k1'", "'k2'"] == [x["exception.message"] for x in _alerts(tmp_path / "f.jsonl")]

    @settings(max_examples=30)
    @given(messages=st.lists(st.text(max_size=8), min_size=1, max_size=5))
    def test_each_distinct_exception_once(self, tmp_path_factory: Any, messages: list[str]) -> None:
        """Any sequence of handled errors: one alert per distinct exception message."""
        path = tmp_path_factory.mktemp("d") / "f.jsonl"
        obs.testing.reset()
        obs.configure(file=str(path), format="json")
        log = obs.get_logger("app")
        for message in messages:
            _raise_and_log(message, log)
        assert len(set(messages)) == len(_alerts(path))


class TestDropInOnceKeywords:
    """vLLM-style ``init_logger(...).error_once`` takes logging's keywords and never raises."""

    def test_logging_keywords_are_taken(self, tmp_path: Path) -> None:
        """``error_once(msg, exc_info=...)``, ``stack_info=``, ``extra=`` raised TypeError
        into the application; now each is logged as ``logging`` would, and a keyword
        logging does not know is reported, not raised."""
        obs.configure(file=str(tmp_path / "f.jsonl"), format="json")
        v = obs.stdlib.init_logger("vllm.fi")
        v.error_once(ALERT, exc_info=ValueError("a"))
        v.error_once(ALERT, exc_info=ValueError("b"))
        v.error_once(ALERT, extra={"chain": "fi_ar"})
        v.error_once(ALERT, stack_info=True, tag=1)
        lines = _lines(tmp_path / "f.jsonl")
        alerts = [x for x in lines if x["event"] == ALERT]
        assert ["a", "b", None, None] == [x.get("exception.message") for x in alerts]
        assert "fi_ar" == alerts[2]["chain"]
        assert all(x["severity_text"] == "ERROR" for x in alerts)
        assert any(x["event"] == "obs_internal_error" for x in lines)

    @settings(max_examples=40)
    @given(
        kw=st.dictionaries(
            st.sampled_from(["exc_info", "stack_info", "extra", "stacklevel", "scope", "foo"]),
            st.one_of(
                st.none(),
                st.booleans(),
                st.integers(),
                st.text(max_size=4),
                st.just({"k": 1, "msg": 2, 3: 4}),
                st.just(ValueError("e")),
            ),
            max_size=4,
        ),
        method=st.sampled_from(["debug_once", "info_once", "warning_once", "error_once"]),
    )
    def test_any_keywords_never_raise(self, kw: dict[str, Any], method: str) -> None:
        """Any mix of keywords and values: the call returns; an ERROR alert is written."""
        obs.testing.reset()
        obs.configure(format="json", stream="stdout")
        v = obs.stdlib.init_logger("vllm.any")
        with obs.testing.capture_events() as events:
            getattr(v, method)(ALERT, **kw)
        if method == "error_once" and kw.get("scope", "local") in ("local", "global", "process"):
            assert [ALERT] == [e["event"] for e in events if e["event"] == ALERT]
