"""One request's budget bounds the records failing alone that are sent once more.

A record answered a server error alone is sent once more after the collector takes another
part of the request (``Delivery._settle``). Those second tries went out whatever the time:
a collector that answers 500 to single records and then stalls stretched one export by up
to three request timeouts past its deadline. Now a second try starts only within the
request's budget; the ones left are undelivered (spooled live, read again on a replay),
never given up untried.

The transport is the seam (:class:`obs.otel.transport.Transport`): a collector whose
answers and stalls are scripted per request; the OTLP exporters behind it are tested on
real loopback collectors elsewhere (``tests/integration/test_otel_poison.py``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource

from obs._otlp_outcome import Outcome
from obs._reentry import MarkedLock
from obs.otel.accounting import Accounting
from obs.otel.delivery import Delivery
from obs.otel.records import RecordBuilder
from obs.rank import RankResolver
from obs.settings import Settings

#: The request timeout of each test: what one stalled second try costs.
TIMEOUT = 0.1


class _Collector:
    """Answers 500 to a request holding a ``bad`` record until it takes one holding none;
    after that, every request holding a ``bad`` one stalls ``stall`` x the timeout (a client
    whose deadline is not honoured to the millisecond) and fails."""

    def __init__(self, bad: set[str], stall: float) -> None:
        self.bad = bad
        self.stall = stall
        self.up = False
        self.sent: list[tuple[float, list[str]]] = []  # (when it started, bodies)
        self.taken: list[str] = []

    def export(self, batch: Sequence[ReadableLogRecord], timeout: float) -> Outcome:
        bodies = [str(r.log_record.body) for r in batch]
        self.sent.append((time.monotonic(), bodies))
        if not self.bad.intersection(bodies):
            self.up = True
            self.taken.extend(bodies)
            return Outcome(ok=True)
        if self.up:
            time.sleep(timeout * self.stall)
            return Outcome(ok=False, message="timed out")
        return Outcome(ok=False, suspect=True, message="HTTP 500")

    def interrupt(self) -> None:
        return

    def close(self, timeout: float) -> None:
        return


def _records(names: list[str]) -> list[tuple[int, ReadableLogRecord]]:
    return [
        (4, ReadableLogRecord(LogRecord(body=n, attributes={"log.record.uid": n}), Resource({})))
        for n in names
    ]


def _rejected(acct: Accounting) -> int:
    return sum(sum(v.values()) for v in acct.counters.dropped.values()) + sum(
        sum(v.values()) for v in acct.counters.replay_dropped.values()
    )


@settings(max_examples=12, deadline=None)
@given(
    bad=st.sets(st.integers(0, 7), min_size=3, max_size=3),
    stall=st.floats(2.0, 3.0),
    replay=st.booleans(),
)
@example(bad={0, 1, 2}, stall=2.0, replay=False)
@example(bad={0, 1, 2}, stall=2.0, replay=True)
def test_second_tries_start_within_the_requests_budget(
    bad: set[int], stall: float, replay: bool
) -> None:
    """Three records fail alone, the collector takes the next part, then stalls: no second
    try starts past the deadline (2 x the timeout after the first request; 3 x allowed), and
    each record is delivered, given up after its second try, or left undelivered, once.
    Before the fix the third second try started at 2 x ``stall`` (4 to 6) x the timeout."""
    names = [f"{'bad' if i in bad else 'ok'}{i}" for i in range(8)]
    collector = _Collector({n for n in names if n.startswith("bad")}, stall)
    lock = MarkedLock()
    acct = Accounting(lambda *a, **k: None, lock, 60.0)
    delivery = Delivery(lambda: collector, acct, lock)
    delivered, left = delivery.deliver(_records(names), TIMEOUT, replay=replay)
    first = collector.sent[0][0]
    late = [bodies for when, bodies in collector.sent if when > first + 3 * TIMEOUT]
    undelivered = [str(r.log_record.body) for _, r in left]
    assert (late, delivered) == ([], len(collector.taken))
    assert len(collector.taken) + len(undelivered) + _rejected(acct) == len(names)
    assert set(collector.taken).isdisjoint(undelivered)


@settings(max_examples=8, deadline=None)
@given(bad=st.sets(st.integers(0, 7), min_size=3, max_size=3), stall=st.floats(2.0, 3.0))
@example(bad={0, 1, 2}, stall=2.0)
def test_a_replay_reads_again_every_record_not_tried_again(bad: set[int], stall: float) -> None:
    """The same collector, spool lines replayed: the lines a replay counts done are each
    taken or given up after a second try; every record left untried is read again (the
    part taken after it too: sent twice rather than lost)."""
    names = [f"{'bad' if i in bad else 'ok'}{i}" for i in range(8)]
    collector = _Collector({n for n in names if n.startswith("bad")}, stall)
    lock = MarkedLock()
    acct = Accounting(lambda *a, **k: None, lock, 60.0)
    delivery = Delivery(lambda: collector, acct, lock)
    builder = RecordBuilder(Settings(service_name="svc"), RankResolver())
    docs = [RecordBuilder.to_spool(r, cls) for cls, r in _records(names)]
    done, whole = delivery.replay(docs, builder, TIMEOUT)
    given_up = _rejected(acct)
    first = collector.taken[:1]
    up = next((i for i, (_, b) in enumerate(collector.sent) if first and first[0] in b), 0)
    handled = set(collector.taken) | {b[0] for _, b in collector.sent[up + 1 :] if len(b) == 1}
    assert whole == (done == len(names))
    assert set(names[:done]) <= handled
    assert len(set(names[:done]) - set(collector.taken)) <= given_up
