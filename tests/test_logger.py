"""Tests for obs._logger.BoundLogger: levels, *_once, bind/unbind/new, reconfiguration."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._config import STATE
from obs._fields import PRIVATE_KEYS

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]


@pytest.fixture
def clean_contextvars() -> Iterator[None]:
    """Clear structlog's contextvars after the test."""
    yield
    structlog.contextvars.clear_contextvars()


class TestGetLogger:
    def test_name(self) -> None:
        """The logger name is the ``logger`` field; no name means "root"."""
        assert ("eng", "root") == (obs.get_logger("eng").name, obs.get_logger().name)

    def test_initial_values(self, configure_json: Configure) -> None:
        """get_logger(name, **values) binds those values."""
        read = configure_json()
        obs.get_logger("eng", model="llama").info("started")
        (record,) = read()
        assert ("eng", "llama") == (record["logger"], record["model"])

    def test_repr(self) -> None:
        """repr shows the name and context."""
        assert "<obs.BoundLogger 'eng' context={'a': 1}>" == repr(obs.get_logger("eng", a=1))


class TestLevels:
    @pytest.mark.parametrize(
        ("method", "text", "number"),
        [
            ("debug", "DEBUG", 5),
            ("info", "INFO", 9),
            ("warning", "WARNING", 13),
            ("warn", "WARNING", 13),
            ("error", "ERROR", 17),
            ("critical", "CRITICAL", 21),
            ("fatal", "CRITICAL", 21),
        ],
    )
    def test_methods(self, method: str, text: str, number: int, configure_json: Configure) -> None:
        """Each method writes at its level."""
        read = configure_json(level="DEBUG")
        getattr(obs.get_logger("t"), method)("evt")
        (record,) = read()
        assert ("evt", text, number) == (
            record["event"],
            record["severity_text"],
            record["severity_number"],
        )

    @pytest.mark.parametrize(
        ("level", "text"),
        [(5, "Level 5"), (10, "DEBUG"), (25, "Level 25"), (40, "ERROR"), (55, "Level 55")],
    )
    def test_log_numeric(self, level: int, text: str, configure_json: Configure) -> None:
        """log(level, ...) writes at any numeric level at or above the threshold."""
        read = configure_json(level=1)
        obs.get_logger("t").log(level, "evt")
        assert [text] == [r["severity_text"] for r in read()]

    @pytest.mark.parametrize(
        "call",
        [
            lambda log: log.debug("x"),
            lambda log: log.info("x"),
            lambda log: log.warning("x"),
            lambda log: log.debug_once("x"),
            lambda log: log.info_once("x"),
            lambda log: log.warning_once("x"),
            lambda log: log.log(logging.INFO, "x"),
            lambda log: log.log(logging.WARNING, "x", once=True),
        ],
    )
    def test_below_level_writes_nothing(
        self, call: Callable[[Any], None], configure_json: Configure
    ) -> None:
        """With level ERROR, calls below it write nothing and use no dedup key."""
        read = configure_json(level="ERROR")
        call(obs.get_logger("t"))
        assert ([], 0) == (read(), len(STATE.runtime.deduper))  # type: ignore[union-attr]

    def test_error_once_at_error_level(self, configure_json: Configure) -> None:
        """error_once passes an ERROR threshold once."""
        read = configure_json(level="ERROR")
        log = obs.get_logger("t")
        log.error_once("x")
        log.error_once("x")
        assert ["x"] == [r["event"] for r in read()]

    def test_is_enabled_for(self, configure_json: Configure) -> None:
        """is_enabled_for follows the configured level."""
        configure_json(level="WARNING")
        log = obs.get_logger("t")
        assert (False, True) == (log.is_enabled_for(logging.INFO), log.is_enabled_for(40))

    def test_exception(self, configure_json: Configure) -> None:
        """exception() is ERROR with the handled exception's fields."""
        read = configure_json()
        try:
            raise ConnectionError("reset")  # noqa: TRY301
        except ConnectionError:
            obs.get_logger("t").exception("lost")
        (record,) = read()
        assert ("ERROR", "ConnectionError", "reset") == (
            record["severity_text"],
            record["exception.type"],
            record["exception.message"],
        )

    def test_exc_info_exception_object(self, configure_json: Configure) -> None:
        """error(..., exc_info=exc) outside an except block describes exc."""
        read = configure_json()
        obs.get_logger("t").error("lost", exc_info=TimeoutError("slow"))
        (record,) = read()
        assert ("TimeoutError", "slow") == (record["exception.type"], record["exception.message"])

    def test_body_override(self, configure_json: Configure) -> None:
        """``body=`` sets the human message; the event name stays."""
        read = configure_json()
        obs.get_logger("t").info("engine_started", body="Engine started with 8 GPUs")
        (record,) = read()
        assert ("engine_started", "Engine started with 8 GPUs") == (
            record["event"],
            record["body"],
        )

    def test_once_keyword_on_plain_call(self, configure_json: Configure) -> None:
        """info(..., once=True) and log(level, ..., once=True) dedup like *_once."""
        read = configure_json()
        log = obs.get_logger("t")
        for _ in range(3):
            log.info("banner", once=True)
            log.log(logging.WARNING, "numeric_once", once=True)
        assert ["banner", "numeric_once"] == [r["event"] for r in read()]

    def test_plain_call_default_scope_is_process(
        self, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """A plain call logs on a non-zero local rank; a *_once call (scope local) does not."""
        for name, value in {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}.items():
            monkeypatch.setenv(name, value)
        read = configure_json()
        log = obs.get_logger("t")
        log.warning("plain")
        log.warning_once("once")
        assert ["plain"] == [r["event"] for r in read()]


class TestLevelGate:
    """The plain methods below the runtime's level are swapped for quiet ones
    (``gate_levels``): whatever the sequence of configure/reset calls, a call is written
    exactly when its level (raised by a ``stage``) reaches the level in force."""

    METHODS = {
        "debug": logging.DEBUG,
        "info": logging.INFO,
        "warning": logging.WARNING,
        "warn": logging.WARNING,
        "error": logging.ERROR,
        "critical": logging.CRITICAL,
        "fatal": logging.CRITICAL,
    }
    #: None: obs.testing.reset() (the next call configures from the defaults: INFO).
    LEVELS = (None, "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

    @given(
        steps=st.lists(
            st.tuples(
                st.sampled_from(LEVELS),
                st.lists(
                    st.tuples(
                        st.sampled_from(sorted(METHODS)),
                        st.sampled_from([None, "attempt", "terminal_failure", "fallback"]),
                    ),
                    max_size=6,
                ),
            ),
            min_size=1,
            max_size=4,
        )
    )
    @settings(max_examples=40, deadline=None)
    def test_written_iff_at_or_above_the_level(
        self, steps: list[tuple[str | None, list[tuple[str, str | None]]]]
    ) -> None:
        log = obs.get_logger("gate")  # made before any configure: reaches every later one
        try:
            for level_name, calls in steps:
                if level_name is None:
                    obs.testing.reset()
                else:
                    obs.configure(format="json", sdk_disabled=True, level=level_name)
                runtime = STATE.runtime or STATE.ensure()
                for method, stage in calls:
                    expected = self.METHODS[method]
                    if stage is not None:
                        expected = runtime.effective_level(expected, stage)
                    with obs.testing.capture_events() as events:
                        if stage is None:
                            getattr(log, method)("gated", n=1)
                        else:
                            getattr(log, method)("gated", n=1, stage=stage)
                    written = [e["event"] for e in events]
                    assert written == (["gated"] if expected >= runtime.level else []), (
                        level_name,
                        method,
                        stage,
                    )
        finally:
            obs.testing.reset()

    def test_gate_follows_the_level(self) -> None:
        """Quiet methods exactly below the level, loud ones from it up, back to loud after
        reset (level 0: nothing known yet)."""
        from obs._logger import _LOUD, _QUIET, BoundLogger

        def quiet_names() -> set[str]:
            return {name for name in _LOUD if vars(BoundLogger)[name] is _QUIET[name]}

        try:
            obs.configure(format="json", sdk_disabled=True, level="ERROR")
            assert {"debug", "info", "msg", "warning", "warn"} == quiet_names()
            obs.configure(format="json", sdk_disabled=True, level="DEBUG")
            assert set() == quiet_names()
        finally:
            obs.testing.reset()
        assert set() == quiet_names()


class TestContext:
    def test_bind_adds_fields_and_copies(self, configure_json: Configure) -> None:
        """bind() returns a new logger with the fields; the original is unchanged."""
        read = configure_json()
        log = obs.get_logger("t")
        bound = log.bind(request_id="r1", user="u")
        bound.info("with")
        log.info("without")
        first, second = read()
        assert (("r1", "u"), False, True) == (
            (first["request_id"], first["user"]),
            "request_id" in second,
            bound is not log,
        )

    def test_call_fields_override_bound(self, configure_json: Configure) -> None:
        """A field passed to the call wins over the bound one."""
        read = configure_json()
        obs.get_logger("t").bind(a=1).info("e", a=2)
        assert 2 == read()[0]["a"]

    def test_unbind(self, configure_json: Configure) -> None:
        """unbind() drops keys; a missing key raises KeyError, as structlog's."""
        read = configure_json()
        log = obs.get_logger("t").bind(a=1, b=2)
        log.unbind("a").info("e")
        with pytest.raises(KeyError):
            log.unbind("missing")
        (record,) = read()
        assert (False, 2) == ("a" in record, record["b"])

    def test_try_unbind(self, configure_json: Configure) -> None:
        """try_unbind() ignores missing keys."""
        read = configure_json()
        obs.get_logger("t").bind(a=1).try_unbind("a", "missing").info("e")
        assert "a" not in read()[0]

    def test_new(self, configure_json: Configure) -> None:
        """new() replaces the whole context."""
        read = configure_json()
        obs.get_logger("t").bind(a=1).new(b=2).info("e")
        (record,) = read()
        assert (False, 2) == ("a" in record, record["b"])

    def test_bound_fields_are_part_of_the_once_key(self, configure_json: Configure) -> None:
        """warning_once from two loggers bound to different values logs twice."""
        read = configure_json()
        log = obs.get_logger("t")
        for req in ("r1", "r2", "r1"):
            log.bind(request=req).warning_once("slow")
        assert ["r1", "r2"] == [r["request"] for r in read()]

    def test_contextvars_are_merged(
        self, configure_json: Configure, clean_contextvars: None
    ) -> None:
        """structlog.contextvars values appear in every record."""
        read = configure_json()
        structlog.contextvars.bind_contextvars(trace="t-1")
        obs.get_logger("t").info("e")
        assert "t-1" == read()[0]["trace"]

    def test_call_keys_win_over_contextvars(
        self, configure_json: Configure, clean_contextvars: None
    ) -> None:
        """A key the call passes beats the same contextvar key (structlog's rule)."""
        read = configure_json()
        structlog.contextvars.bind_contextvars(trace="bound")
        obs.get_logger("t").info("e", trace="call")
        assert "call" == read()[0]["trace"]

    @pytest.mark.parametrize("entry", ["kwarg", "bound", "contextvar", "stdlib_extra"])
    def test_nested_secret_redacted_through_every_entry(
        self, entry: str, configure_json: Configure, clean_contextvars: None
    ) -> None:
        """A dict holding a secret is redacted one level down whichever way it came in
        (the entry's no-dict mark must never skip a dict another entry added)."""
        read = configure_json()
        request = {"api_key": "sk-live", "model": "llama"}
        log = obs.get_logger("t")
        if entry == "kwarg":
            log.info("e", request=request)
        elif entry == "bound":
            log.bind(request=request).info("e")
        elif entry == "contextvar":
            structlog.contextvars.bind_contextvars(request=request)
            log.info("e")
        else:
            logging.getLogger("vllm.t").warning("e", extra={"request": request})
        (record,) = read()
        assert {"api_key": "[REDACTED]", "model": "llama"} == record["request"]
        assert "sk-live" == request["api_key"]  # the caller's dict is untouched


class TestReconfigure:
    def test_logger_obtained_earlier_follows(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A second configure() (level and format) reaches a logger obtained before it."""
        obs.configure(format="json", level="WARNING", sdk_disabled=True)
        log = obs.get_logger("t")
        log.info("hidden")
        obs.configure(format="console", level="INFO", sdk_disabled=True)
        log.info("shown")
        err = capsys.readouterr().err
        assert (1, False, True) == (
            err.count("\n"),
            "hidden" in err,
            "INFO      shown" in err,
        )

    def test_logger_before_any_configure(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Logging before configure() uses a default runtime; configure() then takes over."""
        log = obs.get_logger("t")
        log.info("early")
        obs.configure(format="json", level="ERROR", sdk_disabled=True)
        log.info("late_hidden")
        log.error("late_shown")
        err = capsys.readouterr().err
        assert (True, False, True) == ("early" in err, "late_hidden" in err, "late_shown" in err)


class TestPrivateNames:
    """A caller's field named like one of obs' private ``_obs_*`` keys is a user field."""

    @pytest.mark.parametrize("entry", ["kwarg", "bound", "contextvar"])
    @pytest.mark.parametrize(
        ("name", "value"),
        [("_obs_no_export", True), ("_obs_time_ns", "x"), ("_obs_level", "x"), ("_obs_foo", 1)],
    )
    def test_kept_as_user_field_and_never_acted_on(
        self,
        *,
        entry: str,
        name: str,
        value: object,
        configure_json: Configure,
        fake_sink: Any,
        clean_contextvars: None,
    ) -> None:
        """``_obs_no_export=True`` (a keyword, bind() or a contextvar) neither keeps a
        terminal failure from the export sink nor changes its time or level: it is written
        as ``user._obs_no_export``, on both routes."""
        read = configure_json(sdk_disabled=False)
        log = obs.get_logger("t")
        if entry == "kwarg":
            log.error("workspace_terminal_failure", **{name: value})
        elif entry == "bound":
            log.bind(**{name: value}).error("workspace_terminal_failure")
        else:
            structlog.contextvars.bind_contextvars(**{name: value})
            log.error("workspace_terminal_failure")
        (record,) = read()
        (exported,) = [e for e in fake_sink.received if e["event"] == "workspace_terminal_failure"]
        assert (value, "ERROR", True, value) == (
            record[f"user.{name}"],
            record["severity_text"],
            record["timestamp"].endswith("Z"),
            exported[f"user.{name}"],
        )
        assert [] == [k for k in record if k.startswith("_obs_")]
        assert [] == [k for k in exported if k.startswith("_obs_") and k not in PRIVATE_KEYS]
        assert (type(exported["_obs_time_ns"]), exported["_obs_level"]) == (int, logging.ERROR)
        assert not exported.get("_obs_no_export")
