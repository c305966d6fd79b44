"""comm's chain and destroy against exceptions and workspaces that fight back: a type name
that raises when read, is huge or holds a secret pair; a workspace whose ``backend`` raises.
The terminal failure is still reported once, nothing raises into the caller but what the
chain propagates by contract, and every workspace is released."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from comm.flashinfer_allreduce import FiArWorkspaces, WorkspaceUnavailableError

ARGS = (4, 0, 2048, 4096, "bfloat16", "the-group")
SECRET = "hunter2-c0ffee"
#: A bound on anything an error's type name contributes (the field, the error's message).
MAX_TYPE = 256
MAX_MESSAGE = 8000


#: While set, a :class:`_RaisingName` class's name raises (pytest and Hypothesis read it
#: to report a failure, so it is armed only around the code under test).
ARMED: list[bool] = [False]


class _RaisingName(type):
    """A metaclass whose ``__name__`` raises (a proxy, a broken generated class)."""

    @property
    def __name__(cls) -> str:  # type: ignore[override]
        if ARMED[0]:
            raise RuntimeError("no name for you")
        return "Hostile"


@contextlib.contextmanager
def armed() -> Iterator[None]:
    ARMED[0] = True
    try:
        yield
    finally:
        ARMED[0] = False


class _NotStrName(type):
    """A metaclass whose ``__name__`` is not a str."""

    @property
    def __name__(cls) -> Any:  # type: ignore[override]
        return 12345


def _hostile(kind: str, base: type[BaseException]) -> type[BaseException]:
    if kind == "raising":
        return _RaisingName("Hostile", (base,), {})
    if kind == "not_str":
        return _NotStrName("Hostile", (base,), {})
    if kind == "huge":
        return type("E" * 100_000, (base,), {})
    if kind == "secret":
        return type(f"password={SECRET}", (base,), {})
    raise AssertionError(kind)


KINDS = ("raising", "not_str", "huge", "secret")


class Factory:
    """Raises the given exception for every backend."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.calls = 0

    def create(self, **kw: Any) -> Any:
        self.calls += 1
        raise self.exc


@pytest.fixture
def captured() -> Iterator[list[dict[str, Any]]]:
    obs.configure(level="DEBUG", format="json", sdk_disabled=True, repeat_summary_seconds=0)
    with obs.testing.capture_events() as evs:
        yield evs


def _terminal(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in evs if e["event"] == "workspace_terminal_failure"]


def _check_written(evs: list[dict[str, Any]]) -> None:
    for e in evs:
        for name in ("error_type", "last_error_type"):
            value = e.get(name)
            if value is not None:
                assert isinstance(value, str), (name, value)
                assert len(value) <= MAX_TYPE, (e["event"], name, len(value))
        assert SECRET not in repr(e), e["event"]


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(KINDS), backend=st.sampled_from(["auto", "mnnvl", "trtllm"]))
def test_a_type_name_that_fights_back_is_still_a_terminal_failure(kind: str, backend: str) -> None:
    """The chain fails with an exception whose type name raises when read, is not a str,
    is 100,000 characters or holds a secret pair: get returns None (no error of obs' own
    reaches the caller), one workspace_terminal_failure ERROR names the type bounded and
    scrubbed, and require's error is bounded and scrubbed too. A name that raised escaped
    get_fi_ar_workspace as that RuntimeError with no terminal failure; a huge or secret
    one went whole into WorkspaceUnavailableError's message."""
    obs.testing.reset()
    obs.configure(level="DEBUG", format="json", sdk_disabled=True, repeat_summary_seconds=0)
    exc = _hostile(kind, Exception)("creation failed")
    with obs.testing.capture_events() as evs:
        m = FiArWorkspaces(Factory(exc), backend=backend, nodes=1)
        with armed():
            got = m.get_fi_ar_workspace(*ARGS)
            try:
                m.require_fi_ar_workspace(*ARGS)
            except WorkspaceUnavailableError as err:
                raised = err
        obs.flush()
    assert got is None
    terminal = _terminal(evs)
    assert 1 == len(terminal), [e["event"] for e in evs]
    assert "ERROR" == terminal[0]["severity_text"]
    assert terminal[0]["last_error_message"] == "creation failed"
    _check_written(evs)
    text = str(raised)
    assert len(text) <= MAX_MESSAGE
    assert SECRET not in text


@pytest.mark.parametrize("kind", KINDS)
def test_an_interruption_with_such_a_name_propagates_itself(
    kind: str, captured: list[dict[str, Any]]
) -> None:
    """A BaseException of such a type propagates as itself (not as an error reading its
    name), after the terminal failure with reason interrupted is reported."""
    exc = _hostile(kind, KeyboardInterrupt)()
    m = FiArWorkspaces(Factory(exc), backend="auto", nodes=1)
    caught: BaseException | None = None
    with armed():
        try:
            m.get_fi_ar_workspace(*ARGS)
        except BaseException as err:
            caught = err
    assert caught is exc
    obs.flush()
    terminal = _terminal(captured)
    assert [["interrupted"]] == [e["reasons"] for e in terminal]
    _check_written(captured)


class Workspace:
    """A workspace whose ``backend`` and ``destroy`` may raise."""

    def __init__(self, backend: str, log: list[str], fail: BaseException | None) -> None:
        self._backend = backend
        self._log = log
        self.fail = fail
        self.broken = False

    @property
    def backend(self) -> str:
        if self.broken and self.fail is not None:
            raise self.fail
        return self._backend

    def destroy(self) -> None:
        self._log.append(self._backend)
        if self.fail is not None:
            raise self.fail


class TwoWorkspaces:
    """mnnvl fails for the first getter only: fi_ar is trtllm, fi_ar_quant mnnvl."""

    def __init__(self, fails: dict[str, BaseException | None]) -> None:
        self.fails = fails
        self.destroyed: list[str] = []
        self.made: list[Workspace] = []
        self.first = True

    def create(self, *, backend: str, **kw: Any) -> Workspace:
        if backend == "mnnvl" and self.first:
            self.first = False
            raise RuntimeError("Device does not support multicasting.")
        ws = Workspace(backend, self.destroyed, self.fails.get(backend))
        self.made.append(ws)
        return ws


_FAILURES = st.one_of(
    st.none(),
    st.sampled_from(KINDS).map(lambda k: _hostile(k, Exception)("destroy failed")),
    st.just(RuntimeError("cuda context gone")),
)


@settings(max_examples=60, deadline=None)
@given(first=_FAILURES, second=_FAILURES)
def test_destroy_releases_every_workspace_whatever_they_raise(
    first: BaseException | None, second: BaseException | None
) -> None:
    """Whatever each workspace's destroy() or backend raises (a type name that raises, a
    huge or secret one), destroy() releases both, reports each failure as one bounded,
    scrubbed workspace_destroy_failed, and raises nothing. A backend that raised when read
    escaped destroy() (at exit too) and the other workspace was never released."""
    obs.testing.reset()
    obs.configure(level="DEBUG", format="json", sdk_disabled=True, repeat_summary_seconds=0)
    factory = TwoWorkspaces({"trtllm": first, "mnnvl": second})
    with obs.testing.capture_events() as evs:
        m = FiArWorkspaces(factory, backend="auto", nodes=1)
        assert m.get_fi_ar_workspace(*ARGS) is not None
        assert m.get_fi_ar_quant_workspace(*ARGS) is not None
        for ws in factory.made:
            ws.broken = True
        with armed():
            m.destroy()
        obs.flush()
    assert ["trtllm", "mnnvl"] == factory.destroyed
    assert (None, None) == (m.result("fi_ar"), m.result("fi_ar_quant"))
    failed = [e for e in evs if e["event"] == "workspace_destroy_failed"]
    assert sum(f is not None for f in (first, second)) == len(failed)
    _check_written(evs)


def test_an_interrupted_destroy_still_releases_the_other_workspace(
    captured: list[dict[str, Any]],
) -> None:
    """A KeyboardInterrupt out of the first workspace's destroy() propagates, after the
    other workspace is released and both slots are cleared."""
    factory = TwoWorkspaces({"trtllm": KeyboardInterrupt()})
    m = FiArWorkspaces(factory, backend="auto", nodes=1)
    assert m.get_fi_ar_workspace(*ARGS) is not None
    assert m.get_fi_ar_quant_workspace(*ARGS) is not None
    with pytest.raises(KeyboardInterrupt):
        m.destroy()
    assert ["trtllm", "mnnvl"] == factory.destroyed
    assert (None, None) == (m.result("fi_ar"), m.result("fi_ar_quant"))
