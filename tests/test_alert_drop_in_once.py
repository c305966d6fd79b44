"""The alert's event through the vLLM drop-in ``*_once`` (``obs.stdlib.init_logger`` and
vLLM's own ``init_logger`` once the plugin took its method table): on a rank its scope
leaves out, at any ``*_once`` level, it is written at ERROR with its stage and rank, as
``log.debug_once(...)`` of it is, and its repeats are summarised at ERROR under a key
holding the rank."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.stdlib
import obs.testing
from obs import vllm_plugin
from obs._config import STATE

RANKS = {"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"}
ALERT_NAMES = ["workspace_terminal_failure", "kv_connector_terminal_failure", "terminal_failure"]
METHODS = ["debug_once", "info_once", "warning_once", "error_once"]
SCOPES: list[Any] = ["local", "global", "process", (0,), [0, 1], None]


def _obs_logger(name: str) -> logging.Logger:
    return obs.stdlib.init_logger(name)


def _vllm_logger(name: str) -> logging.Logger:
    import vllm.logger  # the real one, taken by the plugin's table

    assert vllm_plugin.count_vllm_repeats(vllm.logger)
    return vllm.logger.init_logger(name)  # type: ignore[no-any-return]


MAKERS: dict[str, Callable[[str], logging.Logger]] = {"obs": _obs_logger, "vllm": _vllm_logger}


@pytest.fixture(autouse=True)
def _vllm_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """vLLM's own ``*_once`` table entries are put back afterwards."""
    import vllm.logger

    table = vllm.logger._METHODS_TO_PATCH  # type: ignore[attr-defined]
    for name, method in list(table.items()):
        monkeypatch.setitem(table, name, method)
    yield
    obs.testing.reset()


@contextlib.contextmanager
def _json_file(env: dict[str, str], level: str = "INFO") -> Iterator[Callable[[], list[Any]]]:
    """obs writing JSON lines to a file with ``env`` set (both undone after); yields what
    reads the lines written so far."""
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        path = os.path.join(tmp, "f.jsonl")
        for name, value in env.items():
            mp.setenv(name, value)

        def read() -> list[Any]:
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                return [json.loads(x) for x in fh.read().splitlines()]

        try:
            obs.configure(format="json", sdk_disabled=True, file=path, stream="none", level=level)
            yield read
        finally:
            obs.testing.reset()


def _on_rank_3(call: Callable[[], None], level: str = "INFO") -> list[dict[str, Any]]:
    """The JSON lines ``call()`` writes to OBS_FILE on rank 3 (local rank 3) of 8."""
    with _json_file(RANKS, level) as read:
        call()
        return read()


@given(
    maker=st.sampled_from(sorted(MAKERS)),
    method=st.sampled_from(METHODS),
    scope=st.sampled_from(range(len(SCOPES))),
    name=st.sampled_from(ALERT_NAMES),
    level=st.sampled_from(["DEBUG", "INFO", "CRITICAL"]),
    repeats=st.integers(1, 4),
    extra=st.sampled_from([{}, {"extra": {"chain": "c"}}, {"exc_info": ValueError("e")}]),
)
@settings(max_examples=40, deadline=None)
def test_drop_in_once_of_the_alerts_event_on_another_rank(  # noqa: PLR0917
    maker: str, method: str, scope: int, name: str, level: str, repeats: int, extra: dict[str, Any]
) -> None:
    """``init_logger(...).info_once("workspace_terminal_failure")`` on rank 3: written
    once at ERROR with its stage and rank 3, whatever the scope, the ``*_once`` level or
    OBS_LEVEL; the repeats counted in an ERROR summary keyed with the rank. Failed before
    the fix: debug_once and info_once were dropped by their default scope ("local") or
    "global" on rank 3, and the summary was at the call's level, its key without the rank."""
    kw = {**extra} if SCOPES[scope] is None else {**extra, "scope": SCOPES[scope]}

    def call() -> None:
        lib = MAKERS[maker](f"vllm.alert_once.{maker}")
        lib.setLevel(logging.DEBUG)
        for _ in range(repeats):
            getattr(lib, method)(name, **kw)

    lines = _on_rank_3(call, level)
    alerts = [x for x in lines if x["event"] == name]
    assert [("ERROR", "terminal_failure", 3)] == [
        (x["severity_text"], x["stage"], x["rank"]) for x in alerts
    ], lines
    summaries = [x for x in lines if x["event"] == "log_repeats_suppressed"]
    if repeats == 1:
        assert summaries == []
    else:
        assert [("ERROR", repeats - 1)] == [
            (x["severity_text"], x["suppressed_count"]) for x in summaries
        ], summaries
        assert "rank=3" in summaries[0]["dedup_key"]


def test_each_rank_of_a_forked_child_writes_its_own() -> None:
    """Ranks are in the drop-in alert's key: the same call on rank 3 after rank 0 made it
    (a forked child that took another rank) is written again, not counted as a repeat."""
    ranks = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"}
    with _json_file(ranks) as read:
        lib = obs.stdlib.init_logger("vllm.alert_once.ranks")
        lib.error_once("workspace_terminal_failure")
        os.environ.update(RANKS)  # the same names: restored with the others
        assert STATE.runtime is not None
        STATE.runtime.resolver.refresh()
        lib.error_once("workspace_terminal_failure")
        lines = read()
    assert [0, 3] == [x["rank"] for x in lines if x["event"] == "workspace_terminal_failure"]
