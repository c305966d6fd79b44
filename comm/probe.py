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
2 bad usage, 1 the probe itself failed (a rank crashed or timed out).

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "ChainReport",
    "ProbeResult",
    "ProbeSpec",
    "RankReport",
    "build_parser",
    "format_ranks",
    "launch",
    "main",
    "render_table",
    "summarize_records",
]

import argparse
import contextlib
import dataclasses
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

from obs.fallback import Attempt

DTYPES = ("bfloat16", "float16", "float32")
CHAINS = ("fi_ar", "fi_ar_quant")
EXIT_OK, EXIT_PROBE_FAILED, EXIT_USAGE, EXIT_TERMINAL = 0, 1, 2, 3
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
    def exit_code(self) -> int:
        """3 on any terminal failure, else 1 if a rank failed, else 0."""
        outcomes = [c.outcome for r in self.reports.values() for c in r.chains]
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
    log_dir = spec.log_dir or tempfile.mkdtemp(prefix="comm-probe-")
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
        for name in ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"):
            env.pop(name, None)
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = spec.otlp_endpoint
        env["OTEL_LOGS_EXPORTER"] = "otlp"
        env.setdefault("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        env.setdefault("OTEL_BLRP_SCHEDULE_DELAY", "200")
    return env


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
                obs_mod.flush(timeout=5.0)
                obs_mod.shutdown(timeout=5.0)
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
        "ranks and report every rank's outcome and what arrived over OTLP.",
    )
    parser.add_argument("--world-size", type=_positive, required=True)
    parser.add_argument("--nodes", type=_positive, default=1, help="simulated nodes")
    parser.add_argument("--backend", choices=("auto", "mnnvl", "trtllm"), default="auto")
    parser.add_argument("--max-token-num", type=_positive, default=2048)
    parser.add_argument("--hidden-dim", type=_positive, default=4096)
    parser.add_argument("--dtype", choices=DTYPES, default="bfloat16")
    parser.add_argument("--dist-backend", choices=("auto", "gloo", "nccl"), default="auto")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for everything")
    parser.add_argument("--log-dir", default="", help="rank logs and reports (default: temp)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--otlp-endpoint", metavar="URL", help="export the ranks' records here")
    where.add_argument(
        "--embedded-receiver",
        action="store_true",
        help="receive on loopback and summarise (default when no endpoint is configured)",
    )
    return parser


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
        backend=opts.backend,
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
        f"max_token_num={spec.max_token_num} hidden_dim={spec.hidden_dim} dtype={spec.dtype}; "
        f"OTLP -> {endpoint or 'as configured by the environment'}"
    )
    try:
        result = launch(spec, on_message=_on_message)
        stdout.write(render_table(result) + "\n")
        if result.missing:
            stdout.write(
                f"no report from ranks {format_ranks(result.missing)}"
                f"{' (timed out)' if result.timed_out else ''}\n"
            )
        if receiver is not None:
            _report_receiver(receiver, result, stdout)
        stdout.write(f"rank logs: {result.spec.log_dir}\n")
        code = result.exit_code
        stdout.write(f"exit {code}: {_verdict(code)}\n")
        stdout.flush()
        return code
    finally:
        if receiver is not None:
            receiver.stop()


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
