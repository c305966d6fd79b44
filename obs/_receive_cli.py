"""``python -m obs receive``: a local OTLP receiver that prints one line per record.

What it prints and saves is scrubbed as obs' own lines are (:mod:`obs.cli_text`): a
sender's record may carry a credential in its body, attributes, resource or event name.
"""

from __future__ import annotations

__all__ = ["cli_main"]

import argparse
import contextlib
import datetime as _dt
import json
import os
import signal
import socket
import sys
import threading
from collections import Counter
from typing import IO, Any

from obs._otlp_decode import Record, event_of
from obs._receiver import OTLPReceiver
from obs.cli_text import ScrubbingParser, one_line, scrub_tree, shown

#: Attributes the summary line shows in columns of their own (not again as key=value).
_SHOWN = frozenset(
    {"event", "body", "timestamp", "severity_text", "severity_number", "rank", "host.name",
     "local_rank", "world_size", "node_rank", "code.file.path", "code.line.number",
     "code.function.name", "exception.stacktrace", "log.record.uid"}
)  # fmt: skip


def _summary_line(record: Record) -> str:
    """One aligned line per record: time, severity, service.name, rank@host, event, body,
    then the other attributes as key=value (control characters escaped)."""
    ns = record["time_unix_nano"] or record["observed_time_unix_nano"]
    when = _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc)
    attrs = record["attributes"]
    resource = record.get("resource") or {}
    event = event_of(record) or "-"
    where = ""
    if "rank" in attrs or "rank" in resource:
        where = f"r{attrs.get('rank', resource.get('rank'))}"
    host = attrs.get("host.name") or resource.get("host.name")
    if host:
        where = f"{where}@{host}" if where else str(host)
    parts = [
        when.strftime("%H:%M:%S.%f")[:-3],
        str(record["severity_text"] or record["severity_number"]).ljust(8),
        str(resource.get("service.name", "-")).ljust(16),
        where.ljust(12),
        event.ljust(28),
    ]
    body = record["body"]
    if body is not None and body != event:
        parts.append(body if isinstance(body, str) else repr(body))
    pairs = " ".join(f"{k}={_short(v)}" for k, v in attrs.items() if k not in _SHOWN)
    if pairs:
        parts.append(pairs)
    return one_line("  ".join(parts).rstrip())


def _short(value: Any) -> str:
    # bytes (base64 text now) are quoted as JSON writes them, as lists and dicts are
    text = value if type(value) is str else json.dumps(value, default=repr)
    return text if len(text) <= 120 else text[:120] + "..."


def _busy_port(args: argparse.Namespace) -> int:
    """The first configured port that cannot be bound now (the one start() failed on)."""
    ports = [] if args.http_only else [args.grpc_port]
    ports += [] if args.grpc_only else [args.port]
    for port in ports:
        try:
            with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as sock:
                sock.bind((args.host, port))
        except OSError:
            return int(port)
    return int(ports[0])


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc).split(":")[-1].strip() or type(exc).__name__


def _parser() -> argparse.ArgumentParser:
    parser = ScrubbingParser(
        prog="python -m obs receive",
        description="Receive OTLP logs (gRPC and HTTP) on this machine and print one line "
        "per record (or save them). Stop with Ctrl-C (SIGINT) or SIGTERM; a summary follows.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=int, default=4318, help="HTTP port, 0 = any free one")
    parser.add_argument("--grpc-port", type=int, default=4317, help="gRPC port, 0 = any free one")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--grpc-only", action="store_true", help="serve gRPC only")
    only.add_argument("--http-only", action="store_true", help="serve HTTP only")
    parser.add_argument("--out", help="append every record as one JSON line to this file")
    parser.add_argument("--quiet", action="store_true", help="do not print each record")
    return parser


def cli_main(argv: list[str] | None = None) -> int:
    """`python -m obs receive`: run a receiver until SIGINT/SIGTERM, printing each record."""
    args = _parser().parse_args(argv)
    try:  # before anything listens: a path that cannot be opened is one line, exit 1
        out = open(args.out, "a", encoding="utf-8") if args.out else None  # noqa: SIM115
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        why = _reason(exc) if isinstance(exc, OSError) else type(exc).__name__
        sys.stderr.write(f"python -m obs receive: cannot open --out {shown(args.out)}: {why}\n")
        return 1
    try:
        return _run(args, out)
    except BrokenPipeError:  # its reader left (``| head``): stop quietly, as a pipe's writer
        with contextlib.suppress(OSError):  # and the exit's own flush of stdout may not fail
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        if out is not None:
            with contextlib.suppress(OSError, ValueError):  # its last flush failed: said
                out.close()


def _run(args: argparse.Namespace, out: IO[str] | None) -> int:
    """Listen, serve until SIGINT/SIGTERM, print the totals; 1 when it cannot listen."""
    stop = threading.Event()
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        # Outside the main thread signal() raises: the caller must then stop us another way.
        with contextlib.suppress(ValueError):
            previous[signum] = signal.signal(signum, on_signal)
    receiver = OTLPReceiver(
        args.host, args.grpc_port, args.port, grpc=not args.http_only, http=not args.grpc_only
    )
    try:
        receiver.start()
    except OSError as exc:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        which = _busy_port(args)
        sys.stderr.write(
            f"python -m obs receive: cannot listen on {shown(args.host)}:{which} "
            f"({shown(_reason(exc))}): "
            "another receiver or collector may be running; pick another port "
            "(--port / --grpc-port, 0 = any free one)\n"
        )
        return 1
    try:
        _serve(receiver, args, stop, out)
    finally:
        receiver.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _print_totals(receiver)
    return 0


def _serve(
    receiver: OTLPReceiver, args: argparse.Namespace, stop: threading.Event, out: IO[str] | None
) -> None:
    """Print (and save to ``out``) what arrives until ``stop`` is set, then drain once more;
    a write to ``out`` that fails (a full disk) is said once, and the records are still
    printed."""
    where = []
    if not args.http_only:
        where.append(f"grpc {receiver.grpc_endpoint}")
    if not args.grpc_only:
        where.append(f"http {receiver.http_logs_url}")
    print(f"OTLP receiver listening: {shown(' '.join(where))} (Ctrl-C to stop)", flush=True)
    seen = 0
    while True:
        done = stop.is_set()  # read first: one more drain after the signal
        new = receiver._records_since(seen, 0.0 if done else 0.2)
        seen += len(new)
        for received in new:
            record = scrub_tree(received)  # bytes as base64, every text scrubbed
            out = _save(out, record, args.out)
            if not args.quiet:
                print(_summary_line(record), flush=True)
        if done:
            return


def _save(out: IO[str] | None, record: Record, path: str) -> IO[str] | None:
    """Append ``record`` to ``out``; the file to write to next (None once a write failed,
    said on stderr in one scrubbed line)."""
    if out is None:
        return None
    try:
        out.write(json.dumps(record, default=repr) + "\n")
        out.flush()
    except (OSError, ValueError) as exc:
        why = _reason(exc) if isinstance(exc, OSError) else type(exc).__name__
        sys.stderr.write(f"python -m obs receive: cannot write --out {shown(path)} ({why}): "
                         "records are printed only from now on\n")  # fmt: skip
        return None
    return out


def _print_totals(receiver: OTLPReceiver) -> None:
    counts = Counter(shown(event_of(r)) or "<no event>" for r in receiver.records)
    requests = receiver.requests
    print(
        f"received {sum(counts.values())} records in {sum(requests.values())} requests "
        f"(grpc {requests['grpc']}, http {requests['http']})",
        flush=True,
    )
    for name, n in counts.most_common():
        print(f"  {n:6d}  {name}", flush=True)
    sys.stdout.flush()
