"""The probe's report: tables (per rank, or ranks with the same outcome grouped), OTLP
delivery lines, the causes of failures, a summary of what the collector received, and the
whole run as one JSON document."""

from __future__ import annotations

__all__ = [
    "ended",
    "expected_terminal",
    "failure_causes",
    "format_ranks",
    "last_exception",
    "rank_of",
    "render_delivery",
    "render_grouped",
    "render_table",
    "result_json",
    "scrub",
    "summarize_records",
    "verdict",
]

import dataclasses
import os
import re
import signal
from collections.abc import Iterable, Mapping
from typing import Any

from comm.probe.spec import (
    EXIT_OK,
    EXIT_PROBE_FAILED,
    EXIT_TERMINAL,
    EXIT_UNDELIVERED,
    STAGE_ORDER,
    ChainReport,
    ProbeResult,
)
from obs.encode import scrub_text, scrubbed_text


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
            status = result.exits.get(rank)
            if status is not None:  # it ended on its own: how, not "timed out"
                cause = f"{cause} ({ended(status)})" if cause else ended(status)
            if cause is None and result.stopped:  # waiting for a rank that had died
                cause = f"stopped: {result.stopped}"
            if cause is None:
                cause = last_exception(os.path.join(log_dir, "launcher.log"))
                cause = f"launcher: {cause}" if cause else None
            if cause is None and result.timed_out:
                cause = f"timed out after {result.spec.timeout:g} s"
            causes.setdefault(cause or "no cause in the logs", []).append(rank)
        lines += [
            f"rank{'s' if len(r) > 1 else ''} {format_ranks(r)}: {c}" for c, r in causes.items()
        ]
    return lines


def ended(status: int) -> str:
    """How a rank ended, in words, from its exit status (``-N``: signal N)."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"killed by {name} before it reported"
    return f"exited with status {status} before it reported"


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit))(: .*)?$")


#: How much of the end of a log :func:`last_exception` reads.
_TAIL = 65536


def last_exception(path: str) -> str | None:
    """The last ``SomeError: message`` line of a log file (a traceback's last line),
    scrubbed and cut to 500 characters; only the log's last 64 KiB are read."""
    try:
        with open(path, "rb") as f:
            f.seek(max(os.fstat(f.fileno()).st_size - _TAIL, 0))  # a huge log: its tail only
            lines = f.read(_TAIL).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line.strip()):
            return scrubbed_text(line.strip(), 500)  # a crash's message may quote a secret
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
    order = {name: i for i, name in enumerate(STAGE_ORDER)}
    lines = [
        _summary_line(name, by_event[name])
        for name in sorted(by_event, key=lambda n: (order.get(n, len(order)), n))
    ]
    lines += [_summary_line(name, others[name]) for name in sorted(others)]
    return lines


def _summary_line(name: str, group: list[Mapping[str, Any]]) -> str:
    ranks = [r for r in (rank_of(rec) for rec in group) if r is not None]
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


def rank_of(record: Mapping[str, Any]) -> int | None:
    """The rank a received record came from (its attributes, else its resource)."""
    for where in ("attributes", "resource"):
        value = (record.get(where) or {}).get("rank")
        if isinstance(value, int):
            return value
    return None


def expected_terminal(result: ProbeResult) -> set[tuple[int, str]]:
    """(rank, chain) pairs whose terminal failure the collector should receive."""
    return {
        (rank, c.chain)
        for rank, report in result.reports.items()
        for c in report.chains
        if c.outcome in ("terminal_failure", "config_error")
    }


def result_json(result: ProbeResult, receiver: Any = None) -> dict[str, Any]:
    """The run as one JSON-able document (``--json``): spec, per-rank reports with their
    delivery counters, missing ranks, causes, exit code."""
    doc: dict[str, Any] = {
        "spec": {
            **dataclasses.asdict(result.spec),
            "otlp_endpoint": scrub(result.spec.otlp_endpoint or "") or None,
        },
        "mode": result.mode,
        "duration_s": result.duration_s,
        "reports": {str(r): dataclasses.asdict(rep) for r, rep in result.reports.items()},
        "missing": list(result.missing),
        "exits": {str(r): code for r, code in sorted(result.exits.items())},
        "timed_out": result.timed_out,
        "stopped": result.stopped,
        "undelivered": list(result.undelivered),
        "causes": failure_causes(result),
        "exit_code": result.exit_code,
        "verdict": verdict(result.exit_code),
    }
    if receiver is not None:
        doc["received_records"] = len(receiver.records)
    return doc


def scrub(url: str) -> str:
    """``url`` without passwords or tokens (for output)."""
    return scrub_text(url)


def verdict(code: int) -> str:
    """What an exit status means, in words."""
    return {
        EXIT_UNDELIVERED: "records were not delivered over OTLP (see OTLP delivery above)",
        EXIT_OK: "every rank initialized both workspaces",
        EXIT_TERMINAL: "terminal failure (workspace unavailable) on at least one rank",
        EXIT_PROBE_FAILED: "the probe failed: a rank crashed or timed out (see rank logs)",
    }.get(code, "?")
