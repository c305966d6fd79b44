"""vLLM general plugin: vLLM's FlashInfer allreduce workspace getters through comm's.

Enabled by ``OBS_VLLM_FI_AR=1`` (off: no effect, not even an import). vLLM has no hook for
its workspace getters, so this replaces the three names in
``vllm.distributed.device_communicators.flashinfer_all_reduce`` with comm's, which emit
the typed ``workspace_*`` events. The fusion modules bind the names at import
(``from ... import get_fi_ar_workspace``); the plugin loads before the model is built, so
they bind comm's. A fusion module imported earlier is rebound too. The patch is guarded:
vLLM 0.33 only, and each original must still have vLLM's signature; otherwise nothing is
replaced and a ``vllm_fi_ar_not_routed`` error says why.

.. versionadded:: unreleased
"""

from __future__ import annotations

__all__ = ["ENABLE_VAR", "FUSION_MODULES", "GETTERS", "VLLM_MODULE", "install", "register"]

import importlib
import inspect
import sys

import obs
from obs.encode import error_text
from obs.vllm_plugin import enabled

#: The variable that turns the routing on.
ENABLE_VAR = "OBS_VLLM_FI_AR"
#: vLLM's module that defines the getters.
VLLM_MODULE = "vllm.distributed.device_communicators.flashinfer_all_reduce"
#: vLLM modules that bind the getters at import time.
FUSION_MODULES = (
    "vllm.compilation.passes.fusion.allreduce_rms_fusion",
    "vllm.model_executor.layers.fused_allreduce_gemma_rms_norm",
)
#: The replaced names, each with the parameters vLLM 0.33 gives it.
GETTERS: dict[str, tuple[str, ...]] = {
    "get_fi_ar_workspace": ("world_size", "rank", "max_token_num", "hidden_dim", "dtype", "group"),
    "get_fi_ar_quant_workspace": (
        *("world_size", "rank", "max_token_num", "hidden_dim", "dtype", "group"),
    ),
    "destroy_fi_ar_workspace": (),
}
_SUPPORTED_VLLM = ("0.33.",)


def register() -> None:
    """The ``vllm.general_plugins`` entry point (may be called more than once)."""
    try:
        if not enabled(ENABLE_VAR):
            return
        install()
    except Exception as exc:  # never raise into vLLM
        _report(type(exc).__name__, error_text(exc))


def install() -> list[str]:
    """Replace vLLM's getters with comm's; returns the ``module.name``s now bound to
    comm's. Raises ``RuntimeError`` (nothing replaced) if vLLM is not the version or
    shape this was written for."""
    import comm.flashinfer_allreduce as ours  # noqa: PLC0415

    version = getattr(importlib.import_module("vllm"), "__version__", "?")
    if not str(version).startswith(_SUPPORTED_VLLM):
        raise RuntimeError(f"vLLM {version} is not a version this routing supports (0.33)")
    module = importlib.import_module(VLLM_MODULE)
    for name, params in GETTERS.items():
        original = getattr(module, name, None)
        if original is None or getattr(original, "__module__", "") == ours.__name__:
            continue
        if tuple(inspect.signature(original).parameters) != params:
            raise RuntimeError(f"vLLM's {name} no longer takes {params}")
    bound: list[str] = []
    for target in (module, *(sys.modules.get(m) for m in FUSION_MODULES)):
        if target is None:
            continue
        for name in GETTERS:
            if getattr(target, name, None) is not None:
                setattr(target, name, getattr(ours, name))
                bound.append(f"{target.__name__}.{name}")
    return bound


def _report(error_type: str, message: str) -> None:
    """Say through obs why the routing is off (never raising)."""
    try:
        obs.get_logger(__name__).error(
            "vllm_fi_ar_not_routed",
            error_type=error_type,
            error_message=message,
            variable=ENABLE_VAR,
        )
    except Exception:
        return
