"""Tests for obs.stdlib: the root-logger bridge and the vLLM-compatible init_logger."""

from __future__ import annotations

import inspect
import json
import logging
import logging.config
import os
import pickle
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import obs
import obs.stdlib
import obs.testing
from obs._config import STATE
from obs.stdlib import ObsHandler, VllmLogger, init_logger

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]


def _set_rank(monkeypatch: pytest.MonkeyPatch, rank: int, local_rank: int) -> None:
    """Look like rank ``rank`` of a torchrun job of 2 nodes x 2 (and refresh the resolver)."""
    env = {"RANK": rank, "LOCAL_RANK": local_rank, "WORLD_SIZE": 4, "LOCAL_WORLD_SIZE": 2}
    env["GROUP_RANK"] = rank // 2
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    if STATE.runtime is not None:
        STATE.runtime.resolver.refresh()


def _consoles(logger: logging.Logger) -> list[logging.Handler]:
    """The logger's plain StreamHandlers (pytest's capture handlers are subclasses)."""
    return [h for h in logger.handlers if type(h) is logging.StreamHandler]


def _obs_handlers() -> list[logging.Handler]:
    return [h for h in logging.getLogger().handlers if isinstance(h, ObsHandler)]


class TestBridge:
    @pytest.mark.parametrize("name", ["vllm.engine", "flashinfer.comm", "transformers.x"])
    def test_foreign_records_in_json_with_rank(
        self, name: str, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """A plain logging record comes out as a JSON line with rank fields and the body."""
        _set_rank(monkeypatch, 3, 1)
        read = configure_json()
        logging.getLogger(name).warning("backend %s failed after %d tries", "mnnvl", 3)
        (record,) = read()
        assert {
            "event": "backend %s failed after %d tries",
            "body": "backend mnnvl failed after 3 tries",
            "logger": name,
            "severity_text": "WARNING",
            "severity_number": 13,
            "rank": 3,
            "local_rank": 1,
            "world_size": 4,
            "node_rank": 1,
        } == {
            k: record[k]
            for k in (
                *("event", "body", "logger", "severity_text", "severity_number"),
                *("rank", "local_rank", "world_size", "node_rank"),
            )
        }

    def test_extra_fields_and_event_attribute(self, configure_json: Configure) -> None:
        """``extra=`` fields become record fields; an extra ``event`` cannot rename the
        record (the template stays the event) and is kept as ``user.event``."""
        read = configure_json()
        logging.getLogger("vllm").info("loaded", extra={"event": "model_loaded", "gb": 14})
        (record,) = read()
        assert ("loaded", "model_loaded", "loaded", 14) == (
            record["event"],
            record["user.event"],
            record["body"],
            record["gb"],
        )

    def test_record_time_is_kept(self, configure_json: Configure) -> None:
        """The JSON timestamp is the LogRecord's creation time."""
        read = configure_json()
        record = logging.LogRecord("vllm", logging.INFO, __file__, 1, "timed", (), None)
        record.created = 1_700_000_000.25
        _obs_handlers()[0].handle(record)
        assert "2023-11-14T22:13:20.250000Z" == read()[0]["timestamp"]

    def test_bad_format_args_never_raise(self, configure_json: Configure) -> None:
        """A record whose %-formatting fails is written with a note, not a traceback."""
        read = configure_json()
        record = logging.LogRecord(
            "vllm", logging.WARNING, __file__, 1, "expected %d", ("not a number",), None
        )
        _obs_handlers()[0].handle(record)  # pytest's own handler would raise on it
        (record,) = read()
        assert "'expected %d' % ('not a number',) (formatting failed: TypeError)" == record["body"]

    def test_non_str_msg(self, configure_json: Configure) -> None:
        """logging.warning(an_exception) uses its repr as event and str as body."""
        read = configure_json()
        logging.getLogger("vllm").warning(ValueError("v"))
        (record,) = read()
        assert ("ValueError('v')", "v") == (record["event"], record["body"])

    def test_exc_info(self, configure_json: Configure) -> None:
        """logger.exception(...) gives exception.type/message/stacktrace."""
        read = configure_json()
        try:
            raise RuntimeError("cuda oom")  # noqa: TRY301
        except RuntimeError:
            logging.getLogger("vllm.worker").exception("step failed")
        (record,) = read()
        assert ("RuntimeError", "cuda oom", "ERROR") == (
            record["exception.type"],
            record["exception.message"],
            record["severity_text"],
        )

    def test_root_level_follows_settings(self, configure_json: Configure) -> None:
        """The root logger level is the obs level: DEBUG records pass only with DEBUG."""
        read = configure_json(level="INFO")
        logging.getLogger("vllm").debug("hidden")
        hidden = read()
        obs.configure(format="json", sdk_disabled=True, level="DEBUG")
        logging.getLogger("vllm").debug("shown")
        assert ([], ["shown"]) == (hidden, [r["event"] for r in read()])

    def test_reconfigure_keeps_one_handler(self, configure_json: Configure) -> None:
        """configure() twice leaves exactly one ObsHandler: each record is written once."""
        read = configure_json()
        obs.configure(format="json", sdk_disabled=True)
        logging.getLogger("vllm").warning("once_only")
        assert (1, ["once_only"]) == (len(_obs_handlers()), [r["event"] for r in read()])

    def test_bridge_off(self, configure_json: Configure) -> None:
        """stdlib_bridge=False installs no handler."""
        configure_json(stdlib_bridge=False)
        assert [] == _obs_handlers()

    def test_reset_removes_the_handler(self, configure_json: Configure) -> None:
        """obs.testing.reset() takes the handler off the root logger."""
        configure_json()
        obs.testing.reset()
        assert [] == _obs_handlers()

    def test_stdlib_scope_extra(
        self, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """A foreign record with extra={"scope": "global"} is hidden on rank 1."""
        _set_rank(monkeypatch, 1, 1)
        read = configure_json()
        logging.getLogger("vllm").warning("rank0_only", extra={"scope": "global"})
        logging.getLogger("vllm").warning("everyone")
        assert ["everyone"] == [r["event"] for r in read()]

    def test_repeats_of_foreign_once_records(self, configure_json: Configure) -> None:
        """extra={"once": True} on a plain logger dedups and summarises."""
        read = configure_json()
        for _ in range(3):
            logging.getLogger("vllm").warning("noisy", extra={"once": True})
        obs.flush()
        assert [("noisy", None), ("log_repeats_suppressed", 2)] == [
            (r["event"], r.get("suppressed_count")) for r in read()
        ]


class TestObsLevel:
    """OBS_LEVEL is the lowest level logged, for bridged records too: a library's own
    logger level (vLLM sets ``vllm`` to INFO) does not lower it. It did (found by an
    adversarial review on 81cd8e4: vLLM INFO written and exported under OBS_LEVEL=WARNING)."""

    @pytest.mark.parametrize("own", [logging.DEBUG, logging.INFO, logging.NOTSET])
    def test_records_below_obs_level_are_dropped(self, own: int, configure_json: Configure) -> None:
        read = configure_json(level="WARNING")
        logger = logging.getLogger("vllm.levelled")
        logger.setLevel(own)
        try:
            for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR):
                logger.log(level, "at %s", logging.getLevelName(level))
        finally:
            logger.setLevel(logging.NOTSET)
        assert ["at WARNING", "at ERROR"] == [r["body"] for r in read()]

    def test_a_stage_still_raises_a_bridged_record(self, configure_json: Configure) -> None:
        """The stage decides the level before the level filter, for bridged records too."""
        read = configure_json(level="WARNING")
        logger = logging.getLogger("vllm.staged")
        logger.setLevel(logging.INFO)  # the record is made (stdlib's own gate)
        try:
            logger.info("gave up", extra={"stage": "terminal_failure"})
            logger.info("not staged")
        finally:
            logger.setLevel(logging.NOTSET)
        assert [("gave up", "ERROR")] == [(r["body"], r["severity_text"]) for r in read()]

    def test_without_obs_level_a_library_level_is_honoured(self, configure_json: Configure) -> None:
        """OBS_LEVEL unset: a logger the application set to DEBUG logs DEBUG, as stdlib."""
        read = configure_json()
        logger = logging.getLogger("mylib.debugged")
        logger.setLevel(logging.DEBUG)
        try:
            logger.debug("fine grained")
        finally:
            logger.setLevel(logging.NOTSET)
        assert ["fine grained"] == [r["body"] for r in read()]


class TestReentrancy:
    def test_record_logged_inside_the_chain_does_not_loop(self, configure_json: Configure) -> None:
        """A processor that logs to stdlib while handling a record: the nested record is
        written after the outer one, one more generation too, and past that counted."""
        read = configure_json()
        runtime = STATE.runtime
        assert runtime is not None

        def chatty(logger: object, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
            logging.getLogger("vllm.inner").warning("from inside the chain")
            return event_dict

        runtime.processors = (chatty, *runtime.processors)
        logging.getLogger("vllm").warning("outer")
        inner = "from inside the chain"
        assert (["outer", inner, inner], 1) == (
            [r["event"] for r in read() if r["event"] != "obs_records_dropped"],
            runtime.reentrant_dropped,
        )

    def test_handler_without_runtime_failure_is_counted(self) -> None:
        """A runtime that raises inside the handler is counted, never raised."""

        class Broken:
            runtime = None

            def ensure(self) -> Any:
                raise RuntimeError("no runtime")

        handler = ObsHandler(Broken())  # type: ignore[arg-type]
        handler.emit(logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None))
        assert 1 == handler.reentrant_drops


class TestNoExport:
    @pytest.mark.parametrize(
        ("name", "no_export"),
        [
            ("opentelemetry.sdk._logs", True),
            ("opentelemetry", True),
            ("grpc._channel", True),
            ("urllib3.connectionpool", True),
            ("vllm.engine", False),
            ("opentelemetry_like", True),
        ],
    )
    def test_sdk_records_are_not_exported(
        self, name: str, no_export: bool, fake_sink: Any, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Records of the OTel SDK's (and its transports') loggers carry _obs_no_export."""
        obs.configure(format="json")
        logging.getLogger(name).warning("export failed")
        (received,) = fake_sink.received
        assert no_export == received.get("_obs_no_export", False)
        assert "export failed" in capsys.readouterr().err

    def test_log_record_export_flag(self, fake_sink: Any) -> None:
        """Runtime.log_record(export=False) marks the record; export=True does not."""
        obs.configure(format="json")
        runtime = STATE.runtime
        assert runtime is not None
        record = logging.LogRecord("any", logging.WARNING, __file__, 1, "m", (), None)
        runtime.log_record(record, export=False)
        runtime.log_record(record, export=True)
        assert [True, False] == [e.get("_obs_no_export", False) for e in fake_sink.received]


class TestInitLogger:
    def test_is_the_real_logger(self) -> None:
        """init_logger returns logging.getLogger(name) itself, the methods on the instance."""
        logger = init_logger("vllm.compat")
        assert (True, True, True) == (
            logger is logging.getLogger("vllm.compat"),
            isinstance(logger, logging.Logger),
            callable(getattr(logging.getLogger("vllm.compat"), "warning_once", None)),
        )

    def test_propagate_and_level_are_the_loggers(self) -> None:
        """Setting propagate or the level on what init_logger returned changes the logger."""
        logger = init_logger("vllm.compat.delegate")
        logger.propagate = False
        logger.setLevel(logging.ERROR)
        real = logging.getLogger("vllm.compat.delegate")
        try:
            assert (False, False, True) == (
                real.propagate,
                real.isEnabledFor(logging.WARNING),
                real.isEnabledFor(logging.ERROR),
            )
        finally:
            real.propagate = True
            real.setLevel(logging.NOTSET)

    def test_pickles_to_the_same_logger(self) -> None:
        """pickle round-trips to the same logger, *_once methods included (as vLLM's)."""
        logger = init_logger("vllm.compat.pickled")
        again = pickle.loads(pickle.dumps(logger))
        assert (True, True) == (again is logger, callable(again.info_once))

    def test_once_through_get_logger(self, configure_json: Configure) -> None:
        """A *_once call through logging.getLogger(name) after init_logger is deduped."""
        read = configure_json()
        init_logger("vllm.compat.get")
        logger: Any = logging.getLogger("vllm.compat.get")
        logger.warning_once("same %s", "x")
        logger.warning_once("same %s", "x")
        assert ["same x"] == [r["body"] for r in read()]

    def test_200_keys_then_first_again(self, configure_json: Configure) -> None:
        """200 distinct keys then the first again: the first is not re-logged (no eviction)."""
        read = configure_json()
        logger = init_logger("vllm.compat")
        for i in range(200):
            logger.warning_once("key %d", i)
        logger.warning_once("key %d", 0)
        records = read()
        assert (200, "key 0", "key 199") == (
            len(records),
            records[0]["body"],
            records[-1]["body"],
        )

    def test_unhashable_arg(self, configure_json: Configure) -> None:
        """warning_once("x %s", [1]) twice: no TypeError, one line."""
        read = configure_json()
        logger = init_logger("vllm.compat")
        logger.warning_once("shape %s", [1, 2])
        logger.warning_once("shape %s", [1, 2])
        logger.warning_once("shape %s", {"dims": [3]})
        assert ["shape [1, 2]", "shape {'dims': [3]}"] == [r["body"] for r in read()]

    def test_distinct_args_are_distinct_keys(self, configure_json: Configure) -> None:
        """1, 1.0 and True as args are different keys (vLLM's lru_cache merges them)."""
        read = configure_json()
        logger = init_logger("vllm.compat")
        for arg in (1, 1.0, True):
            logger.info_once("value %s", arg)
        assert ["value 1", "value 1.0", "value True"] == [r["body"] for r in read()]

    def test_caller_line(self, configure_json: Configure) -> None:
        """The reported line is the caller's."""
        read = configure_json()
        logger = init_logger("vllm.compat")
        frame = inspect.currentframe()
        assert frame is not None
        line = frame.f_lineno + 1
        logger.error_once("failed %s", "x")
        (record,) = read()
        assert (__file__, line) == (record["code.file.path"], record["code.line.number"])

    @pytest.mark.parametrize(
        ("scope", "visible_on"),
        [
            ("global", [0]),
            ("local", [0, 2]),
            ("process", [0, 1, 2, 3]),
            ([1, 2], [1, 2]),
        ],
    )
    def test_scope_honoured(
        self,
        scope: object,
        visible_on: list[int],
        monkeypatch: pytest.MonkeyPatch,
        configure_json: Configure,
    ) -> None:
        """warning_once(..., scope=) logs only on the ranks the scope selects."""
        read = configure_json()
        logger = init_logger("vllm.compat")
        for rank in range(4):
            _set_rank(monkeypatch, rank, rank % 2)
            logger.warning_once("scoped on %d", rank, scope=scope)
        assert visible_on == [r["rank"] for r in read()]

    def test_default_scope_is_local(
        self, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """Without scope= the once methods log on local rank 0 only, as vLLM's."""
        _set_rank(monkeypatch, 3, 1)
        read = configure_json()
        init_logger("vllm.compat").warning_once("local default")
        assert [] == read()

    def test_local_spelled_out_is_the_default_key(self, configure_json: Configure) -> None:
        """scope="local" passed by the caller and the default are one key: one line, and
        every other call counted, whichever the once cache answers."""
        read = configure_json()
        logger = init_logger("vllm.compat.local")
        for i in range(6):
            if i % 2:
                logger.warning_once("same %s", 1, scope="local")
            else:
                logger.warning_once("same %s", 1)
        lines = read()
        obs.flush()
        assert (["same 1"], [5]) == (
            [r["body"] for r in lines],
            [r["suppressed_count"] for r in read()],
        )

    def test_hidden_rank_does_not_use_the_key(
        self, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """A call hidden by scope leaves the key free for a later visible call."""
        _set_rank(monkeypatch, 1, 1)
        read = configure_json()
        logger = init_logger("vllm.compat")
        logger.warning_once("late", scope="global")
        _set_rank(monkeypatch, 0, 0)
        logger.warning_once("late", scope="global")
        assert ["late"] == [r["body"] for r in read()]

    def test_repeats_summarised(self, configure_json: Configure) -> None:
        """Repeats of a once call are counted in the flush summary."""
        read = configure_json()
        logger = init_logger("vllm.compat")
        for _ in range(4):
            logger.warning_once("deprecated %s", "--flag")
        read()
        obs.flush()
        (summary,) = read()
        assert ("log_repeats_suppressed", "deprecated %s", 3, "vllm.compat") == (
            summary["event"],
            summary["original_event"],
            summary["suppressed_count"],
            summary["logger"],
        )

    def test_below_level_is_not_keyed(self, configure_json: Configure) -> None:
        """A once call below the logger's level neither logs nor uses a key."""
        read = configure_json()
        logger = init_logger("vllm.compat.quiet")
        logging.getLogger("vllm.compat.quiet").setLevel(logging.ERROR)
        try:
            logger.warning_once("quiet")
        finally:
            logging.getLogger("vllm.compat.quiet").setLevel(logging.NOTSET)
        logger.warning_once("quiet")
        assert ["quiet"] == [r["body"] for r in read()]

    def test_debug_once(self, configure_json: Configure) -> None:
        """debug_once logs once at DEBUG when the level allows it."""
        read = configure_json(level="DEBUG")
        logger = init_logger("vllm.compat")
        logger.debug_once("d")
        logger.debug_once("d")
        assert [("d", "DEBUG")] == [(r["body"], r["severity_text"]) for r in read()]

    def test_works_before_configure(self, caplog: pytest.LogCaptureFixture) -> None:
        """Without configure() a once call still dedups; the record goes to stdlib handlers."""
        logger = init_logger("vllm.compat.unconfigured")
        logger.warning_once("early")
        logger.warning_once("early")
        assert ["early"] == [r.getMessage() for r in caplog.records]

    def test_vllm_logger_is_a_type_only(self) -> None:
        """VllmLogger is the typing view of a plain Logger; no instance of it is made."""
        assert (True, False) == (
            issubclass(VllmLogger, logging.Logger),
            isinstance(init_logger("x"), VllmLogger),
        )


@pytest.fixture
def vllm_style_logger() -> Iterator[logging.Logger]:
    """The ``vllm`` logger as vLLM's own ``dictConfig`` leaves it: a stdout StreamHandler
    and propagate=False (so a root handler never sees its records)."""
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"vllm": {"format": "%(levelname)s %(name)s %(message)s"}},
            "handlers": {
                "vllm": {
                    "class": "logging.StreamHandler",
                    "formatter": "vllm",
                    "stream": "ext://sys.stdout",
                }
            },
            "loggers": {"vllm": {"handlers": ["vllm"], "level": "DEBUG", "propagate": False}},
        }
    )
    logger = logging.getLogger("vllm")
    try:
        yield logger
    finally:
        obs.testing.reset()  # gives the handler back first, then undo the dictConfig
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)


class TestAdoption:
    def test_vllm_configured_logger_comes_out_through_obs_once(
        self,
        vllm_style_logger: logging.Logger,
        configure_json: Configure,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """vLLM's own handler is taken off: its records come out once, as obs JSON lines."""
        (vllm_handler,) = _consoles(vllm_style_logger)
        read = configure_json()
        logging.getLogger("vllm.engine").warning("kv cache %d%% full", 95)
        (record,) = read()
        assert ("vllm.engine", "kv cache 95% full", "WARNING") == (
            record["logger"],
            record["body"],
            record["severity_text"],
        )
        assert "" == capsys.readouterr().out  # nothing from vLLM's stdout handler
        assert ([], True) == (_consoles(vllm_style_logger), vllm_style_logger.propagate)
        assert "vllm" in STATE.bridge.adopted
        obs.testing.reset()
        assert ([vllm_handler], False) == (
            _consoles(vllm_style_logger),
            vllm_style_logger.propagate,
        )

    def test_reconfigure_adopts_again_and_restores_once(
        self, vllm_style_logger: logging.Logger, configure_json: Configure
    ) -> None:
        """configure() twice: still adopted, and removal gives back exactly one handler."""
        (vllm_handler,) = _consoles(vllm_style_logger)
        read = configure_json()
        obs.configure(format="json", sdk_disabled=True)
        logging.getLogger("vllm").info("second")
        assert ["second"] == [r["event"] for r in read()]
        obs.testing.reset()
        assert [vllm_handler] == _consoles(vllm_style_logger)

    def test_real_torch_loggers(self, configure_json: Configure) -> None:
        """torch's own console loggers (propagate=False) are adopted; its trace handler is not."""
        import torch.distributed  # noqa: F401 - sets up torch's loggers, as in a real job

        trace = logging.getLogger("torch.__trace")
        trace_state = (list(trace.handlers), trace.propagate)
        read = configure_json()
        dist_logger = logging.getLogger("torch.distributed")
        assert dist_logger.propagate
        assert [] == _consoles(dist_logger)
        dist_logger.warning("gloo %s", "timeout")
        (record,) = read()
        assert ("torch.distributed", "gloo timeout", 0) == (
            record["logger"],
            record["body"],
            record["rank"],
        )
        assert trace_state == (list(trace.handlers), trace.propagate)
        obs.testing.reset()
        assert not dist_logger.propagate
        assert 1 == len(_consoles(dist_logger))

    def test_file_and_null_handlers_are_left_alone(
        self, configure_json: Configure, tmp_path: Path
    ) -> None:
        """A logger that writes to a file (not the console) keeps its handlers and flag."""
        logger = logging.getLogger("vllm.audit")
        file_handler = logging.FileHandler(tmp_path / "audit.log")
        logger.addHandler(file_handler)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
        try:
            read = configure_json()
            logger.warning("kept")
            kept = [type(h) for h in logger.handlers if not h.__module__.startswith("_pytest")]
            assert ([logging.FileHandler, logging.NullHandler], False, []) == (
                kept,
                logger.propagate,
                read(),
            )
            assert "kept" in (tmp_path / "audit.log").read_text()
        finally:
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
            file_handler.close()
            logger.propagate = True

    def test_adopt_none(self, vllm_style_logger: logging.Logger, configure_json: Configure) -> None:
        """OBS_ADOPT_LOGGERS=none leaves library loggers as they are."""
        read = configure_json(adopt_loggers="none")
        vllm_style_logger.warning("theirs")
        assert ([], False, 1) == (
            read(),
            vllm_style_logger.propagate,
            len(_consoles(vllm_style_logger)),
        )

    def test_adopt_again_after_a_late_import(self, configure_json: Configure) -> None:
        """A library configured after configure() is adopted by obs.stdlib.adopt_loggers()."""
        read = configure_json(adopt_loggers=["latelib"])
        late = logging.getLogger("latelib.core")
        late.addHandler(logging.StreamHandler())
        late.propagate = False
        try:
            assert ["latelib.core"] == obs.stdlib.adopt_loggers()
            assert [] == obs.stdlib.adopt_loggers()  # already adopted
            late.error("late_record")
            assert ["late_record"] == [r["event"] for r in read()]
        finally:
            obs.testing.reset()
            for handler in list(late.handlers):
                late.removeHandler(handler)
            late.propagate = True

    def test_adopt_without_bridge_is_a_no_op(
        self, vllm_style_logger: logging.Logger, configure_json: Configure
    ) -> None:
        """With the bridge off nothing is adopted (there would be nowhere for records to go)."""
        configure_json(stdlib_bridge=False)
        assert ([], False) == (obs.stdlib.adopt_loggers(["vllm"]), vllm_style_logger.propagate)

    def test_library_reconfigured_after_adoption(
        self, vllm_style_logger: logging.Logger, configure_json: Configure
    ) -> None:
        """A library that puts a console handler back (torch's set_logs does) is adopted
        again, and removal does not then leave two console handlers."""
        read = configure_json()
        fresh = logging.StreamHandler()
        vllm_style_logger.addHandler(fresh)
        vllm_style_logger.propagate = False
        assert "vllm" in obs.stdlib.adopt_loggers(["vllm"])
        vllm_style_logger.warning("readopted")
        assert ["readopted"] == [r["event"] for r in read()]
        assert ([], True) == (_consoles(vllm_style_logger), vllm_style_logger.propagate)
        vllm_style_logger.addHandler(fresh)  # re-configured once more, then obs goes away
        obs.testing.reset()
        assert [fresh] == _consoles(vllm_style_logger)

    def test_given_back_when_the_root_handler_was_removed_by_someone_else(
        self, vllm_style_logger: logging.Logger, configure_json: Configure
    ) -> None:
        """basicConfig(force=True) drops obs' root handler; removal still restores what
        adoption changed, so the library's console output is not lost for good."""
        (vllm_handler,) = _consoles(vllm_style_logger)
        configure_json()
        root = logging.getLogger()
        for handler in _obs_handlers():
            root.removeHandler(handler)
        obs.testing.reset()
        assert ([vllm_handler], False) == (
            _consoles(vllm_style_logger),
            vllm_style_logger.propagate,
        )

    def test_stream_handler_on_a_file_is_not_console(
        self, configure_json: Configure, tmp_path: Path
    ) -> None:
        """A plain StreamHandler writing to an opened file is left alone."""
        logger = logging.getLogger("vllm.filestream")
        stream = open(tmp_path / "out.log", "w", encoding="utf-8")  # noqa: SIM115
        handler = logging.StreamHandler(stream)
        logger.addHandler(handler)
        logger.propagate = False
        try:
            configure_json()
            assert (True, False) == (handler in logger.handlers, logger.propagate)
        finally:
            logger.removeHandler(handler)
            stream.close()
            logger.propagate = True


EXAMPLE_CONFIG = Path(__file__).resolve().parents[1] / "examples" / "vllm-logging.json"


@pytest.fixture
def restore_vllm_logger() -> Iterator[logging.Logger]:
    """Undo what a dictConfig did to the ``vllm`` logger (handlers, propagate, level)."""
    logger = logging.getLogger("vllm")
    try:
        yield logger
    finally:
        obs.testing.reset()
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)


class TestHandler:
    def test_example_config_configures_obs_from_env_and_exports(
        self,
        *,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        json_lines: Callable[[str], list[dict[str, Any]]],
        otlp_receiver: obs.testing.OTLPReceiver,
        restore_vllm_logger: logging.Logger,
        tmp_path: Path,
    ) -> None:
        """examples/vllm-logging.json loads with dictConfig; with nothing configured, the
        first vllm.* record configures obs from the env: one JSON line and one OTLP record."""
        monkeypatch.setenv("OBS_FORMAT", "json")
        monkeypatch.setenv("OBS_SPOOL_DIR", str(tmp_path))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.http_endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_BLRP_SCHEDULE_DELAY", "50")
        logging.config.dictConfig(json.loads(EXAMPLE_CONFIG.read_text()))
        assert STATE.runtime is None  # nothing happens before the first record
        logging.getLogger("vllm.engine").info("loaded %s in %d s", "llama", 3)
        assert obs.flush(timeout=10.0)
        (line,) = json_lines(capsys.readouterr().err)
        assert ("loaded llama in 3 s", "vllm.engine", 0) == (
            line["body"],
            line["logger"],
            line["rank"],
        )
        (record,) = otlp_receiver.wait_for(
            predicate=lambda r: r["attributes"].get("logger") == "vllm.engine"
        )
        assert ("loaded llama in 3 s", 9) == (record["body"], record["severity_number"])

    def test_once_with_the_root_bridge(
        self, configure_json: Configure, restore_vllm_logger: logging.Logger
    ) -> None:
        """A Handler on a propagating logger plus obs' root handler: each record once."""
        read = configure_json()
        logging.config.dictConfig(
            {
                "version": 1,
                "disable_existing_loggers": False,
                "handlers": {"obs": {"class": "obs.stdlib.Handler", "stream": "ext://sys.stdout"}},
                "loggers": {"vllm": {"handlers": ["obs"], "level": "INFO", "propagate": True}},
            }
        )
        logging.getLogger("vllm.x").warning("twice?")
        assert ["twice?"] == [r["body"] for r in read()]

    def test_bad_env_never_raises(
        self,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        restore_vllm_logger: logging.Logger,
    ) -> None:
        """A bad OBS_ variable on first use: the record is still written, with the
        problem reported, and nothing raises."""
        monkeypatch.setenv("OBS_LEVEL", "LOUD")
        monkeypatch.setenv("OBS_FORMAT", "json")
        restore_vllm_logger.addHandler(obs.stdlib.Handler())
        restore_vllm_logger.propagate = False
        restore_vllm_logger.warning("still here")
        err = capsys.readouterr().err
        assert (True, True) == ("still here" in err, "OBS_LEVEL" in err)

    @pytest.mark.parametrize(
        ("variable", "value"),
        [("OBS_LEVEL", "LOUD"), ("OBS_DEDUP_CAPACITY", "zebra"), ("OBS_FILE", "/dev/null/f")],
    )
    def test_a_bad_variable_leaves_export_on(
        self,
        *,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        otlp_receiver: obs.testing.OTLPReceiver,
        restore_vllm_logger: logging.Logger,
        tmp_path: Path,
        variable: str,
        value: str,
    ) -> None:
        """Configured from the env on first use, one bad variable costs only itself: the
        terminal failure still reaches the collector, and the problem is reported there and
        on the console (it turned OTLP export off entirely: 0 records)."""
        monkeypatch.setenv("OBS_FORMAT", "json")
        monkeypatch.setenv("OBS_SPOOL_DIR", str(tmp_path))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.http_endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv(variable, value)
        restore_vllm_logger.addHandler(obs.stdlib.Handler())
        restore_vllm_logger.propagate = False
        restore_vllm_logger.error("workspace_terminal_failure", extra={"stage": "terminal_failure"})
        assert obs.flush(timeout=10.0)
        (alert,) = otlp_receiver.wait_for(
            predicate=lambda r: r["attributes"].get("event") == "workspace_terminal_failure"
        )
        assert "ERROR" == alert["severity_text"]
        (report,) = otlp_receiver.wait_for(
            predicate=lambda r: r["attributes"].get("variable") == variable
        )
        assert "ConfigError" == report["attributes"]["error_type"]
        assert variable in capsys.readouterr().err


#: Variables that shape obs but not whether or where it exports.
_NOT_EXPORT = [
    "OBS_ADOPT_LOGGERS", "OBS_CONSOLE_TRACEBACKS", "OBS_DEDUP_CAPACITY", "OBS_FILE",
    "OBS_EXPORT_ALL_RANKS_LEVEL", "OBS_FILE_REOPEN_ON_SIGHUP", "OBS_HANDLE_SIGTERM",
    "OBS_LEVEL", "OBS_REPEAT_SUMMARY_SECONDS", "OBS_SHUTDOWN_TIMEOUT", "OBS_SPOOL_MAX_BYTES",
    "OTEL_BLRP_EXPORT_TIMEOUT", "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", "OTEL_BLRP_MAX_QUEUE_SIZE",
    "OTEL_BLRP_SCHEDULE_DELAY", "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME",
]  # fmt: skip


@given(
    bad=st.dictionaries(
        st.sampled_from(_NOT_EXPORT),
        st.sampled_from(["zebra", "-1", "1e999", "", "\x01", "nan", "/dev/null/f", "a=b=c,=,"]),
        min_size=1,
        max_size=4,
    )
)
@settings(max_examples=20)  # each example builds and shuts down an OTLP sink
def test_bad_variables_cost_only_themselves(bad: dict[str, str]) -> None:
    """Configured from the env on first use, any mix of bad variables leaves OTLP export
    on, each reported (before: any one of them fell back to a console-only runtime)."""
    errors: list[obs.ConfigError] = []
    obs.settings.load_settings({}, env={**bad, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:1"},
                               errors=errors)  # fmt: skip
    assume(bad.get("OBS_FILE", "/dev/null/f") == "/dev/null/f")  # else a file made here
    bad_file = "OBS_FILE" in bad
    assume(errors or bad_file)
    env = {**bad, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OBS_SPOOL_DIR": ""}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    events: list[dict[str, Any]] = []
    STATE.sinks.append(events)
    try:
        runtime = STATE.configure_from_env()
        assert runtime.sink is not None  # OTLP export on
    finally:
        STATE.sinks.remove(events)
        obs.testing.reset()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    named = {e.get("variable") for e in events if e["event"] == "obs_internal_error"}
    assert {error.variable for error in errors} <= named
    assert not bad_file or "OBS_FILE" in named


class TestOnceLevelGate:
    """The drop-in's ``*_once`` checks the level from ``isEnabledFor``'s own cache (a frame
    less per repeat). Every way the stdlib turns a logger off must still be obeyed, before
    the first call and after it (the cache was filled by then)."""

    @pytest.mark.parametrize("how", ["setLevel", "disabled", "logging.disable", "root level"])
    def test_off_is_off_after_the_cache_is_warm(self, configure_json: Configure, how: str) -> None:
        read = configure_json()
        logger = init_logger(f"vllm.gate.{how}")
        logger.warning_once("first %s", 1)  # admitted, and the level cache filled
        logger.warning_once("first %s", 1)  # a repeat: counted
        root = logging.getLogger()
        saved_root = root.level
        try:
            if how == "setLevel":
                logger.setLevel(logging.ERROR)
            elif how == "disabled":
                logger.disabled = True
            elif how == "logging.disable":
                logging.disable(logging.WARNING)
            else:
                root.setLevel(logging.ERROR)
            for _ in range(5):
                logger.warning_once("first %s", 1)  # off: neither written nor counted
                logger.warning_once("second %s", 2)
        finally:
            logger.setLevel(logging.NOTSET)
            logger.disabled = False
            logging.disable(logging.NOTSET)
            root.setLevel(saved_root)
        logger.warning_once("second %s", 2)  # on again: written once
        obs.flush()
        records = read()
        assert ["first 1", "second 2"] == [
            r["body"] for r in records if r["event"] != "log_repeats_suppressed"
        ]
        assert [1] == [
            r["suppressed_count"] for r in records if r["event"] == "log_repeats_suppressed"
        ]


class TestDetachedLoggers:
    @pytest.fixture
    def detached(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
        """A module of the tree ``detlib`` whose logger is built by calling the class (as
        flashinfer's JIT logger is): outside logging's tree, with its own console handler."""
        logger = logging.Logger("detlib.jit")  # noqa: LOG001 - built outside the tree, on purpose
        logger.addHandler(logging.StreamHandler(sys.stdout))
        module = types.ModuleType("detlib.jit.core")
        module.logger = logger  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "detlib.jit.core", module)
        yield logger
        obs.testing.reset()

    def test_found_adopted_once_and_given_back(
        self,
        detached: logging.Logger,
        configure_json: Configure,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """adopt_loggers finds a module-level logger outside logging's tree: its record comes
        out once, as obs JSON; adopting again changes nothing; removal gives its console
        handler and its missing parent back."""
        (console,) = _consoles(detached)
        read = configure_json(adopt_loggers=["detlib"])
        assert [] == obs.stdlib.adopt_loggers()  # configure() already adopted it
        detached.warning("jit %s", "built")
        assert (["jit built"], "", logging.getLogger(), []) == (
            [r["body"] for r in read()],
            capsys.readouterr().out,
            detached.parent,
            _consoles(detached),
        )
        obs.testing.reset()
        assert ([console], None, True) == (_consoles(detached), detached.parent, detached.propagate)

    def test_one_without_handlers_is_adopted_too(
        self,
        monkeypatch: pytest.MonkeyPatch,
        configure_json: Configure,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """A detached logger with no handler at all sent its WARNINGs to logging's last
        resort (plain text on stderr, never exported): it is given its tree parent too."""
        bare = logging.Logger("detlib.bare")  # noqa: LOG001 - built outside the tree, on purpose
        module = types.ModuleType("detlib.bare.core")
        module.logger = bare  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "detlib.bare.core", module)
        try:
            read = configure_json(adopt_loggers=["detlib"])
            bare.warning("bare %s", "logger")
            assert (["bare logger"], logging.getLogger()) == (
                [r["body"] for r in read()],
                bare.parent,
            )
        finally:
            obs.testing.reset()
        assert (None, "") == (bare.parent, capsys.readouterr().out)

    def test_parent_is_the_nearest_existing_ancestor(
        self, detached: logging.Logger, configure_json: Configure
    ) -> None:
        """The adopted logger's parent is what logging would give it: an existing ancestor
        (whose level then applies), not a logger obs creates."""
        ancestor = logging.getLogger("detlib")
        configure_json(adopt_loggers=["detlib"])
        assert (ancestor, False) == (
            detached.parent,
            "detlib.jit" in logging.Logger.manager.loggerDict,
        )

    def test_other_trees_are_not_searched(
        self, detached: logging.Logger, configure_json: Configure
    ) -> None:
        """Only modules of the adopted trees are searched: another tree's logger stays."""
        configure_json(adopt_loggers=["vllm"])
        assert (None, 1) == (detached.parent, len(_consoles(detached)))
