"""vLLM's own ``*_once`` and obs' ``init_logger`` behave the same where vLLM is right.

The same cases run against ``vllm.logger.init_logger`` (the real vLLM 0.33 package) and
``obs.stdlib.init_logger``: the key is ``(logger, msg, *args)``, each level keeps its own
keys, the record carries the caller's line, and ``scope="process"`` logs on every rank.
Where they differ on purpose (see docs/VLLM.md) is not tested here.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import obs.stdlib

pytestmark = pytest.mark.vllm

_names = itertools.count()


class _Keep(logging.Handler):
    """Collects the records that reach it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _vllm_init_logger() -> Callable[[str], Any]:
    return importlib.import_module("vllm.logger").init_logger  # type: ignore[no-any-return]


IMPLEMENTATIONS: dict[str, Callable[[], Callable[[str], Any]]] = {
    "vllm": _vllm_init_logger,
    "obs": lambda: obs.stdlib.init_logger,
}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def make(request: pytest.FixtureRequest) -> Iterator[Callable[[], tuple[Any, _Keep]]]:
    """``make()`` -> (a fresh logger from the implementation, its record keeper)."""
    init_logger = IMPLEMENTATIONS[request.param]()
    made: list[tuple[logging.Logger, _Keep]] = []

    def factory() -> tuple[Any, _Keep]:
        logger = init_logger(f"vllm.parity.{request.param}.{next(_names)}")
        keep = _Keep()
        logger.addHandler(keep)
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        made.append((logger, keep))
        return logger, keep

    yield factory
    for logger, keep in made:
        logger.removeHandler(keep)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)


def _messages(keep: _Keep) -> list[str]:
    return [r.getMessage() for r in keep.records]


def test_same_message_and_args_once(make: Callable[[], tuple[Any, _Keep]]) -> None:
    """Same (msg, *args): logged once; other args are another key."""
    logger, keep = make()
    for arg in ("a", "a", "b", "a"):
        logger.warning_once("flag %s deprecated", arg)
    assert ["flag a deprecated", "flag b deprecated"] == _messages(keep)


def test_loggers_and_levels_keep_their_own_keys(make: Callable[[], tuple[Any, _Keep]]) -> None:
    """The same message on another logger or at another level is logged again."""
    first, keep1 = make()
    second, keep2 = make()
    first.info_once("x")
    first.error_once("x")
    second.info_once("x")
    first.info_once("x")
    assert (["x", "x"], ["x"], [20, 40]) == (
        _messages(keep1),
        _messages(keep2),
        [r.levelno for r in keep1.records],
    )


def test_caller_line(make: Callable[[], tuple[Any, _Keep]]) -> None:
    """The record names the caller's file, function and line."""
    logger, keep = make()
    frame = inspect.currentframe()
    assert frame is not None
    line = frame.f_lineno + 1
    logger.error_once("failed %s", "x")
    (record,) = keep.records
    assert (__file__, "test_caller_line", line) == (record.pathname, record.funcName, record.lineno)


def test_process_scope_logs_here(
    make: Callable[[], tuple[Any, _Keep]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """scope="process" logs on a rank that is not rank 0 (no rank check at all)."""
    for name, value in {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}.items():
        monkeypatch.setenv(name, value)
    logger, keep = make()
    logger.warning_once("every rank", scope="process")
    assert ["every rank"] == _messages(keep)
