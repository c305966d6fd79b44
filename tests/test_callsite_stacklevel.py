"""``stacklevel=n`` on every logging API names the caller of a user's own logging helper.

A user's helper (``def warn(msg): log.warning(msg, stacklevel=2)``) is the commonest way
callers' lines went wrong in peers (transformers' and accelerate's ``warning_once``):
stdlib ``logging`` honours ``stacklevel``, so obs' own loggers and the drop-in ``*_once``
must too, by the same rule (frames of ignored modules are not counted).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.stdlib
from obs.callsite import AddCallsite

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]


def _call(api: str, event: str, stacklevel: int) -> None:
    """Make one logging call of ``api`` with ``stacklevel`` (the frame that calls it is
    the innermost frame the caller counts)."""
    log = obs.get_logger("t")
    dropin = obs.stdlib.init_logger("t.dropin")
    calls: dict[str, Callable[[], None]] = {
        "info": lambda: log.info(event, stacklevel=stacklevel),
        "warning": lambda: log.warning(event, n=1, stacklevel=stacklevel),
        "error_bound": lambda: log.bind(r=1).error(event, stacklevel=stacklevel),
        "log": lambda: log.log(logging.WARNING, event, stacklevel=stacklevel),
        "warning_once": lambda: log.warning_once(event, stacklevel=stacklevel),
        "error_once_args": lambda: log.error_once(event + " %s", 1, stacklevel=stacklevel),
        "stage": lambda: log.debug(event, stage="terminal_failure", stacklevel=stacklevel),
        "dropin_warning_once": lambda: dropin.warning_once(event, stacklevel=stacklevel),
        "dropin_info_once_args": lambda: dropin.info_once(
            event + " %s", 2, scope="process", stacklevel=stacklevel
        ),
        "stdlib": lambda: dropin.warning(event, stacklevel=stacklevel),
    }
    calls[api]()


def _helper(k: int, api: str, event: str, stacklevel: int) -> None:
    """``k`` helper frames (this function's) between the caller and :func:`_call`."""
    if k == 1:
        _call(api, event, stacklevel)
    else:
        _helper(k - 1, api, event, stacklevel)


APIS = (
    "info",
    "warning",
    "error_bound",
    "log",
    "warning_once",
    "error_once_args",
    "stage",
    "dropin_warning_once",
    "dropin_info_once_args",
    "stdlib",
)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stacklevel", [1, 2, 3, 5])
def test_stacklevel_names_the_helpers_caller(
    configure_json: Configure, api: str, stacklevel: int
) -> None:
    """``stacklevel=n`` reports the n-th frame from the call (the call's own frame, _call's,
    is 1: the lambda frames are this test module's too): the test's own line at n = the
    number of frames between, never a field named stacklevel, never a TypeError."""
    read = configure_json(level="DEBUG")
    event = f"ev_{api}_{stacklevel}"

    def located() -> tuple[str, int, str]:
        records = [r for r in read() if r["event"].startswith(event)]
        assert len(records) == 1, records
        record = records[0]
        assert "stacklevel" not in record
        assert "user.stacklevel" not in record
        function = record["code.function.name"].rsplit(".", 1)[-1]  # stdlib: no qualname
        return record["code.file.path"], record["code.line.number"], function

    # frames from the logging call up: the lambda, _call, _helper(0) .. _helper(k), here
    if stacklevel == 1:
        _call(api, event, stacklevel)
        assert located()[2] == "<lambda>"
    elif stacklevel == 2:
        _call(api, event, stacklevel)
        assert located()[2] == "_call"
    else:
        line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
        helpers = stacklevel - 3
        _helper(helpers, api, event, stacklevel) if helpers else _call(api, event, stacklevel)
        expected = (__file__, line, "test_stacklevel_names_the_helpers_caller")
        assert located() == expected


def test_a_once_repeat_through_a_helper_is_counted(configure_json: Configure) -> None:
    """A helper's ``*_once(..., stacklevel=2)`` from two call sites: one record (the first
    caller's line), the repeat counted; the drop-in's too."""
    read = configure_json()
    log = obs.get_logger("t")
    dropin = obs.stdlib.init_logger("t.dropin")

    def warn(msg: str) -> None:
        log.warning_once(msg, stacklevel=2)
        dropin.warning_once(msg + " %s", 1, stacklevel=2)

    first = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    warn("helper_once")
    warn("helper_once")
    obs.flush()
    records = read()
    plain = [r for r in records if r["event"] != "log_repeats_suppressed"]
    assert [(r["event"], r["code.line.number"]) for r in plain] == [
        ("helper_once", first),
        ("helper_once %s", first),
    ]
    counts = sorted(
        (r["original_event"], r["suppressed_count"])
        for r in records
        if r["event"] == "log_repeats_suppressed"
    )
    assert counts == [("helper_once", 1), ("helper_once %s", 1)]


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(st.booleans(), min_size=0, max_size=6),
    stacklevel=st.one_of(st.integers(-2, 9), st.sampled_from([True, "2", 2.0, None])),
)
def test_add_callsite_counts_only_frames_outside_ignored_modules(
    kinds: list[bool], stacklevel: object
) -> None:
    """Between the call and this test, helper frames of ignored (True) and user (False)
    modules: the reported frame is the stacklevel-th user frame from the call (ignored
    ones never count), the outermost when the stack runs out; an odd value is 1."""
    seen: list[dict[str, Any]] = []

    def keep(_: Any, __: str, event_dict: dict[str, Any]) -> str:
        seen.append(event_dict)
        return ""

    structlog.configure(
        processors=[AddCallsite(), keep], logger_factory=structlog.ReturnLoggerFactory()
    )
    try:
        # the innermost helper calls the logger; each helper calls the next inner one
        helpers: list[Callable[[], None]] = []
        names: list[str] = []
        inner: Callable[[], None] = lambda: structlog.get_logger().info(  # noqa: E731
            "x", stacklevel=stacklevel
        )
        for i, internal in enumerate(kinds):
            namespace: dict[str, Any] = {
                "__name__": f"obs._fake{i}" if internal else f"userapp.h{i}",
                "inner": inner,
            }
            exec(f"def h{i}():\n    inner()\n", namespace)
            inner = namespace[f"h{i}"]
            helpers.append(inner)
            names.append("ignored" if internal else f"h{i}")
        inner()
    finally:
        structlog.reset_defaults()
    # user frames from the call up: the lambda, each user helper, then this test and above
    user = ["<lambda>", *[n for n in names if n != "ignored"]]
    n = stacklevel if type(stacklevel) is int and stacklevel > 1 else 1
    got = seen[0]["code.function.name"]
    if n <= len(user):
        assert got.rsplit(".", 1)[-1] == user[n - 1]
    else:  # past the helpers: this test's frame, or one of its callers
        assert got.rsplit(".", 1)[-1] not in user
    assert "stacklevel" not in seen[0]
