"""Property tests: arbitrary values never make a log call raise, and every emitted line is
exactly one valid JSON object."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import obs
import obs.stdlib
from obs._config import STATE
from obs._secrets import scrub_name
from obs.encode import to_jsonable, to_otel_value
from obs.render import ConsoleRenderer, JSONRenderer
from obs.stdlib import ObsHandler


class BrokenRepr:
    """repr() and str() raise."""

    def __repr__(self) -> str:
        raise RuntimeError("broken repr")

    __str__ = __repr__


class HugeRepr:
    """repr() is 100 KB of lines."""

    def __repr__(self) -> str:
        return "line\n" * 20_000


class BadEq:
    """== raises (numpy-array-like truthiness)."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("ambiguous")

    __hash__ = object.__hash__


def _reject_constant(constant: str) -> Any:
    raise ValueError(f"not JSON: {constant}")


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.binary(max_size=30),
    st.builds(BrokenRepr),
    st.builds(HugeRepr),
    st.builds(BadEq),
    st.builds(object),
    st.builds(ValueError, st.text()),
)
hashable = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10), st.floats())
values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(hashable, children, max_size=4),
        st.frozensets(hashable, max_size=4),
    ),
    max_leaves=12,
)
# Any str is a valid **kwargs key; "event" would collide with the positional parameter.
field_names = st.text(max_size=20).filter(lambda k: k != "event")
fields = st.dictionaries(field_names, values, max_size=5)


@contextlib.contextmanager
def _only_obs_handler() -> Iterator[None]:
    """Take pytest's capture handlers off the root logger for the block: they raise on a
    record whose %-formatting fails, where stdlib handlers only print a warning."""
    root = logging.getLogger()
    others = [h for h in root.handlers if not isinstance(h, ObsHandler)]
    for handler in others:
        root.removeHandler(handler)
    try:
        yield
    finally:
        for handler in others:
            root.addHandler(handler)


def _ensure_configured() -> None:
    if STATE.runtime is None:
        obs.configure(format="json", sdk_disabled=True, repeat_summary_seconds=0, level="DEBUG")


def _lines(text: str) -> list[dict[str, Any]]:
    records = []
    for line in text.split("\n")[:-1]:
        record = json.loads(line, parse_constant=_reject_constant)
        assert isinstance(record, dict)
        assert (str, str, True) == (
            type(record.get("timestamp")),
            type(record.get("severity_text")),
            "event" in record,
        )
        records.append(record)
    assert text == "" or text.endswith("\n")
    return records


PROFILE = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class TestLogCallsNeverRaise:
    @PROFILE
    @given(event=st.text(max_size=30), kw=fields)
    def test_plain_calls(self, event: str, kw: dict[str, Any]) -> None:
        """log.info/warning/error with arbitrary fields never raise; each line is one JSON
        object and the call's event is among them (as obs writes a name: a secret pair's
        value in it redacted, ``"pwd:0"`` as ``"pwd:[REDACTED]"``)."""
        _ensure_configured()
        buf = io.StringIO()
        log = obs.get_logger("prop")
        with contextlib.redirect_stderr(buf):
            log.info(event, **kw)
            log.bind(**kw).error(event)
        records = _lines(buf.getvalue())
        if not (
            {"scope", "once", "once_key", "every_n", "every_seconds", "_obs_console"} & set(kw)
        ):
            shown = scrub_name(event)
            assert 2 <= len([r for r in records if r["event"] == shown])

    @PROFILE
    @given(event=st.text(max_size=30), kw=fields, every_n=st.integers(min_value=0, max_value=3))
    def test_once_and_throttled_calls(self, event: str, kw: dict[str, Any], every_n: int) -> None:
        """*_once and every_n calls with arbitrary fields never raise; lines stay JSON."""
        _ensure_configured()
        buf = io.StringIO()
        log = obs.get_logger("prop")
        with contextlib.redirect_stderr(buf):
            log.warning_once(event, **kw)
            log.warning_once(event, **kw)
            log.debug(event, every_n=every_n, **{k: v for k, v in kw.items() if k != "every_n"})
            obs.flush()
        assert buf.getvalue().count("\n") == len(_lines(buf.getvalue()))

    @PROFILE
    @given(msg=st.one_of(st.text(max_size=30), values), args=st.lists(values, max_size=3))
    def test_vllm_style_calls(self, msg: Any, args: list[Any]) -> None:
        """init_logger(...).warning_once(msg, *args) and plain stdlib records never raise."""
        _ensure_configured()
        buf = io.StringIO()
        logger = obs.stdlib.init_logger("prop.vllm")
        with contextlib.redirect_stderr(buf), _only_obs_handler():
            logger.warning_once(msg, *args)
            handler = STATE.bridge
            record = logging.LogRecord(
                "prop.std", logging.WARNING, "f.py", 1, msg, tuple(args), None
            )
            handler.handle(record)
        assert buf.getvalue().count("\n") == len(_lines(buf.getvalue()))


class TestEncodersNeverRaise:
    @PROFILE
    @given(value=values)
    def test_to_jsonable_is_json(self, value: Any) -> None:
        """to_jsonable output always serialises as strict JSON and round-trips unchanged."""
        safe = to_jsonable(value)
        assert safe == json.loads(json.dumps(safe, allow_nan=False))

    @PROFILE
    @given(value=values)
    def test_to_otel_value(self, value: Any) -> None:
        """to_otel_value returns only OTel AnyValue types (scalars, lists, str-keyed dicts)."""

        def check(v: Any) -> None:
            if isinstance(v, dict):
                assert all(isinstance(k, str) for k in v)
                for item in v.values():
                    check(item)
            elif isinstance(v, list):
                for item in v:
                    check(item)
            else:
                assert v is None or type(v) in (str, bool, int, float)
                assert not (type(v) is int and not -(2**63) <= v < 2**63)

        check(to_otel_value(value))

    @PROFILE
    @given(ed=st.dictionaries(st.one_of(st.text(max_size=20), st.integers()), values, max_size=5))
    @example(ed={"exception.stacktrace": "Traceback\n  line\nValueError: x", "k": "a\nb"})
    def test_renderers_one_line(self, ed: dict[Any, Any]) -> None:
        """The JSON renderer always gives one JSON object; the console renderer one line,
        followed only by the indented lines of an ``exception.stacktrace`` when there is one
        (Hypothesis draws the key from the code's own literals)."""
        line = JSONRenderer()(None, "info", dict(ed))
        assert "\n" not in line
        assert isinstance(json.loads(line, parse_constant=_reject_constant), dict)
        fields = {str(k): v for k, v in ed.items()}
        _head, *trace = ConsoleRenderer()(None, "info", fields).split("\n")
        assert [] == [t for t in trace if not t.startswith("    ")]
        assert not trace or "exception.stacktrace" in fields
