"""A value whose ``__class__`` (or every attribute) raises when read, given anywhere a
call takes a value (the event, a %-argument, a field, a bound value, ``*_once``, the
drop-in's ``*_once``, ``exc_info``): ``isinstance`` asks ``__class__`` of a value that is
not of the class, so obs must test ``type(value)`` instead; the call never raises and its
line is written."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs.stdlib import init_logger


class ClassRaises:
    """Reading ``__class__`` raises (a lazy proxy whose target failed to load)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "__class__":
            raise RuntimeError("no class")
        return object.__getattribute__(self, name)

    def __repr__(self) -> str:
        return "ClassRaises()"


class AllRaises:
    """Reading any attribute raises (``__class__``, ``__dict__``, ``__repr__`` too)."""

    def __getattribute__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")


class ClassLies:
    """``__class__`` is not a type at all."""

    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        return 42

    def __repr__(self) -> str:
        return "ClassLies()"


HOSTILE: dict[str, Callable[[], object]] = {
    "class_raises": ClassRaises,
    "all_raises": AllRaises,
    "class_lies": ClassLies,
}


def _routes() -> dict[str, Callable[[obs.BoundLogger, object], None]]:
    return {
        "event": lambda log, v: log.info(v),  # type: ignore[arg-type]
        "warning_event": lambda log, v: log.warning(v),  # type: ignore[arg-type]
        "event_kw": lambda log, v: log.info(event=v),
        "pct_arg": lambda log, v: log.info("got %s", v),
        "pct_args": lambda log, v: log.info("got %s %r", v, v),
        "field": lambda log, v: log.info("got", v=v),
        "bound": lambda log, v: log.bind(v=v).info("got"),
        "once_field": lambda log, v: log.info_once("got", v=v),
        "once_arg": lambda log, v: log.warning_once("got %s", v),
        "once_event": lambda log, v: log.error_once(v),  # type: ignore[arg-type]
        "exc_info": lambda log, v: log.info("got", exc_info=v),
        "stage": lambda log, v: log.info("got", stage=v),
        # Not the drop-in's ``warning_once("got %s", v)``: stdlib's LogRecord raises on it
        # (its own ``isinstance(args[0], Mapping)``) before any handler, with or without obs.
        "drop_in_event": lambda _, v: init_logger("vllm.hostile").error_once(v),
    }


ROUTES = _routes()


def _lines_after(route: str, kind: str) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.jsonl"
        try:
            obs.configure(format="json", sdk_disabled=True, file=str(path), stream="none")
            ROUTES[route](obs.get_logger("app"), HOSTILE[kind]())
            obs.flush(5)
            text = path.read_text(encoding="utf-8")
        finally:
            obs.testing.reset()
    return [json.loads(line) for line in text.splitlines()]


def test_a_pct_argument_whose_class_raises_is_formatted() -> None:
    """``log.info("got %s", v)`` with ``v.__class__`` raising: the body is written (failed
    before: ``isinstance(v, Mapping)`` in format_body raised into the caller, twice)."""
    lines = _lines_after("pct_arg", "class_raises")
    assert [("got %s", "got ClassRaises()")] == [
        (x["event"], x["body"]) for x in lines if x["logger"] == "app"
    ]


def test_an_event_whose_class_raises_is_written() -> None:
    """``log.info(v)`` with ``v.__class__`` raising: written under its text (failed before:
    the alert test's ``isinstance(event, str)`` raised into the caller)."""
    lines = _lines_after("event", "class_raises")
    assert ["ClassRaises()"] == [x["event"] for x in lines if x["logger"] == "app"]


@given(route=st.sampled_from(sorted(ROUTES)), kind=st.sampled_from(sorted(HOSTILE)))
@settings(max_examples=40, deadline=None)
def test_a_hostile_class_never_raises_and_is_written(route: str, kind: str) -> None:
    """Every route, every hostile kind: the call returns and writes its line (one whole
    JSON object each), under the event given or the object's safe text."""
    lines = _lines_after(route, kind)
    own = [x for x in lines if x["logger"] in {"app", "vllm.hostile"}]
    assert len(own) == 1, lines
    assert isinstance(own[0]["event"], str)
    assert isinstance(own[0]["body"], str)
