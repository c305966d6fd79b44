"""Tests for comm.flashinfer_allreduce with fake factories (the real one: tests/integration)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from comm import flashinfer_allreduce as fa
from comm.flashinfer_allreduce import (
    BACKEND_VARIABLES,
    CommSettings,
    FiArWorkspaces,
    WorkspaceUnavailableError,
    classify_workspace_error,
    load_comm_settings,
)
from obs.errors import ConfigError

# The real messages (REFERENCE.md, flashinfer-python 0.7.4 / torch 2.13 CPU).
MULTICAST = "[SymmDeviceMemory] Device does not support multicasting."
NO_CUDA = "Torch not compiled with CUDA enabled"
DIST = (
    "torch.distributed is not initialized. Please call torch.distributed.init_process_group() "
    "first."
)
ARGS = (4, 0, 2048, 4096, "bfloat16", "the-group")
ROOT = Path(__file__).resolve().parents[1]


class FakeWorkspace:
    """Stands in for flashinfer's AllReduceFusionWorkspace: a backend and destroy()."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.destroyed = 0

    def destroy(self) -> None:
        self.destroyed += 1


class FakeFactory:
    """Implements WorkspaceFactory: per backend, an exception (or a list of outcomes)."""

    def __init__(self, outcomes: dict[str, Any] | None = None, delay: float = 0.0) -> None:
        self.outcomes = dict(outcomes or {})
        self.delay = delay
        self.calls: list[dict[str, Any]] = []
        self.created: list[FakeWorkspace] = []
        self._lock = threading.Lock()

    def create(
        self,
        *,
        backend: str,
        world_size: int,
        rank: int,
        max_token_num: int,
        hidden_dim: int,
        dtype: Any,
        group: Any,
    ) -> FakeWorkspace:
        with self._lock:
            self.calls.append(
                {
                    "backend": backend,
                    "world_size": world_size,
                    "rank": rank,
                    "max_token_num": max_token_num,
                    "hidden_dim": hidden_dim,
                    "dtype": dtype,
                    "group": group,
                }
            )
            outcome = self.outcomes.get(backend)
            if isinstance(outcome, list):
                outcome = outcome.pop(0) if outcome else None
        if self.delay:
            time.sleep(self.delay)
        if outcome is not None:
            raise outcome
        ws = FakeWorkspace(backend)
        with self._lock:
            self.created.append(ws)
        return ws

    @property
    def backends(self) -> list[str]:
        return [c["backend"] for c in self.calls]


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No backend variable leaks in; the default manager is fresh for every test."""
    for name in BACKEND_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    fa.reset_default_manager()
    yield
    fa.reset_default_manager()


@pytest.fixture
def captured() -> Iterator[list[dict[str, Any]]]:
    """obs at DEBUG, no export, capturing every event after the chain."""
    obs.configure(level="DEBUG", format="json", sdk_disabled=True, repeat_summary_seconds=0)
    with obs.testing.capture_events() as evs:
        yield evs


def trail(evs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(event, severity_text, chain, backend-ish) per workspace event."""
    out = []
    for e in evs:
        if not e["event"].startswith("workspace_"):
            continue
        where = e.get("backend") or (e.get("from_backend"), e.get("to_backend"))
        out.append((e["event"], e["severity_text"], e["chain"], where))
    return out


def pick(event: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: event[k] for k in keys}


def manager(
    outcomes: dict[str, Any] | None = None, **kw: Any
) -> tuple[FiArWorkspaces, FakeFactory]:
    factory = FakeFactory(outcomes)
    kw.setdefault("nodes", 1)
    kw.setdefault("backend", "auto")
    return FiArWorkspaces(factory, **kw), factory


class TestScenarios:
    def test_mnnvl_succeeds(self, captured: list[dict[str, Any]]) -> None:
        """auto: mnnvl works first time; attempt (DEBUG) then initialized (INFO)."""
        m, factory = manager()
        ws = m.get_fi_ar_workspace(*ARGS)
        assert isinstance(ws, FakeWorkspace)
        assert "mnnvl" == ws.backend
        assert [
            {
                "backend": "mnnvl",
                "world_size": 4,
                "rank": 0,
                "max_token_num": 2048,
                "hidden_dim": 4096,
                "dtype": "bfloat16",
                "group": "the-group",
            }
        ] == factory.calls
        assert [
            ("workspace_attempt", "DEBUG", "fi_ar", "mnnvl"),
            ("workspace_initialized", "INFO", "fi_ar", "mnnvl"),
        ] == trail(captured)
        assert {
            "attempt": 1,
            "stage": "attempt",
            "outcome": "pending",
            "severity_number": 5,
            "logger": "comm.flashinfer_allreduce",
        } == pick(captured[0], "attempt", "stage", "outcome", "severity_number", "logger")
        assert {"attempts": 1, "reused": False, "outcome": "success", "severity_number": 9} == pick(
            captured[1], "attempts", "reused", "outcome", "severity_number"
        )
        assert captured[1]["duration_ms"] >= 0.0

    def test_multicast_failure_then_trtllm(self, captured: list[dict[str, Any]]) -> None:
        """auto on one node: mnnvl's multicast error is a WARNING, trtllm wins (INFO)."""
        m, factory = manager({"mnnvl": RuntimeError(MULTICAST)})
        ws = m.get_fi_ar_workspace(*ARGS)
        assert ws is not None
        assert "trtllm" == ws.backend
        assert ["mnnvl", "trtllm"] == factory.backends
        assert [
            ("workspace_attempt", "DEBUG", "fi_ar", "mnnvl"),
            ("workspace_attempt_failed", "WARNING", "fi_ar", "mnnvl"),
            ("workspace_fallback", "WARNING", "fi_ar", ("mnnvl", "trtllm")),
            ("workspace_attempt", "DEBUG", "fi_ar", "trtllm"),
            ("workspace_initialized", "INFO", "fi_ar", "trtllm"),
        ] == trail(captured)
        assert {
            "attempt": 1,
            "reason": "no_multicast",
            "error_type": "RuntimeError",
            "error_message": MULTICAST,
            "severity_number": 13,
            "outcome": "failure",
        } == pick(
            captured[1],
            "attempt",
            "reason",
            "error_type",
            "error_message",
            "severity_number",
            "outcome",
        )
        assert captured[1]["duration_ms"] >= 0.0
        assert {"reason": "no_multicast", "outcome": "degraded"} == pick(
            captured[2], "reason", "outcome"
        )
        assert 2 == captured[3]["attempt"]
        assert {"attempts": 2, "reused": False} == pick(captured[4], "attempts", "reused")
        result = m.result("fi_ar")
        assert result is not None
        assert ("trtllm", ("no_multicast", None)) == (
            result.winner,
            tuple(a.reason for a in result.attempts),
        )

    def test_both_fail(self, captured: list[dict[str, Any]]) -> None:
        """auto: mnnvl and trtllm both fail; None and one terminal ERROR (17)."""
        m, factory = manager({"mnnvl": RuntimeError(MULTICAST), "trtllm": AssertionError(NO_CUDA)})
        assert m.get_fi_ar_workspace(*ARGS) is None
        assert [
            ("workspace_attempt", "DEBUG", "fi_ar", "mnnvl"),
            ("workspace_attempt_failed", "WARNING", "fi_ar", "mnnvl"),
            ("workspace_fallback", "WARNING", "fi_ar", ("mnnvl", "trtllm")),
            ("workspace_attempt", "DEBUG", "fi_ar", "trtllm"),
            ("workspace_attempt_failed", "WARNING", "fi_ar", "trtllm"),
            ("workspace_terminal_failure", "ERROR", "fi_ar", (None, None)),
        ] == trail(captured)
        terminal = captured[-1]
        assert {
            "backends_tried": ["mnnvl", "trtllm"],
            "reasons": ["no_multicast", "no_cuda"],
            "last_error_type": "AssertionError",
            "last_error_message": NO_CUDA,
            "backends_skipped": [],
            "severity_number": 17,
            "stage": "terminal_failure",
            "outcome": "failure",
            "body": "FlashInfer allreduce fusion workspace unavailable (fi_ar): tried "
            "mnnvl, trtllm",
        } == pick(
            terminal,
            "backends_tried",
            "reasons",
            "last_error_type",
            "last_error_message",
            "backends_skipped",
            "severity_number",
            "stage",
            "outcome",
            "body",
        )
        assert "NVLink multicast" in terminal["hint"]
        assert "NVIDIA GPUs with CUDA" in terminal["hint"]
        n = len(captured)
        assert m.get_fi_ar_workspace(*ARGS) is None  # cached failure: no retry, no logging
        assert n == len(captured)
        assert 2 == len(factory.calls)

    def test_explicit_backend_no_fallback(self, captured: list[dict[str, Any]]) -> None:
        """An explicit backend that fails is terminal at once: no fallback event."""
        m, factory = manager({"mnnvl": RuntimeError(MULTICAST)}, backend="mnnvl", nodes=1)
        assert m.get_fi_ar_workspace(*ARGS) is None
        assert ["mnnvl"] == factory.backends
        assert [
            ("workspace_attempt", "DEBUG", "fi_ar", "mnnvl"),
            ("workspace_attempt_failed", "WARNING", "fi_ar", "mnnvl"),
            ("workspace_terminal_failure", "ERROR", "fi_ar", (None, None)),
        ] == trail(captured)
        assert (["mnnvl"], ["no_multicast"]) == (
            captured[-1]["backends_tried"],
            captured[-1]["reasons"],
        )

    def test_explicit_trtllm_single_node(self, captured: list[dict[str, Any]]) -> None:
        """An explicit trtllm on one node is tried directly (mnnvl is never touched)."""
        m, factory = manager(backend="trtllm", nodes=1)
        ws = m.get_fi_ar_workspace(*ARGS)
        assert ws is not None
        assert (["trtllm"], "trtllm") == (factory.backends, ws.backend)

    def test_multi_node_trtllm_value_error(self, captured: list[dict[str, Any]]) -> None:
        """trtllm on several nodes is a ValueError, after a terminal event that says why."""
        m, factory = manager(backend="trtllm", nodes=2)
        with pytest.raises(ValueError, match=r"'trtllm' does not support multi-node .*2 nodes"):
            m.get_fi_ar_workspace(*ARGS)
        assert [] == factory.calls
        assert [("workspace_terminal_failure", "ERROR", "fi_ar", (None, None))] == trail(captured)
        assert {
            "backends_tried": [],
            "reasons": [],
            "backends_skipped": ["trtllm"],
            "skip_reasons": ["multi_node"],
            "last_error_type": None,
        } == pick(
            captured[0],
            "backends_tried",
            "reasons",
            "backends_skipped",
            "skip_reasons",
            "last_error_type",
        )
        assert "several nodes need mnnvl" in captured[0]["hint"]
        with pytest.raises(ValueError, match="the backend argument"):
            m.get_fi_ar_quant_workspace(*ARGS)

    def test_auto_multi_node_skips_trtllm(self, captured: list[dict[str, Any]]) -> None:
        """auto on several nodes: mnnvl only; trtllm is skipped (no fallback event)."""
        m, factory = manager({"mnnvl": AssertionError(NO_CUDA)}, nodes=2)
        assert m.get_fi_ar_workspace(*ARGS) is None
        assert ["mnnvl"] == factory.backends
        assert [
            ("workspace_attempt", "DEBUG", "fi_ar", "mnnvl"),
            ("workspace_attempt_failed", "WARNING", "fi_ar", "mnnvl"),
            ("workspace_terminal_failure", "ERROR", "fi_ar", (None, None)),
        ] == trail(captured)
        assert (["mnnvl"], ["no_cuda"], ["trtllm"], ["multi_node"]) == (
            captured[-1]["backends_tried"],
            captured[-1]["reasons"],
            captured[-1]["backends_skipped"],
            captured[-1]["skip_reasons"],
        )

    def test_flashinfer_missing(self, captured: list[dict[str, Any]]) -> None:
        """An ImportError from the factory is reason flashinfer_missing on every stage."""
        missing = ModuleNotFoundError("No module named 'flashinfer'")
        m, _ = manager({"mnnvl": missing, "trtllm": missing})
        assert m.get_fi_ar_workspace(*ARGS) is None
        failed = [e for e in captured if e["event"] == "workspace_attempt_failed"]
        assert [("mnnvl", "flashinfer_missing", "ModuleNotFoundError")] * 1 + [
            ("trtllm", "flashinfer_missing", "ModuleNotFoundError")
        ] == [(e["backend"], e["reason"], e["error_type"]) for e in failed]
        assert "pip install flashinfer-python" in captured[-1]["hint"]

    def test_real_factory_without_flashinfer(
        self, captured: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The real factory's lazy import failing is caught inside the attempt."""
        monkeypatch.setitem(sys.modules, "flashinfer", None)
        monkeypatch.setitem(sys.modules, "flashinfer.comm", None)
        m = FiArWorkspaces(backend="auto", nodes=1)
        assert m.get_fi_ar_workspace(*ARGS) is None
        assert ["flashinfer_missing", "flashinfer_missing"] == captured[-1]["reasons"]
        assert "ModuleNotFoundError" == captured[-1]["last_error_type"]

    def test_dist_not_initialized(self, captured: list[dict[str, Any]]) -> None:
        """TorchDistBackend's error (vLLM lets it escape) is classified, not raised."""
        m, _ = manager({"mnnvl": RuntimeError(DIST), "trtllm": RuntimeError(DIST)})
        assert m.get_fi_ar_workspace(*ARGS) is None
        assert ["dist_not_initialized", "dist_not_initialized"] == captured[-1]["reasons"]
        assert "init_process_group()" in captured[-1]["hint"]

    def test_non_exception_propagates(self) -> None:
        """KeyboardInterrupt inside creation is not swallowed."""
        m, _ = manager({"mnnvl": KeyboardInterrupt()})
        with pytest.raises(KeyboardInterrupt):
            m.get_fi_ar_workspace(*ARGS)

    @pytest.mark.parametrize("failing", ["mnnvl", "trtllm"])
    @pytest.mark.parametrize(
        "interrupt",
        [KeyboardInterrupt, SystemExit, GeneratorExit, type("Cancelled", (BaseException,), {})],
    )
    def test_interrupted_creation_is_a_reported_terminal_failure(
        self, captured: list[dict[str, Any]], failing: str, interrupt: type[BaseException]
    ) -> None:
        """A BaseException out of creation (Ctrl-C, SystemExit, a framework's Cancelled)
        propagates, and the chain it ended is reported first: attempt_failed and exactly
        one workspace_terminal_failure (ERROR, reason interrupted, the real type); nothing
        is cached, so the next call runs the chain again. It ended silently before."""
        outcomes: dict[str, Any] = {failing: interrupt("stop")}
        if failing == "trtllm":
            outcomes["mnnvl"] = RuntimeError(MULTICAST)
        m, factory = manager(outcomes)
        with pytest.raises(interrupt):
            m.get_fi_ar_workspace(*ARGS)
        terminal = [e for e in captured if e["event"] == "workspace_terminal_failure"]
        assert 1 == len(terminal), trail(captured)
        tried = ["mnnvl"] if failing == "mnnvl" else ["mnnvl", "trtllm"]
        reasons = ["interrupted"] if failing == "mnnvl" else ["no_multicast", "interrupted"]
        assert {
            "severity_text": "ERROR",
            "chain": "fi_ar",
            "backends_tried": tried,
            "reasons": reasons,
            "last_error_type": interrupt.__name__,
            "last_error_message": "stop",
        } == pick(terminal[0], "severity_text", "chain", "backends_tried", "reasons",
                  "last_error_type", "last_error_message")  # fmt: skip
        failed = [e for e in captured if e["event"] == "workspace_attempt_failed"]
        assert ("WARNING", failing, "interrupted") == (
            failed[-1]["severity_text"], failed[-1]["backend"], failed[-1]["reason"]
        )  # fmt: skip
        assert not any(e["event"] == "workspace_fallback" and e["from_backend"] == failing
                       for e in captured)  # fmt: skip
        assert m.result("fi_ar") is None
        factory.outcomes.clear()
        assert isinstance(m.get_fi_ar_workspace(*ARGS), FakeWorkspace)


class TestCallsite:
    def test_events_point_at_the_getters_caller(self, captured: list[dict[str, Any]]) -> None:
        """Workspace events carry the caller's file and line, not comm's internals."""
        m, _ = manager({"mnnvl": RuntimeError(MULTICAST)})
        line = sys._getframe().f_lineno + 1
        m.get_fi_ar_workspace(*ARGS)
        assert captured
        assert {(__file__, line)} == {
            (e["code.file.path"], e["code.line.number"]) for e in captured
        }


class TestQuantAndReuse:
    def test_quant_reuses_primary(self, captured: list[dict[str, Any]]) -> None:
        """The quant getter reuses the primary workspace when backends match."""
        m, factory = manager()
        primary = m.get_fi_ar_workspace(*ARGS)
        quant = m.get_fi_ar_quant_workspace(*ARGS)
        assert primary is quant
        assert ["mnnvl"] == factory.backends
        assert ("workspace_initialized", "INFO", "fi_ar_quant", "mnnvl") == trail(captured)[-1]
        assert {"reused": True, "attempts": 0} == pick(captured[-1], "reused", "attempts")

    def test_primary_reuses_quant(self, captured: list[dict[str, Any]]) -> None:
        """The reuse works the other way round too (quant created first)."""
        m, factory = manager({"mnnvl": RuntimeError(MULTICAST)})
        quant = m.get_fi_ar_quant_workspace(*ARGS)
        primary = m.get_fi_ar_workspace(*ARGS)
        assert quant is primary
        assert ["mnnvl", "trtllm", "mnnvl"] == factory.backends  # primary retries mnnvl first
        assert {"backend": "trtllm", "reused": True, "attempts": 1} == pick(
            captured[-1], "backend", "reused", "attempts"
        )

    def test_quant_chain_is_its_own(self, captured: list[dict[str, Any]]) -> None:
        """Both chains fail separately: one terminal failure per chain."""
        m, _ = manager({"mnnvl": AssertionError(NO_CUDA), "trtllm": AssertionError(NO_CUDA)})
        assert m.get_fi_ar_workspace(*ARGS) is None
        assert m.get_fi_ar_quant_workspace(*ARGS) is None
        terminal = [e["chain"] for e in captured if e["event"] == "workspace_terminal_failure"]
        assert ["fi_ar", "fi_ar_quant"] == terminal


class TestRequire:
    def test_require_raises_with_every_attempt(self, captured: list[dict[str, Any]]) -> None:
        """require_* raises WorkspaceUnavailableError naming each attempt and the event."""
        m, _ = manager({"mnnvl": RuntimeError(MULTICAST), "trtllm": AssertionError(NO_CUDA)})
        with pytest.raises(WorkspaceUnavailableError) as info:
            m.require_fi_ar_workspace(*ARGS)
        err = info.value
        text = str(err)
        assert f"mnnvl: no_multicast (RuntimeError: {MULTICAST})" in text
        assert f"trtllm: no_cuda (AssertionError: {NO_CUDA})" in text
        assert 'event="workspace_terminal_failure"' in text
        assert "fi_ar" == err.chain
        assert ("mnnvl", "trtllm") == tuple(a.backend for a in err.attempts)
        with pytest.raises(WorkspaceUnavailableError, match="chain fi_ar_quant"):
            m.require_fi_ar_quant_workspace(*ARGS)

    def test_require_returns_workspace(self) -> None:
        """require_* returns the workspace when one exists."""
        m, _ = manager()
        assert "mnnvl" == m.require_fi_ar_workspace(*ARGS).backend
        assert "mnnvl" == m.require_fi_ar_quant_workspace(*ARGS).backend

    def test_module_require(self) -> None:
        """The module-level require uses the default manager."""
        fa.reset_default_manager(FiArWorkspaces(FakeFactory({"mnnvl": ValueError("x")}),
                                                backend="mnnvl", nodes=1))  # fmt: skip
        with pytest.raises(WorkspaceUnavailableError, match=r"mnnvl: error \(ValueError: x\)"):
            fa.require_fi_ar_workspace(*ARGS)
        with pytest.raises(WorkspaceUnavailableError):
            fa.require_fi_ar_quant_workspace(*ARGS)


class TestCachedPath:
    def test_cached_path_is_silent(self, captured: list[dict[str, Any]]) -> None:
        """Once built, the getters return the same object and log nothing."""
        m, factory = manager()
        fa.reset_default_manager(m)
        first = fa.get_fi_ar_workspace(*ARGS)
        quant = fa.get_fi_ar_quant_workspace(*ARGS)
        n = len(captured)
        for _ in range(100):
            assert first is fa.get_fi_ar_workspace(*ARGS)
            assert quant is fa.get_fi_ar_quant_workspace(*ARGS)
            assert first is m.get_fi_ar_workspace(*ARGS)
        assert n == len(captured)
        assert 1 == len(factory.calls)

    def test_default_manager_is_lazy_and_single(self) -> None:
        """default_manager() creates one manager on first use; reset replaces it."""
        a = fa.default_manager()
        assert a is fa.default_manager()
        fa.reset_default_manager()
        assert a is not fa.default_manager()


class TestModuleFunctions:
    """The module-level getters are generated from the manager's methods: one signature."""

    @pytest.mark.parametrize(
        "name",
        [
            "get_fi_ar_workspace",
            "get_fi_ar_quant_workspace",
            "require_fi_ar_workspace",
            "require_fi_ar_quant_workspace",
        ],
    )
    def test_same_parameters_as_the_method(self, name: str) -> None:
        """Each module function shows (and takes) the method's parameters, minus self."""
        import inspect

        method = list(inspect.signature(getattr(FiArWorkspaces, name)).parameters)[1:]
        assert (method, name) == (
            list(inspect.signature(getattr(fa, name)).parameters),
            getattr(fa, name).__name__,
        )
        assert ["world_size", "rank", "max_token_num", "hidden_dim", "dtype", "group"] == method

    def test_keyword_call_as_vllm_makes_it(self) -> None:
        """vLLM calls the getter with keywords; the generated function accepts them."""
        m, _ = manager()
        fa.reset_default_manager(m)
        world_size, rank, max_token_num, hidden_dim, dtype, group = ARGS
        ws = fa.get_fi_ar_workspace(
            world_size=world_size,
            rank=rank,
            max_token_num=max_token_num,
            hidden_dim=hidden_dim,
            dtype=dtype,
            group=group,
        )
        assert ws is fa.require_fi_ar_workspace(*ARGS)


class TestDestroy:
    def test_alias_destroyed_once(self) -> None:
        """A shared (aliased) workspace is destroyed once; both slots are cleared."""
        m, factory = manager()
        ws = m.get_fi_ar_workspace(*ARGS)
        assert ws is m.get_fi_ar_quant_workspace(*ARGS)
        m.destroy()
        assert [1] == [w.destroyed for w in factory.created]
        assert (None, None) == (m.result("fi_ar"), m.result("fi_ar_quant"))

    def test_distinct_destroyed_each(self) -> None:
        """Two distinct workspaces are each destroyed exactly once."""
        m, factory = manager({"mnnvl": [RuntimeError(MULTICAST), None]})
        primary = m.get_fi_ar_workspace(*ARGS)
        quant = m.get_fi_ar_quant_workspace(*ARGS)
        assert primary is not None
        assert quant is not None
        assert ("trtllm", "mnnvl") == (primary.backend, quant.backend)
        m.destroy()
        assert [1, 1] == [w.destroyed for w in factory.created]

    def test_idempotent_and_recreates(self, captured: list[dict[str, Any]]) -> None:
        """destroy twice is a no-op the second time; the next get creates a new one."""
        m, factory = manager()
        first = m.get_fi_ar_workspace(*ARGS)
        m.destroy()
        m.destroy()
        assert [1] == [w.destroyed for w in factory.created]
        second = m.get_fi_ar_workspace(*ARGS)
        assert second is not None
        assert second is not first
        assert 2 == len(factory.calls)

    def test_destroy_forgets_failure(self) -> None:
        """After destroy a failed chain is tried again (e.g. after init_process_group)."""
        m, factory = manager({"mnnvl": [RuntimeError(DIST), None]}, backend="mnnvl")
        assert m.get_fi_ar_workspace(*ARGS) is None
        m.destroy()
        ws = m.get_fi_ar_workspace(*ARGS)
        assert ws is not None
        assert ["mnnvl", "mnnvl"] == factory.backends

    def test_destroy_failure_reported(self, captured: list[dict[str, Any]]) -> None:
        """A destroy() that raises is reported as workspace_destroy_failed, not raised."""
        m, _ = manager()
        ws = m.get_fi_ar_workspace(*ARGS)
        assert isinstance(ws, FakeWorkspace)

        def broken() -> None:
            raise RuntimeError("cuda context gone")

        ws.destroy = broken  # type: ignore[method-assign]
        m.destroy()
        assert m.result("fi_ar") is None
        assert m.get_fi_ar_workspace(*ARGS) is not ws
        bad = [e for e in captured if e["event"] == "workspace_destroy_failed"]
        assert [("fi_ar", "mnnvl", "RuntimeError", "cuda context gone", "WARNING")] == [
            (e["chain"], e["backend"], e["error_type"], e["error_message"], e["severity_text"])
            for e in bad
        ]

    def test_module_destroy(self) -> None:
        """destroy_fi_ar_workspace() destroys the default manager's workspaces; idempotent."""
        fa.destroy_fi_ar_workspace()  # no default manager yet: nothing to do
        m, factory = manager()
        fa.reset_default_manager(m)
        assert fa.get_fi_ar_workspace(*ARGS) is not None
        fa.destroy_fi_ar_workspace()
        fa.destroy_fi_ar_workspace()
        assert [1] == [w.destroyed for w in factory.created]
        assert m.result("fi_ar") is None

    def test_atexit_hook_uses_weakref(self) -> None:
        """The at-exit hook destroys a live manager and ignores a collected one."""
        m, factory = manager()
        m.get_fi_ar_workspace(*ARGS)
        fa._destroy_if_alive(weakref.ref(m))
        assert [1] == [w.destroyed for w in factory.created]
        dead = weakref.ref(FiArWorkspaces(FakeFactory(), backend="auto", nodes=1))
        fa._destroy_if_alive(dead)  # collected: a no-op

    def test_destroy_runs_at_exit(self, tmp_path: Any) -> None:
        """The default manager destroys its workspaces when the interpreter exits."""
        script = textwrap.dedent(
            """
            from comm import flashinfer_allreduce as fa

            class WS:
                backend = "trtllm"
                def destroy(self):
                    print("destroyed", flush=True)

            class Factory:
                def create(self, **kw):
                    return WS()

            m = fa.default_manager()
            fa.reset_default_manager(fa.FiArWorkspaces(Factory(), backend="trtllm", nodes=1,
                                                       register_atexit=True))
            fa.get_fi_ar_workspace(1, 0, 16, 16, "bf16", None)
            fa.get_fi_ar_quant_workspace(1, 0, 16, 16, "bf16", None)
            print("exiting", flush=True)
            """
        )
        proc = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={"PATH": "/usr/bin:/bin", "OBS_LEVEL": "ERROR", "PYTHONPATH": str(ROOT)},
            cwd=str(tmp_path),
        )
        assert 0 == proc.returncode, proc.stderr
        assert ["exiting", "destroyed"] == proc.stdout.split()


class TestThreads:
    def test_concurrent_first_calls_create_one(self) -> None:
        """16 threads racing on the first call get one workspace, created once."""
        factory = FakeFactory(delay=0.05)
        m = FiArWorkspaces(factory, backend="auto", nodes=1)
        fa.reset_default_manager(m)
        barrier = threading.Barrier(16)
        got: list[Any] = []

        def call() -> None:
            barrier.wait()
            got.append(fa.get_fi_ar_workspace(*ARGS))

        threads = [threading.Thread(target=call) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert 1 == len(factory.calls)
        assert 16 == len(got)
        assert 1 == len({id(w) for w in got})

    def test_concurrent_default_manager(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Threads racing on the very first module call create one default manager."""
        created: list[FiArWorkspaces] = []
        real_init = FiArWorkspaces.__init__

        def init(self: FiArWorkspaces, *a: Any, **kw: Any) -> None:
            time.sleep(0.01)
            real_init(self, FakeFactory(), backend="auto", nodes=1)
            created.append(self)

        monkeypatch.setattr(FiArWorkspaces, "__init__", init)
        barrier = threading.Barrier(8)
        managers: list[FiArWorkspaces] = []

        def call() -> None:
            barrier.wait()
            managers.append(fa.default_manager())

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert 1 == len(created)
        assert {id(created[0])} == {id(x) for x in managers}

    def test_concurrent_destroy_and_get(self) -> None:
        """Destroy racing with getters never raises and never double-destroys."""
        factory = FakeFactory()
        m = FiArWorkspaces(factory, backend="auto", nodes=1)
        errors: list[BaseException] = []

        def worker(i: int) -> None:
            try:
                for _ in range(200):
                    if i % 2:
                        m.destroy()
                    else:
                        m.get_fi_ar_workspace(*ARGS)
                        m.get_fi_ar_quant_workspace(*ARGS)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        m.destroy()
        assert [] == errors
        assert all(w.destroyed == 1 for w in factory.created)


class TestSettings:
    def test_default_auto(self) -> None:
        """No variable set: auto."""
        assert CommSettings("auto", "default") == load_comm_settings({})

    def test_comm_variable(self) -> None:
        """COMM_FI_AR_BACKEND selects the backend, any case."""
        assert CommSettings("mnnvl", "COMM_FI_AR_BACKEND") == load_comm_settings(
            {"COMM_FI_AR_BACKEND": " MNNVL "}
        )

    def test_vllm_variable_honoured(self) -> None:
        """vLLM's VLLM_FLASHINFER_ALLREDUCE_BACKEND works for drop-in use."""
        env = {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}
        assert CommSettings("trtllm", "VLLM_FLASHINFER_ALLREDUCE_BACKEND") == load_comm_settings(
            env
        )

    def test_comm_wins(self) -> None:
        """COMM_FI_AR_BACKEND takes precedence over the vLLM name; empty means unset."""
        env = {"COMM_FI_AR_BACKEND": "mnnvl", "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}
        assert "mnnvl" == load_comm_settings(env).backend
        env = {"COMM_FI_AR_BACKEND": "", "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}
        assert "trtllm" == load_comm_settings(env).backend

    def test_bad_value_names_variable(self) -> None:
        """A bad value is a ValueError naming the variable and the accepted values."""
        with pytest.raises(
            ValueError,
            match=r"VLLM_FLASHINFER_ALLREDUCE_BACKEND='nvls' is not valid: expected one of "
            r"auto, mnnvl, trtllm",
        ):
            load_comm_settings({"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "nvls"})

    def test_manager_reads_env_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The manager reads the backend at construction, from the environment."""
        monkeypatch.setenv("COMM_FI_AR_BACKEND", "trtllm")
        m = FiArWorkspaces(FakeFactory(), nodes=1)
        monkeypatch.setenv("COMM_FI_AR_BACKEND", "mnnvl")
        assert "trtllm" == m.backend

    def test_manager_bad_env_and_argument(self) -> None:
        """A bad backend (env or argument) or node count fails at construction."""
        with pytest.raises(ConfigError, match="COMM_FI_AR_BACKEND='x'"):
            FiArWorkspaces(FakeFactory(), env={"COMM_FI_AR_BACKEND": "x"})
        with pytest.raises(ConfigError, match="backend='nccl'"):
            FiArWorkspaces(FakeFactory(), backend="nccl")
        with pytest.raises(ValueError, match="nodes=0"):
            FiArWorkspaces(FakeFactory(), backend="auto", nodes=0)

    def test_nodes_from_rank_info(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without nodes=, the node count is world size / local world size (rounded up)."""
        for name, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "8"),
                            ("LOCAL_WORLD_SIZE", "4")):  # fmt: skip
            monkeypatch.setenv(name, value)
        assert 2 == FiArWorkspaces(FakeFactory(), backend="auto").nodes()
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
        assert 1 == FiArWorkspaces(FakeFactory(), backend="auto").nodes()

    @pytest.mark.parametrize("rank", range(8))
    def test_every_rank_of_srun_takes_the_same_path(
        self, monkeypatch: pytest.MonkeyPatch, rank: int, captured: list[dict[str, Any]]
    ) -> None:
        """srun -N2 -n8 (no --ntasks-per-node: SLURM_NTASKS_PER_NODE unset): every rank
        skips trtllm (several nodes). Node 0's ranks counted one node and tried trtllm,
        a collective creation the other node's ranks never joined."""
        launcher = ("SLURM_", "RANK", "LOCAL_", "WORLD_SIZE", "OMPI_", "GROUP_")
        for name in [n for n in os.environ if n.startswith(launcher)]:
            monkeypatch.delenv(name)
        env = {"SLURM_PROCID": rank, "SLURM_LOCALID": rank % 4, "SLURM_NODEID": rank // 4,
               "SLURM_NTASKS": 8, "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_NNODES": 2}  # fmt: skip
        for name, value in env.items():
            monkeypatch.setenv(name, str(value))
        m, factory = manager({"mnnvl": RuntimeError(MULTICAST)}, nodes=None)
        assert m.get_fi_ar_workspace(*ARGS) is None
        assert ["mnnvl"] == factory.backends
        (terminal,) = [e for e in captured if e["event"] == "workspace_terminal_failure"]
        assert (["trtllm"], ["multi_node"]) == (
            terminal["backends_skipped"],
            terminal["skip_reasons"],
        )


class TestClassifier:
    @pytest.mark.parametrize(
        ("exc", "reason"),
        [
            (ModuleNotFoundError("No module named 'flashinfer'"), "flashinfer_missing"),
            (ImportError("libcudart.so.12: cannot open shared object file"), "flashinfer_missing"),
            (RuntimeError(DIST), "dist_not_initialized"),
            (ValueError("Default process group has not been initialized"), "dist_not_initialized"),
            (AssertionError(NO_CUDA), "no_cuda"),
            (RuntimeError("Found no NVIDIA driver on your system."), "no_cuda"),
            (RuntimeError(MULTICAST), "no_multicast"),
            (
                RuntimeError(
                    "[MNNVLAllReduceFusionWorkspace] Multicast pointer is null after rendezvous."
                ),
                "no_multicast",
            ),
            (ValueError("tp_size must be 2, 4, 8, or 16"), "unsupported_world_size"),
            (RuntimeError("Unknown backend: mnnvl2"), "unknown_backend"),
            (ValueError("No suitable backend found. "), "error"),
            (OSError("disk on fire"), "error"),
        ],
    )
    def test_real_messages(self, exc: BaseException, reason: str) -> None:
        """Each real flashinfer/torch message maps to its reason."""
        assert reason == classify_workspace_error(exc)

    def test_unprintable_exception(self) -> None:
        """An exception whose str() raises is 'error', not a crash."""

        class Weird(Exception):
            def __str__(self) -> str:
                raise RuntimeError("no")

        assert "error" == classify_workspace_error(Weird())

    def test_reasons_listed(self) -> None:
        """Every reason the classifier returns (and the runner's interrupted) is in REASONS."""
        assert {
            "interrupted",
            "flashinfer_missing",
            "dist_not_initialized",
            "no_cuda",
            "no_multicast",
            "unsupported_world_size",
            "unknown_backend",
            "error",
        } == set(fa.REASONS)


class TestRankScoping:
    @pytest.fixture
    def second_local_rank(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name, value in (("RANK", "1"), ("LOCAL_RANK", "1"), ("WORLD_SIZE", "2"),
                            ("LOCAL_WORLD_SIZE", "2")):  # fmt: skip
            monkeypatch.setenv(name, value)

    def test_console_only_on_other_local_rank(self, second_local_rank: None) -> None:
        """Without export, local rank 1 logs only the terminal failure (scope process)."""
        obs.configure(level="DEBUG", format="json", sdk_disabled=True, repeat_summary_seconds=0)
        m, _ = manager({"mnnvl": AssertionError(NO_CUDA), "trtllm": AssertionError(NO_CUDA)})
        with obs.testing.capture_events() as evs:
            assert m.get_fi_ar_workspace(*ARGS) is None
        assert [("workspace_terminal_failure", 1)] == [(e["event"], e["rank"]) for e in evs]

    def test_failures_exported_from_every_rank(
        self, second_local_rank: None, fake_sink: Any
    ) -> None:
        """With export on, local rank 1 exports every WARNING+ stage, console-hidden."""
        obs.configure(level="DEBUG", format="json", repeat_summary_seconds=0)
        m, _ = manager({"mnnvl": AssertionError(NO_CUDA), "trtllm": AssertionError(NO_CUDA)})
        assert m.get_fi_ar_workspace(*ARGS) is None
        got = [
            (e["event"], e.get("_obs_console", True))
            for e in fake_sink.received
            if e["event"].startswith("workspace_")
        ]
        assert [
            ("workspace_attempt_failed", False),
            ("workspace_fallback", False),
            ("workspace_attempt_failed", False),
            ("workspace_terminal_failure", True),
        ] == got


class _CustomError(Exception):
    """An error type of the caller's own (a framework's), classified as ``error``."""


_UNCLASSIFIED = (RuntimeError, OSError, TypeError, KeyError, _CustomError)


class TestTerminalFailureIdentity:
    """The terminal failure is written once per process, chain and failure: a later run
    (after destroy) that fails for another error type is another failure, written as its
    own ERROR line (the alert's record, with that type), not a repeat count of the first."""

    @settings(max_examples=40, deadline=None)
    @given(
        st.lists(st.sampled_from(_UNCLASSIFIED), min_size=1, max_size=6),
        st.sampled_from(["mnnvl", "trtllm", "auto"]),
    )
    def test_another_error_type_is_another_terminal_failure(
        self, kinds: list[type[Exception]], backend: str
    ) -> None:
        obs.testing.reset()  # a fresh process's once table for every example
        obs.configure(level="DEBUG", format="json", sdk_disabled=True, repeat_summary_seconds=0)
        with obs.testing.capture_events() as captured:
            factory = FakeFactory(
                {b: [kind("same message") for kind in kinds] for b in ("mnnvl", "trtllm")}
            )
            m = FiArWorkspaces(factory, backend=backend, nodes=1)
            for _ in kinds:
                assert m.get_fi_ar_workspace(*ARGS) is None
                m.destroy()
            obs.flush()
        terminal = [e for e in captured if e["event"] == "workspace_terminal_failure"]
        distinct = list(dict.fromkeys(kind.__name__ for kind in kinds))
        assert distinct == [e["last_error_type"] for e in terminal]
        assert {"ERROR"} == {e["severity_text"] for e in terminal}
        repeats = sum(
            e["suppressed_count"]
            for e in captured
            if e["event"] == "log_repeats_suppressed"
            and e["original_event"] == "workspace_terminal_failure"
        )
        assert len(kinds) - len(distinct) == repeats
