"""The probe's data: what to run (:class:`ProbeSpec`, passed to the launcher and the ranks
as JSON) and what came back (:class:`RankReport`, :class:`ProbeResult`, which decides the
exit status from the reports alone)."""

from __future__ import annotations

__all__ = [
    "CHAINS",
    "DTYPES",
    "EXIT_OK",
    "EXIT_PROBE_FAILED",
    "EXIT_TERMINAL",
    "EXIT_UNDELIVERED",
    "EXIT_USAGE",
    "KEEP_RUNS",
    "MAX_TIMEOUT_S",
    "MAX_WORLD_SIZE",
    "STAGE_ORDER",
    "ChainReport",
    "ProbeResult",
    "ProbeSpec",
    "RankReport",
    "SetupError",
    "decode_spec",
    "encode_spec",
]

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from obs.fallback import Attempt

DTYPES = ("bfloat16", "float16", "float32")
CHAINS = ("fi_ar", "fi_ar_quant")
EXIT_OK, EXIT_PROBE_FAILED, EXIT_USAGE, EXIT_TERMINAL, EXIT_UNDELIVERED = 0, 1, 2, 3, 4
#: The most ranks a probe starts. Every rank is a process on this host (torch, gloo's
#: threads and a full mesh of world_size - 1 TCP connections each, so sockets grow with
#: the square), and the largest NVLink domain the probe stands in for is a 72-GPU rack:
#: 256 covers that several times over (``--nodes`` splits it), where 100,000 would only
#: exhaust the host's processes, memory or file descriptors.
MAX_WORLD_SIZE = 256
#: The longest ``--timeout``: a day. torch.distributed keeps its timeout in milliseconds
#: in a C int (24.8 days), and a probe that has not finished in a day never will.
MAX_TIMEOUT_S = 86400.0
#: Runs kept under the default log directory (older ``run-*`` folders are removed).
KEEP_RUNS = 5
#: The workspace events in the order they happen (the summary lists them so).
STAGE_ORDER = (
    "workspace_attempt",
    "workspace_attempt_failed",
    "workspace_fallback",
    "workspace_initialized",
    "workspace_terminal_failure",
)


class SetupError(RuntimeError):
    """The run could not be set up (its folder, the pipe, the launcher): the OS said why.
    The command line prints it as one line and exits 1 (the probe failed)."""


@dataclasses.dataclass(frozen=True)
class ProbeSpec:
    """What to run: the getters' arguments, the topology and where records go.

    ``otlp_endpoint`` None: the ranks inherit the environment's OTel settings.
    """

    world_size: int
    nodes: int = 1
    backend: str = "auto"
    max_token_num: int = 2048
    hidden_dim: int = 4096
    dtype: str = "bfloat16"
    otlp_endpoint: str | None = None
    dist_backend: str = "auto"
    timeout: float = 120.0
    log_dir: str = ""
    master_port: int = 0

    @property
    def ranks_per_node(self) -> int:
        """Local world size."""
        return self.world_size // self.nodes

    def local_rank(self, rank: int) -> int:
        """``rank``'s rank within its node."""
        return rank % self.ranks_per_node

    def node_of(self, rank: int) -> int:
        """The node ``rank`` runs on."""
        return rank // self.ranks_per_node


@dataclasses.dataclass(frozen=True)
class ChainReport:
    """One getter's outcome on one rank."""

    chain: str
    outcome: str  # initialized | terminal_failure | config_error | error
    backend: str | None
    reused: bool
    returned_none: bool
    attempts: tuple[Attempt, ...]
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class RankReport:
    """What one rank did (``error`` set when it failed outside the getters)."""

    rank: int
    local_rank: int
    node: int
    pid: int
    dist_backend: str
    chains: tuple[ChainReport, ...]
    error: str | None
    duration_s: float
    delivery: Mapping[str, Any] | None = None  # obs.delivery() after the rank's shutdown

    def chain(self, name: str) -> ChainReport | None:
        """The report of getter chain ``name``."""
        return next((c for c in self.chains if c.chain == name), None)


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """Every rank's report; ``missing`` ranks sent none (crashed or timed out)."""

    spec: ProbeSpec
    reports: Mapping[int, RankReport]
    missing: tuple[int, ...]
    mode: str
    timed_out: bool
    duration_s: float
    #: How each rank that ended before the run did ended, by rank: its exit status as
    #: ``os.waitstatus_to_exitcode`` gives it (``-9``: killed by SIGKILL).
    exits: Mapping[int, int] = dataclasses.field(default_factory=dict)
    #: Why the run was stopped before every rank reported (a rank or the launcher ended
    #: first, so the others could never finish), or None.
    stopped: str | None = None

    @property
    def undelivered(self) -> tuple[int, ...]:
        """Ranks that exported over OTLP but whose records were not all acknowledged."""
        return tuple(
            rank
            for rank, r in sorted(self.reports.items())
            if r.delivery
            and r.delivery.get("exporting")
            and int(r.delivery.get("acknowledged", 0)) < int(r.delivery.get("sent", 0))
        )

    @property
    def exit_code(self) -> int:
        """4 if records were not delivered, else 3 on any terminal failure, else 1 if a
        rank failed, else 0."""
        outcomes = [c.outcome for r in self.reports.values() for c in r.chains]
        if self.undelivered:
            return EXIT_UNDELIVERED
        if any(o in ("terminal_failure", "config_error") for o in outcomes):
            return EXIT_TERMINAL
        if self.missing or self.timed_out or any(r.error for r in self.reports.values()):
            return EXIT_PROBE_FAILED
        if len(outcomes) != len(CHAINS) * self.spec.world_size:
            return EXIT_PROBE_FAILED
        return EXIT_OK


def encode_spec(spec: ProbeSpec, fd: int) -> str:
    """The spec as the launcher's and the ranks' argument, with the pipe to report on."""
    return json.dumps({**dataclasses.asdict(spec), "fd": fd})


def decode_spec(text: str) -> tuple[ProbeSpec, int]:
    """(spec, pipe fd) from :func:`encode_spec`'s text."""
    raw: dict[str, Any] = json.loads(text)
    fd = int(raw.pop("fd"))
    return ProbeSpec(**raw), fd
