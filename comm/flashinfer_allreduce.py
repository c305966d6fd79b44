"""FlashInfer allreduce-fusion workspace getters with a reported mnnvl -> trtllm fallback.

Drop-in for vLLM's ``flashinfer_all_reduce`` getters (same signatures), with the smells
fixed: state lives on a :class:`FiArWorkspaces` object (the module functions delegate to
one lazily created default), the factory is injectable, everything that can fail while
creating a workspace (the flashinfer import, ``TorchDistBackend(group=...)``, the call) is
inside the guarded attempt, every stage emits a typed ``workspace_*`` event, and
:func:`require_fi_ar_workspace` raises an error that says why instead of a bare assert.

Backend rules (as vLLM): ``auto`` tries mnnvl, then trtllm only on a single node; an
explicit backend gets no fallback; trtllm on several nodes is a ``ValueError``. A chain's
outcome, success or failure, is cached until :func:`destroy_fi_ar_workspace`: a failed
creation is not retried (and re-logged) on every call; an interrupted one is not cached.

Importing this module imports neither torch nor flashinfer.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "BACKENDS",
    "BACKEND_VARIABLES",
    "LOGGER_NAME",
    "REASONS",
    "WORKSPACE_EVENTS",
    "BackendNotSupportedError",
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
    "terminal_hint",
]

import atexit
import contextlib
import dataclasses
import functools
import inspect
import os
import random
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import (
    Any,
    Concatenate,
    Literal,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
    runtime_checkable,
)

from comm._classify import REASONS, SKIP_MULTI_NODE, classify_workspace_error, terminal_hint
from comm.events import (
    WorkspaceAttempt,
    WorkspaceAttemptFailed,
    WorkspaceDestroyFailed,
    WorkspaceFallback,
    WorkspaceInitialized,
    WorkspaceTerminalFailure,
)
from obs.encode import error_text, scrubbed_text
from obs.errors import ConfigError
from obs.events import emit
from obs.fallback import (
    ChainEvents,
    FallbackResult,
    FallbackRunner,
    Stage,
    error_type,
)
from obs.rank import RankResolver
from obs.stdlib import adopt_loggers

P = ParamSpec("P")
R = TypeVar("R")

Backend = Literal["auto", "mnnvl", "trtllm"]
Chain = Literal["fi_ar", "fi_ar_quant"]
DType = Any  # torch.dtype; not imported so that importing comm never imports torch
ProcessGroup = Any  # torch.distributed.ProcessGroup

#: Events point at the getter's caller (e.g. vLLM's fusion pass), not at this module.
__obs_callsite_skip__ = True

LOGGER_NAME = "comm.flashinfer_allreduce"
BACKENDS: tuple[Backend, ...] = ("auto", "mnnvl", "trtllm")
#: Read in this order; the first one set wins (the vLLM name is honoured for drop-in use).
BACKEND_VARIABLES = ("COMM_FI_AR_BACKEND", "VLLM_FLASHINFER_ALLREDUCE_BACKEND")

WORKSPACE_EVENTS = ChainEvents(
    attempt=WorkspaceAttempt,
    attempt_failed=WorkspaceAttemptFailed,
    fallback=WorkspaceFallback,
    initialized=WorkspaceInitialized,
    terminal_failure=WorkspaceTerminalFailure,
)


# --- settings -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CommSettings:
    """comm's settings; ``source`` names the variable that set the backend."""

    backend: Backend = "auto"
    source: str = "default"


def load_comm_settings(env: Mapping[str, str] | None = None) -> CommSettings:
    """Read :data:`BACKEND_VARIABLES` (the one place comm reads the environment).

    Raises :class:`obs.ConfigError` (a ``ValueError``) naming the variable for a value
    other than auto, mnnvl or trtllm.
    """
    env = os.environ if env is None else env
    for name in BACKEND_VARIABLES:
        raw = env.get(name)
        if raw is None or not raw.strip():
            continue
        return CommSettings(_backend(name, raw), name)
    return CommSettings()


def _backend(name: str, raw: object) -> Backend:
    text = str(raw).strip().lower()
    if text not in BACKENDS:
        raise ConfigError(name, raw, "one of " + ", ".join(BACKENDS))
    return text


# --- the factory seam ---------------------------------------------------------------------


@runtime_checkable
class Workspace(Protocol):
    """What comm needs of a workspace (flashinfer's ``AllReduceFusionWorkspace``)."""

    @property
    def backend(self) -> str:
        """``"mnnvl"`` or ``"trtllm"``."""
        ...

    def destroy(self) -> None:
        """Release the workspace (idempotent in flashinfer)."""
        ...


class WorkspaceFactory(Protocol):
    """Creates a workspace for one backend or raises; injectable for tests."""

    def create(
        self,
        *,
        backend: str,
        world_size: int,
        rank: int,
        max_token_num: int,
        hidden_dim: int,
        dtype: DType,
        group: ProcessGroup,
    ) -> Workspace:
        """A workspace for ``backend``; raises on failure (the chain classifies it)."""
        ...


def _adopt_flashinfer_loggers() -> None:
    """After the lazy flashinfer import: obs takes over the console handlers flashinfer set
    up while importing (``flashinfer.artifacts``'s, the JIT logger's), so each of their
    records comes out once, through obs. Never raises."""
    with contextlib.suppress(Exception):
        adopt_loggers()


class FlashInferWorkspaceFactory:
    """The real factory: ``flashinfer.comm.create_allreduce_fusion_workspace``.

    The import, ``TorchDistBackend(group=group)`` and the call all run here, inside the
    chain's guarded attempt (vLLM builds ``TorchDistBackend`` outside its ``try``). Python's
    ``random`` state is saved and restored around creation, as vLLM does: flashinfer draws
    from ``random`` and every rank shares the same user seed.
    """

    __slots__ = ()

    def create(
        self,
        *,
        backend: str,
        world_size: int,
        rank: int,
        max_token_num: int,
        hidden_dim: int,
        dtype: DType,
        group: ProcessGroup,
    ) -> Workspace:
        """Create the workspace with flashinfer (raises whatever flashinfer raises)."""
        import flashinfer.comm as fi_comm  # noqa: PLC0415 - lazy: flashinfer is optional
        from flashinfer.comm.mnnvl import TorchDistBackend  # type: ignore[attr-defined]  # noqa: PLC0415

        _adopt_flashinfer_loggers()

        comm_backend = TorchDistBackend(group=group)
        state = random.getstate()
        try:
            random.seed(int.from_bytes(os.urandom(16), byteorder="big"))
            workspace = fi_comm.create_allreduce_fusion_workspace(
                backend=backend,
                world_size=world_size,
                rank=rank,
                max_token_num=max_token_num,
                hidden_dim=hidden_dim,
                dtype=dtype,
                comm_backend=comm_backend,
                group=group,
            )
        finally:
            random.setstate(state)
        return cast("Workspace", workspace)


# --- the manager --------------------------------------------------------------------------


class BackendNotSupportedError(ValueError):
    """The configured backend cannot serve this topology (trtllm on several nodes): a
    configuration error, raised before any attempt (a ``ValueError``, as vLLM raises).
    ``backend`` and ``reason`` (a skip reason, e.g. ``multi_node``) say which and why."""

    def __init__(self, backend: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.backend = backend
        self.reason = reason


class WorkspaceUnavailableError(RuntimeError):
    """No backend could create the workspace; carries every attempt.

    Raised by :func:`require_fi_ar_workspace` in place of vLLM's far-away
    ``assert workspace is not None``.
    """

    def __init__(self, result: FallbackResult[Any]) -> None:
        self.result = result
        self.chain = result.chain
        self.attempts = result.attempts
        hint = terminal_hint(result)
        super().__init__(
            f"FlashInfer allreduce fusion workspace unavailable (chain {result.chain}): "
            f"{result.describe()}. Hint: {hint}. Every rank reported it as the "
            f'workspace_terminal_failure event (event="workspace_terminal_failure", '
            f'chain="{result.chain}").'
        )


@dataclasses.dataclass(frozen=True)
class _Args:
    world_size: int
    rank: int
    max_token_num: int
    hidden_dim: int
    dtype: DType
    group: ProcessGroup


class FiArWorkspaces:
    """The two workspaces (``fi_ar`` and ``fi_ar_quant``) of one process, and their chains.

    ``backend`` defaults to :func:`load_comm_settings`; ``nodes`` defaults to the node
    count from obs's rank info (world size / local world size). Creation is serialized
    by one lock, so concurrent first calls create one workspace; the cached path is a
    lock-free attribute read.
    """

    __slots__ = (
        "__weakref__",
        "_backend",
        "_factory",
        "_fi_ar",
        "_fi_ar_quant",
        "_lock",
        "_nodes",
        "_publish",
        "_results",
        "_runners",
        "_source",
    )

    def __init__(
        self,
        factory: WorkspaceFactory | None = None,
        *,
        backend: str | None = None,
        nodes: int | None = None,
        env: Mapping[str, str] | None = None,
        register_atexit: bool = False,
    ) -> None:
        self._factory: WorkspaceFactory = factory or FlashInferWorkspaceFactory()
        settings = (
            load_comm_settings(env)
            if backend is None
            else CommSettings(_backend("backend", backend), "the backend argument")
        )
        self._backend: Backend = settings.backend
        self._source = settings.source
        if nodes is not None and nodes < 1:
            raise ValueError(f"nodes={nodes!r} is not valid: expected an integer >= 1")
        self._nodes = nodes
        self._fi_ar: Workspace | None = None
        self._fi_ar_quant: Workspace | None = None
        #: Mirrors this manager's workspaces for the module-level getters (default only).
        self._publish: Callable[[FiArWorkspaces], None] | None = None
        self._results: dict[str, FallbackResult[Workspace]] = {}
        self._lock = threading.Lock()
        self._runners = {
            chain: FallbackRunner(
                chain,
                events=WORKSPACE_EVENTS,
                classify=classify_workspace_error,
                logger=LOGGER_NAME,
                scope="local",
                terminal_scope="process",
                once=True,
                hint=terminal_hint,
            )
            for chain in ("fi_ar", "fi_ar_quant")
        }
        if register_atexit:
            atexit.register(_destroy_if_alive, weakref.ref(self))

    @property
    def backend(self) -> Backend:
        """The configured backend (``auto``, ``mnnvl`` or ``trtllm``)."""
        return self._backend

    def nodes(self) -> int:
        """The node count the backend rules use."""
        if self._nodes is not None:
            return self._nodes
        info = RankResolver().current()
        return max(1, -(-info.world_size // max(1, info.local_world_size)))

    def result(self, chain: Chain) -> FallbackResult[Workspace] | None:
        """The cached outcome of ``chain`` (None before the first call or after destroy)."""
        return self._results.get(chain)

    def get_fi_ar_workspace(  # noqa: PLR0917 - vLLM's signature
        self,
        world_size: int,
        rank: int,
        max_token_num: int,
        hidden_dim: int,
        dtype: DType,
        group: ProcessGroup,
    ) -> Workspace | None:
        """The non-quant workspace, created on first call; None when no backend works."""
        ws = self._fi_ar
        if ws is not None:
            return ws
        return self._get("fi_ar", _Args(world_size, rank, max_token_num, hidden_dim, dtype, group))

    def get_fi_ar_quant_workspace(  # noqa: PLR0917 - vLLM's signature
        self,
        world_size: int,
        rank: int,
        max_token_num: int,
        hidden_dim: int,
        dtype: DType,
        group: ProcessGroup,
    ) -> Workspace | None:
        """The quant-fusion workspace; reuses the non-quant one when the backend matches."""
        ws = self._fi_ar_quant
        if ws is not None:
            return ws
        return self._get(
            "fi_ar_quant", _Args(world_size, rank, max_token_num, hidden_dim, dtype, group)
        )

    def require_fi_ar_workspace(  # noqa: PLR0917 - vLLM's signature
        self,
        world_size: int,
        rank: int,
        max_token_num: int,
        hidden_dim: int,
        dtype: DType,
        group: ProcessGroup,
    ) -> Workspace:
        """As :meth:`get_fi_ar_workspace`, but raise :class:`WorkspaceUnavailableError`."""
        ws = self.get_fi_ar_workspace(world_size, rank, max_token_num, hidden_dim, dtype, group)
        return ws if ws is not None else self._unavailable("fi_ar")

    def require_fi_ar_quant_workspace(  # noqa: PLR0917 - vLLM's signature
        self,
        world_size: int,
        rank: int,
        max_token_num: int,
        hidden_dim: int,
        dtype: DType,
        group: ProcessGroup,
    ) -> Workspace:
        """As :meth:`get_fi_ar_quant_workspace`, but raise :class:`WorkspaceUnavailableError`."""
        ws = self.get_fi_ar_quant_workspace(
            world_size, rank, max_token_num, hidden_dim, dtype, group
        )
        return ws if ws is not None else self._unavailable("fi_ar_quant")

    def destroy(self) -> None:
        """Destroy both workspaces (an alias once), forget cached outcomes; idempotent."""
        with self._lock:
            primary, quant = self._fi_ar, self._fi_ar_quant
            self._fi_ar = self._fi_ar_quant = None
            self._results.clear()
            if self._publish is not None:
                self._publish(self)
            try:  # the other is released even when the first one's destroy() interrupts
                self._destroy_one("fi_ar", primary)
            finally:
                if quant is not primary:
                    self._destroy_one("fi_ar_quant", quant)

    # -- internals -------------------------------------------------------------------

    def _get(self, chain: Chain, args: _Args) -> Workspace | None:
        with self._lock:
            ws = self._fi_ar if chain == "fi_ar" else self._fi_ar_quant
            if ws is not None:
                return ws
            cached = self._results.get(chain)
            if cached is not None:
                return cached.value
            nodes = self.nodes()
            if self._backend == "trtllm" and nodes > 1:
                self._runners[chain].run((Stage("trtllm", _never, skip=SKIP_MULTI_NODE),))
                raise BackendNotSupportedError(
                    "trtllm",
                    SKIP_MULTI_NODE,
                    f"FlashInfer allreduce backend 'trtllm' does not support multi-node "
                    f"allreduce ({nodes} nodes; set by {self._source}). Use 'mnnvl' or "
                    "'auto' instead.",
                )
            result = self._runners[chain].run(self._stages(chain, args, nodes))
            self._results[chain] = result
            if chain == "fi_ar":
                self._fi_ar = result.value
            else:
                self._fi_ar_quant = result.value
            if self._publish is not None:
                self._publish(self)
            return result.value

    def _stages(self, chain: Chain, args: _Args, nodes: int) -> tuple[Stage[Workspace], ...]:
        if self._backend == "auto":
            plan: tuple[tuple[str, str | None], ...] = (
                ("mnnvl", None),
                ("trtllm", None if nodes == 1 else SKIP_MULTI_NODE),
            )
        else:
            plan = ((self._backend, None),)
        return tuple(
            Stage(
                backend,
                functools.partial(self._create, backend, args),
                skip=skip,
                reuse=functools.partial(self._reusable, chain, backend),
            )
            for backend, skip in plan
        )

    def _create(self, backend: str, args: _Args) -> Workspace:
        return self._factory.create(
            backend=backend,
            world_size=args.world_size,
            rank=args.rank,
            max_token_num=args.max_token_num,
            hidden_dim=args.hidden_dim,
            dtype=args.dtype,
            group=args.group,
        )

    def _reusable(self, chain: Chain, backend: str) -> Workspace | None:
        other = self._fi_ar_quant if chain == "fi_ar" else self._fi_ar
        if other is not None and getattr(other, "backend", None) == backend:
            return other
        return None

    def _unavailable(self, chain: Chain) -> Workspace:
        result = self._results.get(chain)
        if result is None:  # destroyed concurrently: report what we know
            result = FallbackResult(chain, None, None, (), 0.0)
        raise WorkspaceUnavailableError(result)

    def _destroy_one(self, chain: str, ws: Workspace | None) -> None:
        """Destroy ``ws``; a failure is reported (an interruption then propagates)."""
        if ws is None:
            return
        try:
            ws.destroy()
        except BaseException as exc:
            event = WorkspaceDestroyFailed(chain, _backend_of(ws), error_type(exc), error_text(exc))
            emit(event, logger=LOGGER_NAME, scope="process")
            if not isinstance(exc, Exception):
                raise


def _backend_of(ws: Workspace) -> str:
    """``ws.backend`` as text for a report; "?" where reading it fails."""
    try:
        return scrubbed_text(str(ws.backend), 100)
    except Exception:
        return "?"


def _never() -> Workspace:
    raise AssertionError("a skipped stage is never run")


def _destroy_if_alive(ref: weakref.ref[FiArWorkspaces]) -> None:
    manager = ref()
    if manager is not None:
        manager.destroy()


# --- the module-level convenience API (vLLM's names and signatures) -----------------------

_default: FiArWorkspaces | None = None
_default_lock = threading.Lock()


def default_manager() -> FiArWorkspaces:
    """The process's default :class:`FiArWorkspaces`, created on first use (at-exit destroy)."""
    global _default
    manager = _default
    if manager is None:
        with _default_lock:
            if _default is None:
                _default = FiArWorkspaces(register_atexit=True)
                _default._publish = _mirror
            manager = _default
    return manager


def reset_default_manager(manager: FiArWorkspaces | None = None) -> None:
    """Destroy the default manager's workspaces and replace it (``manager``, or a fresh
    one on next use). For tests, and to re-read the backend setting."""
    global _default
    with _default_lock:
        old, _default = _default, manager
        if old is not None:
            old._publish = None
        if manager is not None:
            manager._publish = _mirror
        _mirror(manager)
    if old is not None:
        old.destroy()


#: The default manager's workspaces, mirrored: a module-level getter's cached path is
#: then one global read, as vLLM's own ``if _fi_ar_workspace is not None``.
_ws_fi_ar: Workspace | None = None
_ws_fi_ar_quant: Workspace | None = None


def _mirror(manager: FiArWorkspaces | None) -> None:
    """Publish ``manager``'s workspaces (None: none) for the module-level getters."""
    global _ws_fi_ar, _ws_fi_ar_quant
    _ws_fi_ar = manager._fi_ar if manager is not None else None
    _ws_fi_ar_quant = manager._fi_ar_quant if manager is not None else None


def _on_default_manager(
    method: Callable[Concatenate[FiArWorkspaces, P], R], cached: str
) -> Callable[P, R]:
    """vLLM's module-level form of a manager method: the same parameters (by position or by
    name), served by the default manager; a workspace already made is returned after one
    global read (``_ws_<cached>``). Generated from the method's own signature, so the
    signature is written once and the hot path has no ``*args`` layer."""
    signature = inspect.signature(method)
    params = ", ".join(list(signature.parameters)[1:])
    name = method.__name__
    source = (
        f"def {name}({params}):\n"
        f"    ws = _ws{cached}\n"
        "    if ws is not None:\n"
        "        return ws\n"
        f"    return FiArWorkspaces.{name}(default_manager(), {params})\n"
    )
    namespace: dict[str, Any] = {}
    exec(source, globals(), namespace)  # noqa: S102 - our own text, built from a signature
    function = namespace[name]
    function.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    function.__doc__ = method.__doc__
    function.__qualname__ = name
    return cast("Callable[P, R]", function)


#: vLLM's getters: the non-quant / quant workspace, or None when no backend works.
get_fi_ar_workspace = _on_default_manager(FiArWorkspaces.get_fi_ar_workspace, "_fi_ar")
get_fi_ar_quant_workspace = _on_default_manager(
    FiArWorkspaces.get_fi_ar_quant_workspace, "_fi_ar_quant"
)
#: The same, raising :class:`WorkspaceUnavailableError` (listing every attempt) for None.
require_fi_ar_workspace = _on_default_manager(FiArWorkspaces.require_fi_ar_workspace, "_fi_ar")
require_fi_ar_quant_workspace = _on_default_manager(
    FiArWorkspaces.require_fi_ar_quant_workspace, "_fi_ar_quant"
)


def destroy_fi_ar_workspace() -> None:
    """Destroy the default manager's workspaces (alias-aware, idempotent, thread-safe)."""
    manager = _default
    if manager is not None:
        manager.destroy()
