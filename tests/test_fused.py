"""obs._fused: the fused default chain writes byte-identical lines to the chain it replaces.

Each example logs the same call twice from the same line with the clock held still: once
with the fused path on, once with it off (the composable processors, the source of truth).
The lines must be equal byte for byte, whatever the event name, field names and values.
"""

from __future__ import annotations

import enum
import json
import keyword
import logging
import math
import os
import sys
import time
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from _keys import OddKey as _OddKey
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import obs
import obs._fused
import obs.testing
from obs._config import STATE
from obs._fused import FusedLine, event_dict_of
from obs._output import StreamSink
from obs.encode import MAX_STR
from obs.rank import NOT_IMPORTED, _mark_stale
from obs.render import _LOKI_BYTES

NOW = 1_764_820_800_123_456_789


class _Color(str, enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


plain_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
    st.sampled_from(["\u2028", "\x7f", "\x85", "\u202e", "\ud800", "a\nb", "null", "/dev/null"]),
    # secret pairs and their harmless look-alikes (the fused path must decline the first)
    st.sampled_from(
        ["token=abc", "Cookie: session=x", "a=1, key: v", "max_tokens=8", "http://h:1/?api_key=z"]
    ),
    # text the chain scrubs (URL passwords, bearer tokens) and text that only looks close
    st.lists(
        st.sampled_from(
            ["https://", "bob", ":", "pw", "@", "host", " ", "Bearer", "BASIC", "abcdef", "/x"]
        ),
        max_size=8,
    ).map("".join),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 2**64, -(2**63) - 1]),
    # around the string cap, and subclasses of plain types (the fused path must decline)
    st.integers(MAX_STR - 2, MAX_STR + 2).map(lambda n: "x" * n),
    st.sampled_from(
        [np.float64("nan"), np.float64(1.5), np.int64(7), _Color.RED, _Level.HIGH, b"raw"]
    ),
)
field_names = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_.]{0,15}", fullmatch=True),
    st.text(min_size=1, max_size=12),
    st.sampled_from(["token", "password", "rank", "event", "body", "scope", "stage", "user.x"]),
    st.from_regex(r"_obs_[a-z_]{0,10}", fullmatch=True),  # a caller's: user._obs_* either way
    # str subclass names (their exact text names the field, never over a control field)
    st.sampled_from(["event", "timestamp", "_obs_no_export", "token", "x"]).map(_OddKey),
    st.just(_Color.RED),
)
calls = st.tuples(
    st.sampled_from(["debug", "info", "warning", "error", "critical"]),
    st.one_of(
        st.from_regex(r"[a-z_]{1,20}", fullmatch=True),
        st.text(max_size=30),
        st.sampled_from(["to http://u:pw@h", "sent Bearer abcdefgh", "mail a@b", "basic"]),
    ),
    st.dictionaries(field_names, plain_values, max_size=6),
)


#: Calls ``method(event, **fields)`` from its own file, line and function.
_Site = Callable[[Callable[..., None], str, dict[str, Any]], None]


def _site(path: str, line: int, name: str) -> _Site:
    """A function at ``path:line`` named ``name`` that logs the call it is given."""
    code = compile("\n" * (line - 1) + f"def {name}(m, e, f):\n    m(e, **f)\n", path, "exec")
    scope: dict[str, Any] = {"__name__": "user_code"}
    exec(code, scope)
    return scope[name]  # type: ignore[no-any-return]


sites = st.builds(
    _site,
    st.one_of(
        st.text(  # any text compile() takes for a file name
            alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
            min_size=1,
            max_size=24,
        ),
        st.sampled_from(["/app/é.py", 'a"b.py', "x\x7f.py", "https://u:pw@h/x.py", "\\srv\\a.py"]),
    ),
    st.integers(1, 3000),
    st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True).filter(
        lambda name: not keyword.iskeyword(name)
    ),
)
hosts = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=16),
    st.sampled_from(["vm", "gpu-node-7", 'h"x', "h\x7f", "\u2028", "h\\x"]),
)
#: Logger names: text, and names that are equal but written differently (1, True, 1.0)
#: or are not str at all (get_logger takes them as they are).
logger_names = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["fused", "a.b", 1, True, 1.0, None, 2.5]),
    st.sampled_from(["fused", "x"]).map(_OddKey),
)
#: Calls that share their events (kept heads are looked up again).
calls_alike = st.tuples(
    st.sampled_from(["debug", "info", "warning", "error"]),
    st.sampled_from(["e", "request_done"]),
    st.dictionaries(field_names, plain_values, max_size=3),
)
#: Launcher variables (torchrun's) for a rank, a world size and a local rank.
ranks = st.tuples(st.integers(0, 2**40), st.integers(1, 2**40), st.integers(0, 7)).map(
    lambda t: {"RANK": str(t[0]), "WORLD_SIZE": str(t[1]), "LOCAL_RANK": str(t[2])}
)


def _move_rank(env: dict[str, str], host: str) -> None:
    """The runtime's resolver reads ``env`` and ``host`` when it next looks (marked stale,
    as a fork marks it: the next call to log finds the move)."""
    runtime = STATE.runtime
    assert runtime is not None
    runtime.resolver._env = env
    runtime.resolver._host = host
    _mark_stale(weakref.ref(runtime.resolver))


def _record_fused_taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each FusedLine.write took the call (True) or declined it (False)."""
    taken: list[bool] = []
    real_write = FusedLine.write

    def spy(self: FusedLine, *args: Any) -> bool:
        taken.append(real_write(self, *args))
        return taken[-1]

    monkeypatch.setattr(FusedLine, "write", spy)
    return taken


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Log a call twice (fused, then chain) and return both JSON lines as bytes."""
    written: list[bytes] = []

    def capture(self: Any, data: bytes) -> int:  # the console line, whichever path wrote it
        written.append(data)
        return 0

    monkeypatch.setattr(time, "time_ns", lambda: NOW)
    obs.configure(format="json", level="DEBUG", stdlib_bridge=False, logs_exporter="none")
    runtime = STATE.runtime
    assert runtime is not None
    fused = runtime._fused
    assert fused is not None
    monkeypatch.setattr(StreamSink, "write", capture)
    taken = _record_fused_taken(monkeypatch)

    def both(
        method: str,
        event: str,
        fields: dict[str, Any],
        at: _Site | None = None,
        *,
        fused_first: bool = False,
        name: Any = "fused",
    ) -> tuple[bytes, bytes, bool]:
        log = obs.get_logger(name)
        # a first chain call teaches the redactor the names (and looks at the rank: a fused
        # call first, when asked, is the first to see a move)
        for on in (True, False) if fused_first else (False, True, False):
            runtime._fused = fused if on else None
            del written[:]
            if at is None:
                getattr(log, method)(event, **fields)
            else:  # from another callsite
                at(getattr(log, method), event, fields)
            if on:
                first, fused_taken = list(written), bool(taken and taken[-1])
        runtime._fused = fused
        return b"".join(first), b"".join(written), fused_taken

    yield both
    obs.testing.reset()


class TestByteIdentical:
    @given(call=calls)
    @example(call=("info", "e", {"v": math.nan, "w": 1.5}))
    @example(call=("warning", "e", {"v": None, "w": -math.inf}))
    @example(call=("error", "e", {"big": 2**70, "s": "\ud800"}))
    @example(call=("debug", "", {"_obs_logger": None}))  # a private key: the chain drops it
    @example(call=("info", "e", {"v": np.float64("inf"), "s": "x" * MAX_STR}))
    @settings(
        max_examples=300,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    def test_fused_line_equals_the_chains(self, lines: Any, call: Any) -> None:
        """Whatever the call, the fused path writes exactly the chain's line (or declines)."""
        method, event, fields = call
        fused, chain, _ = lines(method, event, fields)
        assert chain == fused

    @given(
        n=st.integers(60, 72),  # around the field count over which Loki's fold is tried
        size=st.one_of(st.integers(0, 400), st.integers(_LOKI_BYTES - 800, _LOKI_BYTES + 50)),
        tail=st.sampled_from(["", "\x7f", "\xe9", "\u2028", "\x85"]),
    )
    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    def test_fused_line_equals_the_chains_at_the_bounds_of_its_own_line(
        self, lines: Any, n: int, size: int, tail: str
    ) -> None:
        """Around the bounds where the fused path hands its line to the renderer (Loki's
        fold by bytes or fields, text to escape) it still writes exactly the chain's line."""
        fields: dict[str, Any] = {f"f{i}": i for i in range(n)}
        fields["s"] = "x" * size + tail
        fused, chain, taken = lines("info", "e", fields)
        assert (True, chain) == (taken, fused)

    def test_credentials_take_the_chain(self, lines: Any) -> None:
        """A URL password or a bearer token in the event or a value: the chain scrubs it."""
        for event, fields in (
            ("connect", {"url": "https://bob:pw@h/x"}),
            ("to https://bob:pw@h/x", {}),
            ("sent", {"h": "Bearer abcdefgh"}),
        ):
            fused, chain, taken = lines("info", event, fields)
            assert (False, chain) == (taken, fused)
            assert b"pw@" not in chain
            assert b"abcdefgh" not in chain

    def test_plain_calls_take_the_fused_path(self, lines: Any) -> None:
        """The common call (plain short values under known names) is fused."""
        fused, chain, taken = lines("info", "request_done", {"model": "llama", "tokens": 1})
        assert (True, chain) == (taken, fused)

    @pytest.mark.parametrize(
        "fields",
        [
            {"scope": "global"},
            {"stage": "attempt"},
            {"v": [1, 2]},
            {"v": "x" * 70000},
            {"rank": 9},
            {"code.line.number": 1},
        ],
        ids=["scope", "stage", "list", "long", "rank", "callsite"],
    )
    def test_anything_else_takes_the_chain(self, lines: Any, fields: dict[str, Any]) -> None:
        """A control keyword, a container, a long value or the name of a field every line
        ends with (the chain keeps it where the call put it): the chain writes it."""
        _, _, taken = lines("warning", "not_plain", fields)
        assert not taken

    def test_bound_context_takes_the_chain(self) -> None:
        """A logger with bound values (or bound contextvars) is never fused."""
        obs.configure(format="json", stdlib_bridge=False, logs_exporter="none", stream="none")
        try:
            runtime = STATE.runtime
            assert runtime is not None
            assert runtime._fused is not None
            log = obs.get_logger("fused").bind(request="r1")
            assert not runtime._fused.write(log, logging.INFO, "info", "e", {}, 4)
        finally:
            obs.testing.reset()


class TestSplice:
    """The rank and callsite fields are written once per rank info and callsite, the
    level's, event's and logger's once per (level, event, logger), and spliced around
    the time and the call's own fields: the line still follows any of them at once."""

    @given(
        calls=st.lists(
            st.tuples(st.one_of(calls, calls_alike), logger_names),
            min_size=1,
            max_size=6,
        )
    )
    @settings(
        max_examples=80,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @example(calls=[(("info", "e", {}), 1), (("info", "e", {}), True), (("info", "e", {}), 1.0)])
    def test_lines_follow_the_level_the_event_and_the_logger(
        self, lines: Any, calls: list[Any]
    ) -> None:
        """Calls at other levels, with other events or from other loggers, in any order
        and repeated: each fused line is the chain's."""
        for (method, event, fields), name in calls * 2:
            fused, chain, _ = lines(method, event, fields, name=name)
            assert chain == fused

    def test_loggers_named_alike_keep_their_names(self, lines: Any) -> None:
        """Loggers named 1, True and 1.0 (equal as keys) each write their own name."""
        for name in (1, True, 1.0, 1, 1.0):
            fused, chain, _ = lines("info", "e", {"n": 1}, name=name)
            assert (chain, b'"logger":%s,' % json.dumps(name).encode()) == (
                fused,
                fused[fused.index(b'"logger":') :].split(b'"n":')[0],
            )

    def test_kept_heads_are_bounded(self, lines: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """Past the bound the kept heads are dropped and written anew; lines stay right."""
        monkeypatch.setattr(obs._fused, "_HEADS_MAX", 2)
        for event in ["a", "b", "c", "d", "e"] * 2:
            fused, chain, taken = lines("info", event, {"n": 1})
            assert (True, chain) == (taken, fused)
        runtime = STATE.runtime
        assert runtime is not None
        assert runtime._fused is not None
        assert 1 <= len(runtime._fused._heads) <= 2

    @given(
        moves=st.lists(st.tuples(ranks, hosts), min_size=1, max_size=4),
        call=calls,
        at=st.lists(sites, min_size=1, max_size=3),
    )
    @example(moves=[({"RANK": "1", "WORLD_SIZE": "2"}, "h\xe9")], call=("info", "e", {}), at=[])
    @settings(
        max_examples=80,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    def test_lines_follow_the_rank_the_host_and_the_callsite(
        self, lines: Any, moves: Any, call: Any, at: list[_Site]
    ) -> None:
        """Whatever the rank, host and callsite, and however they move between calls, the
        fused line is the chain's."""
        method, event, fields = call
        for where in [None, *at] * 2:  # the names learnt, the tails kept
            lines(method, event, fields, at=where)
        for env, host in moves:
            _move_rank(env, host)
            for where in [*at, None, *at]:
                fused, chain, _ = lines(method, event, fields, at=where, fused_first=True)
                assert chain == fused

    def test_a_plain_call_is_spliced_after_a_move(self, lines: Any) -> None:
        """The common call after a rank move is still fused, with the new rank."""
        for _ in range(2):
            lines("info", "request_done", {"tokens": 1})
        _move_rank({"RANK": "5", "WORLD_SIZE": "8"}, "node-a")
        fused, chain, taken = lines("info", "request_done", {"tokens": 1}, fused_first=True)
        assert (True, chain) == (taken, fused)
        assert b'"rank":5,' in fused
        assert b'"host.name":"node-a",' in fused

    def test_kept_tails_are_bounded(self, lines: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """Past the bound the kept tails are dropped and written anew; lines stay right."""
        monkeypatch.setattr(obs._fused, "_TAILS_MAX", 2)
        at = [_site("app.py", n, "f") for n in range(1, 6)]
        for where in at * 2:
            fused, chain, taken = lines("info", "e", {"n": 1}, at=where)
            assert (True, chain) == (taken, fused)
        runtime = STATE.runtime
        assert runtime is not None
        assert runtime._fused is not None
        assert 1 <= len(runtime._fused._tails[1]) <= 2

    def test_torch_distributed_coming_up_moves_the_rank(
        self, lines: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """torch.distributed imported, then its default group initialized: the next line
        has the group's rank (the resolver's probe is read inline, without ``current``)."""
        world = types.SimpleNamespace(_default_pg=None)
        dist = types.ModuleType("torch.distributed")
        dist.is_available = lambda: True  # type: ignore[attr-defined]
        dist.distributed_c10d = types.SimpleNamespace(_world=world)  # type: ignore[attr-defined]
        dist.get_rank = lambda: 3  # type: ignore[attr-defined]
        dist.get_world_size = lambda: 4  # type: ignore[attr-defined]
        # torch not imported yet, as far as the resolver knows (an earlier test may have
        # imported the real one: the resolver would keep probing its holder)
        monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
        resolver = STATE.runtime.resolver  # type: ignore[union-attr]
        resolver._is_init = None
        resolver.world = NOT_IMPORTED
        resolver.refresh()
        for _ in range(2):
            lines("info", "e", {"n": 1})
        monkeypatch.setitem(sys.modules, "torch.distributed", dist)
        fused, chain, taken = lines("info", "e", {"n": 1}, fused_first=True)
        assert (True, chain) == (taken, fused)
        assert b'"rank":0,' in fused
        world._default_pg = object()
        fused, chain, taken = lines("info", "e", {"n": 1}, fused_first=True)
        assert (True, chain) == (taken, fused)
        assert b'"rank":3,"local_rank":3,"world_size":4,' in fused

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
    def test_a_forked_child_writes_its_own_rank(self, lines: Any) -> None:
        """A child forked after lines were spliced recomputes its rank: its fused line is
        the chain's, with the child's rank."""
        env = {"RANK": "0", "WORLD_SIZE": "2"}
        _move_rank(env, "h")
        for _ in range(2):
            lines("info", "e", {"n": 1})
        env["RANK"] = "1"  # what the child finds (the parent's cache is not refreshed)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                fused, chain, taken = lines("info", "e", {"n": 1}, fused_first=True)
                os.write(write, b"%d|%s|%s" % (taken, fused, chain))
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as reader:
            got = reader.read()
        os.waitpid(pid, 0)
        taken, fused, chain = got.split(b"|")
        assert (b"1", chain) == (taken, fused)
        assert b'"rank":1,' in fused
        parent, _, _ = lines("info", "e", {"n": 1}, fused_first=True)
        assert b'"rank":0,' in parent


#: What the export sink and the record builder read of an event besides the public fields
#: (compared in order: attributes keep it): the level, the time, the no-export mark.
_EXPORT_PRIVATE = ("_obs_level", "_obs_time_ns", "_obs_no_export")


class _NoExport:
    """An exporter that accepts and drops every batch (the sink is what is compared)."""

    def export(self, batch: Any) -> Any:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        return

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _export_with_spy(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    seen: Callable[[dict[str, Any]], None],
    **kw: Any,
) -> Any:
    """Configure obs with OTLP export to a no-op exporter, ``seen`` called with every event
    dict the export sink is handed; the runtime."""
    import obs.otel.transport
    from obs.otel.sink import ExportSink

    monkeypatch.setattr(obs.otel.transport, "build_exporter", lambda settings: _NoExport())
    real_call = ExportSink.__call__

    real_hand_over = ExportSink.hand_over

    def spy(self: ExportSink, logger: Any, method: str, ed: Any) -> Any:
        seen(ed)
        return real_call(self, logger, method, ed)

    def spy_hand_over(self: ExportSink, time_ns: int, parts: Any) -> None:
        seen(event_dict_of(parts, time_ns))  # what the export thread builds the record of
        real_hand_over(self, time_ns, parts)

    monkeypatch.setattr(ExportSink, "__call__", spy)
    monkeypatch.setattr(ExportSink, "hand_over", spy_hand_over)
    obs.configure(
        stdlib_bridge=False,
        logs_exporter="otlp",
        otlp_endpoint="http://127.0.0.1:9",
        spool_dir=str(tmp_path),
        **kw,
    )
    assert STATE.runtime is not None
    return STATE.runtime


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Any]:
    """Log a call twice with OTLP export on (fused, then chain): the lines and what the
    export sink was handed each time (the part of it the sink reads)."""
    monkeypatch.setattr(time, "time_ns", lambda: NOW)
    written: list[bytes] = []
    handed: list[tuple[list[tuple[str, Any]], dict[str, Any]]] = []

    def capture(self: Any, data: bytes) -> int:  # the console line, whichever path wrote it
        written.append(data)
        return 0

    def seen(ed: dict[str, Any]) -> None:
        public = [(k, v) for k, v in ed.items() if not k.startswith("_obs_")]
        handed.append((public, {k: ed[k] for k in _EXPORT_PRIVATE if k in ed}))

    runtime = _export_with_spy(monkeypatch, tmp_path, seen, format="json", level="DEBUG")
    fused = runtime._fused
    assert fused is not None, "export on: the fused path is still taken"
    monkeypatch.setattr(StreamSink, "write", capture)
    taken = _record_fused_taken(monkeypatch)

    def both(method: str, event: str, fields: dict[str, Any]) -> tuple[Any, Any, bool]:
        log = obs.get_logger("fused")
        out = []
        for on in (False, True, False):
            runtime._fused = fused if on else None
            del written[:], handed[:], taken[:]
            getattr(log, method)(event, **fields)
            out.append((b"".join(written), list(handed), bool(taken and taken[-1])))
        runtime._fused = fused
        return out[1][:2], out[2][:2], out[1][2]

    yield both
    obs.testing.reset()


class TestWithExport:
    @given(call=calls)
    @example(call=("info", "request_done", {"model": "llama", "tokens": 1}))
    @example(call=("warning", "e", {"v": None, "w": -math.inf}))
    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    def test_fused_export_equals_the_chains(self, exported: Any, call: Any) -> None:
        """With export on, the fused path writes the chain's line and hands the export sink
        what the chain hands it: the same fields in the same order, level and time."""
        method, event, fields = call
        fused, chain, _ = exported(method, event, fields)
        assert chain == fused

    def test_plain_calls_are_fused_and_exported(self, exported: Any) -> None:
        """The common call takes the fused path with export on, and is handed over once."""
        fused, chain, taken = exported("info", "request_done", {"model": "llama", "tokens": 1})
        assert (True, 1, chain) == (taken, len(fused[1]), fused)

    def test_a_shutdown_under_way_takes_the_chain(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
    ) -> None:
        """Shutdown takes the sink off the runtime before it marks it closed; a call in
        between is not fused (it would be neither exported nor counted): the chain hands it
        to the sink, which is still in its processors."""
        handed: list[str] = []
        runtime = _export_with_spy(
            monkeypatch,
            tmp_path,
            lambda ed: handed.append(ed["event"]),
            format="json",
            stream="none",
        )
        log = obs.get_logger("fused")
        log.info("warm_up", n=0)  # the redactor learns the name: the next call could be fused
        taken = _record_fused_taken(monkeypatch)
        del handed[:]
        sink = runtime.sink
        runtime.sink = None  # shutdown's first step; `closed` is not set yet
        try:
            log.info("in_between", n=1)
        finally:
            runtime.sink = sink
        assert ([False], ["in_between"]) == (taken, handed)
