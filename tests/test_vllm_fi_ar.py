"""Tests for comm.vllm_fi_ar's guards: off by default, and nothing replaced on a vLLM that
is not the version or shape it was written for (stand-in modules: the real vLLM run is in
tests/integration/test_vllm_fi_ar.py)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

import pytest

import obs.testing
from comm import vllm_fi_ar


def _fake_vllm(
    monkeypatch: pytest.MonkeyPatch, version: str, getter: Callable[..., object]
) -> types.ModuleType:
    """Stand-in vllm and flashinfer_all_reduce modules in sys.modules."""
    package = types.ModuleType("vllm")
    package.__version__ = version  # type: ignore[attr-defined]
    module = types.ModuleType(vllm_fi_ar.VLLM_MODULE)
    for name in vllm_fi_ar.GETTERS:
        setattr(module, name, getter)
    monkeypatch.setitem(sys.modules, "vllm", package)
    monkeypatch.setitem(sys.modules, vllm_fi_ar.VLLM_MODULE, module)
    return module


def _vllm_shaped(world_size, rank, max_token_num, hidden_dim, dtype, group):  # noqa: PLR0917
    return None


class TestRegister:
    def test_off_imports_nothing(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without OBS_VLLM_FI_AR the plugin does not even import vLLM's module."""
        monkeypatch.delitem(sys.modules, vllm_fi_ar.VLLM_MODULE, raising=False)
        vllm_fi_ar.register()
        assert vllm_fi_ar.VLLM_MODULE not in sys.modules

    def test_other_vllm_version_is_left_alone(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """vLLM 0.34: nothing replaced, and an error event says why."""
        module = _fake_vllm(monkeypatch, "0.34.0", _vllm_shaped)
        monkeypatch.setenv("OBS_VLLM_FI_AR", "1")
        with obs.testing.capture_events() as events:
            vllm_fi_ar.register()
        assert (_vllm_shaped, ["vllm_fi_ar_not_routed"]) == (
            module.get_fi_ar_workspace,
            [e["event"] for e in events],
        )

    def test_changed_signature_is_left_alone(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A 0.33 whose getter takes other parameters: nothing replaced."""
        module = _fake_vllm(monkeypatch, "0.33.0", lambda *a, **k: None)
        with pytest.raises(RuntimeError, match="no longer takes"):
            vllm_fi_ar.install()
        assert "comm" not in module.get_fi_ar_workspace.__module__

    def test_matching_vllm_is_routed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """0.33 with vLLM's signatures: the three names are comm's."""
        import comm.flashinfer_allreduce as ours

        module = _fake_vllm(monkeypatch, "0.33.0", _vllm_shaped)
        monkeypatch.setattr(module, "destroy_fi_ar_workspace", lambda: None)
        bound = vllm_fi_ar.install()
        assert [getattr(ours, n) for n in vllm_fi_ar.GETTERS] == [
            getattr(module, n) for n in vllm_fi_ar.GETTERS
        ]
        assert 3 == len(bound)
