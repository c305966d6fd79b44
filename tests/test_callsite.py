"""Tests for obs.callsite: every API path reports the caller's own file, line and function."""

from __future__ import annotations

import gc
import inspect
import logging
from collections.abc import Callable
from typing import Any

import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import comm.events as comm_events
import obs
import obs.stdlib
from obs.callsite import AddCallsite

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]


def _next_line() -> int:
    """The line number after the caller's current line."""
    frame = inspect.currentframe()
    assert frame is not None
    assert frame.f_back is not None
    return frame.f_back.f_lineno + 1


def _where(record: dict[str, Any]) -> tuple[str, int, str]:
    return record["code.file.path"], record["code.line.number"], record["code.function.name"]


class TestApiPaths:
    def test_info(self, configure_json: Configure) -> None:
        """log.info reports the test's line."""
        read = configure_json()
        line = _next_line()
        obs.get_logger("t").info("here")
        assert (__file__, line, "TestApiPaths.test_info") == _where(read()[0])

    def test_warning_once(self, configure_json: Configure) -> None:
        """log.warning_once reports the test's line."""
        read = configure_json()
        log = obs.get_logger("t")
        line = _next_line()
        log.warning_once("here_once")
        assert (__file__, line, "TestApiPaths.test_warning_once") == _where(read()[0])

    def test_bound_error(self, configure_json: Configure) -> None:
        """log.bind(...).error reports the test's line."""
        read = configure_json()
        line = _next_line()
        obs.get_logger("t").bind(request="r1").error("bound")
        assert (__file__, line, "TestApiPaths.test_bound_error") == _where(read()[0])

    def test_exception(self, configure_json: Configure) -> None:
        """log.exception reports the line of the log call, not the raise."""
        read = configure_json()
        try:
            raise RuntimeError("x")  # noqa: TRY301
        except RuntimeError:
            line = _next_line()
            obs.get_logger("t").exception("failed")
        assert (__file__, line, "TestApiPaths.test_exception") == _where(read()[0])

    def test_log_with_numeric_level(self, configure_json: Configure) -> None:
        """log.log(level, ...) with once=True reports the test's line."""
        read = configure_json()
        line = _next_line()
        obs.get_logger("t").log(logging.WARNING, "numeric", once=True)
        assert (__file__, line) == _where(read()[0])[:2]

    def test_log_with_numeric_level_plain(self, configure_json: Configure) -> None:
        """log.log(level, ...) without once reports the test's line."""
        read = configure_json()
        line = _next_line()
        obs.get_logger("t").log(logging.WARNING, "numeric_plain")
        assert (__file__, line) == _where(read()[0])[:2]

    def test_typed_event_emit(self, configure_json: Configure) -> None:
        """obs.events.emit (two obs frames more than log.x) reports the test's line."""
        from obs import events

        read = configure_json()
        line = _next_line()
        events.emit(comm_events.WorkspaceFallback("fi_ar", "mnnvl", "trtllm", "no_multicast"))
        assert (__file__, line) == _where(read()[0])[:2]

    def test_wrapper_module_past_the_depth_jump(self, configure_json: Configure) -> None:
        """A helper that opts out is skipped even though the walk starts at the logger's
        caller: the jump lands on the helper and the walk goes on from there."""
        read = configure_json()
        namespace: dict[str, Any] = {"__name__": "myapp.helpers", "__obs_callsite_skip__": True}
        namespace["log"] = obs.get_logger("t")
        exec("def helper():\n    log.warning_once('via_helper')\n", namespace)
        line = _next_line()
        namespace["helper"]()
        assert (__file__, line) == _where(read()[0])[:2]

    def test_stdlib_init_logger_warning_once(self, configure_json: Configure) -> None:
        """obs.stdlib.init_logger(...).warning_once reports the test's line."""
        read = configure_json()
        logger = obs.stdlib.init_logger("vllm.callsite")
        line = _next_line()
        logger.warning_once("compat %s", "x")
        expected = (__file__, line, "test_stdlib_init_logger_warning_once")
        assert expected == _where(read()[0])

    def test_stdlib_init_logger_plain_method(self, configure_json: Configure) -> None:
        """A plain method of the vLLM-style logger (LoggerAdapter) reports the test's line."""
        read = configure_json()
        logger = obs.stdlib.init_logger("vllm.callsite")
        line = _next_line()
        logger.info("plain %d", 1)
        assert (__file__, line) == _where(read()[0])[:2]

    def test_plain_stdlib_logger(self, configure_json: Configure) -> None:
        """A foreign logging.getLogger("vllm.x").warning keeps the line logging found."""
        read = configure_json()
        line = _next_line()
        logging.getLogger("vllm.x").warning("foreign %s", "record")
        expected = (__file__, line, "test_plain_stdlib_logger")
        assert expected == _where(read()[0])

    def test_caller_location_fields_are_kept_aside(self, configure_json: Configure) -> None:
        """code.* are the chain's: a caller's own are kept as user.code.*, never forged."""
        read = configure_json()
        obs.get_logger("t").info("located", **{"code.file.path": "x.py", "code.line.number": 7})
        record = read()[0]
        assert ("x.py", 7, __file__) == (
            record["user.code.file.path"],
            record["user.code.line.number"],
            record["code.file.path"],
        )


class TestAddCallsiteAlone:
    def _capture_chain(self, processor: AddCallsite) -> tuple[Any, list[dict[str, Any]]]:
        seen: list[dict[str, Any]] = []

        def keep(_: object, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
            seen.append(dict(event_dict))
            raise structlog.DropEvent

        logger = structlog.wrap_logger(
            structlog.PrintLogger(), processors=[processor, keep], context_class=dict
        )
        return logger, seen

    def test_in_a_plain_structlog_chain(self) -> None:
        """In a user's own structlog chain the processor skips structlog's frames."""
        logger, seen = self._capture_chain(AddCallsite())
        line = _next_line()
        logger.info("alone")
        assert (__file__, line, "TestAddCallsiteAlone.test_in_a_plain_structlog_chain") == _where(
            seen[0]
        )

    def test_additional_ignores(self) -> None:
        """A helper module named in additional_ignores is skipped to reach its caller."""
        logger, seen = self._capture_chain(AddCallsite(additional_ignores=["myapp.logutil"]))
        namespace: dict[str, Any] = {"__name__": "myapp.logutil", "logger": logger}
        exec("def helper():\n    logger.info('via_helper')\n", namespace)
        line = _next_line()
        namespace["helper"]()
        assert (__file__, line) == _where(seen[0])[:2]

    def test_helper_not_ignored_is_reported(self) -> None:
        """Without the ignore, the helper's own frame is the caller."""
        logger, seen = self._capture_chain(AddCallsite())
        namespace: dict[str, Any] = {"__name__": "myapp.logutil", "logger": logger}
        exec("def helper():\n    logger.info('via_helper')\n", namespace)
        namespace["helper"]()
        assert ("<string>", 2, "helper") == _where(seen[0])

    def test_module_opt_out(self) -> None:
        """A module that sets ``__obs_callsite_skip__ = True`` is skipped like obs itself."""
        logger, seen = self._capture_chain(AddCallsite())
        namespace: dict[str, Any] = {
            "__name__": "myapp.getters",
            "__obs_callsite_skip__": True,
            "logger": logger,
        }
        exec("def helper():\n    logger.info('via_getter')\n", namespace)
        line = _next_line()
        namespace["helper"]()
        assert (__file__, line) == _where(seen[0])[:2]

    def test_depth_past_the_stack_walks_from_the_start(self) -> None:
        """A depth deeper than the stack (a wrong hint) falls back to the plain walk."""
        where = AddCallsite().locate(10_000)
        assert where is not None
        assert (
            __file__,
            "TestAddCallsiteAlone.test_depth_past_the_stack_walks_from_the_start",
        ) == (where[0], where[2])

    def test_prefix_match_is_by_package(self) -> None:
        """Only ``obs`` and ``obs.*`` are skipped: a module named ``obsidian`` is not."""
        logger, seen = self._capture_chain(AddCallsite())
        namespace: dict[str, Any] = {"__name__": "obsidian", "logger": logger}
        exec("def helper():\n    logger.info('x')\n", namespace)
        namespace["helper"]()
        assert "helper" == seen[0]["code.function.name"]


class TestCodeIdentity:
    """The skip cache is keyed by code identity (a code object's own hash walks all its
    bytecode: microseconds per line from a large function). Code objects come and go; a
    new one must never inherit the decision cached for a dead one whose id it reuses."""

    @settings(max_examples=25, deadline=None)
    @given(st.lists(st.booleans(), min_size=2, max_size=40))
    def test_short_lived_helpers_never_inherit_a_decision(self, kinds: list[bool]) -> None:
        """Helpers compiled one after another (ids get reused), some in skipped modules and
        some not: every line names the right function."""
        seen: list[dict[str, Any]] = []
        chain = AddCallsite()

        def capture(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
            seen.append(event_dict)
            raise structlog.DropEvent

        logger = structlog.wrap_logger(None, processors=[chain, capture])
        expected = []
        for skipped in kinds:
            name = "myapp.logutil" if skipped else "myapp.views"
            namespace: dict[str, Any] = {"__name__": name, "log": logger}
            namespace["__obs_callsite_skip__"] = skipped
            exec("def fn():\n    log.info('e')\n", namespace)
            namespace["fn"]()
            expected.append(
                "TestCodeIdentity.test_short_lived_helpers_never_inherit_a_decision"
                if skipped
                else "fn"
            )
            namespace.clear()  # the function and its code are freed: their ids are free again
            gc.collect(0)  # the youngest generation holds them: a full pass per helper cost 20 s
        assert expected == [r["code.function.name"] for r in seen]

    def test_a_large_callers_code_is_not_hashed(self) -> None:
        """The cache holds ids, not code objects as keys (their hash is O(size))."""
        chain = AddCallsite()
        namespace: dict[str, Any] = {"__name__": "myapp.big", "chain": chain}
        body = "".join(f"    x{i} = ({i}, 's{i}')\n" for i in range(500))
        exec(f"def big():\n{body}    return chain(None, 'info', {{}})\n", namespace)
        record = namespace["big"]()
        assert "big" == record["code.function.name"]
        assert all(type(key) is int for key in chain._skip)

    @settings(
        max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(st.lists(st.integers(0, 59), min_size=1, max_size=30))
    def test_each_call_site_in_a_long_function_names_its_own_line(
        self, configure_json: Configure, calls: list[int]
    ) -> None:
        """Locations are cached per code object and instruction: sixty call sites in one
        long function, hit in any order through the real configured chain (fused and
        not), each report their own line."""
        read = configure_json()
        log = obs.get_logger("t")
        namespace: dict[str, Any] = {"__name__": "myapp.long", "log": log, "bound": log.bind(k=1)}
        body = "".join(  # odd sites through a bound logger: the chain, not the fused path
            f"    if which == {i}:\n        {who}.info('site', i={i}, n=n)\n"
            for i, who in ((i, "bound" if i % 2 else "log") for i in range(60))
        )
        exec(compile(f"def long(which, n):\n{body}", "long_app.py", "exec"), namespace)
        read()
        for n, which in enumerate(calls):
            namespace["long"](which, n)
        records = [r for r in read() if r["event"] == "site"]
        assert [(which, 3 + 2 * which) for which in calls] == [
            (r["i"], r["code.line.number"]) for r in records
        ]
        assert all(
            ("long_app.py", "long") == (r["code.file.path"], r["code.function.name"])
            for r in records
        )
