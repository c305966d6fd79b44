"""A Hypothesis state machine over obs' public API, checking the logging promises.

Rules drive bound loggers, ``*_once``, ``bind``, contextvars, stdlib records, configure /
reconfigure / shutdown / flush, bursts from threads and a signal handler that logs while the
main thread is inside a log call, with adversarial field values and secrets under
secret-looking keys. Invariants, checked on everything obs wrote (the stream, ``OBS_FILE``,
the spool directory and a real OTLP receiver on loopback): no exception reached the caller,
every line is one JSON object with intact control fields, no secret marker appears anywhere,
and every uniquely named event was written exactly once (or counted as dropped).
"""

from __future__ import annotations

import itertools
import json
import logging
import signal
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

import obs
import obs.testing

SECRET = "SECRET-MARKER-9c1e"
CONTROL = ("timestamp", "severity_text", "severity_number", "event", "logger", "rank")
SECRET_KEYS = st.sampled_from(["password", "authToken", "X-Api-Key", "hf_token", "privateKey"])
VALUES = st.one_of(
    st.text(max_size=40),
    st.integers(),
    st.floats(),
    st.none(),
    st.binary(max_size=20),
    st.just(10**400),
    st.just("\ud800"),
    st.just("x" * 40_000),
    st.lists(st.integers(), max_size=5),
)
FIELDS = st.dictionaries(
    st.sampled_from(["a", "b", "event", "rank", "outcome", "stage_x", "n"]), VALUES, max_size=4
)
LEVELS = st.sampled_from([logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR])


@pytest.fixture(scope="module")
def receiver() -> Iterator[Any]:
    """One real OTLP receiver (HTTP) for the whole machine run."""
    with obs.testing.OTLPReceiver() as rx:
        yield rx


class LoggingPromises(RuleBasedStateMachine):
    """The state: what was logged under a unique name, and where obs writes."""

    receiver: Any = None
    tmp: Path = Path()
    #: Uniquely named events checked over all runs (the test asserts the machine did work).
    checked = 0
    #: Numbers the runs' files: each run writes its own.
    runs = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        #: Unique event names logged at or above INFO that must appear exactly once.
        self.expected: set[str] = set()
        self.signalled = 0
        # A fresh number per run, not id(self): a collected run's id comes back, and its
        # OBS_FILE (appended to) then held that run's lines (its signal_ events).
        run = next(LoggingPromises.runs)
        self.stream_path = self.tmp / f"stream-{run}.txt"
        self.file_path = self.tmp / f"file-{run}.jsonl"
        self.spool = self.tmp / f"spool-{run}"
        self.stream = open(self.stream_path, "w", encoding="utf-8")  # noqa: SIM115
        self.saved_stderr = sys.stderr
        sys.stderr = self.stream

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n}"

    def configure(self) -> None:
        obs.configure(
            format="json",
            file=str(self.file_path),
            otlp_endpoint=self.receiver.http_endpoint,
            spool_dir=str(self.spool),
            shutdown_timeout=1,
            repeat_summary_seconds=0,
            otlp_headers={"authorization": f"Bearer {SECRET}"},
        )

    @initialize()
    def start(self) -> None:
        self.configure()

    @rule(level=LEVELS, fields=FIELDS, key=SECRET_KEYS)
    def plain(self, level: int, fields: dict[str, Any], key: str) -> None:
        event = self.name("plain")
        obs.get_logger("fuzz").log(level, event, **fields, **{key: SECRET})
        if level >= logging.INFO:
            self.expected.add(event)

    @rule(level=LEVELS, fields=FIELDS, k=st.integers(0, 3), key=SECRET_KEYS)
    def once(self, level: int, fields: dict[str, Any], k: int, key: str) -> None:
        log = obs.get_logger("fuzz")
        method = {10: log.debug_once, 20: log.info_once, 30: log.warning_once, 40: log.error_once}
        method[level](f"once_{k}", **fields, **{key: {"nested": [{key: SECRET}]}})

    @rule(fields=FIELDS, key=SECRET_KEYS, args=st.lists(VALUES, max_size=2))
    def bound_with_args(self, fields: dict[str, Any], key: str, args: list[Any]) -> None:
        event = self.name("bound")
        log = obs.get_logger("fuzz", **{key: SECRET}).bind(**fields)
        log.warning(event + " %s" * len(args), *args)
        self.expected.add(event + " %s" * len(args))

    @rule(fields=FIELDS, key=SECRET_KEYS)
    def contextvars(self, fields: dict[str, Any], key: str) -> None:
        event = self.name("ctx")
        structlog.contextvars.bind_contextvars(**fields, **{key: SECRET})
        try:
            obs.get_logger("fuzz").info(event)
        finally:
            structlog.contextvars.clear_contextvars()
        self.expected.add(event)

    @rule(arg=VALUES, stage=st.sampled_from([None, "attempt", "terminal_failure"]))
    def stdlib(self, arg: Any, stage: str | None) -> None:
        event = self.name("std")
        extra = {"stage": stage} if stage else {}
        logging.getLogger("fuzz.lib").warning(event + " %r", arg, extra={**extra, "token": SECRET})
        if stage != "attempt":
            self.expected.add(event + " %r")

    @rule()
    def reconfigure(self) -> None:
        self.configure()

    @rule()
    def flush(self) -> None:
        obs.flush(timeout=1.0)

    @rule()
    def shutdown_then_log(self) -> None:
        obs.shutdown(timeout=1.0)
        event = self.name("after_shutdown")
        obs.get_logger("fuzz").error(event, password=SECRET)
        self.expected.add(event)

    @rule(threads=st.integers(2, 6))
    def burst(self, threads: int) -> None:
        names = [[self.name("thread") for _ in range(10)] for _ in range(threads)]

        def work(mine: list[str]) -> None:
            for event in mine:
                obs.get_logger("fuzz").warning(event, blob="b" * 5000, api_key=SECRET)

        workers = [threading.Thread(target=work, args=(m,)) for m in names]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=30)
        self.expected.update(e for m in names for e in m)

    @rule()
    def signal_mid_call(self) -> None:
        log = obs.get_logger("fuzz")

        def handler(signum: int, frame: Any) -> None:
            self.signalled += 1
            log.warning(self.name("signal"), secret=SECRET)
            log.warning_once("once_from_signal")

        previous = signal.signal(signal.SIGALRM, handler)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
            for _ in range(40):
                log.info("under_signals", blob="s" * 2000)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, previous)

    def lines(self, path: Path) -> list[dict[str, Any]]:
        out = []
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        assert SECRET not in text
        for line in text.splitlines():
            record = json.loads(line)
            assert isinstance(record, dict)
            for key in CONTROL:
                assert key in record, (key, line[:200])
            assert isinstance(record["event"], str)
            out.append(record)
        return out

    @invariant()
    def every_line_whole_and_clean(self) -> None:
        self.stream.flush()
        self.lines(self.stream_path)
        self.lines(self.file_path)

    def teardown(self) -> None:
        try:
            obs.shutdown(timeout=1.0)
            self.stream.flush()
            file_records = self.lines(self.file_path)
            stream_records = self.lines(self.stream_path)
            for records in (file_records, stream_records):
                counts = Counter(r["event"] for r in records)
                dropped = sum(
                    r.get("count", 0) for r in records if r["event"] == "obs_records_dropped"
                )
                assert dict.fromkeys(self.expected, 1) == {e: counts[e] for e in self.expected}
                signals = sum(n for e, n in counts.items() if e.startswith("signal_"))
                assert self.signalled - dropped <= signals <= self.signalled
            if self.spool.exists():
                for path in self.spool.rglob("*"):
                    if path.is_file():
                        assert SECRET.encode() not in path.read_bytes()
            assert SECRET not in json.dumps(self.receiver.records, default=str)
            LoggingPromises.checked += len(self.expected)
        finally:
            sys.stderr = self.saved_stderr
            self.stream.close()
            obs.testing.reset()


@pytest.mark.timeout(600)
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # a 40 kB value
def test_logging_promises(receiver: Any, tmp_path: Path) -> None:
    """The state machine above, a bounded number of runs (each step under a timeout)."""
    LoggingPromises.receiver = receiver
    LoggingPromises.tmp = tmp_path
    run_state_machine_as_test(
        LoggingPromises,
        settings=settings(
            max_examples=40,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    assert LoggingPromises.checked > 200
