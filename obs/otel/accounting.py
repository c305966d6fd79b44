"""Delivery accounting: what was sent, delivered, spooled and lost, and obs' reports of it.

Counts reach the operator through ``report`` as ``obs_records_dropped`` (rate-limited) and
failures as ``obs_internal_error`` (once per place and kind; a failed or refused export
once per kind of answer: a collector down, then refusing a token, then rejecting records
is three reports, its thousandth 503 none); both are obs' own events,
which the sink spools into the spool's reserve, so a report of loss is not itself lost.
"""

from __future__ import annotations

__all__ = ["LOSS_REPORTS", "Accounting", "Counters", "Report"]

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from obs._own_events import ObsInternalError, ObsRecordsDropped
from obs._registry import Event
from obs._spool import VERSION
from obs.encode import safe_repr, scrub_text
from obs.levels import CLASS_NAMES

if TYPE_CHECKING:
    from obs._reentry import MarkedLock
    from obs._spool import ReplayResult

#: How the sink reports obs' own events: ``report(event, level=None, *, body=None)``.
Report = Callable[..., None]
#: obs' own reports of loss: spooled into the spool's reserve, so they survive a full spool.
LOSS_REPORTS = frozenset({ObsRecordsDropped.name, ObsInternalError.name})
#: Kinds of answers reported per place and kind (distinct statuses, codes, client errors).
_MAX_ANSWERS = 16
#: Notes deduplicated per kind of answer by :meth:`Accounting.note_answer`, not here.
_PER_ANSWER = frozenset({("otel_export", "ExportFailed"), ("otel_export", "Rejected")})


def answer_kind(answer: str) -> str:
    """What kind of answer ``answer`` is: ``HTTP 503``, ``UNAVAILABLE``, a client error's
    type (``ConnectionError``); the words after it (the collector's) vary, the kind not."""
    head = answer.split(":", 1)[0].strip()
    if head.startswith("HTTP "):
        head = " ".join(head.split()[:2])
    return head[:60]


class Counters:
    """Delivery accounting, for :meth:`ExportSink.stats` and ``obs_records_dropped``."""

    __slots__ = (
        "dropped",
        "enqueued",
        "exported",
        "failed_exports",
        "pending_drops",
        "replay_delivered",
        "replay_dropped",
        "replayed",
        "spool_corrupt",
        "spool_kept",
        "spooled",
    )

    def __init__(self) -> None:
        self.enqueued = 0
        self.exported = 0
        self.spooled = 0
        self.replayed = 0
        self.replay_delivered = 0  # spooled records a replay delivered (any process's)
        self.failed_exports = 0
        self.spool_corrupt = 0
        self.spool_kept = 0  # lines of another spool format version, kept, not replayed
        self.dropped: dict[str, dict[str, int]] = {}  # reason -> level -> n, since start
        #: Spooled records given up when replayed (rejected, corrupt): the spool's losses,
        #: not more of this process's (each was counted spooled, or another process's).
        self.replay_dropped: dict[str, dict[str, int]] = {}
        self.pending_drops: dict[str, dict[str, int]] = {}  # ... not yet reported

    def drop(self, reason: str, cls: int, n: int = 1, *, report: bool = True) -> None:
        """Count ``n`` records of class ``cls`` lost for ``reason``; ``report`` False: in
        :meth:`stats` only (obs' own loss report, whose report would be lost in turn)."""
        if report:
            self.drop_named(reason, CLASS_NAMES[cls], n)
            return
        per_level = self.dropped.setdefault(reason, {})
        per_level[CLASS_NAMES[cls]] = per_level.get(CLASS_NAMES[cls], 0) + n

    def corrupt(self, n: int = 1, cls: object = None) -> None:
        """Spool lines that could not be replayed (torn, not JSON, not a record): counted,
        and reported as ``spool_corrupt`` drops (per level when the line says it)."""
        self.spool_corrupt += n
        name = "UNKNOWN"
        if isinstance(cls, int) and type(cls) is int and 0 <= cls < len(CLASS_NAMES):
            name = CLASS_NAMES[cls]
        self.drop_named("spool_corrupt", name, n, replay=True)

    def drop_named(self, reason: str, name: str, n: int = 1, *, replay: bool = False) -> None:
        """Count and report ``n`` records of level ``name`` lost for ``reason``; ``replay``:
        spooled records lost when replayed (``replay_dropped``, outside the identity)."""
        for table in (self.replay_dropped if replay else self.dropped, self.pending_drops):
            per_level = table.setdefault(reason, {})
            per_level[name] = per_level.get(name, 0) + n

    def snapshot(self, *, queued: int, in_flight: int = 0) -> dict[str, Any]:
        """Delivery counters: queued, in flight (taken from the queue: being exported or
        spooled), enqueued, exported, dropped per level, spooled, replayed, spooled records
        given up when replayed per level (``replay_dropped``), both losses per reason
        (``dropped_by_reason``), failed exports, corrupt spool lines. enqueued = exported +
        spooled + dropped + queued + in flight: what becomes of a spooled record is not
        counted against what was sent again (``replayed``: spool lines a replay took,
        delivered or given up; those given up are ``replay_dropped`` too; those the
        collector took are ``replay_delivered``)."""
        by_reason: dict[str, dict[str, int]] = {}
        for source in (self.dropped, self.replay_dropped):
            for reason, table in source.items():
                merged = by_reason.setdefault(reason, {})
                for name, n in table.items():
                    merged[name] = merged.get(name, 0) + n
        return {
            "queued": queued,
            "in_flight": in_flight,
            "enqueued": self.enqueued,
            "exported": self.exported,
            "dropped": _per_level(self.dropped),
            "dropped_by_reason": by_reason,
            "spooled": self.spooled,
            "replayed": self.replayed,
            "replay_delivered": self.replay_delivered,
            "replay_dropped": _per_level(self.replay_dropped),
            "failed_exports": self.failed_exports,
            "spool_corrupt": self.spool_corrupt,
            "spool_kept": self.spool_kept,
        }

    def totals(self) -> tuple[int, int, int]:
        """(spooled, every record lost before the spool or when replayed, failed exports):
        what shutdown compares before and after to tell whether it delivered everything."""
        tables = (*self.dropped.values(), *self.replay_dropped.values())
        lost = sum(n for per_level in tables for n in per_level.values())
        return self.spooled, lost, self.failed_exports


def _per_level(table: dict[str, dict[str, int]]) -> dict[str, int]:
    per_level: dict[str, int] = {}
    for counts in table.values():
        for name, n in counts.items():
            per_level[name] = per_level.get(name, 0) + n
    return per_level


class Accounting:
    """The counters of one sink (replaced in a forked child) and the reports made of them.

    Notes are internal failures waiting to be reported (from any thread, lock-free);
    :meth:`send` reports them, and the pending drop counts, without holding ``lock``:
    ``report`` runs the chain, which re-enters the sink.
    """

    __slots__ = (
        "_drop_interval",
        "_last_drop_report",
        "_lock",
        "_report",
        "answers",
        "counters",
        "last_reject_message",
        "notes",
        "ready",
        "reported",
    )

    def __init__(self, report: Report, lock: MarkedLock, drop_interval: float) -> None:
        self._report = report
        self._lock = lock
        self._drop_interval = drop_interval
        self._last_drop_report = time.monotonic()
        self.counters = Counters()
        self.notes: list[tuple[str, str, str]] = []
        self.reported: set[tuple[str, str]] = set()
        #: (where, kind, kind of answer) noted for the operator (at most _MAX_ANSWERS each).
        self.answers: set[tuple[str, str, str]] = set()
        #: Nothing is reported before the first event or flush: until then the runtime
        #: that owns ``report`` may still be under construction.
        self.ready = False
        self.last_reject_message = ""

    def note(self, where: str, exc: BaseException) -> None:
        """Remember an internal failure; :meth:`send` reports it (once per kind)."""
        with contextlib.suppress(Exception):
            self.notes.append((where, type(exc).__name__, scrub_text(safe_repr(exc, 1000))))

    def note_answer(self, where: str, kind: str, answer: str, text: str) -> None:
        """Note a failure whose answer the operator must hear of (``text``): once for each
        kind of answer (:func:`answer_kind`), for at most ``_MAX_ANSWERS`` kinds, so a
        later, different failure (the collector back, then refusing records for good) is
        reported too, and a repeated one never floods."""
        key = (where, kind, answer_kind(answer))
        if key in self.answers or sum(k[:2] == key[:2] for k in self.answers) >= _MAX_ANSWERS:
            return
        self.answers.add(key)
        self.notes.append((where, kind, text))

    def replayed(self, result: ReplayResult, directory: str) -> None:
        """Count what one spool replay did (the caller holds the lock) and note what the
        operator must hear of: spool files set aside, lines of another format version."""
        counters = self.counters
        counters.replayed += result.replayed
        if result.corrupt:
            counters.corrupt(result.corrupt)
        if result.error is not None:  # replayed on: its progress is kept in memory
            self.note("otel_spool", result.error)
        if result.refused:
            self.notes.append(
                (
                    "otel_spool",
                    "SpoolFileRefused",
                    scrub_text(
                        f"{result.refused} spool file(s) in {directory} not owned by this "
                        "uid or accessible to others were set aside (refused.*) and not "
                        "replayed"
                    ),
                )
            )
        if result.kept:
            counters.spool_kept += result.kept
            versions = ", ".join(sorted(result.versions)[:4])
            self.notes.append(
                (
                    "otel_spool",
                    "SpoolOtherVersion",
                    scrub_text(
                        f"{counters.spool_kept} spool line(s) of another spool format "
                        f"version (v={versions}; this obs replays v={VERSION}) were kept in "
                        f"{directory}/spool.other.jsonl and not replayed"
                    ),
                )
            )

    def drops_due(self, now: float) -> bool:
        """Whether pending drop counts are due for their (rate-limited) report."""
        return bool(self.counters.pending_drops) and (
            now - self._last_drop_report >= self._drop_interval
        )

    def send(self, *, force: bool) -> None:
        """Deliver internal-error notes and (rate-limited) drop counts through ``report``."""
        if not self.ready:
            return
        notes: list[tuple[str, str, str]] = []
        with contextlib.suppress(IndexError):  # another sender took the last one meanwhile
            while True:
                notes.append(self.notes.pop(0))
        for where, kind, message in notes:
            if (where, kind) in self.reported and (where, kind) not in _PER_ANSWER:
                continue
            self.reported.add((where, kind))
            self._call(
                ObsInternalError(where=where, error_type=kind, error_message=message),
                logging.WARNING if kind in ("ExportFailed", "RecordsFolded") else logging.ERROR,
            )
        with self._lock:
            now = time.monotonic()
            pending = self.counters.pending_drops
            if not pending or not (force or now - self._last_drop_report >= self._drop_interval):
                return
            self.counters.pending_drops = {}
            self._last_drop_report = now
        for reason, per_level in sorted(pending.items()):
            total = sum(per_level.values())
            collector = self.last_reject_message if reason == "rejected" else None
            self._call(
                ObsRecordsDropped(
                    reason=reason, count=total, dropped=dict(per_level), collector_message=collector
                ),
                body=f"{total} log records were not exported ({reason})",
            )

    def _call(self, event: Event, level: int | None = None, *, body: str | None = None) -> None:
        try:
            self._report(event, level, body=body)
        except Exception:
            return  # the runtime counts its own failures; we must not loop
