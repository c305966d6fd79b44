"""``python -m comm probe``: the command line (parse, launch, print, exit status)."""

from __future__ import annotations

__all__ = ["build_parser", "main"]

import argparse
import errno
import io
import json
import math
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import IO, Any, NoReturn

from comm.probe.launch import launch
from comm.probe.report import (
    expected_terminal,
    failure_causes,
    format_ranks,
    rank_of,
    render_delivery,
    render_grouped,
    render_table,
    result_json,
    scrub,
    summarize_records,
    verdict,
)
from comm.probe.spec import (
    DTYPES,
    EXIT_PROBE_FAILED,
    EXIT_USAGE,
    KEEP_RUNS,
    MAX_TIMEOUT_S,
    MAX_WORLD_SIZE,
    ProbeResult,
    ProbeSpec,
    SetupError,
)
from obs.cli_text import ScrubbingParser, one_line, scrub_tree, shown
from obs.encode import scrub_text, scrubbed_text


def build_parser() -> _ProbeParser:
    """The ``probe`` argument parser (argparse errors exit with 2)."""
    parser = _ProbeParser(  # its errors quote no secret of a refused value
        prog="python -m comm probe",
        description="Run the FlashInfer allreduce workspace fallback chain on N local "
        "ranks and report every rank's outcome and whether its records were delivered over "
        "OTLP. Exit status: 0 all initialized, 3 a terminal failure, 4 records not "
        "delivered, 1 the probe failed, 2 bad usage, 130/143 stopped by Ctrl-C/SIGTERM.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--world-size",
        type=_world_size,
        required=True,
        help=f"ranks to start on this machine (at most {MAX_WORLD_SIZE})",
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
        "--timeout",
        type=_positive_seconds,
        default=120.0,
        help=f"seconds for the run, <= {MAX_TIMEOUT_S:g}",
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
        raise argparse.ArgumentTypeError(f"{_shown(text)!r} is not a number of seconds") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a positive number of seconds")
    if value > MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{_shown(text)} seconds: at most {MAX_TIMEOUT_S:g}")
    return value


def _log_dir_problem(path: str) -> str | None:
    """Why ``path`` cannot hold the run's logs and reports, or None (it is created when
    missing). Checked before any rank starts: a --log-dir that is a file, under one, too
    long or not writable is bad usage (exit 2, one line), not a traceback."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        why = getattr(exc, "strerror", None) or type(exc).__name__
        if getattr(exc, "errno", None) in _NOT_THE_PATH:  # the machine's, not the argument's
            msg = f"cannot use --log-dir {_shown(path)}: {why}"
            raise SetupError(msg) from None
        return f"{path!r} is not a folder the probe can write ({why})"
    return None


#: OS errors that say nothing about a --log-dir path (no descriptor, memory or disk space
#: left, an I/O error): the probe failed (exit 1), the usage was right.
_NOT_THE_PATH = frozenset(
    getattr(errno, name)
    for name in ("EMFILE", "ENFILE", "ENOMEM", "ENOSPC", "EDQUOT", "EIO", "EAGAIN")
    if hasattr(errno, name)
)


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
    except ValueError:  # not a number, or past int()'s digit limit
        raise argparse.ArgumentTypeError(f"{_shown(text)!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not >= 1")
    return value


def _world_size(text: str) -> int:
    """A rank count: every rank is a process on this host, so at most MAX_WORLD_SIZE."""
    value = _positive(text)
    if value > MAX_WORLD_SIZE:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} ranks: at most {MAX_WORLD_SIZE} (each rank is a process on "
            "this machine)"
        )
    return value


def _shown(text: str) -> str:
    """An argument quoted in a usage line: scrubbed and short (it may be anything)."""
    return scrubbed_text(text, 40)


def main(argv: list[str] | None = None, *, out: IO[str] | None = None) -> int:
    """Parse, run, print; the exit status (see the module docstring)."""
    stdout = out or sys.stdout
    parser = build_parser()
    try:
        opts = parser.parse_args(sys.argv[1:] if argv is None else argv)
        doc = parser.doc = stdout if opts.json else None  # a usage error: the document too
        if opts.world_size % opts.nodes:
            parser.error(f"--world-size {opts.world_size} is not a multiple of --nodes")
        try:
            problem = _log_dir_problem(opts.log_dir) if opts.log_dir else None
        except SetupError as exc:
            return _failed(str(exc), doc)
        if problem is not None:
            parser.error(f"argument --log-dir: {problem}")
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
        from obs.testing import OTLPReceiver  # noqa: PLC0415 - grpc loads only here

        try:
            receiver = OTLPReceiver(grpc=False).start()
        except OSError as exc:  # no socket (EMFILE) or no loopback port
            return _failed(f"cannot start the embedded OTLP receiver: {exc}", doc)
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
        f"OTLP -> {scrub(endpoint) if endpoint else 'as configured by the environment'}"
    )
    try:
        return _run(spec, opts, receiver, stdout)
    finally:
        if receiver is not None:
            receiver.stop()


def _run(spec: ProbeSpec, opts: argparse.Namespace, receiver: Any, stdout: IO[str]) -> int:
    """Launch and print; 128 + the signal when Ctrl-C or SIGTERM stopped the run."""
    previous = _on_sigterm(_terminate)
    try:
        result = launch(spec, on_message=None if opts.json else _on_message)
    except SetupError as exc:  # the run folder, the pipe, the launcher: the OS said no
        return _failed(str(exc), stdout if opts.json else None)
    except OSError as exc:  # anything else the OS refused while running: still one line
        return _failed(f"the probe failed: {exc}", stdout if opts.json else None)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: launch() killed the ranks
        signum = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
        _progress(f"stopped by {signal.Signals(signum).name}; the launcher and ranks killed")
        return 128 + signum
    finally:
        _on_sigterm(previous)
    if opts.json:
        # Every text of the document scrubbed: a --log-dir (or a rank's error) may hold a
        # credential; the round trip first makes it plain JSON data (paths as str).
        doc = json.loads(json.dumps(result_json(result, receiver), default=str))
        stdout.write(json.dumps(scrub_tree(doc)) + "\n")
    else:
        text = io.StringIO()
        _print_result(result, receiver, text, verbose=opts.verbose)
        stdout.write(scrub_text(text.getvalue()))  # as the document: paths, ranks' errors
    stdout.flush()
    return result.exit_code


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C is so that the same cleanup runs."""


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM handler: unwind as Ctrl-C does, so launch() kills the launcher's session
    (its own process group, which a signal to the probe alone never reaches)."""
    del signum, frame
    raise _Terminated


def _on_sigterm(handler: Any) -> Any:
    """Install ``handler`` for SIGTERM (main thread only); the handler it replaced."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        return None


def _print_result(result: ProbeResult, receiver: Any, stdout: IO[str], *, verbose: bool) -> None:
    stdout.write((render_table(result) if verbose else render_grouped(result)) + "\n")
    if result.missing:
        stdout.write(
            f"no report from ranks {format_ranks(result.missing)}"
            f"{' (timed out)' if result.timed_out else ''}\n"
        )
    causes = failure_causes(result)
    if causes:
        stdout.write("why:\n" + "".join(f"  {one_line(line)}\n" for line in causes))
    if receiver is not None:
        _report_receiver(receiver, result, stdout)
    delivery = render_delivery(result)
    if delivery:
        stdout.write("OTLP delivery (each rank's own obs counters):\n")
        stdout.write("".join(f"  {line}\n" for line in delivery))
    stdout.write(f"rank logs: {one_line(result.spec.log_dir)}\n")  # a line break: escaped
    code = result.exit_code
    stdout.write(f"exit {code}: {verdict(code)}\n")


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
    expected = expected_terminal(result)

    def arrived() -> set[tuple[int, str]]:
        got = set()
        for rec in receiver.by_event("workspace_terminal_failure"):
            rank, chain = rank_of(rec), (rec.get("attributes") or {}).get("chain")
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


def _failed(text: str, doc: IO[str] | None = None) -> int:
    """One line saying why the probe could not run (and with ``--json``, ``doc``, the
    document saying so); the probe's failure status (1)."""
    line = scrubbed_text(text, 1000)
    sys.stderr.write(f"python -m comm probe: error: {line}\n")
    sys.stderr.flush()
    if doc is not None:
        _json_failure(doc, EXIT_PROBE_FAILED, line)
    return EXIT_PROBE_FAILED


class _ProbeParser(ScrubbingParser):
    """With ``--json`` (:attr:`doc` set once parsed), a usage error found after parsing is
    also the JSON document: stdout stays one JSON document whatever happens."""

    doc: IO[str] | None = None

    def error(self, message: str) -> NoReturn:
        """The document saying so (with ``--json``), then argparse's line and exit 2."""
        if self.doc is not None:
            _json_failure(self.doc, EXIT_USAGE, scrubbed_text(message, 1000))
        super().error(message)


def _json_failure(doc: IO[str], code: int, error: str) -> None:
    """The ``--json`` document of a probe that could not run: its status and why."""
    what = "bad usage" if code == EXIT_USAGE else "the probe could not run"
    doc.write(json.dumps({"exit_code": code, "verdict": what, "error": error}) + "\n")
    doc.flush()


def _progress(text: str) -> None:
    sys.stderr.write(f"[probe] {shown(text)}\n")
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
