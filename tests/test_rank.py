"""Tests for obs.rank: launcher env parsing, torch.distributed, caching and refresh."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obs.rank import RankInfo, RankResolver, add_rank_info, rank_from_env

TORCHRUN = {
    "RANK": "3",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "1",
}
SLURM = {
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "2",
    "SLURM_NTASKS": "8",
    "SLURM_NTASKS_PER_NODE": "2",
}
# What mpirun sets for rank 6 of 8 on 2 nodes of 4: NODE_RANK is the rank on the node.
OPENMPI = {
    "OMPI_COMM_WORLD_RANK": "6",
    "OMPI_COMM_WORLD_LOCAL_RANK": "2",
    "OMPI_COMM_WORLD_SIZE": "8",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
    "OMPI_COMM_WORLD_NODE_RANK": "2",
}


class TestRankFromEnv:
    def test_torchrun(self) -> None:
        """torchrun's RANK/LOCAL_RANK/WORLD_SIZE/LOCAL_WORLD_SIZE/GROUP_RANK are read."""
        assert RankInfo(3, 1, 4, 2, 1, "h", "torchrun") == rank_from_env(TORCHRUN, "h")

    def test_torchrun_node_rank_alias(self) -> None:
        """NODE_RANK is the node index when GROUP_RANK is absent."""
        env = {**TORCHRUN, "NODE_RANK": "1"}
        del env["GROUP_RANK"]
        assert 1 == rank_from_env(env).node_rank  # type: ignore[union-attr]

    def test_torchrun_derives_missing_fields(self) -> None:
        """RANK with LOCAL_WORLD_SIZE only: local rank and node come from the arithmetic."""
        env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}
        assert RankInfo(5, 1, 8, 4, 1, "", "torchrun") == rank_from_env(env)

    def test_slurm(self) -> None:
        """SLURM_PROCID/LOCALID/NODEID/NTASKS are read."""
        assert RankInfo(5, 1, 8, 2, 2, "", "slurm") == rank_from_env(SLURM)

    def test_slurm_heterogeneous_tasks_per_node(self) -> None:
        """SLURM_NTASKS_PER_NODE like '2(x4)' is not a number and never breaks parsing."""
        env = {**SLURM, "SLURM_NTASKS_PER_NODE": "2(x4)"}
        info = rank_from_env(env)
        assert (5, 1, 8, 2) == (info.rank, info.local_rank, info.world_size, info.node_rank)  # type: ignore[union-attr]

    def test_openmpi(self) -> None:
        """Open MPI vars are read; the node index is rank // local size, not NODE_RANK."""
        assert RankInfo(6, 2, 8, 4, 1, "", "openmpi") == rank_from_env(OPENMPI)

    def test_openmpi_node_zero(self) -> None:
        """Rank 2 of node 0 (NODE_RANK=2 as mpirun sets it) is on node 0."""
        env = {**OPENMPI, "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_NODE_RANK": "2"}
        assert 0 == rank_from_env(env).node_rank  # type: ignore[union-attr]

    def test_torchrun_wins_over_slurm(self) -> None:
        """torchrun inside a SLURM allocation: torchrun's RANK is the process's rank."""
        assert "torchrun" == rank_from_env({**SLURM, **TORCHRUN}).source  # type: ignore[union-attr]

    def test_no_launcher_is_none(self) -> None:
        """Without launcher variables there is no env rank info."""
        assert rank_from_env({"PATH": "/bin"}) is None

    @pytest.mark.parametrize("bad", ["three", "", " ", "3.0", "-1", "0x3"])
    def test_malformed_rank_is_ignored(self, bad: str) -> None:
        """A malformed RANK is skipped (the next source, here SLURM, answers)."""
        assert "slurm" == rank_from_env({**SLURM, "RANK": bad}).source  # type: ignore[union-attr]

    def test_malformed_rank_alone_is_single_process(self) -> None:
        """A malformed RANK with no other source means no env info: a single process."""
        assert rank_from_env({"RANK": "oops", "WORLD_SIZE": "4"}) is None

    def test_malformed_local_fields_are_derived(self) -> None:
        """Malformed LOCAL_RANK/WORLD_SIZE/GROUP_RANK fall back to arithmetic, not errors."""
        env = {
            "RANK": "3",
            "LOCAL_RANK": "x",
            "WORLD_SIZE": "-4",
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "?",
        }
        assert RankInfo(3, 1, 4, 2, 1, "", "torchrun") == rank_from_env(env)

    def test_world_size_smaller_than_rank(self) -> None:
        """WORLD_SIZE <= RANK is inconsistent; world size becomes rank + 1."""
        assert 8 == rank_from_env({"RANK": "7", "WORLD_SIZE": "2"}).world_size  # type: ignore[union-attr]


class TestRankInfo:
    def test_single_process_defaults(self) -> None:
        """The default RankInfo is rank 0 of 1 on node 0."""
        info = RankInfo()
        assert (0, 0, 1, 1, 0, "single") == (
            info.rank,
            info.local_rank,
            info.world_size,
            info.local_world_size,
            info.node_rank,
            info.source,
        )

    def test_fields(self) -> None:
        """fields() returns the five record fields, as a fresh dict each time."""
        info = RankInfo(3, 1, 4, 2, 1, "gpu-1", "torchrun")
        fields = info.fields()
        fields["rank"] = 99
        expected = {
            "rank": 3,
            "local_rank": 1,
            "world_size": 4,
            "node_rank": 1,
            "host.name": "gpu-1",
        }
        assert expected == info.fields()

    def test_first_flags(self) -> None:
        """is_global_first / is_local_first follow rank and local rank."""
        flags = [
            (i.is_global_first, i.is_local_first)
            for i in (RankInfo(0, 0), RankInfo(2, 0), RankInfo(3, 1))
        ]
        assert [(True, True), (False, True), (False, False)] == flags


class TestRankResolver:
    def test_single_process(self) -> None:
        """No launcher env: rank 0 of 1 with the given host name."""
        assert RankInfo(host="box") == RankResolver(env={}, host="box").current()

    def test_host_defaults_to_hostname(self) -> None:
        """Without a host argument the machine's host name is used."""
        import socket

        assert socket.gethostname() == RankResolver(env={}).current().host

    def test_reads_os_environ_by_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With no env mapping the process environment is read."""
        for name, value in SLURM.items():
            monkeypatch.setenv(name, value)
        assert ("slurm", 5) == (RankResolver().current().source, RankResolver().current().rank)

    def test_cached_until_refresh(self) -> None:
        """current() is cached; refresh() re-reads the env mapping."""
        env = dict(TORCHRUN)
        resolver = RankResolver(env=env, host="h")
        first = resolver.current()
        env["RANK"] = "2"
        env["LOCAL_RANK"] = "0"
        assert (first, 3) == (resolver.current(), resolver.current().rank)
        assert (2, 0) == (resolver.refresh().rank, resolver.current().local_rank)

    def test_cached_object_is_reused(self) -> None:
        """A cached answer is the same object (no per-call allocation)."""
        resolver = RankResolver(env=dict(TORCHRUN))
        assert resolver.current() is resolver.current()

    def test_fork_recomputes_in_child(self) -> None:
        """After fork the child recomputes (it may be another rank); the parent keeps its cache."""
        env = dict(TORCHRUN)
        resolver = RankResolver(env=env, host="h")
        resolver.current()
        env["RANK"] = "1"
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.write(write, str(resolver.current().rank).encode())
            finally:
                os._exit(0)
        os.close(write)
        child_rank = int(os.read(read, 16).decode())
        os.close(read)
        os.waitpid(pid, 0)
        assert (1, 3) == (child_rank, resolver.current().rank)


def _fake_dist(**attrs: object) -> types.ModuleType:
    module = types.ModuleType("torch.distributed")
    module.is_available = lambda: True  # type: ignore[attr-defined]
    for name, value in attrs.items():
        setattr(module, name, value)
    return module


class TestBrokenTorchDistributed:
    def test_get_rank_raising_falls_back_to_env(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An initialized-looking torch.distributed whose get_rank raises: env answers."""

        def boom() -> int:
            raise RuntimeError("broken")

        fake = _fake_dist(
            is_initialized=lambda: True,
            group=types.SimpleNamespace(WORLD=object()),
            get_rank=boom,
            get_world_size=lambda: 2,
        )
        monkeypatch.setitem(sys.modules, "torch.distributed", fake)
        assert "torchrun" == RankResolver(env=dict(TORCHRUN)).current().source

    def test_is_initialized_raising_fails_open(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """is_initialized() raising counts as not initialized, never an error."""

        def boom() -> bool:
            raise RuntimeError("broken")

        monkeypatch.setitem(sys.modules, "torch.distributed", _fake_dist(is_initialized=boom))
        assert RankInfo(host="h") == RankResolver(env={}, host="h").current()

    def test_unavailable_distributed_is_ignored(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A torch built without distributed support is never asked for a rank."""
        fake = types.ModuleType("torch.distributed")
        fake.is_available = lambda: False  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "torch.distributed", fake)
        assert "torchrun" == RankResolver(env=dict(TORCHRUN)).current().source


class TestTorchDistributed:
    def test_initialized_group_is_preferred_and_re_evaluated(self, tmp_path: Path) -> None:
        """Before init: env; after init_process_group: torch.distributed; after destroy: env."""
        import torch.distributed as dist

        resolver = RankResolver(env=dict(TORCHRUN), host="h")
        before = resolver.current()
        dist.init_process_group(
            "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
        )
        try:
            during = resolver.current()
        finally:
            dist.destroy_process_group()
        after = resolver.current()
        assert ("torchrun", 3) == (before.source, before.rank)
        assert RankInfo(0, 0, 1, 1, 0, "h", "torch.distributed") == during
        assert ("torchrun", 3) == (after.source, after.rank)

    def test_env_local_fields_kept_when_ranks_agree(self, tmp_path: Path) -> None:
        """When torch's rank matches the env's, the env's local rank and node are kept."""
        import torch.distributed as dist

        env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "GROUP_RANK": "0"}
        resolver = RankResolver(env=env, host="h")
        dist.init_process_group(
            "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
        )
        try:
            info = resolver.current()
        finally:
            dist.destroy_process_group()
        assert RankInfo(0, 0, 1, 1, 0, "h", "torch.distributed") == info

    @pytest.mark.parametrize(
        "env",
        [
            {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"},  # vLLM's XPU worker: no RANK
            {"SLURM_LOCALID": "0", "SLURM_NTASKS_PER_NODE": "2"},
            {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
        ],
    )
    def test_env_local_fields_without_a_global_rank(self, env: dict[str, str]) -> None:
        """A launcher's local rank and local size are used with torch's rank when the env
        has no global rank: rank 2 of 4, two per node, is local rank 0 of node 1 (it was
        local rank 2 of node 0, and scope="local" kept it quiet)."""
        info = _with_fake_group(env, rank=2, world=4)
        assert RankInfo(2, 0, 4, 2, 1, "h", "torch.distributed") == info

    @settings(max_examples=30, deadline=None)
    @given(data=st.data(), per_node=st.integers(1, 8), nodes=st.integers(1, 4))
    def test_local_rank_and_node_follow_the_launchers_local_size(
        self, data: st.DataObject, per_node: int, nodes: int
    ) -> None:
        """Any rank of any block-mapped layout, the env giving only the local fields."""
        world = per_node * nodes
        rank = data.draw(st.integers(0, world - 1))
        env = {"LOCAL_RANK": str(rank % per_node), "LOCAL_WORLD_SIZE": str(per_node)}
        info = _with_fake_group(env, rank=rank, world=world)
        assert (rank % per_node, per_node, rank // per_node) == (
            info.local_rank,
            info.local_world_size,
            info.node_rank,
        )


def _with_fake_group(env: dict[str, str], *, rank: int, world: int) -> RankInfo:
    """The resolver's info inside torch's own fake process group (rank of world)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    resolver = RankResolver(env=env, host="h")
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        return resolver.current()
    finally:
        dist.destroy_process_group()


class TestAddRankInfo:
    def test_adds_fields_and_control_key(self) -> None:
        """The processor adds the five rank fields and ``_obs_rank``."""
        resolver = RankResolver(env=dict(TORCHRUN), host="gpu-1")
        out = add_rank_info(resolver)(None, "info", {"event": "e"})
        info = out.pop("_obs_rank")
        expected = {
            "event": "e",
            "rank": 3,
            "local_rank": 1,
            "world_size": 4,
            "node_rank": 1,
            "host.name": "gpu-1",
        }
        assert (expected, resolver.current()) == (out, info)

    def test_default_resolver(self) -> None:
        """Without a resolver the processor reads the process environment."""
        assert 0 == add_rank_info()(None, "info", {})["rank"]


_ENV_VALUE = st.one_of(
    st.none(),
    st.integers(-3, 40).map(str),
    st.sampled_from(["", "x", " 2 ", "1.5", "9" * 30]),
)


_LAUNCHERS = [
    ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"),
    ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID"),
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "OMPI_COMM_WORLD_NODE_RANK",
    ),
]


@settings(max_examples=300, deadline=None)
@given(
    source=st.sampled_from(_LAUNCHERS),
    rank=st.integers(0, 40),
    values=st.tuples(_ENV_VALUE, _ENV_VALUE, _ENV_VALUE, _ENV_VALUE),
)
def test_inconsistent_launcher_env_gives_a_consistent_rank(
    source: tuple[str, ...], rank: int, values: tuple[str | None, ...]
) -> None:
    """Whatever a launcher's variables say (LOCAL_RANK >= LOCAL_WORLD_SIZE, a local size
    above the world size, negative, non-int, huge), the rank info holds together: 0 <=
    local_rank < local_world_size <= world_size and rank < world_size, so each node has a
    local rank 0 for scope="local". LOCAL_RANK=5 with LOCAL_WORLD_SIZE=2 was kept as 5."""
    env = {source[0]: str(rank)}
    env.update({name: v for name, v in zip(source[1:], values, strict=True) if v is not None})
    info = rank_from_env(env)
    assert info is not None
    assert 0 <= info.rank < info.world_size, (env, info)
    assert 0 <= info.local_rank < info.local_world_size <= info.world_size, (env, info)
    assert 0 <= info.node_rank, (env, info)


def _compressed(counts: list[int]) -> str:
    """SLURM's form of a per-node task list: [4, 4, 3] is "4(x2),3"."""
    parts: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        parts.append(str(counts[i]) + (f"(x{j - i})" if j - i > 1 else ""))
        i = j
    return ",".join(parts)


@settings(max_examples=200, deadline=None)
@given(
    counts=st.one_of(
        st.tuples(st.integers(1, 8), st.integers(1, 6)).map(lambda t: [t[0]] * t[1]),
        st.lists(st.integers(1, 8), min_size=1, max_size=6),
    ),
    variable=st.sampled_from(["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "both"]),
    with_node_id=st.booleans(),
)
def test_srun_without_ntasks_per_node(counts: list[int], variable: str, with_node_id: bool) -> None:
    """srun -N<n> -n<N> without --ntasks-per-node sets no SLURM_NTASKS_PER_NODE, only the
    per-node task list: every rank gets its node's local size, so all ranks agree on one
    node or several (comm skips trtllm on several). Node 0's ranks took the whole world
    as their node (single node) while the other nodes' ranks saw several: the backend
    rules split the job, and a collective creation waited on ranks that never came."""
    world = sum(counts)
    text = _compressed(counts)
    rank = 0
    for node, count in enumerate(counts):
        for local in range(count):
            env = {
                "SLURM_PROCID": str(rank),
                "SLURM_LOCALID": str(local),
                "SLURM_NTASKS": str(world),
            }
            if with_node_id:
                env["SLURM_NODEID"] = str(node)
            if variable in ("SLURM_STEP_TASKS_PER_NODE", "both"):
                env["SLURM_STEP_TASKS_PER_NODE"] = text
            if variable in ("SLURM_TASKS_PER_NODE", "both"):
                env["SLURM_TASKS_PER_NODE"] = text if variable != "both" else "99"
            info = rank_from_env(env)
            assert info is not None
            several = -(-info.world_size // info.local_world_size) > 1
            assert (len(counts) > 1) == several, (env, info)
            assert (rank, local, world) == (info.rank, info.local_rank, info.world_size)
            if with_node_id or len(set(counts)) == 1:
                assert (node, count) == (info.node_rank, info.local_world_size), (env, info)
            rank += 1


@settings(max_examples=100, deadline=None)
@given(per_node=st.integers(1, 8), nodes=st.integers(1, 6), with_group_rank=st.booleans())
def test_torchrun_names_without_local_world_size(
    per_node: int, nodes: int, with_group_rank: bool
) -> None:
    """RANK/LOCAL_RANK/WORLD_SIZE and GROUP_WORLD_SIZE (the node count torchrun sets) but
    no LOCAL_WORLD_SIZE: the local size is the world over the nodes on every rank."""
    world = per_node * nodes
    for rank in range(world):
        env = {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank % per_node),
            "WORLD_SIZE": str(world),
            "GROUP_WORLD_SIZE": str(nodes),
        }
        if with_group_rank:
            env["GROUP_RANK"] = str(rank // per_node)
        info = rank_from_env(env)
        assert info is not None
        assert (rank % per_node, per_node, rank // per_node) == (
            info.local_rank,
            info.local_world_size,
            info.node_rank,
        ), env


_OTHER_LAUNCHER = st.sampled_from(
    [
        "none",
        "SLURM_NTASKS_PER_NODE",
        "SLURM_STEP_TASKS_PER_NODE",
        "SLURM_NNODES",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ]
)


def _other_launcher_env(kind: str, per_node: int, nodes: int) -> dict[str, str]:
    """What another launcher around the job sets that gives the local size away."""
    world = str(per_node * nodes)
    if kind == "SLURM_NTASKS_PER_NODE":
        return {"SLURM_NTASKS": world, "SLURM_NTASKS_PER_NODE": str(per_node)}
    if kind == "SLURM_STEP_TASKS_PER_NODE":
        return {"SLURM_NTASKS": world, "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})"}
    if kind == "SLURM_NNODES":
        return {"SLURM_NNODES": str(nodes)}
    if kind == "OMPI_COMM_WORLD_LOCAL_SIZE":
        return {"OMPI_COMM_WORLD_SIZE": world, "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_node)}
    return {}


@settings(max_examples=150, deadline=None)
@given(
    per_node=st.integers(1, 8),
    nodes=st.integers(1, 6),
    with_group_rank=st.booleans(),
    other=_OTHER_LAUNCHER,
)
def test_every_rank_agrees_on_the_nodes_without_local_world_size(
    per_node: int, nodes: int, with_group_rank: bool, other: str
) -> None:
    """RANK/LOCAL_RANK/WORLD_SIZE exported by a job script (RANK=$SLURM_PROCID, ...) with no
    LOCAL_WORLD_SIZE: every rank takes the same node count, so comm's backend rules send
    every rank down the same path; where another launcher's variables around the job give
    the local size (SLURM's, Open MPI's), it is that. Each rank guessed its own: rank 0 one
    node, rank 5 (LOCAL_RANK=1) LOCAL_RANK + 1 = 2 per node, so node 0 tried trtllm and
    waited in a collective the other nodes' ranks never joined."""
    world = per_node * nodes
    around = _other_launcher_env(other, per_node, nodes)
    counts = set()
    for rank in range(world):
        env = {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank % per_node),
            "WORLD_SIZE": str(world),
            **around,
        }
        if with_group_rank:
            env["GROUP_RANK"] = str(rank // per_node)
        info = rank_from_env(env)
        assert info is not None
        assert (rank, rank % per_node, world) == (info.rank, info.local_rank, info.world_size)
        counts.add(-(-info.world_size // info.local_world_size))
        if other != "none":
            assert (per_node, rank // per_node) == (info.local_world_size, info.node_rank), env
    assert 1 == len(counts), (per_node, nodes, other, counts)
