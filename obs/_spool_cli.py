"""``python -m obs spool``: look into, replay or purge a spool directory.

``list`` shows the records waiting, per service, with their count and age; ``replay``
sends them to an OTLP endpoint (each keeps its original resource); ``purge`` deletes
them. The directory is ``--dir``, or ``OBS_SPOOL_DIR``, or by default the spool root
(``$TMPDIR/obs-spool-$UID``) and each per-service directory in it.
"""

from __future__ import annotations

__all__ = ["cli_spool"]

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from obs._spool import Spool
from obs.cli_text import ScrubbingParser, shown
from obs.errors import ConfigError


def _parser() -> argparse.ArgumentParser:
    # its errors quote no secret of a refused value
    parser = ScrubbingParser(prog="python -m obs spool", description=__doc__)
    parser.add_argument("action", choices=("list", "replay", "purge"))
    parser.add_argument("--dir", help="spool directory (default: OBS_SPOOL_DIR or obs' own)")
    parser.add_argument("--endpoint", help="replay: OTLP endpoint (default: the OTEL_ ones)")
    parser.add_argument("--protocol", choices=("grpc", "http/protobuf"), help="replay protocol")
    parser.add_argument("--timeout", type=float, default=30.0, help="replay: seconds (30)")
    return parser


def _summary(spool: Spool) -> dict[str, dict[str, Any]]:
    """service.name -> count, oldest and newest record time (ns) of what is waiting."""
    out: dict[str, dict[str, Any]] = {}
    for doc in spool.scan():
        res = doc.get("res")
        service = str(res.get("service.name", "?")) if isinstance(res, dict) else "?"
        ts = doc.get("ts") if isinstance(doc.get("ts"), int) else 0
        row = out.setdefault(service, {"records": 0, "oldest": ts, "newest": ts})
        row["records"] += 1
        row["oldest"] = min(row["oldest"], ts) if ts else row["oldest"]
        row["newest"] = max(row["newest"], ts)
    return out


def _age(ns: int) -> str:
    if not ns:
        return "?"
    seconds = max(time.time() - ns / 1e9, 0.0)
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m"


def _replay(directory: str, args: argparse.Namespace) -> int:
    from obs._registry import Event  # noqa: PLC0415
    from obs.otel import ExportSink  # noqa: PLC0415 - the SDK loads only here
    from obs.rank import RankResolver  # noqa: PLC0415
    from obs.settings import load_settings  # noqa: PLC0415

    overrides: dict[str, Any] = {"logs_exporter": "otlp", "spool_dir": directory}
    if args.endpoint:
        overrides["otlp_endpoint"] = args.endpoint
    if args.protocol:
        overrides["otlp_protocol"] = args.protocol
    settings = load_settings(overrides)
    reports: list[str] = []

    def report(event: Event, level: int | None = None, *, body: str | None = None) -> None:
        reports.append(f"{type(event).name} {body or event.body()}")

    with _scrubbed_library_warnings():
        sink = ExportSink(settings, RankResolver(), report)
        try:
            ok = sink.force_flush(args.timeout)
        finally:
            sink.shutdown(1.0)
    stats = sink.stats()
    given_up = sum((stats.get("replay_dropped") or {}).values())
    sys.stdout.write(f"replayed {stats['replayed']} records\n")
    if given_up:  # taken out of the spool, never delivered: the collector's words on stderr
        sys.stdout.write(
            f"gave up {given_up} records: refused for good by the collector, or not records\n"
        )
    if stats.get("spool_kept"):
        sys.stdout.write(
            f"kept {stats['spool_kept']} lines of another spool format version, not replayed\n"
        )
    for line in reports:
        sys.stderr.write(shown(line) + "\n")
    return 0 if ok and not given_up and not Spool(directory, 1).pending() else 1


class _ScrubbedStderr(logging.Handler):
    """The OTel SDK's and urllib3's own warnings, on stderr, scrubbed as obs' own text: they
    quote the endpoint (a query token, a URL password) and obs is not configured here."""

    def emit(self, record: logging.LogRecord) -> None:
        from obs.encode import scrub_text  # noqa: PLC0415 - loaded with the replay only

        try:
            sys.stderr.write(f"{record.levelname} {scrub_text(record.getMessage())}\n")
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _scrubbed_library_warnings() -> Iterator[None]:
    """While a replay runs, the root logger writes through :class:`_ScrubbedStderr`
    (otherwise logging's last resort would print the libraries' text raw)."""
    root = logging.getLogger()
    handler = _ScrubbedStderr(logging.WARNING)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def cli_spool(argv: list[str]) -> int:
    """Run the spool subcommand; 0 on success, 1 when it could not do it all, 2 on usage."""
    args = _parser().parse_args(argv)
    try:
        directories = [args.dir] if args.dir else _default_directories()
    except ConfigError as exc:
        sys.stderr.write(f"{shown(str(exc))}\n")
        return 2
    status = 0
    for directory in directories:
        status = max(status, _one(directory, args))
    return status


def _default_directories() -> list[str]:
    """``OBS_SPOOL_DIR``, or the default root and its per-service directories."""
    from obs.settings import _default_spool_dir, load_settings  # noqa: PLC0415

    root = load_settings({}).spool_dir
    if root != _default_spool_dir():
        return [root]
    try:
        with os.scandir(root) as entries:
            subdirs = sorted(e.path for e in entries if e.is_dir(follow_symlinks=False))
    except OSError:
        subdirs = []
    return [root, *subdirs]


def _one(directory: str, args: argparse.Namespace) -> int:
    spool = Spool(directory, 1)
    try:
        if args.action == "list":
            rows = _summary(spool)
            sys.stdout.write(f"{shown(directory)}\n")
            for service, row in sorted(rows.items()):
                sys.stdout.write(
                    f"  {shown(service)}: {row['records']} records, oldest {_age(row['oldest'])}, "
                    f"newest {_age(row['newest'])}\n"
                )
            kept = spool.kept()
            if kept:
                sys.stdout.write(
                    f"  {kept} lines of another spool format version (not replayed by this "
                    "obs) kept in spool.other.jsonl\n"
                )
            if not rows and not kept:
                sys.stdout.write("  (empty)\n")
            return 0
        if args.action == "purge":
            if not spool.purge():
                sys.stderr.write("a replay holds the spool: try again later\n")
                return 1
            sys.stdout.write(f"purged {shown(directory)}\n")
            return 0
        return _replay(directory, args)
    except OSError as exc:  # the path, and the OS's text naming it again: scrubbed
        sys.stderr.write(f"{shown(directory)}: {shown(str(exc))}\n")
        return 1
    except ConfigError as exc:  # a bad --endpoint or --protocol: a usage error (redacted)
        sys.stderr.write(f"{shown(str(exc))}\n")
        return 2
    finally:
        spool.close()
