"""A logged value whose own hooks (``__repr__``, ``__str__``, ``__format__``, a mapping's
``items``, a sequence's ``__iter__``, ``__hash__``/``__eq__``, a property) raise a
``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``,
``GeneratorExit``, a framework's own) never reaches the caller: the record is written, with
its event and level intact and the value marked, on every entry point, as CPython itself
treats an exception it cannot raise (``sys.unraisablehook``)."""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs.stdlib import init_logger

EVENT = "workspace_terminal_failure"


class Cancelled(BaseException):
    """A framework's cancellation (trio, gevent's ``GreenletExit``): a ``BaseException``."""


RAISED = (KeyboardInterrupt, SystemExit, GeneratorExit, Cancelled)
HOOKS = ("repr", "str", "format", "items", "iter", "hash", "property", "len")


def hostile(hook: str, exc: type[BaseException]) -> object:
    """A value whose ``hook`` raises ``exc`` (its other hooks work)."""

    def boom(*_a: object, **_k: object) -> Any:
        raise exc

    if hook == "items":
        return type("Odd", (dict,), {"items": boom, "__iter__": boom, "keys": boom})(a=1)
    if hook == "iter":
        return type("Odd", (list,), {"__iter__": boom})([1, 2])
    if hook == "len":
        return type("Odd", (list,), {"__len__": boom})([1, 2])
    if hook == "property":
        return type("Odd", (), {"shape": property(boom), "__repr__": lambda _s: "Odd()"})()
    names = {"repr": "__repr__", "str": "__str__", "format": "__format__"}
    if hook in names:
        attrs: dict[str, Any] = {names[hook]: boom}
        if hook == "repr":
            attrs["__str__"] = boom
        return type("Odd", (), attrs)()
    return type("Odd", (), {"__hash__": boom, "__eq__": boom, "__repr__": lambda _s: "Odd()"})()


ENTRIES = (
    "kw",
    "positional",
    "bind",
    "error_once",
    "once_key",
    "event_keyword",
    "stdlib_args",
    "stdlib_extra",
    "dropin_once",
)


def call(entry: str, value: object) -> str:
    """One ERROR call of kind ``entry`` carrying ``value``: the event name it must write."""
    log = obs.get_logger("app")
    if entry == "kw":
        log.error(EVENT, v=value)
    elif entry == "positional":
        log.error(EVENT + " %s", value)
        return EVENT + " %s"
    elif entry == "bind":
        log.bind(v=value).error(EVENT)
    elif entry == "error_once":
        log.error_once(EVENT, v=value)
    elif entry == "once_key":
        log.error(EVENT, once=True, once_key=(value,))
    elif entry == "event_keyword":
        log.error(event=EVENT, v=value)
    elif entry == "stdlib_args":
        logging.getLogger("app.std").error(EVENT + " %s %r", value, value)
        return EVENT + " %s %r"
    elif entry == "stdlib_extra":
        logging.getLogger("app.std").error(EVENT, extra={"v": value})
    else:
        init_logger("vllm.app").error_once(EVENT + " %s", value)
        return EVENT + " %s"
    return EVENT


def guarded_call(entry: str, hook: str, exc: type[BaseException]) -> tuple[str, str | None]:
    """:func:`call`, and the name of what escaped it (the value never reaches pytest's
    report, whose own repr of it would raise)."""
    event = EVENT + (" %s %r" if entry == "stdlib_args" else " %s")
    if entry not in {"positional", "stdlib_args", "dropin_once"}:
        event = EVENT
    try:
        call(entry, hostile(hook, exc))
    except BaseException as escaped:  # what the test looks for
        return event, type(escaped).__name__
    return event, None


@settings(max_examples=120, deadline=None)
@given(
    entry=st.sampled_from(ENTRIES),
    hook=st.sampled_from(HOOKS),
    exc=st.sampled_from(RAISED),
)
def test_a_value_hook_raising_a_base_exception_never_reaches_the_caller(
    entry: str, hook: str, exc: type[BaseException]
) -> None:
    """On main a ``__repr__``/``__str__``/``items()`` raising ``KeyboardInterrupt``,
    ``SystemExit`` or ``GeneratorExit`` propagated out of every entry point and the record
    was lost."""
    root = logging.getLogger()
    others = root.handlers[:]  # pytest's capture handler formats the record itself: only obs'
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.jsonl"
        try:
            root.handlers.clear()
            obs.configure(file=str(path), stream="none", stdlib_bridge=True)
            event, escaped = guarded_call(entry, hook, exc)
            obs.flush(2.0)
        finally:
            obs.testing.reset()
            root.handlers[:] = others
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert escaped is None
    mine = [r for r in records if r["event"] == event]
    assert len(mine) == 1, records
    assert mine[0]["severity_text"] == "ERROR"
