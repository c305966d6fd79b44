"""comm: FlashInfer allreduce-fusion workspace getters whose every stage is a typed event.

``get_fi_ar_workspace`` / ``get_fi_ar_quant_workspace`` / ``destroy_fi_ar_workspace`` keep
vLLM's signatures; ``require_fi_ar_workspace`` raises :class:`WorkspaceUnavailableError`
with every attempt instead of returning None. ``python -m comm probe`` runs the chain on N
ranks. Importing comm imports neither torch nor flashinfer.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "CommSettings",
    "FiArWorkspaces",
    "FlashInferWorkspaceFactory",
    "Workspace",
    "WorkspaceFactory",
    "WorkspaceUnavailableError",
    "classify_workspace_error",
    "default_manager",
    "destroy_fi_ar_workspace",
    "get_fi_ar_quant_workspace",
    "get_fi_ar_workspace",
    "load_comm_settings",
    "require_fi_ar_quant_workspace",
    "require_fi_ar_workspace",
    "reset_default_manager",
]

from comm._packaging import warn_once as _warn_once
from comm.flashinfer_allreduce import (
    CommSettings,
    FiArWorkspaces,
    FlashInferWorkspaceFactory,
    Workspace,
    WorkspaceFactory,
    WorkspaceUnavailableError,
    classify_workspace_error,
    default_manager,
    destroy_fi_ar_workspace,
    get_fi_ar_quant_workspace,
    get_fi_ar_workspace,
    load_comm_settings,
    require_fi_ar_quant_workspace,
    require_fi_ar_workspace,
    reset_default_manager,
)

_warn_once(__path__[0])  # one listdir: says so when another 'comm' shares this folder
