"""Tests for obs.scope: which ranks log, export-only records, and scope before dedup."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog import DropEvent

import obs
import obs.testing
from obs._config import STATE
from obs.rank import RankInfo, RankResolver
from obs.scope import SCOPES, DecideScope, scope_allows

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]

RANK0 = RankInfo(0, 0, 4, 2, 0)
RANK1 = RankInfo(1, 1, 4, 2, 0)
RANK2 = RankInfo(2, 0, 4, 2, 1)
RANK3 = RankInfo(3, 1, 4, 2, 1)
ALL = (RANK0, RANK1, RANK2, RANK3)


def _set_rank(monkeypatch: pytest.MonkeyPatch, rank: int, local_rank: int) -> None:
    """Make this process look like a torchrun rank of 2 nodes x 2 and refresh the resolver."""
    for name, value in {
        "RANK": rank,
        "LOCAL_RANK": local_rank,
        "WORLD_SIZE": 4,
        "LOCAL_WORLD_SIZE": 2,
        "GROUP_RANK": rank // 2,
    }.items():
        monkeypatch.setenv(name, str(value))
    if STATE.runtime is not None:
        STATE.runtime.resolver.refresh()


class _Unanswerable:
    def __contains__(self, item: object) -> bool:
        raise RuntimeError("no")

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0


class TestScopeAllows:
    @pytest.mark.parametrize(
        ("scope", "expected"),
        [
            ("global", [True, False, False, False]),
            ("local", [True, False, True, False]),
            ("process", [True, True, True, True]),
            (None, [True, True, True, True]),
            ([1, 3], [False, True, False, True]),
            ({2}, [False, False, True, False]),
            ((0,), [True, False, False, False]),
            (range(2, 4), [False, False, True, True]),
            (frozenset(), [False, False, False, False]),
            (3, [False, False, False, True]),
        ],
    )
    def test_ranks_that_log(self, scope: object, expected: list[bool]) -> None:
        """Each scope selects the DESIGN.md ranks of a 2 x 2 job."""
        assert expected == [scope_allows(scope, info) for info in ALL]

    @pytest.mark.parametrize("scope", ["everyone", "GLOBAL", 2.5, True, object(), b"local"])
    def test_unknown_scope_fails_open(self, scope: object) -> None:
        """A scope obs does not understand logs on every rank rather than hiding events."""
        assert [True] * 4 == [scope_allows(scope, info) for info in ALL]

    def test_collection_that_raises_fails_open(self) -> None:
        """A collection whose membership test raises logs rather than raising."""
        assert scope_allows(_Unanswerable(), RANK1) is True


class TestDecideScope:
    def test_process_scope_shows_on_console(self) -> None:
        """No scope (stdlib semantics) or "process": console output on every rank."""
        resolver = RankResolver(env={"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"})
        out = DecideScope(resolver)(None, "info", {"event": "e"})
        assert {"event": "e", "_obs_console": True} == out

    def test_allowed_scope_is_popped(self) -> None:
        """An allowed scope is removed from the record and marked for the console."""
        out = DecideScope(RankResolver(env={}), None)(None, "info", {"scope": "global"})
        assert {"_obs_console": True} == out

    def test_hidden_without_sink_is_dropped(self) -> None:
        """With no export sink (level None) a hidden event is dropped whatever its level."""
        decide = DecideScope(RankResolver(env={}), None)
        with pytest.raises(DropEvent):
            decide(None, "error", {"scope": "global", "_obs_level": 40, "_obs_rank": RANK1})

    def test_hidden_at_export_level_is_export_only(self) -> None:
        """With a sink, a hidden WARNING is kept with ``_obs_console`` False."""
        decide = DecideScope(RankResolver(env={}), logging.WARNING)
        out = decide(None, "warning", {"scope": "local", "_obs_level": 30, "_obs_rank": RANK3})
        assert {"_obs_level": 30, "_obs_rank": RANK3, "_obs_console": False} == out

    def test_hidden_below_export_level_is_dropped(self) -> None:
        """With a sink, a hidden INFO record is still dropped."""
        decide = DecideScope(RankResolver(env={}), logging.WARNING)
        with pytest.raises(DropEvent):
            decide(None, "info", {"scope": "local", "_obs_level": 20, "_obs_rank": RANK3})

    def test_resolver_used_without_rank_key(self) -> None:
        """Used alone (no add_rank_info before it) the processor asks its resolver."""
        resolver = RankResolver(env={"RANK": "1", "WORLD_SIZE": "2"})
        with pytest.raises(DropEvent):
            DecideScope(resolver, None)(None, "info", {"scope": "global"})


class TestThroughTheChain:
    def test_global_scope_on_rank_1_is_silent(
        self, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """Without a sink, rank 1 writes and captures nothing for scope="global"."""
        _set_rank(monkeypatch, 1, 1)
        read = configure_json()
        with obs.testing.capture_events() as events:
            obs.get_logger("t").error("only_rank0", scope="global")
        assert ([], []) == (read(), events)

    def test_explicit_ranks(
        self, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """scope=[0, 3] logs on rank 3 and not on rank 2."""
        _set_rank(monkeypatch, 3, 1)
        read = configure_json()
        log = obs.get_logger("t")
        log.info("picked", scope=[0, 3])
        _set_rank(monkeypatch, 2, 0)
        log.info("picked", scope=[0, 3])
        assert [3] == [r["rank"] for r in read()]

    def test_unknown_scope_logs(
        self, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """A misspelt scope logs on a non-zero rank (fail open) without a scope field."""
        _set_rank(monkeypatch, 3, 1)
        read = configure_json()
        obs.get_logger("t").warning("typo", scope="globl")
        (record,) = [r for r in read() if r["event"] == "typo"]
        assert (3, False) == (record["rank"], "scope" in record)

    def test_hidden_warning_is_export_only_with_sink(
        self, monkeypatch: pytest.MonkeyPatch, fake_sink: Any, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """With a sink, rank 1's hidden WARNING reaches the sink (console False), not stderr."""
        _set_rank(monkeypatch, 1, 1)
        obs.configure(format="json")
        log = obs.get_logger("t")
        log.warning("node_failure", scope="global")
        log.info("chatty", scope="global")
        assert [("node_failure", False, 1)] == [
            (e["event"], e["_obs_console"], e["rank"]) for e in fake_sink.received
        ]
        assert "" == capsys.readouterr().err

    def test_visible_event_reaches_sink_and_console(
        self, fake_sink: Any, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """On rank 0 a scoped event is on the console and in the sink (console True)."""
        obs.configure(format="json")
        obs.get_logger("t").warning("shown", scope="global")
        assert [True] == [e["_obs_console"] for e in fake_sink.received]
        assert '"event":"shown"' in capsys.readouterr().err

    def test_hidden_once_is_export_only_with_sink(
        self, monkeypatch: pytest.MonkeyPatch, fake_sink: Any
    ) -> None:
        """``warning_once`` (local scope) on local rank 1 is exported once, tagged rank 3."""
        _set_rank(monkeypatch, 3, 1)
        obs.configure(format="json")
        log = obs.get_logger("t")
        log.warning_once("flag_deprecated")
        log.warning_once("flag_deprecated")
        assert [(3, False)] == [
            (e["rank"], e["_obs_console"])
            for e in fake_sink.received
            if e["event"] == "flag_deprecated"
        ]


class TestScopeBeforeDedup:
    def test_once_hidden_rank_does_not_use_the_key(
        self, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """A ``warning_once`` hidden by scope does not spend its key: it fires when visible."""
        _set_rank(monkeypatch, 1, 1)
        read = configure_json()
        log = obs.get_logger("t")
        log.warning_once("flag_deprecated", flag="x")
        _set_rank(monkeypatch, 0, 0)
        log.warning_once("flag_deprecated", flag="x")
        log.warning_once("flag_deprecated", flag="x")
        assert [("flag_deprecated", 0)] == [(r["event"], r["rank"]) for r in read()]

    def test_processor_path_hidden_rank_does_not_use_the_key(
        self, monkeypatch: pytest.MonkeyPatch, configure_json: Configure
    ) -> None:
        """``once=True`` through the Dedup processor: a hidden call leaves the key unused."""
        _set_rank(monkeypatch, 2, 0)
        read = configure_json()
        log = obs.get_logger("t")
        log.info("startup_banner", once=True, scope="global")
        _set_rank(monkeypatch, 0, 0)
        log.info("startup_banner", once=True, scope="global")
        log.info("startup_banner", once=True, scope="global")
        assert [0] == [r["rank"] for r in read()]
        assert 1 == len(STATE.runtime.deduper)  # type: ignore[union-attr]


class TestInvalidScopes:
    """A scope that is not a name, a rank or a collection of ranks is a mistake: the event
    is logged on every rank (fail open) and the mistake is reported once."""

    BAD = ("bogus", ["bad"], [0, "1"], [True], -1, 2.5, b"local", {0: "x", "y": 1}, [1.0])

    @pytest.mark.parametrize("scope", BAD, ids=repr)
    def test_bad_scope_fails_open_on_every_rank(self, scope: object) -> None:
        """No rank hides an event whose scope cannot be understood."""
        assert [True] * 4 == [scope_allows(scope, info) for info in ALL]

    @given(
        scope=st.one_of(
            st.text(max_size=8).filter(lambda s: s not in SCOPES),
            st.integers(max_value=-1),
            st.lists(st.one_of(st.text(max_size=3), st.floats(), st.booleans()), min_size=1),
            st.binary(max_size=4),
        )
    )
    @settings(max_examples=50, deadline=None)
    def test_bad_scope_is_reported_once_and_logged(self, scope: object) -> None:
        """Through the chain, each call with a bad scope is written, and one
        obs_internal_error names the scope argument."""
        obs.configure(stream="none")
        try:
            with obs.testing.capture_events() as events:
                obs.get_logger("t").info("scoped", scope=scope)
                obs.get_logger("t").info("scoped", scope=scope)
                obs.get_logger("t").info_once("scoped_once", scope=scope)
        finally:
            obs.testing.reset()
        names = [e["event"] for e in events]
        reports = [e for e in events if e["event"] == "obs_internal_error"]
        assert (2, 1, 1) == (names.count("scoped"), names.count("scoped_once"), len(reports))
        assert reports[0]["error_message"].startswith("scope=")

    @pytest.mark.parametrize("scope", ["global", "local", "process", None, 0, [0, 1], range(4)])
    def test_good_scopes_are_not_reported(self, scope: object) -> None:
        """Valid scopes never produce a report."""
        obs.configure(stream="none")
        try:
            with obs.testing.capture_events() as events:
                obs.get_logger("t").info("scoped", scope=scope)
        finally:
            obs.testing.reset()
        assert [] == [e for e in events if e["event"] == "obs_internal_error"]


class TestIntegerLikeRanks:
    """numpy's integers (``np.arange``, a rank read from an array) are ranks: they select
    ranks as ints do and are not reported. They were "something other than ranks": the
    event showed on every rank and an obs_internal_error was written."""

    def scopes(self) -> list[tuple[object, list[bool]]]:
        np = pytest.importorskip("numpy")
        return [
            (np.int64(3), [False, False, False, True]),
            (np.uint8(0), [True, False, False, False]),
            ([np.int64(1), np.int32(3)], [False, True, False, True]),
            ([1, np.int16(1), 1, 3], [False, True, False, True]),
            (np.arange(2, 4), [False, False, True, True]),
            ((np.int64(0), 2), [True, False, True, False]),
        ]

    def test_select_the_ranks(self) -> None:
        for scope, expected in self.scopes():
            assert expected == [scope_allows(scope, info) for info in ALL], scope

    def test_not_reported(self) -> None:
        obs.configure(stream="none")
        try:
            with obs.testing.capture_events() as events:
                for scope, _ in self.scopes():
                    obs.get_logger("t").error("scoped", scope=scope)
        finally:
            obs.testing.reset()
        assert [] == [e for e in events if e["event"] == "obs_internal_error"]

    def test_negative_and_bool_members_still_fail_open(self) -> None:
        np = pytest.importorskip("numpy")
        for scope in (np.int64(-1), [np.int64(-2)], [np.bool_(True)], np.array([0.0])):
            assert [True] * 4 == [scope_allows(scope, info) for info in ALL], scope
