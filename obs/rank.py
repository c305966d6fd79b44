"""Rank information: who am I in the job, without importing torch.

Sources, first that answers wins: an initialized ``torch.distributed`` (consulted only
when torch is already imported), torchrun env, SLURM env, Open MPI env, else a single
process. A missing local size is taken from the launcher's per-node task list or node
count (SLURM without ``--ntasks-per-node``), else from another launcher's variables around
the job, else the whole world is one node: the same answer on every rank.
:class:`RankResolver` re-evaluates when the answer can change (process group initialized
or destroyed, fork) and is a few attribute reads otherwise.
"""

from __future__ import annotations

__all__ = ["RankInfo", "RankResolver", "add_rank_info", "rank_from_env"]

import dataclasses
import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger


@dataclasses.dataclass(frozen=True)
class RankInfo:
    """Where this process sits in the job. ``source`` says which source answered."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    host: str = ""
    source: str = "single"

    @property
    def is_global_first(self) -> bool:
        """True on global rank 0 (``scope="global"`` logs here)."""
        return self.rank == 0

    @property
    def is_local_first(self) -> bool:
        """True on local rank 0 of each node (``scope="local"`` logs here)."""
        return self.local_rank == 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "_fields", self._make_fields())

    def fields(self) -> dict[str, Any]:
        """The record fields every event carries (a fresh dict)."""
        return dict(self._fields)  # type: ignore[attr-defined]

    def _make_fields(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "node_rank": self.node_rank,
            "host.name": self.host,
        }


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        raw = env.get(name)
        if raw is None:
            continue
        try:
            value = int(raw.strip())
        except ValueError:
            continue  # a malformed launcher variable must never break logging
        if value >= 0:  # a negative rank or size is malformed too
            return value
    return None


_SOURCES: tuple[
    tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]],
    ...,
] = (
    # name, rank, local_rank, world_size, local_world_size, node_rank
    (
        "torchrun",
        ("RANK",),
        ("LOCAL_RANK",),
        ("WORLD_SIZE",),
        ("LOCAL_WORLD_SIZE",),
        ("GROUP_RANK", "NODE_RANK"),
    ),
    (
        "slurm",
        ("SLURM_PROCID",),
        ("SLURM_LOCALID",),
        ("SLURM_NTASKS",),
        ("SLURM_NTASKS_PER_NODE",),
        ("SLURM_NODEID",),
    ),
    (
        "openmpi",
        ("OMPI_COMM_WORLD_RANK",),
        ("OMPI_COMM_WORLD_LOCAL_RANK",),
        ("OMPI_COMM_WORLD_SIZE",),
        ("OMPI_COMM_WORLD_LOCAL_SIZE",),
        # Not OMPI_COMM_WORLD_NODE_RANK: that is the rank *on* the node across all jobs, not
        # the node's index; the index is rank // local size (block mapping, mpirun's default).
        (),
    ),
)


#: Where a launcher's local size variable is missing (srun without --ntasks-per-node sets
#: no SLURM_NTASKS_PER_NODE): its per-node task list ("4(x2),3"), then its node count.
_LOCAL_HINTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "torchrun": ((), ("GROUP_WORLD_SIZE",)),
    "slurm": (
        ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"),
        ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"),
    ),
}
_MAX_NODES = 1 << 16  # entries a task list is expanded to


def _tasks_per_node(text: str) -> list[int] | None:
    """SLURM's compressed task counts per node ("4(x2),3" is [4, 4, 3]), or None when
    malformed (or more than :data:`_MAX_NODES` nodes)."""
    counts: list[int] = []
    for part in text.strip().split(",")[:_MAX_NODES]:
        count, _, times = part.strip().partition("(x")
        try:
            n, repeat = int(count), int(times.rstrip(")")) if times else 1
        except ValueError:
            return None
        if n < 1 or repeat < 1 or len(counts) + repeat > _MAX_NODES:
            return None
        counts.extend([n] * repeat)
    return counts or None


def _local_size_hint(
    source: str, env: Mapping[str, str], world: int, node: int | None
) -> int | None:
    """The local size where the launcher's variable for it is missing, from what else it
    sets: this node's entry of the per-node task list, else the world over the node count
    (rounded up). The same answer on every rank of a homogeneous job, so every rank takes
    the same single-node or several-node path (comm's backend rules). None: no hint."""
    lists, node_counts = _LOCAL_HINTS.get(source, ((), ()))
    for name in lists:
        counts = _tasks_per_node(env.get(name) or "")
        if counts is not None:
            if len(counts) == 1:
                return min(counts[0], world)
            if node is not None and node < len(counts):
                return min(counts[node], world)
            return min(max(counts), world)
    nodes = _int(env, *node_counts)
    return -(-world // nodes) if nodes else None


def _around(source: str, env: Mapping[str, str], world: int, node: int | None) -> int | None:
    """The local size from another launcher's variables around the job (a script that
    exports ``RANK=$SLURM_PROCID``, ``LOCAL_RANK=$SLURM_LOCALID``): its local size or task
    list where its world size is ours, its node count in any case. None: none says."""
    for name, _, _, ws, lws, nr in _SOURCES:
        if name == source:
            continue
        if _int(env, *ws) == world:
            size = _int(env, *lws)
            if size:
                return min(size, world)
            at = node if node is not None else _int(env, *nr)
            hint = _local_size_hint(name, env, world, at)
        else:  # another layer's tasks (one per node, say): only its node count holds
            nodes = _int(env, *_LOCAL_HINTS.get(name, ((), ()))[1])
            hint = -(-world // nodes) if nodes else None
        if hint:
            return hint
    return None


def local_from_env(env: Mapping[str, str]) -> tuple[int | None, int | None]:
    """A launcher's local rank and local size where it gives no global rank (vLLM's
    workers set ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` alone); torch.distributed gives
    the rest. (None, None) when no launcher says."""
    for _, _, lr, _, lws, _ in _SOURCES:
        local_rank, local_world = _int(env, *lr), _int(env, *lws)
        if local_rank is not None or local_world:
            if local_world and local_world > 0 and local_rank is not None:
                local_rank = local_rank if 0 <= local_rank < local_world else None
            return local_rank, local_world if local_world and local_world > 0 else None
    return None, None


def rank_from_env(env: Mapping[str, str], host: str = "") -> RankInfo | None:
    """Rank info from launcher variables (torchrun, SLURM, Open MPI), or None."""
    for source, r, lr, ws, lws, nr in _SOURCES:
        rank = _int(env, *r)
        if rank is None:
            continue
        local_rank = _int(env, *lr)
        world = _int(env, *ws)
        local_world = _int(env, *lws)
        node = _int(env, *nr)
        world = world if world and world > rank else rank + 1
        if not local_world:
            local_world = _local_size_hint(source, env, world, node) or _around(
                source, env, world, node
            )
        if not local_world:
            # No launcher says: the whole world is one node, on every rank alike (a guess
            # from this rank's LOCAL_RANK would differ between ranks, and so would comm's
            # backend path).
            local_world = world
        if local_rank is None:
            local_rank = rank % local_world
        # Inconsistent variables (LOCAL_RANK >= LOCAL_WORLD_SIZE, a local size above the
        # world size) are made consistent, so every node has a local rank 0.
        local_world = min(local_world, world)
        if local_rank >= local_world:
            local_rank = rank % local_world
        if node is None:
            node = rank // local_world if local_world else 0
        return RankInfo(rank, local_rank, world, local_world, node, host, source)
    return None


class RankResolver:
    """Caches :class:`RankInfo`; recomputes when torch.distributed or the pid changes."""

    __slots__ = (
        "__weakref__",
        "_dist_state",
        "_env",
        "_host",
        "_info",
        "_is_init",
        "_stale",
        "generation",
        "on_change",
        "world",
    )

    def __init__(self, env: Mapping[str, str] | None = None, host: str | None = None) -> None:
        self._env = env
        self._host = host
        #: True when the cached info must be recomputed (after a fork, or ``refresh()``).
        self._stale = True
        #: Bumped whenever the info is recomputed or marked stale (after a fork): the once
        #: cache compares it inline instead of calling :meth:`current`.
        self.generation = 0
        #: Called after the generation moved (the once cache drops its inline check's
        #: holder, so a hit compares one attribute, not the generation too).
        self.on_change: Callable[[], object] | None = None
        self._dist_state: object = False
        self._is_init: Any = None
        #: torch's process-group holder once found (its ``_default_pg`` is what the probe
        #: reads): the once cache compares it inline instead of calling :meth:`current`.
        #: Until then a stand-in with the same attribute (see :class:`_NotImported`); None
        #: only where the probe must be called (a torch without the holder).
        self.world: Any = NOT_IMPORTED
        self._info = RankInfo()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _mark_stale(ref))

    def current(self) -> RankInfo:
        """The rank info now; cheap when nothing changed (one probe of torch.distributed)."""
        probe = self._is_init
        if probe is not None:
            state = probe()
        else:  # torch.distributed not found yet: look only once it is imported (a C test)
            state = self._dist_probe() if NOT_IMPORTED._default_pg else False
        if state is not self._dist_state or self._stale:
            self.generation += 1
            self._info = self._compute(state)
            self._dist_state = state
            self._stale = False
            if self.on_change is not None:
                self.on_change()
        return self._info

    def refresh(self) -> RankInfo:
        """Forget the cache and recompute (after changing env vars, say)."""
        self._stale = True
        return self.current()

    def _dist_probe(self) -> object:
        """The default process group when torch.distributed is initialized, else False.

        Reads torch's world holder directly (one attribute read, ~30 ns) and falls back to
        ``is_initialized()`` where that private holder is missing. Identity changes when a
        group is destroyed and another initialized, so re-initialisation is seen too.
        """
        probe = self._is_init
        if probe is None:
            dist = sys.modules.get("torch.distributed")
            if dist is None:
                return False
            _WATCH._default_pg = True  # seen here first (another finder went before it)
            try:
                if not dist.is_available():
                    probe = _NEVER
                    self.world = NO_GROUPS
                else:
                    world = getattr(getattr(dist, "distributed_c10d", None), "_world", None)
                    if world is not None and hasattr(world, "_default_pg"):
                        probe = functools.partial(getattr, world, "_default_pg", None)
                        self.world = world
                    else:
                        probe = _via_is_initialized(dist)
                        self.world = None
            except Exception:
                return False
            self._is_init = probe
        return probe()

    def _compute(self, dist_state: object) -> RankInfo:
        env = os.environ if self._env is None else self._env
        host = self._host if self._host is not None else _hostname()
        from_env = rank_from_env(env, host)
        if not dist_state:
            return from_env or RankInfo(host=host)
        dist = sys.modules["torch.distributed"]
        try:
            rank = int(dist.get_rank())
            world = int(dist.get_world_size())
        except Exception:
            return from_env or RankInfo(host=host)
        if from_env is not None and from_env.rank == rank:
            local_rank, local_world, node = (
                from_env.local_rank,
                from_env.local_world_size,
                from_env.node_rank,
            )
        else:
            given_rank, given_world = (None, None) if from_env else local_from_env(env)
            size = from_env.local_world_size if from_env else given_world or world
            local_world = min(size, world)
            local_rank = rank % local_world
            if given_rank is not None and given_rank < local_world:
                local_rank = given_rank
            node = rank // local_world
        return RankInfo(rank, local_rank, world, local_world, node, host, "torch.distributed")


class _NotImported(str):
    """torch's world holder before ``torch.distributed`` is imported: its ``_default_pg``
    is False until the module appears (True after), so the once cache's inline check sees
    the import without calling :meth:`RankResolver.current` on every hit. The stand-in is
    the module's name and the getter is ``sys.modules.__contains__`` itself: a C call, not
    a Python frame per hit (which cost a suppressed repeat a third more instructions)."""

    __slots__ = ()
    _default_pg = property(sys.modules.__contains__)


class _NoGroups:
    """The holder where torch has no distributed support: never a group."""

    __slots__ = ()
    _default_pg = None


NOT_IMPORTED = _NotImported("torch.distributed")
NO_GROUPS = _NoGroups()


class _ImportWatch:
    """torch's world holder for the once cache while torch is not imported at all: its
    ``_default_pg`` is a plain attribute, False until an import of ``torch.distributed``
    starts (this finder, first on ``sys.meta_path``, sees it and says True; it finds
    nothing itself), so a hit reads one attribute instead of probing ``sys.modules``."""

    __slots__ = ("_default_pg",)

    def __init__(self) -> None:
        self._default_pg = False

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        """Note an import of ``torch.distributed`` (or a module in it); find nothing."""
        if name[:17] == "torch.distributed":
            self._default_pg = True

    def __repr__(self) -> str:
        return "obs.rank.import_watch"


_WATCH = _ImportWatch()
_WATCH_LOCK = threading.Lock()


def import_watch() -> Any:
    """The import watch, installed on first use (never at import), when it can be
    trusted: torch was not imported before it was in place (checked after installing, so
    an import that started meanwhile is not missed) and no import was seen. None: probe
    ``sys.modules`` instead (:data:`NOT_IMPORTED`)."""
    if _WATCH._default_pg:
        return None
    with _WATCH_LOCK:
        if _WATCH not in sys.meta_path:
            try:
                sys.meta_path.insert(0, _WATCH)
            except Exception:  # an odd meta_path: probe instead
                return None
    if "torch" in sys.modules or "torch.distributed" in sys.modules or _WATCH._default_pg:
        return None
    return _WATCH


#: The probes where the answer needs no Python frame per call (``current`` is on every
#: line's path): never a group (torch without distributed support), and torch's world
#: holder's ``_default_pg`` read in C (None: not initialized).
_NEVER = functools.partial(bool)


def _via_is_initialized(dist: Any) -> Callable[[], object]:
    def probe() -> object:
        try:
            return dist.group.WORLD if dist.is_initialized() else False
        except Exception:
            return False  # fail open: rank checks never break logging

    return probe


def _mark_stale(ref: weakref.ref[RankResolver]) -> None:
    resolver = ref()
    if resolver is not None:
        resolver._stale = True
        resolver.generation += 1
        if resolver.on_change is not None:
            resolver.on_change()


class add_rank_info:  # noqa: N801 - a processor, named like structlog's add_log_level
    """Processor: add ``rank``, ``local_rank``, ``world_size``, ``node_rank``, ``host.name``."""

    __slots__ = ("_resolver",)

    def __init__(self, resolver: RankResolver | None = None) -> None:
        self._resolver = resolver or RankResolver()

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        info = self._resolver.current()
        event_dict.update(info._fields)  # type: ignore[attr-defined]
        event_dict["_obs_rank"] = info
        return event_dict


def _hostname() -> str:
    """``socket.gethostname()``, read from ``os.uname()`` where there is one (the same
    name; no import at log time, which fails as the interpreter shuts down)."""
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().nodename)
    import socket  # noqa: PLC0415 - socket costs more to import than the rest of this module

    return socket.gethostname()
