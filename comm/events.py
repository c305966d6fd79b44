"""comm's events: the FlashInfer allreduce-fusion workspace chain (the names are the
Grafana contract: alerts key on ``event="workspace_terminal_failure"``).

They are obs' generic fallback-chain events with comm's names and messages. obs learns of
them through the ``obs.events`` entry point group (:func:`register`, idempotent), loaded
when the registry is first listed, so ``python -m obs schema`` and docs/EVENTS.md list them
while obs itself knows nothing of comm.
"""

from __future__ import annotations

__all__ = [
    "EVENTS",
    "WorkspaceAttempt",
    "WorkspaceAttemptFailed",
    "WorkspaceDestroyFailed",
    "WorkspaceFallback",
    "WorkspaceInitialized",
    "WorkspaceTerminalFailure",
    "register",
]

import dataclasses
import logging
from typing import ClassVar

from obs.events import (
    REGISTRY,
    ChainAttempt,
    ChainAttemptFailed,
    ChainFallback,
    ChainInitialized,
    ChainTerminalFailure,
    Event,
    EventRegistry,
)


@dataclasses.dataclass(frozen=True)
class WorkspaceAttempt(ChainAttempt):
    """Creating a FlashInfer allreduce-fusion workspace with one backend starts."""

    name: ClassVar[str] = "workspace_attempt"
    description: ClassVar[str] = (
        "Creating a FlashInfer allreduce-fusion workspace starts with one backend."
    )
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}): trying backend {backend}"
    )


@dataclasses.dataclass(frozen=True)
class WorkspaceAttemptFailed(ChainAttemptFailed):
    """One backend could not create the workspace."""

    name: ClassVar[str] = "workspace_attempt_failed"
    description: ClassVar[str] = "One backend failed to create the workspace (reason classified)."
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}): backend {backend} failed "
        "({reason}): {error_type}: {error_message}"
    )


@dataclasses.dataclass(frozen=True)
class WorkspaceFallback(ChainFallback):
    """The workspace getter falls back to the next backend (mnnvl -> trtllm)."""

    name: ClassVar[str] = "workspace_fallback"
    description: ClassVar[str] = "The workspace getter falls back to the next backend."
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}): falling back from "
        "{from_backend} to {to_backend} ({reason})"
    )


@dataclasses.dataclass(frozen=True)
class WorkspaceInitialized(ChainInitialized):
    """A workspace exists (created, or reused from the other getter)."""

    name: ClassVar[str] = "workspace_initialized"
    description: ClassVar[str] = (
        "The workspace is ready: backend, attempts, time, reused from the other getter."
    )
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}) initialized with backend "
        "{backend} after {attempts} attempt(s)"
    )


@dataclasses.dataclass(frozen=True)
class WorkspaceTerminalFailure(ChainTerminalFailure):
    """No backend could create the workspace: the fusion is unavailable."""

    name: ClassVar[str] = "workspace_terminal_failure"
    description: ClassVar[str] = (
        "No backend could create the workspace; allreduce fusion is unavailable (alert)."
    )
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace unavailable ({chain}): tried {backends_tried}"
    )


@dataclasses.dataclass(frozen=True)
class WorkspaceDestroyFailed(Event):
    """Destroying a workspace raised; the reference is dropped anyway."""

    name: ClassVar[str] = "workspace_destroy_failed"
    level: ClassVar[int] = logging.WARNING
    description: ClassVar[str] = "A workspace's destroy() raised; it was released anyway."
    message: ClassVar[str | None] = (
        "FlashInfer allreduce fusion workspace ({chain}, {backend}) destroy failed: "
        "{error_type}: {error_message}"
    )

    chain: str
    backend: str
    error_type: str
    error_message: str


#: Every event comm emits.
EVENTS: tuple[type[Event], ...] = (
    WorkspaceAttempt,
    WorkspaceAttemptFailed,
    WorkspaceFallback,
    WorkspaceInitialized,
    WorkspaceTerminalFailure,
    WorkspaceDestroyFailed,
)


def register(registry: EventRegistry = REGISTRY) -> None:
    """Register comm's events in ``registry`` (the ``obs.events`` entry point)."""
    for cls in EVENTS:
        registry.register(cls)
