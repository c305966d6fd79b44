"""The export worker's core: its queue and the callers' lock-free end of it, its state,
accounting, and the disposal of what is not exported (spool WARNING+, count the rest,
written ahead while the collector is down). :mod:`obs.otel.worker` adds the thread.

A caller appends its captured event to :attr:`WorkerCore.intake` (a deque: no lock) and
then reads :attr:`WorkerCore.wake_at`; whatever stops the lock-free path (shutdown, the
collector down, no thread, a queue about to be full) sets it to 0 under the lock before it
looks at the intake, so a caller that appended after that sees 0 and queues the intake
itself under the lock (:meth:`WorkerCore.settle`), and one that appended before is seen.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from operator import itemgetter

from obs._export_queue import SeverityQueue
from obs._reentry import LOCAL, MarkedLock
from obs._spool import Spool
from obs.levels import WARNING_CLASS
from obs.otel.accounting import Accounting, Report
from obs.otel.delivery import Delivery, Disposer
from obs.otel.pacing import Pacing
from obs.otel.records import Captured, Payload, RecordBuilder, class_of
from obs.otel.state import CLOSING_PHASES, Collector, Phase, Signal, State, transition
from obs.otel.transport import ExportThread, Transport
from obs.settings import Settings

__all__ = ["DISPOSE_CHUNK", "WorkerCore"]

DISPOSE_CHUNK = 256  # records spooled per step at shutdown (what shutdown can take over)
_OPEN_PHASES = frozenset({Phase.RUNNING, Phase.FLUSHING})


class WorkerCore:
    """The export worker's queue, state, accounting and disposal; :class:`ExportWorker`
    adds the thread.

    The caller's side (:class:`~obs.otel.sink.ExportSink`) only captures events, appends
    them to :attr:`intake` and calls :meth:`settle` once the intake reaches :attr:`wake_at`;
    everything that touches the network or the spool happens in the worker's threads.
    """

    def __init__(
        self,
        settings: Settings,
        builder: RecordBuilder,
        spool: Spool,
        make_transport: Callable[[], Transport],
        report: Report,
        *,
        mode: str,
        drop_report_interval: float = 5.0,
        notes: Sequence[tuple[str, str, str]] = (),
    ) -> None:
        self._settings = settings
        self._builder = builder
        self._spool = spool
        self._make_transport = make_transport
        self._report = report
        self.mode = mode
        self._drop_interval = drop_report_interval
        self._initial_notes = list(notes)
        self._batch_size = max(
            1, min(settings.blrp_max_export_batch_size, settings.blrp_max_queue_size)
        )
        self._crashes = 0
        self._transport: Transport | None = make_transport()  # ConfigError now, not later
        self._state: State = State(Phase.RUNNING, Collector.UP)
        self._reset_state()

    def start(self) -> None:
        """Start the thread; it first replays what an earlier process left behind."""
        with self._cond:
            self._replay_due = True
            self._start_thread_locked()

    # -- state -----------------------------------------------------------------------------

    def _signal(self, signal: Signal) -> None:
        """Apply ``signal`` to the state (the only place the state changes)."""
        self._state = transition(self._state, signal)
        self._rearm()

    def _rearm(self) -> None:
        """Set :attr:`wake_at`: callers append without the lock only while the thread runs,
        the collector is up and no shutdown began, and only until the queue would be full."""
        state, queue = self._state, self._queue
        if (
            self._acct.ready
            and self._thread is not None
            and state.phase in _OPEN_PHASES
            and state.collector is Collector.UP
        ):
            self.wake_at = max(1, min(self._batch_size, queue.capacity - len(queue)))
        else:
            if self.wake_at:  # what is in the intake now was logged while it was open
                self._open_items = len(self.intake)
            self.wake_at = 0

    @property
    def state(self) -> State:
        """The current state."""
        return self._state

    @property
    def closing(self) -> bool:
        """Shutdown has begun (or is over)."""
        return self._state.phase in CLOSING_PHASES

    @property
    def _closed(self) -> bool:
        return self._state.phase is Phase.CLOSED or self._state.phase is Phase.ABANDONED

    @property
    def _abandoned(self) -> bool:
        return self._state.phase is Phase.ABANDONED

    @property
    def _down(self) -> bool:
        return self._state.collector is not Collector.UP

    @property
    def _give_up(self) -> bool:
        return self._state.collector is Collector.GONE

    @property
    def shutdown_ok(self) -> bool:
        """What the finished (or running) shutdown returned."""
        return bool(self._shutdown_ok)

    def note(self, where: str, exc: BaseException) -> None:
        """Remember an internal failure; the thread reports it once per kind."""
        self._acct.note(where, exc)

    def add_note(self, where: str, kind: str, message: str) -> None:
        """Remember a failure described by the caller; reported once per kind."""
        self._acct.notes.append((where, kind, message))

    def _reset_state(self) -> None:
        """Fresh lock, queue and counters (construction, and in a forked child)."""
        #: Marks its holder as inside a log call: a signal handler or finaliser that logs
        #: while this thread holds it (a flush, ``delivery()``) is deferred, never waits.
        self._lock = MarkedLock()
        self._cond = threading.Condition(self._lock)  # type: ignore[arg-type]
        self._queue: SeverityQueue[Captured] = SeverityQueue(self._settings.blrp_max_queue_size)
        #: The callers' end of the queue, appended to without the lock: older than nothing
        #: in the queue (what takes the lock moves it there first), taken after the queue.
        self.intake: deque[Captured] = deque()
        #: The intake's length at which a caller calls :meth:`settle` (0: at every record).
        self.wake_at = 0
        #: How many of the intake's first records were appended while :attr:`wake_at` was
        #: not 0: queued as they would have been then (not written ahead, say).
        self._open_items = 0
        self._acct: Accounting = Accounting(self._report, self._lock, self._drop_interval)
        self._acct.notes.extend(self._initial_notes)
        self._initial_notes = []
        self._delivery = Delivery(lambda: self._transport, self._acct, self._lock)
        self._disposer = Disposer(self._builder, self._spool, self._acct, self._lock)
        self._thread: ExportThread | None = None
        self._inflight: Sequence[tuple[int, Payload]] | None = None
        self._state = State(Phase.RUNNING, Collector.UP)
        self._disposing = False
        self._final_reported = False
        self._shutdown_ok: bool | None = None
        self._deadline = 0.0
        self._reserve = 0.0
        self._flush_target = 0
        self._flush_deadline = 0.0
        self._flush_waiters = 0
        self._pace = Pacing()
        self._replay_due = False
        self._replay_busy = False
        self._replay_retry_at = 0.0  # when the worker replays the spool on its own (0: no)
        self._ahead: list[tuple[int, Payload]] = []  # WARNING+ to write ahead (collector down)
        self._ahead_held: list[tuple[int, Payload]] | None = None  # being written
        self._ahead_cond = threading.Condition(self._lock)  # type: ignore[arg-type]
        self._ahead_thread: ExportThread | None = None
        self._closing_replayed = False
        self._last_replay_check = 0.0
        self._next_due = time.monotonic() + self._settings.blrp_schedule_delay_ms / 1000.0

    def after_fork(self) -> None:
        """The child drops the parent's queued records (the parent exports them), gets a
        new exporter (sockets and gRPC channels do not survive fork) and its own rank;
        a child of a closing or closed sink starts closed."""
        state = transition(self._state, Signal.FORK)
        self._reset_state()
        self._state = state
        self._transport = None
        self._builder.after_fork()

    def settle(self) -> None:
        """The caller's side past :attr:`wake_at`: wake the thread when a batch is waiting
        and there is room, else queue the intake under the full rules (spooling or counting
        what has to leave: no I/O but a spool write when the queue is full or closed)."""
        with self._lock.raw if LOCAL.busy else self._lock:  # the chain's call is marked
            self._acct.ready = True
            queue = self._queue
            if self.wake_at and len(self.intake) + len(queue) < queue.capacity:
                self._cond.notify()  # the thread takes it; callers go on until it is full
                self.wake_at = queue.capacity - len(queue)
                return
            victims = self._absorb_locked()
        if victims:
            self._dispose(victims, "after_shutdown" if self._closed else "queue_full")

    def _absorb(self) -> None:
        """Queue the intake now (flush, shutdown), disposing of what has to leave."""
        with self._lock:
            victims = self._absorb_locked()
        if victims:
            self._dispose(victims, "after_shutdown" if self._closed else "queue_full")

    def _absorb_locked(self) -> list[tuple[int, Payload]]:
        """Move the intake into the queue (or the write-ahead list, or out); the victims."""
        victims: list[tuple[int, Payload]] = []
        intake = self.intake
        while intake:
            item = intake.popleft()
            victim: tuple[int, Payload] | None
            if self._open_items:
                self._open_items -= 1
                self._acct.counters.enqueued += 1
                victim = self._queue.put(class_of(item[2]), item)
            else:
                victim = self._submit_locked(class_of(item[2]), item)
            if victim is not None:
                victims.append(victim)
        if len(self._queue) >= self._batch_size:
            self._cond.notify()
        self._rearm()
        return victims

    def _pop_intake_locked(self, limit: int) -> list[tuple[int, Captured]]:
        """Up to ``limit`` records from the intake, oldest first (the queue is older)."""
        intake = self.intake
        out = []
        for _ in range(min(limit, len(intake))):
            item = intake.popleft()
            out.append((class_of(item[2]), item))
        self._acct.counters.enqueued += len(out)
        self._open_items = max(0, self._open_items - len(out))
        return out

    def _submit_locked(self, cls: int, item: Captured) -> tuple[int, Payload] | None:
        """Queue one event of severity class ``cls``; the record that has to leave."""
        self._acct.counters.enqueued += 1  # sent: then spooled, counted, or queued
        if self._closed:
            return cls, item
        if self._down and cls >= WARNING_CLASS and not self.closing:
            self._ahead.append((cls, item))  # collector down: written ahead to the spool
            if self._ahead_thread is None:
                self._ahead_thread = ExportThread(
                    target=self._write_ahead, name="obs-otel-spool", daemon=True
                )
                self._ahead_thread.start()
            elif len(self._ahead) == 1:
                self._ahead_cond.notify()
            return None
        queue = self._queue
        victim = queue.put(cls, item)
        if self._thread is None:
            if self._crashes < 3:
                self._start_thread_locked()
        elif len(queue) == self._batch_size:
            self._cond.notify()
        return victim

    def _run(self) -> None:
        raise NotImplementedError  # the export thread: ExportWorker's

    def _start_thread_locked(self) -> None:
        thread = ExportThread(target=self._run, name="obs-otel-export", daemon=True)
        self._thread = thread
        thread.start()
        self._rearm()

    # -- disposal: spool WARNING+, count the rest ----------------------------------------

    def _dispose(self, victims: Sequence[tuple[int, Payload]], reason: str, held: str = "") -> None:
        """Records that will not be exported now: spooled or counted; replay is scheduled.
        ``held``: the attribute holding them in flight, emptied as they are counted."""
        release = (lambda: self._let_go(held)) if held else None
        written = self._disposer.dispose(victims, reason, release)
        if written:
            with self._lock:
                if not self._replay_retry_at:
                    self._replay_retry_at = max(self._pace.until, time.monotonic() + 0.5)

    def _let_go(self, held: str) -> None:
        if not self._abandoned:  # (else shutdown took them over)
            setattr(self, held, None)

    def _write_ahead(self) -> None:
        """The write-ahead thread: while the collector is known to be down, WARNING+
        records go to the spool as they are logged, not after the next failed export
        (which may hang in a blackholed connection), so a SIGTERM or SIGKILL loses at most
        the few milliseconds of records not yet written."""
        while True:
            with self._lock:
                while not self._ahead:
                    if self.closing or self._closed:
                        self._ahead_thread = None
                        self._ahead_cond.notify_all()
                        return
                    self._ahead_cond.wait(1.0)
                batch, self._ahead = self._ahead, []
                self._ahead_held = batch
            try:
                self._dispose(batch, "collector_down", "_ahead_held")
            finally:
                with self._lock:
                    self._ahead_held = None
                    self._replay_due = True  # delivered by replay (also the next probe)
                    self._ahead_cond.notify_all()
                    self._cond.notify_all()

    def _take_ahead(self, deadline: float) -> list[tuple[int, Payload]]:
        """At shutdown: what the write-ahead thread has not taken yet (ours to spool), after
        waiting until ``deadline`` for the batch it is writing; that one, if still not
        written, is counted (it may yet be written: counted twice, never lost)."""
        with self._lock:
            while self._ahead_held is not None and time.monotonic() < deadline:
                self._ahead_cond.wait(max(deadline - time.monotonic(), 0.001))
            if self._ahead_held is not None:
                for cls, _ in self._ahead_held:
                    self._acct.counters.drop("shutdown_in_flight", cls)
                self._ahead_held = None
            rest: list[tuple[int, Payload]] = list(self._ahead)
            self._ahead = []
            self._ahead_cond.notify_all()
        return rest

    def _dispose_until(
        self, victims: Sequence[tuple[int, Payload]], reason: str, deadline: float
    ) -> None:
        """:meth:`_dispose` chunk by chunk until ``deadline``; what is left then is counted
        as ``shutdown_timeout`` drops (cheap), so exit stays within its budget."""
        start = 0
        while start < len(victims) and time.monotonic() < deadline:
            self._dispose(victims[start : start + DISPOSE_CHUNK], reason)
            start += DISPOSE_CHUNK
        if start < len(victims):  # counted per class in C: a loaded exit's burst is cheap
            left = Counter(map(itemgetter(0), victims[start:]))
            with self._lock:
                for cls, n in left.items():
                    self._acct.counters.drop("shutdown_timeout", cls, n)
