"""Where a batch goes: delivered through the transport (split when too large, a permanent
rejection narrowed down to the records the collector refuses, given up and counted, so a
poisoned record never blocks the ones behind it), or disposed of: spooled or counted.
"""

from __future__ import annotations

__all__ = ["Delivery", "Disposer", "failure_text"]

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk._logs import ReadableLogRecord

from obs._otlp_outcome import Outcome
from obs._own_events import ObsRecordsDropped
from obs._spool import Spool
from obs.encode import scrub_text
from obs.levels import CLASS_NAMES, WARNING_CLASS
from obs.otel.accounting import LOSS_REPORTS, Accounting
from obs.otel.records import Payload, RecordBuilder
from obs.otel.transport import Transport

if TYPE_CHECKING:
    from obs._reentry import MarkedLock


def failure_text(target: str, directory: str, answer: str) -> str:
    """obs' report of a failed export: where to, what the collector (or the client)
    answered, so that a wrong token reads differently from a collector that is down."""
    why = f" ({answer})" if answer else ""
    return (
        f"OTLP export to {target} failed{why}; WARNING+ records are spooled to "
        f"{directory} and replayed when it is reachable again"
    )


#: Records answered a server error alone, before the collector took any part of the request,
#: after which the collector counts as failing (not the records): the request is left.
_MAX_SUSPECTS = 3
#: Records failing alone remembered across requests (the spool's head holds no more).
_MAX_REMEMBERED = 64
#: The fewest spool lines a replay reads at a time (sent in requests of the batch size):
#: past a record failing alone there is another to tell whether the collector is up.
MIN_REPLAY_READ = _MAX_SUSPECTS + 1


class Delivery:
    """Sends records (class, record) for one sink; counts and notes rejections."""

    __slots__ = (
        "_acct",
        "_lock",
        "_transport",
        "counted",
        "handled",
        "last_failure",
        "reachable",
        "retry_after",
        "suspect",
    )

    def __init__(
        self,
        transport: Callable[[], Transport | None],
        accounting: Accounting,
        lock: MarkedLock,
    ) -> None:
        self._transport = transport
        self._acct = accounting
        self._lock = lock
        #: What the collector (or the client) answered to the last failed request.
        self.last_failure = ""
        #: How long the collector asked to wait after the last failed request (0: nothing).
        self.retry_after = 0.0
        #: The last request left records only because they failed alone with a server
        #: error: the collector answers (it is not down); a later record can prove it up.
        self.reachable = False
        #: Records of the batch in flight already counted lost (rejected): no longer in
        #: flight. The worker resets it and :attr:`handled` as it takes or settles a batch.
        self.counted = 0
        #: The records of the batch in flight handled (taken by the collector or given up),
        #: by ``id``: shutdown spools only the others of a batch it takes over. Not always
        #: its first ones: records failing alone are settled after the part taken behind them.
        self.handled: set[int] = set()
        #: Records that failed alone with a server error before the collector took anything
        #: of their request (by uid, the last _MAX_REMEMBERED), and whether it took a
        #: request since: one failing alone again then is given up (the collector is up).
        self.suspect: dict[object, bool] = {}

    def send(self, records: Sequence[ReadableLogRecord], timeout: float) -> Outcome:
        if not records:
            return Outcome(ok=True)
        transport = self._transport()
        if transport is None:
            return Outcome(ok=False)
        try:
            return transport.export(records, timeout)
        except Exception as exc:
            self._acct.note("otel_export", exc)
            return Outcome(ok=False)

    def deliver(
        self,
        records: list[tuple[int, ReadableLogRecord]],
        timeout: float,
        *,
        replay: bool = False,
        size: int = 0,
    ) -> tuple[int, list[tuple[int, ReadableLogRecord]]]:
        """Send ``records`` (class, record); a request too large is split in halves, a
        permanent rejection is narrowed down by halves to the records the collector
        refuses, which are given up and counted ``rejected`` (so a poisoned record never
        blocks the ones behind it); so is a server error (``Outcome.suspect``), a record
        failing alone given up once the collector takes another part. Returns (records
        the collector took, records left undelivered by a transient failure: the
        collector is down or the budget is spent).
        Parts go out oldest first, so the undelivered records are the batch's last ones,
        returned in their order (spooled and replayed in order; a replay keeps the progress
        before them), but for records failing alone left untried when the budget ran out
        while settling them (they precede the part the collector took after them).
        ``replay``: spooled records, whose rejection is a loss of the spool
        (``replay_dropped``), not more of what this process sent. ``size``: the most records
        a request holds (0: all of them).
        """
        deadline = time.monotonic() + max(timeout, 0.05) * 2
        self.retry_after = 0.0
        self.reachable = False
        step = size if size > 0 else max(len(records), 1)
        parts = [records[i : i + step] for i in range(0, len(records), step)][::-1]
        delivered = 0
        taken = False  # the collector took a part of this request: it is up
        #: Records answered a server error alone before the collector took anything: given
        #: up once it takes another part, else left undelivered (it is down) with the rest.
        suspects: list[tuple[int, ReadableLogRecord]] = []
        why = ""  # the server error the suspects were answered
        retried: object = None  # the record failing alone that is being sent once more
        while parts:
            part = parts.pop()
            if time.monotonic() > deadline and part is not records:
                return delivered, [*suspects, *(r for p in [part, *reversed(parts)] for r in p)]
            outcome = self.send([r for _, r in part], timeout)
            if outcome.ok:
                taken = True
                self.suspect = dict.fromkeys(self.suspect, True)
                delivered += self._taken(part, outcome, replay)
                settled, unsent = self._settle(suspects, why, timeout, replay, deadline)
                delivered += settled
                suspects = []
                if unsent:  # budget spent or no answer: they and the rest are left
                    return delivered, [*unsent, *(r for p in reversed(parts) for r in p)]
                continue
            narrow = outcome.too_large or outcome.permanent
            if outcome.suspect and (taken or len(suspects) < _MAX_SUSPECTS):
                narrow = True
                alone = len(part) == 1 and not taken and part is not retried
                if alone and not self._again(part[0]):
                    suspects.append(part[0])
                    why = self.last_failure = outcome.message
                    self.retry_after = outcome.retry_after
                    continue
            if not narrow:
                self.last_failure, self.retry_after = outcome.message, outcome.retry_after
                return delivered, [*suspects, *(r for p in [part, *reversed(parts)] for r in p)]
            if len(part) > 1:
                mid = len(part) // 2
                parts.append(part[mid:])
                parts.append(part[:mid])
                continue
            alone = outcome.suspect and not (outcome.permanent or outcome.too_large)
            if alone and part is not retried:  # failing alone once more before given up
                retried = part
                parts.append(part)
                continue
            text = outcome.message or "rejected by the collector"
            self._give_up(part, text, replay, suspect=alone)
        self.reachable = bool(suspects)
        return delivered, suspects

    def _settle(
        self,
        suspects: list[tuple[int, ReadableLogRecord]],
        why: str,
        timeout: float,
        replay: bool,
        deadline: float,
    ) -> tuple[int, list[tuple[int, ReadableLogRecord]]]:
        """The collector is up: each record that failed alone is sent once more, and given
        up if the collector fails it again (a server error or a rejection: it is not held
        behind what was taken after it). Only within the request's budget, and only while
        the collector answers: (how many arrived, the ones left, from the first not tried
        again or not answered: a timeout, the collector gone, shutdown's interrupt)."""
        delivered = 0
        for i, record in enumerate(suspects):
            if time.monotonic() > deadline:
                self.last_failure = why
                return delivered, suspects[i:]
            again = self.send([record[1]], timeout)
            if again.ok:
                delivered += self._taken([record], again, replay)
            elif again.suspect or again.permanent or again.too_large:
                self._give_up([record], again.message or why, replay, suspect=True)
            else:
                self.last_failure, self.retry_after = again.message, again.retry_after
                return delivered, suspects[i:]
        return delivered, []

    def _taken(
        self, part: list[tuple[int, ReadableLogRecord]], outcome: Outcome, replay: bool
    ) -> int:
        """Count ``part`` taken (less what a partial success rejected): how many arrived."""
        rejected = min(outcome.rejected, len(part))
        if rejected:
            self._reject(part, rejected, outcome.message, replay)
        self._handled(part, replay)
        return len(part) - rejected

    def _again(self, record: tuple[int, ReadableLogRecord]) -> bool:
        """Whether ``record`` failed alone with a server error before, and the collector
        took a request since; else it is remembered as one that failed alone."""
        attributes = record[1].log_record.attributes or {}
        uid = attributes.get("log.record.uid") or id(record[1])
        if self.suspect.pop(uid, False):
            return True
        self.suspect[uid] = False
        while len(self.suspect) > _MAX_REMEMBERED:
            del self.suspect[next(iter(self.suspect))]
        return False

    def _give_up(
        self,
        part: list[tuple[int, ReadableLogRecord]],
        message: str,
        replay: bool,
        *,
        suspect: bool = False,
    ) -> None:
        """Count each record of ``part`` rejected (``suspect``: it failed alone with a
        server error, and the collector has just taken another part) and handled."""
        text = f"failed alone while the collector took the rest: {message}" if suspect else message
        for record in part:
            self._reject([record], 1, text, replay)
            self._handled([record], replay)

    def _handled(self, part: list[tuple[int, ReadableLogRecord]], replay: bool) -> None:
        if not replay:
            with self._lock:
                self.handled.update(id(record) for _, record in part)

    def replay(
        self, docs: list[dict[str, Any]], builder: RecordBuilder, timeout: float, size: int = 0
    ) -> tuple[int, bool]:
        """Deliver one batch of spool lines: (how many of them, from the first, are done:
        delivered or given up; whether all of them are). Those the collector took are
        counted ``replay_delivered``; a line that is not a record is counted
        ``spool_corrupt`` once done (lines past ``done`` are read again)."""
        records = []
        index: list[int] = []  # the doc each record came from
        broken: list[tuple[int, object]] = []
        for i, doc in enumerate(docs):
            try:
                cls = doc.get("cls")
                cls = cls if type(cls) is int and 0 <= cls < len(CLASS_NAMES) else 3
                records.append((cls, builder.from_spool(doc)))
                index.append(i)
            except Exception:
                broken.append((i, doc.get("cls")))
        delivered, left = self.deliver(records, timeout, replay=True, size=size)
        done = len(docs) if not left else index[_first(records, left)]
        with self._lock:
            self._acct.counters.replay_delivered += delivered
            for _, cls in (b for b in broken if b[0] < done):
                self._acct.counters.corrupt(1, cls)
        return done, not left

    def _reject(
        self, part: list[tuple[int, ReadableLogRecord]], n: int, message: str, replay: bool
    ) -> None:
        """Count ``n`` records of ``part`` as given up for good (the collector refused them);
        their level is known unless a partial success rejected some of a mixed batch."""
        classes = {cls for cls, _ in part}
        level = CLASS_NAMES[classes.pop()] if len(classes) == 1 else "UNKNOWN"
        with self._lock:
            self._acct.counters.drop_named("rejected", level, n, replay=replay)
            self.counted += 0 if replay else n
            self._acct.last_reject_message = message
        text = scrub_text(f"the collector rejected {n} log record(s) for good: {message}")
        self._acct.note_answer("otel_export", "Rejected", message, text)


class Disposer:
    """Records that will not be exported now: WARNING+ are spooled (obs' own reports of
    loss into the spool's reserve, so they survive a full spool), the rest counted."""

    __slots__ = ("_acct", "_builder", "_lock", "_spool")

    def __init__(
        self, builder: RecordBuilder, spool: Spool, accounting: Accounting, lock: MarkedLock
    ) -> None:
        self._builder = builder
        self._spool = spool
        self._acct = accounting
        self._lock = lock

    def dispose(
        self,
        victims: Sequence[tuple[int, Payload]],
        reason: str,
        release: Callable[[], None] | None = None,
    ) -> int:
        """Spool or count ``victims`` (class, payload) as ``reason``; the number spooled.
        ``release`` runs under the lock as they are counted: it takes them out of what the
        caller holds in flight, so that no moment counts them twice."""
        lines: list[dict[str, Any]] = []
        classes: list[int] = []
        own: list[dict[str, Any]] = []  # obs' loss reports: may use the spool's reserve
        own_classes: list[int] = []
        dropped: list[tuple[str, int]] = []
        quiet: list[tuple[str, int]] = []  # lost loss reports: counted, never reported again
        for cls, payload in victims:
            if cls < WARNING_CLASS:
                dropped.append((reason, cls))
                continue
            try:
                record = (
                    payload
                    if isinstance(payload, ReadableLogRecord)
                    else self._builder.build(payload, cls)
                )
                line = RecordBuilder.to_spool(record, cls)
                if line["name"] in LOSS_REPORTS:
                    own.append(line)
                    own_classes.append(cls)
                else:
                    lines.append(line)
                    classes.append(cls)
            except Exception as exc:
                self._acct.note("otel_encode", exc)
                dropped.append(("encode_error", cls))
        written = 0
        for batch, batch_classes, reserved in ((lines, classes, False), (own, own_classes, True)):
            if not batch:
                continue
            why, n = "spool_full", 0
            try:
                n = self._spool.append(batch, reserved=reserved)
            except Exception as exc:  # unwritable directory, disk full, ...
                self._acct.note("otel_spool", exc)
                why, n = "spool_error", getattr(exc, "lines", 0)  # written whole: spooled
            written += n
            (quiet if reserved else dropped).extend((why, cls) for cls in batch_classes[n:])
            if reserved and n < len(batch):
                self._keep_lost(batch[n:])
        self._count(written, dropped, quiet, release)
        return written

    def _keep_lost(self, reports: Sequence[dict[str, Any]]) -> None:
        """Persist loss reports the spool had no room for (their counts merged per kind),
        so the next replay still delivers them: the count of a loss is never lost."""
        docs: dict[str, dict[str, Any]] = {}
        for line in reports:
            key = loss_key(line)
            docs[key] = merge_loss(docs[key], line) if key in docs else line
        try:
            self._spool.keep_lost(docs, merge_loss)
        except Exception as exc:  # the spool is unusable: counted quiet already
            self._acct.note("otel_spool", exc)

    def _count(
        self,
        written: int,
        dropped: list[tuple[str, int]],
        quiet: list[tuple[str, int]],
        release: Callable[[], None] | None,
    ) -> None:
        """Count what :meth:`dispose` spooled and dropped, and ``release`` with it."""
        with self._lock:
            counters = self._acct.counters
            counters.spooled += written
            for why, cls in dropped:
                counters.drop(why, cls)
            for why, cls in quiet:  # a report of this loss would be lost the same way
                counters.drop(why, cls, report=False)
            if release is not None:
                release()


def _first(
    records: list[tuple[int, ReadableLogRecord]], left: list[tuple[int, ReadableLogRecord]]
) -> int:
    """Where the first of ``left`` is in ``records``: records that failed alone and were
    not tried again precede the part taken after them (read again: sent twice, not lost)."""
    ids = {id(record) for _, record in left}
    return next(i for i, (_, record) in enumerate(records) if id(record) in ids)


def loss_key(line: dict[str, Any]) -> str:
    """The kind of one of obs' own loss reports: its event and what its counts are of."""
    attrs = line.get("attrs")
    if not isinstance(attrs, dict):
        attrs = {}
    what = (attrs.get("reason"), attrs.get("where"), attrs.get("error_type"))
    return json.dumps([line.get("name"), *what], default=str)[:512]


def merge_loss(kept: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """One report of two of a kind: ``obs_records_dropped`` counts add up (the newer
    record's time and resource); any other report stays the first one."""
    old, attrs = kept.get("attrs"), new.get("attrs")
    if new.get("name") != ObsRecordsDropped.name or not (
        isinstance(old, dict) and isinstance(attrs, dict)
    ):
        return kept
    dropped: dict[str, int] = {}
    for table in (old.get("dropped"), attrs.get("dropped")):
        for level, n in (table if isinstance(table, dict) else {}).items():
            dropped[str(level)] = dropped.get(str(level), 0) + _count_of(n)
    count = _count_of(old.get("count")) + _count_of(attrs.get("count"))
    merged = dict(new)
    merged["attrs"] = {**attrs, "count": count, "dropped": dropped}
    merged["body"] = f"{count} log records were not exported ({attrs.get('reason')})"
    return merged


def _count_of(value: object) -> int:
    return value if type(value) is int and value > 0 else 0
