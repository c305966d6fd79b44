"""How comm classifies a failed workspace attempt, and the hint a terminal failure
carries: flashinfer 0.7.4's messages mapped to the stable reasons dashboards group by.

Re-exported by :mod:`comm.flashinfer_allreduce`; importing it imports neither torch nor
flashinfer.
"""

from __future__ import annotations

__all__ = ["REASONS", "SKIP_MULTI_NODE", "classify_workspace_error", "terminal_hint"]

from typing import Any

from obs.fallback import INTERRUPTED, FallbackResult

#: Every failure reason a workspace attempt can be classified as.
REASONS = (
    "flashinfer_missing",
    "dist_not_initialized",
    "no_cuda",
    "no_multicast",
    "unsupported_world_size",
    "unknown_backend",
    "error",
    INTERRUPTED,
)
#: Reason of a stage the backend rules skip (trtllm on several nodes).
SKIP_MULTI_NODE = "multi_node"

_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "dist_not_initialized",
        (
            "torch.distributed is not initialized",
            "default process group has not been initialized",
            "process group has not been initialized",
        ),
    ),
    (
        "no_cuda",
        (
            "not compiled with cuda",
            "no cuda gpus are available",
            "found no nvidia driver",
            "cuda driver initialization failed",
            "cuda is not available",
        ),
    ),
    ("no_multicast", ("multicast",)),
    ("unknown_backend", ("unknown backend",)),
    (
        "unsupported_world_size",
        ("tp_size must be", "world_size must be", "unsupported world size", "world size"),
    ),
)


def classify_workspace_error(exc: BaseException) -> str:
    """Map a creation failure to one of :data:`REASONS` (messages of flashinfer 0.7.4)."""
    if isinstance(exc, ImportError):
        return "flashinfer_missing"
    try:
        text = str(exc).lower()
    except BaseException:  # a __str__ that raises, whatever it raises: error_text's rule
        return "error"
    for reason, needles in _PATTERNS:
        if any(n in text for n in needles):
            return reason
    return "error"


_HINTS = {
    "flashinfer_missing": "install flashinfer-python (pip install flashinfer-python)",
    "dist_not_initialized": "call torch.distributed.init_process_group() before creating "
    "the workspace",
    "no_cuda": "FlashInfer allreduce fusion needs NVIDIA GPUs with CUDA; disable the "
    "allreduce fusion pass on this host",
    "no_multicast": "mnnvl needs NVLink multicast (NVSwitch or MNNVL); on a single node "
    "use COMM_FI_AR_BACKEND=auto or trtllm",
    "unsupported_world_size": "the backend does not support this world size",
    "unknown_backend": "the installed flashinfer does not know this backend; check "
    "COMM_FI_AR_BACKEND and the flashinfer version",
    SKIP_MULTI_NODE: "trtllm works within one node only; several nodes need mnnvl "
    "(NVLink multicast)",
    INTERRUPTED: "creation was interrupted (KeyboardInterrupt, SystemExit, a cancellation); "
    "nothing is cached: the next call tries again",
    "error": "see error_type and error_message, and this rank's workspace_attempt_failed",
}


def terminal_hint(result: FallbackResult[Any]) -> str:
    """What to do about a terminal failure, from its reasons (each hint once)."""
    hints: list[str] = []
    for attempt in result.attempts:
        hint = _HINTS.get(attempt.reason or "", _HINTS["error"])
        if hint not in hints:
            hints.append(hint)
    return "; ".join(hints)
