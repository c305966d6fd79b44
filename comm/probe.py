"""``python -m comm probe``: run the workspace fallback chain on N local ranks and report.

The parent starts an OTLP receiver on loopback (unless an endpoint is configured), then a
launcher process that starts the ranks with torchrun's environment (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``), so ``--nodes 2`` simulates two nodes on one machine. Each rank
configures obs (exporting over OTLP), joins a gloo (CPU) or nccl (GPUs) process group,
runs both getters, writes its report and flushes obs. The parent prints a line per rank
as it starts, a per-rank table, and what arrived over OTLP per event and rank.

Speed: on a CPU-only torch build the launcher imports torch and flashinfer once and forks
the ranks (importing flashinfer takes seconds per process); with a CUDA build it starts a
fresh interpreter per rank instead, since CUDA does not survive fork.

Exit status: 0 every rank initialized both workspaces, 3 a terminal failure on any rank,
4 records were not delivered over OTLP (obs' own counters: sent but not acknowledged), 2
bad usage, 1 the probe itself failed (a rank crashed or timed out). 4 wins over 3: a
terminal failure the collector never received is one nobody will be alerted to.

Run directories: without ``--log-dir`` each run writes under
``$TMPDIR/comm-probe-$UID/run-*``, and only the last :data:`KEEP_RUNS` runs are kept.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "ChainReport",
    "ProbeResult",
    "ProbeSpec",
    "RankReport",
    "build_parser",
    "failure_causes",
    "format_ranks",
    "is_logs_url",
    "last_exception",
    "launch",
    "main",
    "new_run_dir",
    "render_delivery",
    "render_grouped",
    "render_table",
    "result_json",
    "summarize_records",
]

import argparse
import contextlib
import dataclasses
import json
import math
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

from obs.fallback import Attempt

DTYPES = ("bfloat16", "float16", "float32")
CHAINS = ("fi_ar", "fi_ar_quant")
EXIT_OK, EXIT_PROBE_FAILED, EXIT_USAGE, EXIT_TERMINAL, EXIT_UNDELIVERED = 0, 1, 2, 3, 4
#: Runs kept under the default log directory (older ``run-*`` folders are removed).
KEEP_RUNS = 5
_STAGE_ORDER = (
    "workspace_attempt",
    "workspace_attempt_failed",
    "workspace_fallback",
    "workspace_initialized",
    "workspace_terminal_failure",
)
_BOOT = "import sys; from comm.probe import {fn}; sys.exit({fn}(sys.argv[1:]))"


# --- data ---------------------------------------------------------------------------------


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


# --- the parent ---------------------------------------------------------------------------


def launch(
    spec: ProbeSpec,
    *,
    on_message: Callable[[Mapping[str, Any]], None] | None = None,
) -> ProbeResult:
    """Start the ranks, wait for them (bounded by ``spec.timeout``) and collect reports."""
    started = time.monotonic()
    log_dir = spec.log_dir or new_run_dir()
    os.makedirs(log_dir, exist_ok=True)
    spec = dataclasses.replace(spec, log_dir=log_dir, master_port=spec.master_port or _free_port())
    read_fd, write_fd = os.pipe()
    payload = json.dumps({**dataclasses.asdict(spec), "fd": write_fd})
    env = _base_env(spec)
    with open(os.path.join(log_dir, "launcher.log"), "ab") as launcher_log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT.format(fn="_launcher_entry"), payload],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=launcher_log,
            stderr=launcher_log,
            pass_fds=(write_fd,),
            start_new_session=True,
        )
    os.close(write_fd)
    collector = _Collector(on_message)
    clean = False
    try:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            clean = collector.read(pipe, started + spec.timeout)
        if clean:
            proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        clean = False
    finally:
        if not clean:  # timeout, Ctrl-C, a crash here: never leave ranks behind
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.wait(timeout=10)
    mode, done, timed_out = collector.mode, collector.done, collector.timed_out
    reports = {}
    for rank in sorted(done):
        report = _read_report(os.path.join(log_dir, f"rank-{rank}.json"))
        if report is not None:
            reports[rank] = report
    missing = tuple(r for r in range(spec.world_size) if r not in reports)
    return ProbeResult(
        spec, reports, missing, mode, timed_out, round(time.monotonic() - started, 3)
    )


def new_run_dir(base: str | None = None, keep: int = KEEP_RUNS) -> str:
    """A fresh ``run-*`` folder under ``base`` (default ``$TMPDIR/comm-probe-$UID``), after
    removing all but the newest ``keep - 1`` earlier runs, so probes never fill /tmp."""
    base = base or os.path.join(tempfile.gettempdir(), f"comm-probe-{os.getuid()}")
    os.makedirs(base, mode=0o700, exist_ok=True)
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        # Not ours (another user's, a symlink, or writable by others in a shared /tmp):
        # a fresh private folder instead, never pruned.
        return tempfile.mkdtemp(prefix="comm-probe-")
    runs: list[tuple[float, str, str]] = []
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        for e in entries:
            with contextlib.suppress(OSError):  # another probe may be pruning too
                if e.name.startswith("run-") and e.is_dir(follow_symlinks=False):
                    runs.append((e.stat().st_mtime, e.name, e.path))
    runs.sort()
    for _, _, path in runs[: max(len(runs) - (keep - 1), 0)]:
        shutil.rmtree(path, ignore_errors=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return tempfile.mkdtemp(prefix=f"run-{stamp}-", dir=base)


class _Collector:
    """Reads the JSON-line messages of the launcher and ranks off the pipe."""

    __slots__ = ("done", "mode", "on_message", "timed_out")

    def __init__(self, on_message: Callable[[Mapping[str, Any]], None] | None) -> None:
        self.on_message = on_message
        self.mode = "?"
        self.done: set[int] = set()
        self.timed_out = False

    def read(self, pipe: IO[bytes], deadline: float) -> bool:
        """Until every writer is gone (True) or the deadline passes (False)."""
        buffer = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                return False
            ready, _, _ = select.select([pipe], [], [], min(remaining, 0.5))
            if not ready:
                continue
            chunk = pipe.read(65536)
            if not chunk:
                return True  # the launcher and every rank have exited
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self._handle(line)

    def _handle(self, line: bytes) -> None:
        message = _parse(line)
        if message is None:
            return
        if message.get("kind") == "launcher":
            self.mode = str(message.get("mode"))
        if message.get("kind") == "done":
            self.done.add(int(message["rank"]))
        if self.on_message is not None:
            self.on_message(message)


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _base_env(spec: ProbeSpec) -> dict[str, str]:
    """The ranks' environment: ours, plus comm/obs/OTel settings for the probe."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    env["COMM_FI_AR_BACKEND"] = spec.backend
    env.setdefault("OBS_LEVEL", "DEBUG")
    env["OBS_FORMAT"] = "json"
    env.setdefault("OTEL_SERVICE_NAME", "comm-probe")
    if spec.otlp_endpoint is not None:
        for name in (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
            "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
        ):
            env.pop(name, None)
        # A full logs URL (".../v1/logs") is used as is; a base URL gets /v1/logs appended.
        name = "OTEL_EXPORTER_OTLP_ENDPOINT"
        if is_logs_url(spec.otlp_endpoint):
            name = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
        env[name] = spec.otlp_endpoint
        env["OTEL_LOGS_EXPORTER"] = "otlp"
        env.setdefault("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        env.setdefault("OTEL_BLRP_SCHEDULE_DELAY", "200")
    return env


def is_logs_url(url: str) -> bool:
    """True for a full OTLP/HTTP logs URL (path ending in ``/v1/logs``)."""
    return urllib.parse.urlsplit(url).path.rstrip("/").endswith("/v1/logs")


def _read_report(path: str) -> RankReport | None:
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        chains = tuple(
            ChainReport(
                chain=c["chain"],
                outcome=c["outcome"],
                backend=c.get("backend"),
                reused=bool(c.get("reused")),
                returned_none=bool(c.get("returned_none")),
                attempts=tuple(Attempt(**a) for a in c.get("attempts", ())),
                error=c.get("error"),
            )
            for c in raw.get("chains", ())
        )
        return RankReport(
            rank=int(raw["rank"]),
            local_rank=int(raw["local_rank"]),
            node=int(raw["node"]),
            pid=int(raw["pid"]),
            dist_backend=str(raw.get("dist_backend", "?")),
            chains=chains,
            error=raw.get("error"),
            duration_s=float(raw.get("duration_s", 0.0)),
            delivery=raw.get("delivery") if isinstance(raw.get("delivery"), dict) else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- the launcher (a child process: imports torch, then forks or spawns ranks) ----------


def _send(fd: int, message: Mapping[str, Any]) -> None:
    """One JSON line to the parent (small: one atomic pipe write)."""
    with contextlib.suppress(OSError):
        os.write(fd, json.dumps(message).encode() + b"\n")


def _rank_env(spec: Mapping[str, Any], rank: int) -> dict[str, str]:
    per_node = int(spec["world_size"]) // int(spec["nodes"])
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank % per_node),
        "WORLD_SIZE": str(spec["world_size"]),
        "LOCAL_WORLD_SIZE": str(per_node),
        "GROUP_RANK": str(rank // per_node),
        "NODE_RANK": str(rank // per_node),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(spec["master_port"]),
    }


def _launcher_entry(argv: list[str]) -> int:
    """Launcher process: preload (fork mode) and start every rank, then wait for them."""
    spec = json.loads(argv[0])
    fd = int(spec["fd"])
    t0 = time.monotonic()
    import torch  # noqa: PLC0415 - the launcher is the only place that needs it up front

    fork = torch.version.cuda is None and hasattr(os, "fork")
    if fork:
        _preload()
    _send(
        fd,
        {
            "kind": "launcher",
            "mode": "fork" if fork else "spawn",
            "preload_s": round(time.monotonic() - t0, 2),
        },
    )
    children: dict[int, int] = {}
    for rank in range(int(spec["world_size"])):
        env = _rank_env(spec, rank)
        log_path = os.path.join(spec["log_dir"], f"rank-{rank}.log")
        if fork:
            pid = os.fork()
            if pid == 0:  # the rank
                code = 1
                try:
                    os.environ.update(env)
                    _redirect_output(log_path)
                    code = _rank_main(spec, rank, fd)
                finally:
                    os._exit(code)
        else:
            with open(log_path, "ab") as log:
                child = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        _BOOT.format(fn="_rank_entry"),
                        json.dumps(spec),
                        str(rank),
                    ],
                    env={**os.environ, **env},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    pass_fds=(fd,),
                )
            pid = child.pid
        children[pid] = rank
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        rank = children.pop(pid, -1)
        _send(fd, {"kind": "exited", "rank": rank, "code": os.waitstatus_to_exitcode(status)})
    return _fast_exit(0)


def _fast_exit(code: int) -> int:
    """Exit now: tearing down an interpreter with torch and flashinfer loaded takes seconds,
    and everything worth keeping (reports, obs export) is already flushed."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _preload() -> None:
    """Import what every rank needs once, before forking (flashinfer takes seconds)."""
    for name in (
        "flashinfer.comm",
        "torch.distributed",
        "obs",
        "comm.flashinfer_allreduce",
        "opentelemetry.sdk._logs",
        "opentelemetry.exporter.otlp.proto.http._log_exporter",
    ):
        with contextlib.suppress(Exception):  # a missing module is the ranks' story to tell
            __import__(name)


def _redirect_output(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _rank_entry(argv: list[str]) -> int:
    """A freshly spawned rank (CUDA builds): the environment is already set."""
    spec = json.loads(argv[0])
    return _fast_exit(_rank_main(spec, int(argv[1]), int(spec["fd"])))


# --- a rank -------------------------------------------------------------------------------


def _rank_main(spec: Mapping[str, Any], rank: int, fd: int) -> int:
    """Configure obs, join the process group, run both getters, write the report."""
    started = time.monotonic()
    per_node = int(spec["world_size"]) // int(spec["nodes"])
    report: dict[str, Any] = {
        "rank": rank,
        "local_rank": rank % per_node,
        "node": rank // per_node,
        "pid": os.getpid(),
        "dist_backend": "?",
        "chains": [],
        "error": None,
    }
    _send(
        fd,
        {
            "kind": "started",
            "rank": rank,
            "pid": os.getpid(),
            "node": report["node"],
            "local_rank": report["local_rank"],
        },
    )
    obs_mod: Any = None
    try:
        import obs  # noqa: PLC0415

        obs_mod = obs
        obs.configure()
        report["dist_backend"], group = _init_dist(spec, rank, per_node)
        report["chains"] = _run_getters(spec, rank, group)
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        report["duration_s"] = round(time.monotonic() - started, 3)
        if obs_mod is not None:
            with contextlib.suppress(Exception):
                obs_mod.shutdown(timeout=math.inf)  # bounded by OBS_SHUTDOWN_TIMEOUT (3 s)
                report["delivery"] = obs_mod.delivery()
        path = os.path.join(spec["log_dir"], f"rank-{rank}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(report, f)
        _send(fd, {"kind": "done", "rank": rank, "duration_s": report["duration_s"]})
    return 0


def _init_dist(spec: Mapping[str, Any], rank: int, per_node: int) -> tuple[str, Any]:
    import datetime  # noqa: PLC0415

    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    import obs.stdlib  # noqa: PLC0415

    obs.stdlib.adopt_loggers()  # torch set up its own console loggers on import
    backend = str(spec["dist_backend"])
    if backend == "auto":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        backend = "nccl" if gpus >= per_node else "gloo"
    if backend == "nccl":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus < per_node:
            raise RuntimeError(
                f"--dist-backend nccl needs one CUDA GPU per local rank ({per_node}); "
                f"this machine has {gpus} (use --dist-backend gloo or auto)"
            )
        torch.cuda.set_device(rank % per_node)
    dist.init_process_group(
        backend,
        init_method="env://",
        rank=rank,
        world_size=int(spec["world_size"]),
        timeout=datetime.timedelta(seconds=float(spec["timeout"])),
    )
    return backend, dist.group.WORLD


def _run_getters(spec: Mapping[str, Any], rank: int, group: Any) -> list[dict[str, Any]]:
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    from comm import flashinfer_allreduce as fa  # noqa: PLC0415

    dtype = getattr(torch, str(spec["dtype"]))
    args = (
        int(spec["world_size"]),
        rank,
        int(spec["max_token_num"]),
        int(spec["hidden_dim"]),
        dtype,
        group,
    )
    getters: tuple[tuple[fa.Chain, Callable[..., Any]], ...] = (
        ("fi_ar", fa.get_fi_ar_workspace),
        ("fi_ar_quant", fa.get_fi_ar_quant_workspace),
    )
    out = []
    for chain, getter in getters:
        error = None
        try:
            ws = getter(*args)
        except ValueError as exc:  # trtllm on several nodes: a configuration error
            ws, error = None, f"{type(exc).__name__}: {exc}"
        result = fa.default_manager().result(chain)
        if result is not None:
            attempts = [dataclasses.asdict(a) for a in result.attempts]
            outcome = "initialized" if result.ok else "terminal_failure"
            backend, reused = result.winner, result.reused
        else:  # the backend rules refused before any attempt (trtllm on several nodes)
            skipped = Attempt(str(spec["backend"]), "multi_node", None, None, 0.0, skipped=True)
            attempts = [dataclasses.asdict(skipped)] if error and "multi-node" in error else []
            outcome, backend, reused = ("config_error" if error else "error"), None, False
        out.append(
            {
                "chain": chain,
                "outcome": outcome,
                "backend": backend,
                "reused": reused,
                "returned_none": ws is None,
                "attempts": attempts,
                "error": error,
            }
        )
    fa.destroy_fi_ar_workspace()
    dist.destroy_process_group()
    return out


# --- reporting ----------------------------------------------------------------------------


def format_ranks(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 6]`` -> ``"0-3, 6"``."""
    values = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(parts) if parts else "none"


def _tried(chain: ChainReport) -> str:
    tried = [a.backend for a in chain.attempts if not a.skipped]
    return ", ".join(tried) if tried else "-"


def _reasons(chain: ChainReport) -> str:
    parts = []
    for a in chain.attempts:
        if a.skipped:
            parts.append(f"{a.backend} skipped: {a.reason}")
        elif not a.ok:
            parts.append(f"{a.backend}: {a.reason}")
    return "; ".join(parts) if parts else "-"


def _outcome(chain: ChainReport) -> str:
    if chain.outcome == "initialized":
        return f"initialized ({chain.backend}{', reused' if chain.reused else ''})"
    return chain.outcome


def render_table(result: ProbeResult) -> str:
    """The per-rank table: rank, node, chain, backend tried, reason, outcome."""
    header = ("rank", "node", "chain", "backend tried", "reason", "outcome")
    rows: list[tuple[str, ...]] = []
    for rank in range(result.spec.world_size):
        report = result.reports.get(rank)
        node = str(rank // result.spec.ranks_per_node)
        if report is None:
            rows.append((str(rank), node, "-", "-", "-", "no report (crashed or timed out)"))
            continue
        if report.error and not report.chains:
            rows.append((str(rank), node, "-", "-", report.error[:60], "error"))
        for chain in report.chains:
            rows.append(
                (
                    str(rank),
                    str(report.node),
                    chain.chain,
                    _tried(chain),
                    _reasons(chain),
                    _outcome(chain),
                )
            )
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
    return "\n".join(lines)


def _rank_rows(result: ProbeResult, rank: int) -> tuple[tuple[str, str, str, str], ...]:
    """(chain, backend tried, reason, outcome) rows of one rank, as the tables show them."""
    report = result.reports.get(rank)
    if report is None:
        return (("-", "-", "-", "no report (crashed or timed out)"),)
    rows = [(c.chain, _tried(c), _reasons(c), _outcome(c)) for c in report.chains]
    if report.error and not report.chains:
        rows.append(("-", "-", report.error.splitlines()[0][:80], "error"))
    return tuple(rows)


def render_grouped(result: ProbeResult) -> str:
    """Ranks with identical outcomes on one row: ``ranks 0-63  fi_ar  mnnvl  ...``, so a
    64-rank run reads in a few lines (``--verbose`` gives :func:`render_table`)."""
    groups: dict[tuple[tuple[str, str, str, str], ...], list[int]] = {}
    for rank in range(result.spec.world_size):
        groups.setdefault(_rank_rows(result, rank), []).append(rank)
    header = ("ranks", "chain", "backend tried", "reason", "outcome")
    rows: list[tuple[str, ...]] = []
    for key, ranks in sorted(groups.items(), key=lambda item: item[1][0]):
        label = format_ranks(ranks)
        rows += [(label, *row) for row in key]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    )


def render_delivery(result: ProbeResult) -> list[str]:
    """One line per group of ranks with the same OTLP delivery counts (obs' own counters):
    sent, acknowledged, spooled, dropped, and the endpoint each rank actually used."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for rank, report in sorted(result.reports.items()):
        d = report.delivery
        if not d:
            key: tuple[Any, ...] = ("no delivery counters (the rank did not finish obs)",)
        elif not d.get("exporting"):
            key = ("OTLP export off",)
        else:
            key = (
                d.get("endpoint"),
                int(d.get("sent", 0)),
                int(d.get("acknowledged", 0)),
                int(d.get("spooled", 0)),
                int(d.get("dropped", 0)),
            )
        groups.setdefault(key, []).append(rank)
    lines = []
    for key, ranks in groups.items():
        where = f"rank{'s' if len(ranks) > 1 else ''} {format_ranks(ranks)}"
        if len(key) == 1:
            lines.append(f"{where}: {key[0]}")
            continue
        endpoint, sent, acked, spooled, dropped = key
        verdict = "delivered" if acked >= sent else "NOT DELIVERED"
        lines.append(
            f"{where}: sent {sent}, acknowledged {acked}, spooled {spooled}, dropped "
            f"{dropped} -> {endpoint} ({verdict})"
        )
    return lines


def failure_causes(result: ProbeResult) -> list[str]:
    """Why ranks failed, in full: a rank's own error, or for a rank with no report the last
    exception line of its log (or the launcher's, when no rank started)."""
    lines = []
    for rank, report in sorted(result.reports.items()):
        if report.error:
            lines.append(f"rank {rank}: {report.error}")
    if result.missing:
        log_dir = result.spec.log_dir
        causes: dict[str, list[int]] = {}
        for rank in result.missing:
            cause = last_exception(os.path.join(log_dir, f"rank-{rank}.log"))
            if cause is None:
                cause = last_exception(os.path.join(log_dir, "launcher.log"))
                cause = f"launcher: {cause}" if cause else None
            if cause is None and result.timed_out:
                cause = f"timed out after {result.spec.timeout:g} s"
            causes.setdefault(cause or "no cause in the logs", []).append(rank)
        lines += [f"ranks {format_ranks(r)}: {c}" for c, r in causes.items()]
    return lines


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit))(: .*)?$")


def last_exception(path: str) -> str | None:
    """The last ``SomeError: message`` line of a log file (a traceback's last line)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read()[-65536:].splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line.strip()):
            return line.strip()[:500]
    return None


def summarize_records(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per typed event, e.g. ``"workspace_terminal_failure: 4 records, ranks 0-3"``;
    records that are not registered events (bridged stdlib logs) are counted per logger."""
    from obs.events import REGISTRY  # noqa: PLC0415

    by_event: dict[str, list[Mapping[str, Any]]] = {}
    others: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        attrs = record.get("attributes") or {}
        name = str(record.get("event_name") or attrs.get("event") or "")
        if name in REGISTRY:
            by_event.setdefault(name, []).append(record)
        else:
            logger = attrs.get("logger") or (record.get("scope") or {}).get("name") or "?"
            others.setdefault(f"other records from logger {logger}", []).append(record)
    order = {name: i for i, name in enumerate(_STAGE_ORDER)}
    lines = [
        _summary_line(name, by_event[name])
        for name in sorted(by_event, key=lambda n: (order.get(n, len(order)), n))
    ]
    lines += [_summary_line(name, others[name]) for name in sorted(others)]
    return lines


def _summary_line(name: str, group: list[Mapping[str, Any]]) -> str:
    ranks = [r for r in (_rank_of(rec) for rec in group) if r is not None]
    chains: dict[str, int] = {}
    for rec in group:
        chain = (rec.get("attributes") or {}).get("chain")
        if isinstance(chain, str):
            chains[chain] = chains.get(chain, 0) + 1
    line = f"{name}: {len(group)} record{'s' if len(group) != 1 else ''}, "
    line += f"ranks {format_ranks(ranks)}"
    if chains:
        line += " (" + ", ".join(f"{c}: {n}" for c, n in sorted(chains.items())) + ")"
    severities = sorted({int(rec.get("severity_number") or 0) for rec in group})
    return line + f", severity_number {'/'.join(str(s) for s in severities)}"


def _rank_of(record: Mapping[str, Any]) -> int | None:
    for where in ("attributes", "resource"):
        value = (record.get(where) or {}).get("rank")
        if isinstance(value, int):
            return value
    return None


def _expected_terminal(result: ProbeResult) -> set[tuple[int, str]]:
    return {
        (rank, c.chain)
        for rank, report in result.reports.items()
        for c in report.chains
        if c.outcome in ("terminal_failure", "config_error")
    }


# --- CLI ----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``probe`` argument parser (argparse errors exit with 2)."""
    parser = argparse.ArgumentParser(
        prog="python -m comm probe",
        description="Run the FlashInfer allreduce workspace fallback chain on N local "
        "ranks and report every rank's outcome and whether its records were delivered over "
        "OTLP. Exit status: 0 all initialized, 3 a terminal failure, 4 records not "
        "delivered, 1 the probe failed, 2 bad usage.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--world-size", type=_positive, required=True, help="ranks to start on this machine"
    )
    parser.add_argument(
        "--nodes", type=_positive, default=1, help="simulated nodes (ranks are split evenly)"
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "mnnvl", "trtllm"),
        default=None,
        help="workspace backend; default: COMM_FI_AR_BACKEND (or "
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND) when set, else auto",
    )
    parser.add_argument(
        "--max-token-num", type=_positive, default=2048, help="getter max_token_num"
    )
    parser.add_argument("--hidden-dim", type=_positive, default=4096, help="getter hidden_dim")
    parser.add_argument("--dtype", choices=DTYPES, default="bfloat16", help="getter dtype")
    parser.add_argument(
        "--dist-backend",
        choices=("auto", "gloo", "nccl"),
        default="auto",
        help="torch.distributed backend; auto = nccl with a GPU per local rank, else gloo",
    )
    parser.add_argument(
        "--timeout", type=_positive_seconds, default=120.0, help="seconds for the whole run"
    )
    parser.add_argument(
        "--log-dir",
        default="",
        help="rank logs and reports, kept; default: a new run folder under "
        f"$TMPDIR/comm-probe-$UID (the last {KEEP_RUNS} runs are kept)",
    )
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--verbose", action="store_true", help="one table row per rank instead of grouped"
    )
    shown.add_argument(
        "--json", action="store_true", help="print the whole result as one JSON document"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="export the ranks' records here: a base URL (/v1/logs is appended) or a full "
        "URL ending in /v1/logs (used as is); default: the environment's OTEL_* settings",
    )
    where.add_argument(
        "--embedded-receiver",
        action="store_true",
        help="receive on loopback and summarise (default when no endpoint is configured)",
    )
    return parser


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def _backend_from_env() -> tuple[str, str]:
    """The backend comm would use from the environment, and where it came from."""
    for name in ("COMM_FI_AR_BACKEND", "VLLM_FLASHINFER_ALLREDUCE_BACKEND"):
        value = os.environ.get(name, "").strip().lower()
        if value:
            return value, name
    return "auto", "default"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def main(argv: list[str] | None = None, *, out: IO[str] | None = None) -> int:
    """Parse, run, print; the exit status (see the module docstring)."""
    stdout = out or sys.stdout
    parser = build_parser()
    try:
        opts = parser.parse_args(sys.argv[1:] if argv is None else argv)
        if opts.world_size % opts.nodes:
            parser.error(f"--world-size {opts.world_size} is not a multiple of --nodes")
        backend, backend_from = opts.backend, "--backend"
        if backend is None:
            backend, backend_from = _backend_from_env()
            if backend not in ("auto", "mnnvl", "trtllm"):
                parser.error(f"{backend_from}={backend!r}: expected auto, mnnvl or trtllm")
        embedded = _use_embedded(parser, opts)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    receiver: Any = None
    endpoint = opts.otlp_endpoint
    if embedded:
        from obs._receiver import OTLPReceiver  # noqa: PLC0415 - grpc loads only here

        receiver = OTLPReceiver(grpc=False).start()
        endpoint = receiver.http_endpoint
    spec = ProbeSpec(
        world_size=opts.world_size,
        nodes=opts.nodes,
        backend=backend,
        max_token_num=opts.max_token_num,
        hidden_dim=opts.hidden_dim,
        dtype=opts.dtype,
        otlp_endpoint=endpoint,
        dist_backend=opts.dist_backend,
        timeout=opts.timeout,
        log_dir=opts.log_dir,
    )
    _progress(
        f"probe: world_size={spec.world_size} nodes={spec.nodes} backend={spec.backend} "
        f"(from {backend_from}) max_token_num={spec.max_token_num} "
        f"hidden_dim={spec.hidden_dim} dtype={spec.dtype}; "
        f"OTLP -> {_scrub(endpoint) if endpoint else 'as configured by the environment'}"
    )
    try:
        result = launch(spec, on_message=None if opts.json else _on_message)
        if opts.json:
            stdout.write(json.dumps(result_json(result, receiver), default=str) + "\n")
        else:
            _print_result(result, receiver, stdout, verbose=opts.verbose)
        stdout.flush()
        return result.exit_code
    finally:
        if receiver is not None:
            receiver.stop()


def _print_result(result: ProbeResult, receiver: Any, stdout: IO[str], *, verbose: bool) -> None:
    stdout.write((render_table(result) if verbose else render_grouped(result)) + "\n")
    if result.missing:
        stdout.write(
            f"no report from ranks {format_ranks(result.missing)}"
            f"{' (timed out)' if result.timed_out else ''}\n"
        )
    causes = failure_causes(result)
    if causes:
        stdout.write("why:\n" + "".join(f"  {line}\n" for line in causes))
    if receiver is not None:
        _report_receiver(receiver, result, stdout)
    delivery = render_delivery(result)
    if delivery:
        stdout.write("OTLP delivery (each rank's own obs counters):\n")
        stdout.write("".join(f"  {line}\n" for line in delivery))
    stdout.write(f"rank logs: {result.spec.log_dir}\n")
    code = result.exit_code
    stdout.write(f"exit {code}: {_verdict(code)}\n")


def result_json(result: ProbeResult, receiver: Any = None) -> dict[str, Any]:
    """The run as one JSON-able document (``--json``): spec, per-rank reports with their
    delivery counters, missing ranks, causes, exit code."""
    doc: dict[str, Any] = {
        "spec": {
            **dataclasses.asdict(result.spec),
            "otlp_endpoint": _scrub(result.spec.otlp_endpoint or "") or None,
        },
        "mode": result.mode,
        "duration_s": result.duration_s,
        "reports": {str(r): dataclasses.asdict(rep) for r, rep in result.reports.items()},
        "missing": list(result.missing),
        "timed_out": result.timed_out,
        "undelivered": list(result.undelivered),
        "causes": failure_causes(result),
        "exit_code": result.exit_code,
        "verdict": _verdict(result.exit_code),
    }
    if receiver is not None:
        doc["received_records"] = len(receiver.records)
    return doc


def _scrub(url: str) -> str:
    from obs.encode import scrub_text  # noqa: PLC0415

    return scrub_text(url)


def _use_embedded(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> bool:
    from obs.errors import ConfigError  # noqa: PLC0415
    from obs.settings import load_settings  # noqa: PLC0415

    try:
        if opts.otlp_endpoint is not None:
            load_settings({"otlp_endpoint": opts.otlp_endpoint})
            return False
        configured = load_settings().otlp_endpoint is not None
    except ConfigError as exc:
        parser.error(str(exc))
    return bool(opts.embedded_receiver or not configured)


def _report_receiver(receiver: Any, result: ProbeResult, stdout: IO[str]) -> None:
    expected = _expected_terminal(result)

    def arrived() -> set[tuple[int, str]]:
        got = set()
        for rec in receiver.by_event("workspace_terminal_failure"):
            rank, chain = _rank_of(rec), (rec.get("attributes") or {}).get("chain")
            if rank is not None and isinstance(chain, str):
                got.add((rank, chain))
        return got

    deadline = time.monotonic() + 5.0
    while not expected <= arrived() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # let a last in-flight batch land
    records = receiver.records
    stdout.write(
        f"OTLP records received by the embedded receiver ({receiver.http_endpoint}): "
        f"{len(records)}\n"
    )
    for line in summarize_records(records):
        stdout.write(f"  {line}\n")
    lost = sorted(expected - arrived())
    if expected and not lost:
        stdout.write("  every rank's workspace_terminal_failure arrived over OTLP\n")
    for rank, chain in lost:
        stdout.write(f"  MISSING: workspace_terminal_failure of rank {rank} ({chain})\n")


def _verdict(code: int) -> str:
    return {
        EXIT_UNDELIVERED: "records were not delivered over OTLP (see OTLP delivery above)",
        EXIT_OK: "every rank initialized both workspaces",
        EXIT_TERMINAL: "terminal failure (workspace unavailable) on at least one rank",
        EXIT_PROBE_FAILED: "the probe failed: a rank crashed or timed out (see rank logs)",
    }.get(code, "?")


def _progress(text: str) -> None:
    sys.stderr.write(f"[probe] {text}\n")
    sys.stderr.flush()


def _on_message(message: Mapping[str, Any]) -> None:
    kind = message.get("kind")
    if kind == "launcher":
        how = (
            "torch + flashinfer imported once, ranks forked"
            if message.get("mode") == "fork"
            else "one fresh interpreter per rank"
        )
        _progress(f"launcher ready in {message.get('preload_s')} s ({how})")
    elif kind == "started":
        _progress(
            f"rank {message.get('rank')} started (pid {message.get('pid')}, node "
            f"{message.get('node')}, local rank {message.get('local_rank')})"
        )
    elif kind == "done":
        _progress(f"rank {message.get('rank')} reported after {message.get('duration_s')} s")
    elif kind == "exited" and message.get("code"):
        _progress(f"rank {message.get('rank')} exited with status {message.get('code')}")
