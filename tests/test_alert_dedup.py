"""A terminal failure (what alerts key on) is never suppressed by another record's dedup key.

Past ``OBS_DEDUP_CAPACITY`` the keys that are not retained share one throttled overflow slot:
before this was fixed, a ``workspace_terminal_failure`` logged with ``once`` (as comm logs
it), ``*_once``, ``every_n`` or ``every_seconds`` after a long-running server had filled
the table with other ``*_once`` keys was suppressed as a repeat of *another* event, on every
route (obs' own chain, typed events, an application's structlog chain with obs'
processors). And a forked child of another rank (a vLLM worker) inherits its parent's keys:
its own terminal failure was taken for the parent's and suppressed. Alert keys now hold the
rank and take a reserve past capacity (``obs.dedup.ALERT_RESERVE``); past that too they are
written, never suppressed.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.processors
import obs.testing
from comm.flashinfer_allreduce import FiArWorkspaces
from obs.dedup import ALERT_RESERVE, OVERFLOW, Deduper

ROOT = Path(__file__).resolve().parent.parent
ALERT = "workspace_terminal_failure"
CHAINS = ("fi_ar", "fi_ar_quant", "attn", "kv")


def _log_route(route: str) -> Callable[[str], None]:
    """A call that logs one terminal failure of ``chain`` through ``route``."""
    log = obs.get_logger("comm.flashinfer_allreduce")
    routes: dict[str, Callable[[str], None]] = {
        "error_once": lambda c: log.error_once(ALERT, stage="terminal_failure", chain=c),
        "warning_once": lambda c: log.warning_once(
            ALERT, stage="TERMINAL-FAILURE", chain=c, scope="process"
        ),
        "log_once": lambda c: log.log(40, ALERT, stage="terminal_failure", chain=c, once=True),
        "keyword": lambda c: log.error(event=ALERT, stage="terminal_failure", chain=c, once=True),
        "every_n": lambda c: log.error(ALERT, stage="terminal_failure", chain=c, every_n=1000),
        "every_seconds": lambda c: log.info(
            ALERT, stage="terminal_failure", chain=c, every_seconds=3600
        ),
        "bound": lambda c: log.bind(chain=c).error_once(ALERT, stage="terminal_failure"),
    }
    return routes[route]


@settings(max_examples=40)
@given(
    route=st.sampled_from(
        ["error_once", "warning_once", "log_once", "keyword", "every_n", "every_seconds", "bound"]
    ),
    capacity=st.integers(1, 4),
    fillers=st.integers(0, 12),
    chains=st.lists(st.sampled_from(CHAINS), min_size=1, max_size=8),
)
def test_full_table_never_hides_a_terminal_failure(
    route: str, capacity: int, fillers: int, chains: list[str]
) -> None:
    """However full the table is, each chain's terminal failure is written once: the first
    of each chain, never a later repeat of the same chain."""
    obs.configure(stream="none", sdk_disabled=True, repeat_summary_seconds=0,
                  dedup_capacity=capacity)  # fmt: skip
    try:
        with obs.testing.capture_events() as events:
            for i in range(fillers):
                obs.get_logger("vllm.engine").warning_once("request_slow", request=i)
            call = _log_route(route)
            for chain in chains:
                call(chain)
    finally:
        obs.testing.reset()
    written = [e for e in events if e["event"] == ALERT]
    assert list(dict.fromkeys(chains)) == [e["chain"] for e in written]
    assert {("ERROR", "terminal_failure")} == {(e["severity_text"], e["stage"]) for e in written}


class _Unavailable:
    """A workspace factory every backend of which fails, as on a machine without a GPU."""

    def create(self, **_: Any) -> Any:
        raise RuntimeError("Torch not compiled with CUDA enabled")


def test_comm_typed_terminal_failures_past_capacity() -> None:
    """comm's getters after the table filled up: both chains' typed terminal failures are
    written (each was suppressed as the overflow slot's repeat)."""
    obs.configure(stream="none", sdk_disabled=True, repeat_summary_seconds=0, dedup_capacity=2)
    with obs.testing.capture_events() as events:
        for i in range(5):
            obs.get_logger("vllm").warning_once("filler", i=i)
        m = FiArWorkspaces(_Unavailable(), backend="auto", nodes=1, register_atexit=False)
        m.get_fi_ar_workspace(2, 0, 16, 16, "bfloat16", None)
        m.get_fi_ar_quant_workspace(2, 0, 16, 16, "bfloat16", None)
    assert ["fi_ar", "fi_ar_quant"] == [e["chain"] for e in events if e["event"] == ALERT]


@settings(max_examples=20)
@given(capacity=st.integers(1, 3), chains=st.lists(st.sampled_from(CHAINS), max_size=6))
def test_own_structlog_chain_past_capacity(capacity: int, chains: list[str]) -> None:
    """The same in an application's structlog chain with obs' processors (README, "In your
    own structlog chain")."""
    out = io.StringIO()
    structlog.configure(
        processors=[
            *obs.processors.chain(dedup_capacity=capacity),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    try:
        log = structlog.get_logger("app")
        for i in range(capacity + 3):
            log.warning("filler", i=i, once=True)
        for chain in chains:
            log.error(ALERT, stage="terminal_failure", chain=chain, once=True)
    finally:
        structlog.reset_defaults()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert list(dict.fromkeys(chains)) == [d["chain"] for d in lines if d["event"] == ALERT]


def test_reserve_is_bounded_and_past_it_alerts_are_written() -> None:
    """Alert keys past capacity take at most ALERT_RESERVE entries; beyond them each new
    alert key is written (OVERFLOW, truthy), never suppressed, and memory stays bounded."""
    deduper = Deduper(capacity=2, summary_seconds=0)
    assert deduper.admit(("a",))
    assert deduper.admit(("b",))
    assert OVERFLOW == deduper.admit(("c",))  # a plain key: the shared slot
    assert not deduper.admit(("d",))  # ... whose next new key is suppressed, counted
    admitted = [deduper.admit((i,), alert=True) for i in range(ALERT_RESERVE + 50)]
    assert all(admitted)
    assert OVERFLOW == admitted[-1]
    assert len(deduper) == 2 + ALERT_RESERVE
    assert not deduper.admit((0,), alert=True)  # a retained alert key stays once


FORK = textwrap.dedent(
    """
    import os, sys
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="4", LOCAL_WORLD_SIZE="4")
    import obs
    obs.configure(format="json", repeat_summary_seconds=0)
    log = obs.get_logger("comm.flashinfer_allreduce")
    def fail():
        log.error_once("workspace_terminal_failure", stage="terminal_failure",
                       chain="fi_ar", scope="process")
    fail()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        if sys.argv[1] == "other":  # the worker becomes another rank (as a vLLM worker does)
            os.environ.update(RANK="3", LOCAL_RANK="3")
            obs.configure(format="json", repeat_summary_seconds=0)
        fail()
        obs.flush(timeout=5)
        os._exit(0)
    os.waitpid(pid, 0)
    """
)


def _fork_lines(tmp_path: Path, mode: str) -> list[dict[str, Any]]:
    script = tmp_path / "fork.py"
    script.write_text(FORK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, str(script), mode],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stderr.splitlines()]


def test_forked_child_of_another_rank_writes_its_own_terminal_failure(tmp_path: Path) -> None:
    """A forked child that became rank 3 writes its terminal failure (it was suppressed as
    rank 0's repeat); one that stays rank 0 keeps the parent's once."""
    other = [(d["event"], d["rank"]) for d in _fork_lines(tmp_path, "other")]
    assert [(ALERT, 0), (ALERT, 3)] == other
    same = [(d["event"], d["rank"]) for d in _fork_lines(tmp_path, "same")]
    assert [(ALERT, 0)] == [x for x in same if x[0] == ALERT]


INSTRUCTIONS = {
    "once": st.just(True),
    "once_key": st.sampled_from(["request-1", "k"]),
    "every_n": st.integers(2, 100),
    "every_seconds": st.sampled_from([60, 3600.0]),
    "scope": st.sampled_from(["global", "read write", 7]),
    "stacklevel": st.integers(2, 9),
}


@settings(max_examples=60)
@given(
    source=st.sampled_from(["bind", "contextvars"]),
    bound=st.sampled_from(sorted(INSTRUCTIONS)).flatmap(
        lambda name: INSTRUCTIONS[name].map(lambda value: (name, value))
    ),
)
def test_context_never_instructs_the_chain(source: str, bound: tuple[str, Any]) -> None:
    """A bound value or a contextvar named like a call keyword (``once_key``, ``every_n``,
    ``scope``, ...) is data, kept as ``user.<name>``: it used to act on every record
    logged in that context, so ``bind_contextvars(once_key="request-1")`` suppressed the
    second chain's terminal failure (and every other record at that level) as a repeat."""
    name, value = bound
    obs.configure(stream="none", sdk_disabled=True, repeat_summary_seconds=0)
    try:
        with obs.testing.capture_events() as events:
            log = obs.get_logger("app")
            if source == "bind":
                log = log.bind(**{name: value})
            else:
                structlog.contextvars.bind_contextvars(**{name: value})
            try:
                for chain in CHAINS:
                    log.error(ALERT, stage="terminal_failure", chain=chain)
                log.error("another_event")
            finally:
                structlog.contextvars.clear_contextvars()
    finally:
        obs.testing.reset()
    assert [*CHAINS, None] == [e.get("chain") for e in events]
    assert all(e[f"user.{name}"] == value for e in events)
    assert all(e["code.function.name"] == "test_context_never_instructs_the_chain" for e in events)
