"""The export worker: one thread per process that turns queued events into OTLP batches,
spools what cannot be delivered and replays it, driven by the state machine of
:mod:`obs.otel.state` (every state change is a :class:`~obs.otel.state.Signal` through
:func:`~obs.otel.state.transition`; the flags beside it are work to do, not state).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.sdk._logs import ReadableLogRecord

from obs._spool import ReplayResult
from obs.otel.delivery import MIN_REPLAY_READ, failure_text, merge_loss
from obs.otel.intake import DISPOSE_CHUNK, WorkerCore
from obs.otel.pacing import MAX_BACKOFF
from obs.otel.records import Captured, Payload
from obs.otel.state import Phase, Signal
from obs.otel.transport import bounded, endpoint_text

__all__ = ["ExportWorker"]

_SUPPRESS_KEY = otel_context._SUPPRESS_INSTRUMENTATION_KEY
_PROBE_TIMEOUT = 1.0  # one export attempt at shutdown when the collector was just down
_REPLAY_CHECK_INTERVAL = 1.0
#: What the thread does next: (kind, the batch it took, the request timeout).
Action = tuple[str, list[tuple[int, Captured]], float]
_EXIT: Action = ("exit", [], 0.0)
_REPORT: Action = ("report", [], 0.0)


class ExportWorker(WorkerCore):
    """The export thread of one sink (see :class:`~obs.otel.intake.WorkerCore`): builds
    and delivers batches, replays the spool, flushes and shuts down within a budget."""

    # -- the export thread ---------------------------------------------------------------

    def _run(self) -> None:
        token = otel_context.attach(otel_context.set_value(_SUPPRESS_KEY, True))
        try:
            if self._transport is None:
                self._transport = self._make_transport()
            while self._step():
                pass
        except BaseException as exc:
            self._acct.note("otel_export_thread", exc)
            with contextlib.suppress(Exception):
                self._acct.send(force=True)
        finally:
            otel_context.detach(token)
            with self._cond:
                if self._thread is threading.current_thread() and not self.closing:
                    self._crashes += 1  # restarted by the next event, a few times at most
                    self._thread = None
                    self._rearm()
                self._cond.notify_all()

    def _step(self) -> bool:
        """One unit of export-thread work; False when the thread should end."""
        self._acct.send(force=False)
        with self._cond:
            action = self._next_action_locked()
        kind = action[0]
        if kind == "exit":
            return False
        if kind == "report":
            self._acct.send(force=True)
            return True
        if kind == "replay":
            self._replay(action[2])
            return True
        if kind == "dispose":
            self._dispose(action[1], "shutdown", "_inflight")
            with self._cond:
                if not self._abandoned:
                    self._inflight = None
                    self._disposing = False
                self._cond.notify_all()
            return True
        self._export_batch(action[1], action[2])
        return True

    def _next_action_locked(self) -> Action:
        """Wait for work; decide what to do next (called with the lock held): the state's
        phase picks the rules, each a function of the state and the queue."""
        settings = self._settings
        delay = settings.blrp_schedule_delay_ms / 1000.0
        request_timeout = min(settings.otlp_timeout, settings.blrp_export_timeout_ms / 1000.0)
        while True:
            if self._abandoned:
                return _EXIT
            now = time.monotonic()
            if self.closing:
                step = self._closing_action_locked(now, request_timeout)
                if step[0] != "wait":
                    return step
                self._cond.wait(step[2])  # the collector's "not before", within the budget
                continue
            action = self._open_action_locked(now, request_timeout, delay)
            if action is not None:
                return action
            queued, retry = len(self._queue) + len(self.intake), self._replay_retry_at
            wake = max(self._pace.until, self._next_due) - now if queued else delay
            if retry and not queued:
                wake = min(wake, max(retry, self._pace.until) - now)
            self._cond.wait(max(min(wake, delay), 0.005))

    def _closing_action_locked(self, now: float, request_timeout: float) -> Action:
        """Closing: export against the deadline (less a reserve for spooling), one probe if
        the collector was down; past the reserve, or with the collector gone, spool in
        chunks shutdown can see; then the last drop report and one replay, then exit."""
        remaining = self._deadline - now
        timeout = min(request_timeout, remaining - self._reserve)
        if self._down:
            timeout = min(timeout, _PROBE_TIMEOUT)
        ahead = self._pace.not_before - now
        if ahead > 0 and not self._give_up and (self._queue or self._spool.pending()):
            if ahead < remaining - self._reserve:
                return "wait", [], ahead
            self._signal(Signal.GIVE_UP)  # it asked for later than the deadline: spool
        if self._queue:
            if self._give_up or remaining <= self._reserve:
                chunk, _ = self._queue.take(DISPOSE_CHUNK)  # shutdown sees what we hold
                self._inflight = chunk
                self._disposing = True
                return "dispose", chunk, 0.0
            return self._take_locked(timeout)
        if not self._final_reported and self._acct.counters.pending_drops:
            self._final_reported = True
            return _REPORT
        if (
            not self._closing_replayed
            and not self._give_up
            and remaining > self._reserve + 0.05
            and self._spool.pending()
        ):  # replay what we can within the budget (one probe if it was down)
            self._closing_replayed = True
            self._replay_busy = True
            return "replay", [], timeout
        return _EXIT

    def _open_action_locked(
        self, now: float, request_timeout: float, delay: float
    ) -> Action | None:
        """Running or flushing: a batch when one is due (a flush's first, and at once), a
        replay when due and not backing off, a drop report when due; None: wait."""
        queued = len(self._queue) + len(self.intake)
        # a force_flush is waiting (and its deadline has not passed): try now, unless the
        # collector asked for later (Retry-After; obs' own backoff a flush skips)
        flushing = self._state.phase is Phase.FLUSHING and self._flush_deadline > now
        flushing = flushing and not self._pace.asked_wait(now)
        flush_timeout = min(request_timeout, max(self._flush_deadline - now, 0.05))
        if queued:
            if flushing and self._flush_pending_locked():
                return self._take_locked(flush_timeout)
            if now >= self._pace.until and (queued >= self._batch_size or now >= self._next_due):
                self._next_due = now + delay
                return self._take_locked(request_timeout)
        retry = self._replay_retry_at
        if retry and now >= retry and now >= self._pace.until and not queued:
            self._replay_retry_at = 0.0  # our own schedule: probe the collector, replay
            self._replay_due = True
        if self._replay_due and (flushing or now >= self._pace.until):
            self._replay_due = False
            self._replay_busy = True
            return "replay", [], flush_timeout if flushing else request_timeout
        if self._acct.drops_due(now):
            return _REPORT
        return None

    def _take_locked(self, timeout: float) -> Action:
        batch, _ = self._queue.take(self._batch_size)
        if len(batch) < self._batch_size and self.intake:
            batch += self._pop_intake_locked(self._batch_size - len(batch))
        self._rearm()
        self._inflight, self._delivery.counted = batch, 0
        self._delivery.handled = set()
        return "export", batch, timeout

    def _flush_pending_locked(self) -> bool:
        if not self._flush_target:
            return False
        oldest = self._queue.oldest_seq()
        return oldest is not None and oldest <= self._flush_target

    def _export_batch(self, batch: list[tuple[int, Captured]], timeout: float) -> None:
        records: list[tuple[int, ReadableLogRecord]] = []
        build = self._builder.build
        resource = self._builder.resource()
        for cls, item in batch:
            try:
                records.append((cls, build(item, cls, resource)))
            except Exception as exc:
                self._acct.note("otel_encode", exc)
                with self._lock:
                    self._acct.counters.drop("encode_error", cls)
        with self._lock:  # in flight: what was built (what shutdown would take over)
            self._inflight = self._inflight if self._abandoned else list(records)
        delivered, undelivered = self._delivery.deliver(records, timeout)
        records = undelivered
        now = time.monotonic()
        with self._cond:
            if self._abandoned:
                return  # shutdown gave up on us and disposed of this batch itself
            was_down, gone = self._down, self._give_up  # gone: shutdown interrupted it
            self._acct.counters.exported += delivered
            self._delivery.counted, self._delivery.handled = 0, set()  # (_inflight: below)
            if not undelivered:
                self._inflight = None
                self._pace.ok()
                self._signal(Signal.EXPORT_OK)
                if now - self._last_replay_check >= _REPLAY_CHECK_INTERVAL or was_down:
                    self._last_replay_check = now
                    self._replay_due = self._replay_due or self._spool.pending()
                self._cond.notify_all()
                return
            self._acct.counters.failed_exports += 1
            self._enter_backoff_locked(now)
            self._inflight = undelivered  # (not what the collector took) until spooled
            self._disposing = True  # flush waits for the spool write below
        try:
            self._dispose(records, "export_failed", "_inflight")
            if not gone:  # (an interrupted export is no answer of the collector's)
                self._note_failure()
            self._acct.send(force=False)  # before a waiting flush returns
        finally:
            with self._cond:
                self._disposing = False
                if not self._abandoned:
                    self._inflight = None  # held until spooled: shutdown counts it otherwise
                self._cond.notify_all()

    def _enter_backoff_locked(self, now: float) -> None:
        self._pace.failed(now, self._delivery.retry_after)
        # while closing: the collector is gone
        self._signal(Signal.SERVER_ERROR if self._delivery.reachable else Signal.EXPORT_FAILED)

    def _note_failure(self) -> None:
        """Note a failed export or replay for the operator (once per kind of answer)."""
        target = endpoint_text(self._settings.otlp_logs_url) or self.mode
        answer = self._delivery.last_failure
        text = failure_text(target, self._spool.directory, answer)
        self._acct.note_answer("otel_export", "ExportFailed", answer, text)

    def _replay(self, timeout: float) -> None:
        """Replay the spool through the transport (another process may hold the lock)."""

        def should_stop() -> bool:
            if self.closing:
                return self._give_up or time.monotonic() >= self._deadline - self._reserve
            return self._abandoned or len(self._queue) + len(self.intake) >= self._batch_size

        try:
            result = self._spool.replay(
                lambda docs: self._replay_batch(docs, timeout),
                max(self._batch_size, MIN_REPLAY_READ),
                should_stop,
                merge_loss,
            )
        except Exception as exc:
            self._acct.note("otel_replay", exc)
            result = None
        with self._cond:
            self._replay_busy = False
            if result is not None:
                self._replayed_locked(result)
            else:  # a failed attempt: a flush or shutdown now says the spool is undelivered
                self._acct.counters.failed_exports += 1
                if not self.closing:
                    self._replay_retry_at = time.monotonic() + MAX_BACKOFF
            self._cond.notify_all()

    def _replay_batch(self, docs: list[dict[str, Any]], timeout: float) -> int:
        """Deliver one batch of spool lines; how many of them (from the first) are done,
        delivered or given up. The outcome moves the collector's state."""
        done, ok = self._delivery.replay(docs, self._builder, timeout, self._batch_size)
        with self._cond:
            gone = self._give_up  # shutdown interrupted it: no answer to report
            if ok:  # the collector is back: log straight to it again
                self._signal(Signal.EXPORT_OK)
                self._pace.ok()
            else:
                self._acct.counters.failed_exports += 1
                self._enter_backoff_locked(time.monotonic())
        if not (ok or gone):
            self._note_failure()
        return done

    def _replayed_locked(self, result: ReplayResult) -> None:
        """Count a finished replay and schedule the next one (soon, or on the backoff)."""
        self._acct.replayed(result, self._spool.directory)
        if not result.failed and not result.skipped and self._spool.pending():
            self._replay_due = True  # stopped early to serve the queue
        if result.failed or result.skipped:  # try again on the backoff schedule
            self._replay_retry_at = max(self._pace.until, time.monotonic() + 0.5)

    # -- reports -------------------------------------------------------------------------

    def _budget(self, timeout: float | None) -> float:
        return self._settings.shutdown_timeout if timeout is None else max(0.0, timeout)

    def force_flush(self, timeout: float | None = None) -> bool:
        """Export everything queued so far (and pending replays); True when all of it was
        delivered within ``timeout`` (default ``settings.shutdown_timeout``).

        Pending drop counts are reported first, and once more if the flush itself caused
        drops (the report takes a queue slot), so the counts reach the collector too.
        """
        deadline = time.monotonic() + self._budget(timeout)
        self._acct.ready = True
        try:
            with self._lock:
                before = self._acct.counters.totals()
            for _ in range(2):
                self._acct.send(force=True)
                if not self._wait_flushed(deadline):
                    return False
                with self._lock:
                    if not self._acct.counters.pending_drops:
                        break
            ok = self._flushed_ok(before)
            if self.mode == "provider" and self._transport is not None:
                self._transport.close(max(deadline - time.monotonic(), 0.0))
        except Exception as exc:
            self._acct.note("otel_flush", exc)
            return False
        else:
            return ok

    def _flushed_ok(self, before: tuple[int, int, int]) -> bool:
        """Whether a flush that ended in time delivered everything: no export failed and
        nothing was spooled meanwhile, or (an attempt begun before the flush failed during
        it) its replay left nothing in the spool, and nothing was lost since it began."""
        with self._lock:
            spooled, lost, failures = self._acct.counters.totals()
        if (spooled, failures) == (before[0], before[2]):
            return True
        return lost == before[1] and not self._spool.pending()

    def _wait_flushed(self, deadline: float) -> bool:
        """Wait until everything queued now is handled; False at the deadline."""
        self._absorb()  # what was logged so far gets its arrival number
        with self._cond:
            if self._closed or self.closing:
                return False
            if self._thread is None:
                self._start_thread_locked()
            target = self._queue.last_seq
            self._flush_target = max(self._flush_target, target)
            self._flush_deadline = max(self._flush_deadline, deadline)
            self._replay_due = self._replay_due or self._spool.pending()
            self._flush_waiters += 1
            self._signal(Signal.FLUSH_BEGIN)
            self._cond.notify_all()
            try:
                while self._flush_busy_locked(target):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._pace.not_before > deadline:
                        return False
                    self._cond.wait(remaining)
            finally:
                self._flush_waiters -= 1
                if not self._flush_waiters:
                    self._flush_deadline = 0.0  # nobody waits: back to the schedule
                    self._signal(Signal.FLUSH_END)
            return True

    def _flush_busy_locked(self, target: int) -> bool:
        oldest = self._queue.oldest_seq()
        return (
            (oldest is not None and oldest <= target)
            or self._inflight is not None
            or self._disposing
            or self._replay_due
            or self._replay_busy
            or bool(self._ahead)
            or self._ahead_held is not None
        )

    def shutdown(self, timeout: float | None = None) -> bool:
        """Deliver what is queued, spool what cannot be, stop; bounded by ``timeout``
        (default ``settings.shutdown_timeout``) even with the collector down or stuck.
        True when everything was delivered. Idempotent."""
        budget = self._budget(timeout)
        deadline = time.monotonic() + budget
        try:
            with self._cond:
                if self.closing or self._closed:
                    return bool(self._shutdown_ok)
            self._acct.ready = True
            self._acct.send(force=True)
            self._absorb()
            with self._cond:
                before = self._acct.counters.totals()
                self._signal(Signal.SHUTDOWN)  # callers now queue under the lock
                late = self._absorb_locked()  # (logged since)
                self._deadline = deadline
                self._reserve = min(0.5, budget * 0.2)
                if self._thread is None and self._queue:
                    self._start_thread_locked()
                thread = self._thread
                self._cond.notify_all()
            if late:
                self._dispose(late, "queue_full")
            abandoned = self._wait_for(thread, deadline)
            self._dispose_until(self._take_ahead(deadline), "shutdown", deadline)
            with self._cond:
                after = self._acct.counters.totals()
                self._signal(Signal.CLOSE)
                self._shutdown_ok = not abandoned and before[1:] == after[1:]
            self._acct.send(force=True)  # what shutdown counted: to the console and spool
            if self._shutdown_ok and before[0] != after[0]:  # spooled, but replayed since?
                self._shutdown_ok = not self._spool.pending()
        except Exception as exc:
            self._acct.note("otel_shutdown", exc)
            self._signal(Signal.CLOSE)
            return False
        else:
            return self._shutdown_ok

    def _wait_for(self, thread: threading.Thread | None, deadline: float) -> bool:
        """Join the export thread by the deadline, interrupting then abandoning a stuck
        export; True when it had to be abandoned."""
        transport = self._transport
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(deadline - self._reserve - time.monotonic(), 0.0))
            if thread.is_alive() and transport is not None:
                with self._cond:
                    self._signal(Signal.GIVE_UP)
                bounded(transport.interrupt, 0.05)  # also closes it
                transport = None
                thread.join(max(deadline - 0.1 - time.monotonic(), 0.0))
            if thread.is_alive():
                with self._cond:
                    self._signal(Signal.ABANDON)
                    held = list(self._inflight or [])
                    self._inflight = None
                    leftovers: list[tuple[int, Payload]] = []
                    if self._disposing:  # the thread is spooling them: may still finish
                        for cls, _ in held:  # (then they are counted twice, never lost)
                            self._acct.counters.drop("shutdown_in_flight", cls)
                    else:  # stuck in the network: ours to spool, all it did not hand over
                        done = self._delivery.handled
                        self._acct.counters.exported += len(done) - self._delivery.counted
                        leftovers.extend(r for r in held if id(r[1]) not in done)
                    leftovers.extend(self._queue.drain())
                    leftovers.extend(self._pop_intake_locked(len(self.intake)))
                self._dispose_until(leftovers, "shutdown", deadline)
                return True
        if transport is not None:
            transport.close(max(deadline - time.monotonic(), 0.0))
        return False

    def stats(self) -> dict[str, Any]:
        """Delivery counters (see :meth:`~obs.otel.accounting.Counters.snapshot`)."""
        with self._lock:
            held = max(len(self._inflight or ()) - self._delivery.counted, 0)
            held += len(self._ahead) + len(self._ahead_held or ())
            waiting = len(self.intake)  # sent, not counted yet: counted here, as queued
            stats = self._acct.counters.snapshot(queued=len(self._queue) + waiting, in_flight=held)
        stats["enqueued"] += waiting
        return stats
