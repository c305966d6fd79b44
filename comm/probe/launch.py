"""The parent side (:func:`launch`: start the launcher, read the pipe, collect the reports)
and the launcher process (preload torch and flashinfer once, then fork the ranks, or spawn
fresh interpreters on CUDA builds)."""

from __future__ import annotations

__all__ = [
    "DEATH_GRACE_S",
    "is_logs_url",
    "launch",
    "launcher_entry",
    "new_run_dir",
    "rank_entry",
    "rank_env",
    "read_report",
]

import contextlib
import dataclasses
import json
import os
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
from collections.abc import Callable, Mapping
from typing import IO, Any

from comm.probe.pipe import fast_exit, parse, send
from comm.probe.rank import ERROR_LIMIT, error_line, rank_main
from comm.probe.report import ended as _ended
from comm.probe.spec import (
    KEEP_RUNS,
    ChainReport,
    ProbeResult,
    ProbeSpec,
    RankReport,
    SetupError,
    decode_spec,
    encode_spec,
)
from obs.encode import scrubbed_text
from obs.fallback import Attempt

_BOOT = "import sys; from comm.probe.launch import {fn}; sys.exit({fn}(sys.argv[1:]))"


def launch(
    spec: ProbeSpec,
    *,
    on_message: Callable[[Mapping[str, Any]], None] | None = None,
) -> ProbeResult:
    """Start the ranks, wait for them (bounded by ``spec.timeout``) and collect reports."""
    started = time.monotonic()
    try:
        log_dir = spec.log_dir or new_run_dir()
        os.makedirs(log_dir, exist_ok=True)
    except OSError as exc:  # $TMPDIR/comm-probe-$UID a file, a read-only or full disk
        raise SetupError(f"cannot create the run folder: {_os_error(exc)}") from None
    spec = dataclasses.replace(spec, log_dir=log_dir)
    try:
        spec = dataclasses.replace(spec, master_port=spec.master_port or _free_port())
        proc, read_fd = _start_launcher(spec)
    except OSError as exc:  # EMFILE, EAGAIN, ENOMEM: the OS refused a pipe or a process
        raise SetupError(f"cannot start the ranks: {_os_error(exc)}") from None
    collector = _Collector(on_message)
    clean = False
    try:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            clean = collector.read(pipe, started + spec.timeout, proc.poll)
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
        report = read_report(os.path.join(log_dir, f"rank-{rank}.json"))
        if report is not None:
            reports[rank] = report
    missing = tuple(r for r in range(spec.world_size) if r not in reports)
    return ProbeResult(
        spec,
        reports,
        missing,
        mode,
        timed_out,
        round(time.monotonic() - started, 3),
        dict(collector.exits),
        collector.stopped,
    )


def _start_launcher(spec: ProbeSpec) -> tuple[subprocess.Popen[bytes], int]:
    """The launcher process (its own session) and the read end of the ranks' pipe."""
    read_fd, write_fd = os.pipe()
    try:
        with open(os.path.join(spec.log_dir, "launcher.log"), "ab") as launcher_log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _BOOT.format(fn="launcher_entry"),
                    encode_spec(spec, write_fd),
                ],
                env=_base_env(spec),
                stdin=subprocess.DEVNULL,
                stdout=launcher_log,
                stderr=launcher_log,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return proc, read_fd


def _os_error(exc: OSError) -> str:
    """An OS error as one bounded, scrubbed line (a path may be long or quote anything)."""
    return scrubbed_text(str(exc), 500)


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


#: How long the other ranks get to report once a rank (or the launcher) ended before it
#: reported: ranks past every collective finish within it (obs' flush is bounded at 3 s);
#: ranks waiting for the dead one in the rendezvous or a collective never would, so the
#: run is stopped then rather than at --timeout.
DEATH_GRACE_S = 5.0


class _Collector:
    """Reads the JSON-line messages of the launcher and ranks off the pipe."""

    __slots__ = (
        "_stop_at",
        "_why",
        "done",
        "exits",
        "mode",
        "on_message",
        "stopped",
        "timed_out",
    )

    def __init__(self, on_message: Callable[[Mapping[str, Any]], None] | None) -> None:
        self.on_message = on_message
        self.mode = "?"
        self.done: set[int] = set()
        #: rank -> exit status, as the launcher saw each rank end.
        self.exits: dict[int, int] = {}
        self.timed_out = False
        #: Why the run was stopped before every rank reported (a rank or the launcher
        #: died first), or None.
        self.stopped: str | None = None
        self._why: str | None = None
        self._stop_at: float | None = None

    def read(
        self, pipe: IO[bytes], deadline: float, launcher: Callable[[], int | None] = lambda: None
    ) -> bool:
        """Until every writer is gone (True), the deadline passes or a rank or the launcher
        died before reporting and the others did not finish within :data:`DEATH_GRACE_S`
        (False). ``launcher``: the launcher's exit status once it has ended, else None."""
        buffer = b""
        while True:
            now = time.monotonic()
            if self._stop_at is None:
                status = launcher()
                if status:  # killed, or crashed: no rank's end will be reported any more
                    how = _ended(status).removesuffix(" before it reported")
                    self._dead(f"the launcher {how}", now + DEATH_GRACE_S)
            if self._stop_at is not None and now >= self._stop_at:
                self.stopped = self._why
                return False
            remaining = deadline - now
            if remaining <= 0:
                self.timed_out = True
                return False
            wait = min(remaining, 0.5)
            if self._stop_at is not None:
                wait = min(wait, max(self._stop_at - now, 0.0))
            ready, _, _ = select.select([pipe], [], [], wait)
            if not ready:
                continue
            chunk = pipe.read(65536)
            if not chunk:
                return True  # the launcher and every rank have exited
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self._handle(line)

    def _dead(self, why: str, stop_at: float) -> None:
        """Something the run needs ended: stop at ``stop_at`` unless already stopping."""
        if self._stop_at is None:
            self._why, self._stop_at = scrubbed_text(why, ERROR_LIMIT + 200), stop_at

    def _handle(self, line: bytes) -> None:
        message = parse(line)
        if message is None:
            return
        kind = message.get("kind")
        if kind == "launcher":
            self.mode = str(message.get("mode"))
        elif kind == "done":
            self.done.add(int(message["rank"]))
        elif kind == "exited" and int(message.get("rank", -1)) >= 0:
            rank, code = int(message["rank"]), int(message.get("code", 0))
            self.exits[rank] = code
            if rank not in self.done:
                self._dead(f"rank {rank} {_ended(code)}", time.monotonic() + DEATH_GRACE_S)
        elif kind == "failed":  # the launcher could not start a rank: nobody can finish
            why = f"the launcher could not start rank {message.get('rank')}"
            self._dead(f"{why} ({message.get('error')})", time.monotonic())
        if self.on_message is not None:
            self.on_message(message)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _base_env(spec: ProbeSpec) -> dict[str, str]:
    """The ranks' environment: ours, plus comm/obs/OTel settings for the probe."""
    env = dict(os.environ)
    # The folder holding this ``comm`` package, first: the ranks run the probe's own copy,
    # not whichever comm an editable install or site-packages would give them.
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


def read_report(path: str) -> RankReport | None:
    """A rank's report file, or None when it is missing or unreadable."""
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
                error=_text(c.get("error")),
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
            error=_text(raw.get("error")),
            duration_s=float(raw.get("duration_s", 0.0)),
            delivery=raw.get("delivery") if isinstance(raw.get("delivery"), dict) else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _text(value: object) -> str | None:
    """A report's error text as the probe shows it: scrubbed and bounded however the
    report file came to hold it (the rank writes it so already)."""
    return scrubbed_text(value, ERROR_LIMIT + 200) if isinstance(value, str) else None


# --- the launcher (a child process: imports torch, then forks or spawns ranks) ----------


def rank_env(spec: ProbeSpec, rank: int) -> dict[str, str]:
    """torchrun's variables for ``rank`` of ``spec``."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(spec.local_rank(rank)),
        "WORLD_SIZE": str(spec.world_size),
        "LOCAL_WORLD_SIZE": str(spec.ranks_per_node),
        "GROUP_RANK": str(spec.node_of(rank)),
        "NODE_RANK": str(spec.node_of(rank)),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(spec.master_port),
    }


def launcher_entry(argv: list[str]) -> int:
    """Launcher process: preload (fork mode) and start every rank, then wait for them."""
    spec, fd = decode_spec(argv[0])
    t0 = time.monotonic()
    import torch  # noqa: PLC0415 - the launcher is the only place that needs it up front

    fork = torch.version.cuda is None and hasattr(os, "fork")
    if fork:
        _preload()
    send(
        fd,
        {
            "kind": "launcher",
            "mode": "fork" if fork else "spawn",
            "preload_s": round(time.monotonic() - t0, 2),
        },
    )
    children: dict[int, int] = {}
    for rank in range(spec.world_size):
        try:
            children[_start_rank(spec, rank, fd, fork=fork)] = rank
        except OSError as exc:  # EAGAIN (RLIMIT_NPROC), EMFILE, ENOMEM: the parent stops
            send(fd, {"kind": "failed", "rank": rank, "error": error_line(exc)})
            break  # the ranks started wait for this one: the parent stops them all
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        rank = children.pop(pid, -1)
        send(fd, {"kind": "exited", "rank": rank, "code": os.waitstatus_to_exitcode(status)})
    return fast_exit(0)


def _start_rank(spec: ProbeSpec, rank: int, fd: int, *, fork: bool) -> int:
    """Fork (or spawn) ``rank`` with its torchrun environment and log; its pid."""
    env = rank_env(spec, rank)
    log_path = os.path.join(spec.log_dir, f"rank-{rank}.log")
    if fork:
        pid = os.fork()
        if pid == 0:  # the rank
            code = 1
            try:
                os.environ.update(env)
                _redirect_output(log_path)
                code = rank_main(spec, rank, fd)
            finally:
                os._exit(code)
        return pid
    with open(log_path, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-c", _BOOT.format(fn="rank_entry"), encode_spec(spec, fd), str(rank)],
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(fd,),
        )
    return child.pid


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
    """Make this process's stdout and stderr the rank's log file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def rank_entry(argv: list[str]) -> int:
    """A freshly spawned rank (CUDA builds): the environment is already set."""
    spec, fd = decode_spec(argv[0])
    return fast_exit(rank_main(spec, int(argv[1]), fd))
