"""OBS_VLLM_FI_AR=1 and the real vLLM 0.33 source: the names the fusion modules bind.

The fusion modules cannot be imported on a CPU-only torch (they need vLLM's compiled ops),
so which getters they bind at import (``from ...flashinfer_all_reduce import ...``) is read
from their source. The real run (vLLM loads its plugins, vLLM's getter on a real gloo group
with the real flashinfer emits comm's terminal failure, reason ``no_cuda``) shares a vLLM
process with the logging tests (test_vllm_logging.py, the fi_ar test).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from comm.vllm_fi_ar import FUSION_MODULES, GETTERS, VLLM_MODULE

pytestmark = [pytest.mark.integration, pytest.mark.vllm]


def _imported_names(module: str) -> set[str]:
    """The names ``module`` imports from vLLM's flashinfer_all_reduce module."""
    spec = importlib.util.find_spec("vllm")  # top level: found without importing vLLM
    assert spec is not None
    assert spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations))).parent
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text())
    return {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == VLLM_MODULE
        for alias in node.names
    }


@pytest.mark.parametrize("module", FUSION_MODULES)
def test_fusion_modules_bind_only_replaced_getters(module: str) -> None:
    """Each workspace getter a fusion module binds at import is one the plugin replaces."""
    getters = {n for n in _imported_names(module) if "fi_ar" in n}
    assert (True, set()) == (bool(getters), getters - set(GETTERS))
